package report

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/nvdp-project/nvdp/privacy"
)

// TestReference: the achievable reference on SST-2 (non-private 0.796)
// with exact accounting is the 0.605, 0.676, 0.753, 0.792 at
// epsilon 4, 8, 16, 32 (delta 1e-5); the bound is Phi(mu/2) on balanced
// classes and m + (2 Phi(mu/2) - 1)(1 - m) otherwise, never below the
// achievable; tasks without a closed form have none.
func TestReference(t *testing.T) {
	r := &referenceCurve{Delta: 1e-5, Baseline: 0.796, Majority: 0.5}
	for _, tc := range []struct{ eps, achievable float64 }{{4, 0.605}, {8, 0.676}, {16, 0.753}, {32, 0.792}} {
		pt, err := r.At(tc.eps)
		if err != nil {
			t.Fatal(err)
		}
		mu, _ := privacy.GaussianMechanismMu(tc.eps, 1e-5)
		p := distuv.UnitNormal.CDF(mu / 2)
		if math.Abs(float64(pt.Achievable)-tc.achievable) > 5e-4 || pt.Mu != mu || math.Abs(pt.Bound-p) > 1e-15 || pt.Bound < float64(pt.Achievable) {
			t.Errorf("epsilon %v: %+v, want achievable %v, bound Phi(mu/2) %v", tc.eps, pt, tc.achievable, p)
		}
	}
	r.Majority = 0.8
	pt, _ := r.At(8)
	if p := distuv.UnitNormal.CDF(pt.Mu / 2); math.Abs(pt.Bound-(0.8+(2*p-1)*0.2)) > 1e-15 {
		t.Errorf("unbalanced bound %v", pt.Bound)
	}
	for _, tc := range []struct{ task, metric string }{{"stsb", "pearson_spearman"}, {"mrpc", "f1"}} {
		if referenceNote(tc.task, tc.metric) == "" {
			t.Errorf("%s (%s) has a reference", tc.task, tc.metric)
		}
	}
	if n := referenceNote("sst2", "accuracy"); n != "" {
		t.Errorf("sst2: %q", n)
	}
}
