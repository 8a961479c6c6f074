package dnn_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/nn"
)

// tolDropout: dropout multiplies each kept element by the same float32
// scale on both devices and the keep decisions are the same bits, so the
// device must equal nn exactly.
// Derivation: one float32 product per element, no addition to fuse with: 0 ulps whatever --fmad.
const tolDropout = 0

// testDropoutTwin: the device Dropout, drawing from a Philox stream, keeps
// exactly the elements nn.Dropout keeps when nn draws from the same stream
// (rand.New of a copy), gives the same outputs and gradients, and advances
// the stream by as many draws; ApplyMask with nn's mask gives nn's output;
// the identity draws nothing. Lengths around the 4-element draws and the
// 256-thread blocks, odd stream positions, and a P that rounds to 65536
// (every element dropped).
func testDropoutTwin(t *testing.T, e *dnn.Engine) {
	cases := []struct {
		n   int
		p   float32
		pos uint64
	}{
		{1, 0.1, 0}, {7, 0.5, 3}, {300, 0.1, 1<<32 + 1}, {1030, 0.3, 5}, {9, 1 - 1.0/(1<<20), 0},
	}
	// A position whose draw has a low chunk equal to the threshold of P =
	// 0.5 (kept: the comparison is >=).
	const tieKey = 99
	tie := dnn.NewPhilox(tieKey)
	for tie.Draw(tie.Pos)&0xffff != 32768 {
		tie.Pos++
	}
	cases = append(cases, struct {
		n   int
		p   float32
		pos uint64
	}{1, 0.5, tie.Pos})
	rng := rand.New(rand.NewPCG(4, 4))
	for i, c := range cases {
		g := &dnn.Philox{Key: rng.Uint64(), Pos: c.pos}
		if i == len(cases)-1 {
			g.Key = tieKey
		}
		host := *g
		x := randn(rng, 1, c.n)
		y, cache := nn.Dropout{P: c.p}.Forward(x, rand.New(&host), true)
		dx0 := e.Upload(x)
		d := dnn.Dropout{P: c.p}
		dy, dc := d.Forward(e, dx0, g, true)
		if g.Pos != host.Pos {
			t.Errorf("n %d: device Pos %d, host %d", c.n, g.Pos, host.Pos)
		}
		if got := e.KeepMask(dc); !bytes.Equal(got, cache.Mask) {
			t.Errorf("n %d p %v: device mask %v, want %v", c.n, c.p, got, cache.Mask)
		}
		near(t, e, "dropout y", dy, y, tolDropout)
		near(t, e, "dropout input untouched", dx0, x, 0)
		gr := randn(rng, 1, c.n)
		near(t, e, "dropout dx", d.Backward(e, dc, e.Upload(gr)), nn.Dropout{P: c.p}.Backward(cache, gr), tolDropout)
		// ApplyMask with the host's mask, in place.
		xm := e.Upload(x)
		mc := d.ApplyMask(e, xm, cache.Mask)
		near(t, e, "dropout ApplyMask y", xm, y, tolDropout)
		near(t, e, "dropout ApplyMask dx", d.Backward(e, mc, e.Upload(gr)), nn.Dropout{P: c.p}.Backward(cache, gr), tolDropout)
	}
	// The identity: the same tensor, no mask, no draws.
	g := dnn.NewPhilox(1)
	x := e.Upload(randn(rng, 1, 5))
	for _, c := range []struct {
		p     float32
		train bool
	}{{0.1, false}, {0, true}} {
		y, dc := dnn.Dropout{P: c.p}.Forward(e, x, g, c.train)
		if y != x || dc.Mask.Ptr != 0 || g.Pos != 0 || e.KeepMask(dc) != nil {
			t.Errorf("p %v train %v: not the identity (pos %d)", c.p, c.train, g.Pos)
		}
		if (dnn.Dropout{P: c.p}).Backward(e, dc, x) != x {
			t.Errorf("p %v train %v: backward not the identity", c.p, c.train)
		}
	}
}
