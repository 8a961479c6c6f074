package privacy

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// fixedSet is a fixed-noise clip set: the logvar range one value (floor = cap = ln prior var), the
// pseudo-counts C_amin = C_amax: the main job's design (N 65, P 128, sigma 1, C_mu 0.493).
func fixedSet() ClipSet {
	return ClipSet{Components: 65, Dims: 128, CMu: 0.493, PriorMu: []float64{0}, PriorVar: []float64{1},
		LogvarFloor: []float64{0}, LogvarCap: []float64{0}, AlphaMin: 1.5, AlphaMax: 1.5, PriorAlpha: 1}
}

// ReleaseLattice exists exactly for the fixed-noise designs: the main job's lattice is 2^-18 with
// sigma' = sigma = 1 and the centre at index 0; a set whose noise scale or pseudo-counts depend on
// the input is ErrNotFixedNoise with its reason, and ReleaseMechanism says which.
func TestReleaseLattice(t *testing.T) {
	lat, lv, centres, err := fixedSet().ReleaseLattice()
	if err != nil {
		t.Fatal(err)
	}
	if lat.Exp != -18 || lat.Sigma != 1 || lv != 0 || len(centres) != 1 || centres[0] != 0 {
		t.Errorf("main job: lattice 2^%d, sigma' %v, lv %v, centres %v", lat.Exp, lat.Sigma, lv, centres)
	}
	m := fixedSet().ReleaseMechanism()
	if !m.Exact || m.LatticeExp != -18 || m.Lattice != math.Ldexp(1, -18) || m.NoiseSigma != 1 || m.CertifiedSigma != 1 ||
		m.AddedSensitivity != 0 || m.Sampler == FloatSampler || m.Reason != "" || !strings.Contains(m.String(), "exact") {
		t.Errorf("main job: mechanism %+v", m)
	}
	// a noise sigma that is not a float32: sigma' is the float32 above it
	s := fixedSet()
	s.PriorVar, s.LogvarFloor, s.LogvarCap = []float64{0.3}, []float64{math.Log(0.3)}, []float64{math.Log(0.3)}
	if m := s.ReleaseMechanism(); !m.Exact || !(m.NoiseSigma >= m.CertifiedSigma) || float64(float32(m.NoiseSigma)) != m.NoiseSigma {
		t.Errorf("sigma^2 0.3: %+v, want sigma' a float32 >= the certified sigma", m)
	}
	for _, tc := range []struct {
		name   string
		mod    func(*ClipSet)
		reason string
	}{
		{"sigma range", func(s *ClipSet) { s.LogvarFloor = []float64{-1} }, "log-variance ranges"},
		{"alpha range", func(s *ClipSet) { s.AlphaMin = 1 }, "pseudo-counts range"},
		{"prior variance", func(s *ClipSet) { s.PriorVar = []float64{2} }, "prior component's log-variance"},
	} {
		s := fixedSet()
		tc.mod(&s)
		_, _, _, err := s.ReleaseLattice()
		if !errors.Is(err, ErrNotFixedNoise) || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: %v, want ErrNotFixedNoise naming %q", tc.name, err, tc.reason)
		}
		if m := s.ReleaseMechanism(); m.Exact || m.Sampler != FloatSampler || !strings.Contains(m.Reason, tc.reason) || !strings.Contains(m.String(), "NOT exact") {
			t.Errorf("%s: mechanism %+v", tc.name, m)
		}
	}
	// a centre off the lattice is refused (not ErrNotFixedNoise: it is no design of nvdp's)
	s = fixedSet()
	s.PriorMu = []float64{math.Ldexp(1, -20)}
	if _, _, _, err := s.ReleaseLattice(); err == nil || errors.Is(err, ErrNotFixedNoise) {
		t.Errorf("centre 2^-20: %v", err)
	}
	// the guarantee carries the mechanism
	g, err := CertifyCurve(fixedSet(), CurveOptions{Releases: 1, Delta: DefaultDelta})
	if err != nil {
		t.Fatal(err)
	}
	if g.Release == nil || *g.Release != fixedSet().ReleaseMechanism() {
		t.Errorf("guarantee's release %+v", g.Release)
	}
}
