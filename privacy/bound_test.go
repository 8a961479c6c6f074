package privacy_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/privacy/privacytest"
)

func TestPairBoundMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := privacytest.RandomPosteriors(rng, 6, 5, 7, 0.32)
	for _, lam := range []float64{1.05, 1.1, 2.1, 3} {
		for q := range p.M {
			for qp := range p.M {
				if q == qp {
					continue
				}
				got, err := privacy.PairBound(lam, p.View(q), p.View(qp))
				if err != nil {
					t.Fatal(err)
				}
				want := privacytest.NaiveRD(lam, p, q, qp, false, true)
				if math.IsInf(want, 1) {
					if !math.IsInf(got.Total, 1) || got.Undefined == "" {
						t.Errorf("lam %v (%d,%d): got %v (%q), want +Inf", lam, q, qp, got.Total, got.Undefined)
					}
					continue
				}
				if math.Abs(got.Total-want) > 1e-10*math.Max(1, math.Abs(want)) {
					t.Errorf("lam %v (%d,%d): PairBound %.12g, naive %.12g", lam, q, qp, got.Total, want)
				}
				if s := got.DirichletTotal + got.DirichletComponents + got.Gaussian; s != got.Total {
					t.Errorf("terms do not add up: %v vs %v", s, got.Total)
				}
			}
		}
	}
	// Identical posteriors: every term is 0.
	b, _ := privacy.PairBound(1.1, p.View(2), p.View(2))
	if math.Abs(b.Total) > 1e-12 {
		t.Errorf("D(q||q) = %v, want 0", b.Total)
	}
	if _, err := privacy.PairBound(1, p.View(0), p.View(1)); err == nil {
		t.Error("lambda = 1 accepted")
	}
	if _, err := privacy.PairBound(0.5, p.View(0), p.View(1)); err == nil {
		t.Error("lambda = 0.5 accepted")
	}
	bad := p.View(1)
	bad.Alpha = bad.Alpha[:2]
	if _, err := privacy.PairBound(1.1, p.View(0), bad); err == nil {
		t.Error("shape mismatch accepted")
	}
}

// renyiGauss1D integrates D_lambda(N(m1,s1^2) || N(m2,s2^2)) numerically.
func renyiGauss1D(lam, m1, s1, m2, s2 float64) float64 {
	pdf := func(x, m, s float64) float64 { return math.Exp(-(x-m)*(x-m)/(2*s*s)) / (s * math.Sqrt(2*math.Pi)) }
	var sum float64
	const h = 1e-3
	for x := -30.0; x <= 30; x += h {
		sum += math.Pow(pdf(x, m1, s1), lam) * math.Pow(pdf(x, m2, s2), 1-lam) * h
	}
	return math.Log(sum) / (lam - 1)
}

// The paper's Gaussian term is D(N_q' || N_q); DirectionStandard is D(N_q || N_q').
func TestGaussianDirection(t *testing.T) {
	lam := 1.5
	m1, s1, m2, s2 := 0.3, 0.6, -0.4, 0.9
	mk := func(m, s float64) privacy.PosteriorView {
		return privacy.PosteriorView{N: 1, P: 1, Mu: []float32{float32(m)}, Logvar: []float32{float32(2 * math.Log(s))}, Alpha: []float32{1}}
	}
	q, qp := mk(m1, s1), mk(m2, s2)
	m1, m2 = float64(q.Mu[0]), float64(qp.Mu[0])
	s1, s2 = math.Exp(float64(q.Logvar[0])/2), math.Exp(float64(qp.Logvar[0])/2)
	paper, _ := privacy.PairBoundWith(lam, q, qp, privacy.BoundOptions{Direction: privacy.DirectionPaper})
	std, _ := privacy.PairBoundWith(lam, q, qp, privacy.BoundOptions{Direction: privacy.DirectionStandard})
	privacytest.RelClose(t, "paper = D(N_q'||N_q)", paper.Gaussian, renyiGauss1D(lam, m2, s2, m1, s1), 1e-6)
	privacytest.RelClose(t, "standard = D(N_q||N_q')", std.Gaussian, renyiGauss1D(lam, m1, s1, m2, s2), 1e-6)
	if math.Abs(paper.Gaussian-std.Gaussian) < 1e-3 {
		t.Error("test not discriminating: directions agree")
	}
}
