package nvib

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
)

// TestClipMuStoredRadius: the float32 mu that ClipMu stores is within
// privacy.StoredRadius(C_mu) of the centre (computed exactly in float64),
// for radii that float32 cannot represent and vectors of every scale, so the
// certificate's mean term (radius StoredRadius) covers every stored posterior.
func TestClipMuStoredRadius(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	var shrunk int
	for trial := 0; trial < 3000; trial++ {
		P := 1 + rng.IntN(300)
		cMu := []float64{0.19, 1.0 / 3, 2, 7.3, 0.0693056955933, 1e-3}[trial%6]
		mu := make([]float32, P)
		center := make([]float32, P)
		scale := math.Exp(rng.Float64()*12 - 4)
		for j := range mu {
			mu[j] = float32(rng.NormFloat64() * scale)
			if trial%3 == 0 {
				center[j] = float32(rng.NormFloat64())
				mu[j] += center[j]
			}
		}
		c := center
		if trial%3 != 0 {
			c = nil
		}
		_, active := ClipMu(mu, c, cMu)
		var d2 float64
		for j, v := range mu {
			d := float64(v)
			if c != nil {
				d -= float64(c[j])
			}
			d2 += d * d
		}
		if R := privacy.StoredRadius(cMu); math.Sqrt(d2) > R {
			t.Fatalf("trial %d: stored distance %.17g > radius %.17g (C_mu %v, P %d)", trial, math.Sqrt(d2), R, cMu, P)
		} else if active && math.Sqrt(d2) < R*(1-1e-5) {
			t.Fatalf("trial %d: projected to %.17g, far inside %.17g", trial, math.Sqrt(d2), R)
		} else if active {
			shrunk++
		}
	}
	if shrunk < 1000 {
		t.Errorf("only %d projections exercised", shrunk)
	}
}

// TestClipMuWindowAndInf: the rows the random trials above rarely hit. A row
// whose distance lies in (StoredRadius(C_mu), C_mu] (C_mu = 0.19 is no
// float32) is projected too: compared with C_mu it would be stored ~1e-8
// outside the radius the certificate uses. A row with ±Inf entries goes
// along their signs onto the stored radius, within it once rounded, also
// around a centre far larger than C_mu.
func TestClipMuWindowAndInf(t *testing.T) {
	dist := func(row, c []float32) float64 {
		var d2 float64
		for j, v := range row {
			d := float64(v)
			if c != nil {
				d -= float64(c[j])
			}
			d2 += d * d
		}
		return math.Sqrt(d2)
	}
	cMu := 0.19
	R := privacy.StoredRadius(cMu)
	row := []float32{0.13253441, 0.13614194}
	if n := dist(row, nil); !(n > R && n <= cMu) {
		t.Fatalf("set-up: the row's distance %.17g is not in (%.17g, %v]", n, R, cMu)
	}
	if _, active := ClipMu(row, nil, cMu); !active || dist(row, nil) > R {
		t.Errorf("window row: active %v, stored distance %.17g > %.17g", active, dist(row, nil), R)
	}
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		row, center []float32
		cMu         float64
	}{
		{[]float32{inf, 0, -inf}, nil, 0.19},
		{[]float32{inf, 3, inf, -inf}, []float32{100, 100, 100, 100}, 0.19},
		{[]float32{-inf}, []float32{-3}, 0.0693056955933},
	} {
		n, active := ClipMu(tc.row, tc.center, tc.cMu)
		R := privacy.StoredRadius(tc.cMu)
		// within R, and near it: float32 spacing around a centre of 100 is 4e-5 of R
		if d := dist(tc.row, tc.center); !math.IsInf(n, 1) || !active || d > R || d < R*(1-1e-4) {
			t.Errorf("inf row around %v: n %v, active %v, stored %v at distance %.17g, want within %.17g", tc.center, n, active, tc.row, d, R)
		}
	}
}

// TestClippedPosteriorsBelowCertificate: every pair of posteriors the
// principled clipping writes (random and adversarial pre-clip outputs) has
// an Eq. rdp value at most privacy.Certify of the configuration's ClipSet, in
// both Gaussian directions; the certificate is finite for orders below the
// set's MaxOrder.
func TestClippedPosteriorsBelowCertificate(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	N, P := 6, 5
	for trial := 0; trial < 40; trial++ {
		order := []float64{1.01, 1.1, 2, 8}[trial%4]
		cAmax := []float64{0.5, 1, 1.5}[rng.IntN(3)]
		prior := []Prior{DefaultPrior(), {Mu: 0.5, Var: 2.5, LogAlpha: 1.2}, {Mu: -1, Var: 0.3, LogAlpha: -3}}[rng.IntN(3)]
		cfg := DefaultClip(privacy.ModePrincipled, []float64{0.1, 0.19, 2}[rng.IntN(3)], cAmax)
		cfg.Order = order
		cfg.LogvarMargin = []float64{1e-3, 0.3, math.Log(order / (order - 1))}[rng.IntN(3)]
		cfg.CAlphaMin = PrincipledAlphaMin(order, cAmax)
		cfg.ClipPrior = trial%2 == 0
		set := cfg.ClipSet(prior, N, P)
		const M = 6
		views := make([]privacy.PosteriorView, M)
		for e := 0; e < M; e++ {
			mu, lv, la := adversarialPreclip(rng, N, P, prior)
			views[e] = clipped(cfg, prior, mu, lv, la, N, P)
		}
		for _, dir := range []privacy.GaussianDirection{privacy.DirectionStandard, privacy.DirectionPaper} {
			cert, err := privacy.Certify(set, order, dir)
			if err != nil {
				t.Fatal(err)
			}
			if !cert.Finite {
				t.Fatalf("trial %d: certificate infinite at order %v (max order %v): %s", trial, order, set.MaxOrder(), cert.Reason)
			}
			for a := 0; a < M; a++ {
				for b := 0; b < M; b++ {
					if a == b {
						continue
					}
					tb, err := privacy.PairBoundWith(order, views[a], views[b], privacy.BoundOptions{Direction: dir})
					if err != nil {
						t.Fatal(err)
					}
					if tb.Total > float64(cert.RD)*(1+1e-12) {
						t.Fatalf("trial %d %s: pair (%d,%d) %.15g > certificate %.15g", trial, dir, a, b, tb.Total, float64(cert.RD))
					}
				}
			}
		}
	}
	// unclipped and uncapped configurations certify nothing
	off := DefaultClip(privacy.ModePrincipled, 2, 1)
	off.Enabled = false
	ref := DefaultClip(privacy.ModeReference, 2, 1)
	for name, cfg := range map[string]ClipConfig{"disabled": off, "reference": ref} {
		c, err := privacy.Certify(cfg.ClipSet(DefaultPrior(), N, P), 1.1, "")
		if err != nil || c.Finite {
			t.Errorf("%s: finite %v err %v", name, c != nil && c.Finite, err)
		}
	}
}
