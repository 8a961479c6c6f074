package rngstream

import (
	"math/rand/v2"
	"testing"
)

// TestTrainSampleDevice: the device's sampling stream is PCG(seed,
// trainTag | 3), its key that PCG's first draw, and it is none of the
// other streams of a training run (96 epochs, as TestDistinct).
func TestTrainSampleDevice(t *testing.T) {
	const seed = 12345
	if got, want := TrainSampleDevice.Key(seed, 0), rand.NewPCG(seed, 0x6e766470<<8|3).Uint64(); got != want {
		t.Fatalf("TrainSampleDevice key %#x, want %#x", got, want)
	}
	streams := []Stream{TrainInit, TrainSample, TrainOrder, TrainEval, TrainDev}
	dev, err := TrainSampleDevice.PCG(1, 0).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	perEpoch := map[string]bool{TrainOrder.Name: true, TrainDev.Name: true}
	for _, s := range streams {
		n := 1
		if perEpoch[s.Name] {
			n = 96
		}
		for i := 0; i < n; i++ {
			b, err := s.PCG(1, i).MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if string(b) == string(dev) {
				t.Fatalf("TrainSampleDevice is %s[%d]", s.Name, i)
			}
		}
	}
}
