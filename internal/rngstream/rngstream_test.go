package rngstream

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestNumbers pins every stream to the PCG its purpose used before the
// streams were named (written out independently), so the runs keep their
// numbers for a seed.
func TestNumbers(t *testing.T) {
	const seed = 12345
	cases := []struct {
		s    Stream
		i    int
		want *rand.PCG
	}{
		{TrainInit, 0, rand.NewPCG(seed, 0x6e766470<<8|1)},
		{TrainSample, 0, rand.NewPCG(seed, 0x6e766470<<8|2)},
		{TrainOrder, 3, rand.NewPCG(seed, 0x6e766470<<8|(1000+3))},
		{TrainEval, 0, rand.NewPCG(seed, 0x6e766470<<8|(5000-1))},
		{TrainDev, 7, rand.NewPCG(seed, 0x6e766470<<8|(5000+7))},
		{PretrainInit, 0, rand.NewPCG(seed, 0)},
		{PretrainPack, 0, rand.NewPCG(seed, 1)},
		{PretrainHeldOutPack, 0, rand.NewPCG(seed, 2)},
		{PretrainEvalMask, 0, rand.NewPCG(seed, 3)},
		{PretrainMask, 0, rand.NewPCG(seed, 4)},
		{PretrainDropout, 0, rand.NewPCG(seed, 5)},
		{PretrainHeldOut, 0, rand.NewPCG(seed, 0x4e1d)},
		{PretrainOrder, 2, rand.NewPCG(seed^0x9e3779b97f4a7c15, 2)},
	}
	for _, c := range cases {
		got := c.s.PCG(seed, c.i)
		for k := 0; k < 4; k++ {
			if g, w := got.Uint64(), c.want.Uint64(); g != w {
				t.Fatalf("%s instance %d draw %d: %#x, want %#x", c.s.Name, c.i, k, g, w)
			}
		}
	}
}

// TestDistinct: within one run, no two streams (or instances, up to 96
// epochs) share a PCG state; at 97 epochs TrainDev meets TrainOrder, which
// this test documents.
func TestDistinct(t *testing.T) {
	check := func(epochs int, streams []Stream, perEpoch map[string]bool) error {
		seen := map[string]string{} // PCG state (its two words) -> stream
		for _, s := range streams {
			n := 1
			if perEpoch[s.Name] {
				n = epochs
			}
			for i := 0; i < n; i++ {
				b, err := s.PCG(1, i).MarshalBinary()
				if err != nil {
					return err
				}
				k := string(b)
				name := fmt.Sprintf("%s[%d]", s.Name, i)
				if prev, ok := seen[k]; ok {
					return fmt.Errorf("%s and %s are the same stream", prev, name)
				}
				seen[k] = name
			}
		}
		return nil
	}
	train := []Stream{TrainInit, TrainSample, TrainOrder, TrainEval, TrainDev}
	trainEpochs := map[string]bool{TrainOrder.Name: true, TrainDev.Name: true}
	pre := []Stream{PretrainInit, PretrainPack, PretrainHeldOutPack, PretrainEvalMask, PretrainMask, PretrainDropout, PretrainHeldOut, PretrainOrder}
	if err := check(96, train, trainEpochs); err != nil {
		t.Errorf("train, 96 epochs: %v", err)
	}
	if err := check(97, train, trainEpochs); err == nil {
		t.Errorf("train, 97 epochs: no collision, but TrainDev[96] should equal TrainOrder[0]")
	}
	if err := check(10000, pre, map[string]bool{PretrainOrder.Name: true}); err != nil {
		t.Errorf("pretrain, 10000 epochs: %v", err)
	}
}
