package dnn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/nn"
)

// philoxKAT are Random123's known-answer vectors of Philox4x32-10
// (kat_vectors: philox4x32 10 ctr key -> out).
var philoxKAT = []struct {
	ctr [4]uint32
	key [2]uint32
	out [4]uint32
}{
	{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
	{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff},
		[4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
	{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0},
		[4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
}

// TestPhiloxKnownAnswers: the host Philox4x32-10 gives the published
// known answers.
func TestPhiloxKnownAnswers(t *testing.T) {
	for _, v := range philoxKAT {
		if got := dnn.PhiloxBlock(v.ctr, v.key); got != v.out {
			t.Errorf("host Philox4x32-10(%08x, %08x) = %08x, want %08x", v.ctr, v.key, got, v.out)
		}
	}
}

// TestPhiloxStream: the stream's draws (Uint64, the rand.Source) are the
// documented halves of the blocks; the state survives MarshalBinary
// (nn.RNGState).
func TestPhiloxStream(t *testing.T) {
	p := dnn.NewPhiloxStream(rngstream.TrainSampleDevice, 7, 0)
	if p.Key != rngstream.TrainSampleDevice.Key(7, 0) || p.Pos != 0 {
		t.Fatalf("NewPhiloxStream: key %#x pos %d", p.Key, p.Pos)
	}
	k := [2]uint32{uint32(p.Key), uint32(p.Key >> 32)}
	for m := uint64(0); m < 6; m++ {
		blk := dnn.PhiloxBlock([4]uint32{uint32(m / 2), 0, 0, 0}, k)
		want := uint64(blk[2*(m%2)]) | uint64(blk[2*(m%2)+1])<<32
		if got := p.Uint64(); got != want {
			t.Fatalf("draw %d: %#x, want %#x", m, got, want)
		}
	}
	if p.Pos != 6 {
		t.Fatalf("Pos %d after 6 draws", p.Pos)
	}
	big := uint64(0x3_0000_0001) // counter (0x80000000, 1, 0, 0), second half
	blk := dnn.PhiloxBlock([4]uint32{uint32(big >> 1), uint32(big >> 33), 0, 0}, k)
	if got, want := p.Draw(big), uint64(blk[2])|uint64(blk[3])<<32; got != want {
		t.Fatalf("draw %#x: %#x, want %#x", big, got, want)
	}
	st, err := nn.RNGState(p)
	if err != nil {
		t.Fatal(err)
	}
	var q dnn.Philox
	if err := nn.RestoreRNG(st, &q); err != nil || q.Key != p.Key || q.Pos != p.Pos || q.Uint64() != p.Uint64() {
		t.Fatalf("state round trip: %v, %+v vs %+v", err, q, p)
	}
	if err := q.UnmarshalBinary([]byte("pcg")); err == nil {
		t.Fatal("UnmarshalBinary of a foreign state: no error")
	}
}

// testPhiloxDevice: the device's Philox4x32-10 (kernel philox_blocks)
// gives the known answers and equals the host's bit for bit on random
// counters and keys; its stream (philox_u64) equals the host's from any
// position (odd ones, across the counter's 32-bit word) and advances Pos
// alike.
func testPhiloxDevice(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(3, 3))
	var in []uint32
	var want [][4]uint32
	for i := 0; i < 300; i++ { // two blocks of threads
		var ctr [4]uint32
		var key [2]uint32
		if i < len(philoxKAT) {
			ctr, key = philoxKAT[i].ctr, philoxKAT[i].key
		} else {
			ctr = [4]uint32{rng.Uint32(), rng.Uint32(), rng.Uint32(), rng.Uint32()}
			key = [2]uint32{rng.Uint32(), rng.Uint32()}
		}
		in = append(in, ctr[:]...)
		in = append(in, key[:]...)
		if i < len(philoxKAT) {
			want = append(want, philoxKAT[i].out)
		} else {
			want = append(want, dnn.PhiloxBlock(ctr, key))
		}
	}
	got := dnn.PhiloxBlocksOnDevice(e, in)
	for i, w := range want {
		if g := [4]uint32(got[4*i : 4*i+4]); g != w {
			t.Errorf("device block %d: %08x, want %08x", i, g, w)
			return
		}
	}

	p := dnn.NewPhilox(0x0123456789abcdef)
	for _, pos := range []uint64{0, 1, 255, 1<<33 - 3, 1<<40 + 1} {
		g := &dnn.Philox{Key: p.Key, Pos: pos}
		got := dnn.PhiloxDrawsOnDevice(e, g, 300)
		if g.Pos != pos+300 {
			t.Errorf("device draws from %d: Pos %d after 300", pos, g.Pos)
			return
		}
		for i, w := range got {
			if h := p.Draw(pos + uint64(i)); w != h {
				t.Errorf("device draw %d: %#x, host %#x", pos+uint64(i), w, h)
				return
			}
		}
	}
}
