package nvib

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/privacy"
)

// adversarialPreclip draws pre-clip layer outputs for one example of N
// components: mostly random, with extremes (±MaxFloat32, ±Inf, huge logvar,
// exp-overflowing log alpha) mixed in.
func adversarialPreclip(rng *rand.Rand, N, P int, prior Prior) (mu, lv, la []float32) {
	mu, lv, la = make([]float32, N*P), make([]float32, N*P), make([]float32, N)
	ext := []float32{math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), 0, 1e-30, -1e-30, 88.8, -104, 1e4, -1e4}
	pick := func(scale float64) float32 {
		if rng.IntN(4) == 0 {
			return ext[rng.IntN(len(ext))]
		}
		return float32(rng.NormFloat64() * scale)
	}
	for k := range mu {
		mu[k], lv[k] = pick(20), pick(5)
	}
	for i := range la {
		la[i] = pick(5)
	}
	// prior component as the layer builds it
	for j := 0; j < P; j++ {
		mu[j], lv[j] = float32(prior.Mu), float32(math.Log(prior.Var))
	}
	la[0] = float32(prior.LogAlpha)
	return
}

func clipped(cfg ClipConfig, prior Prior, mu, lv, la []float32, N, P int) privacy.PosteriorView {
	m, l := append([]float32(nil), mu...), append([]float32(nil), lv...)
	a, _ := clipPosterior(cfg, prior, m, l, la, 1, N, P)
	return privacy.PosteriorView{N: N, P: P, Mu: m, Logvar: l, Alpha: a}
}

// TestClippedPosteriorsFiniteBound: with the principled defaults, every pair
// of clipped posteriors (aligned components) has a finite Eq. rdp bound, for
// random and adversarial pre-clip outputs, several orders, radii, C_amax and
// priors, whether or not the prior component is clipped. The same draws with
// the reference clipping (C_amin = 0, no sigma cap, floor on the boundary)
// must produce undefined pairs, so the test can fail.
func TestClippedPosteriorsFiniteBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	N, P := 6, 5
	undefinedRef := 0
	for trial := 0; trial < 60; trial++ {
		order := []float64{1.01, 1.1, 2, 8}[trial%4]
		cAmax := []float64{0.5, 1, 1.5, 30}[rng.IntN(4)]
		prior := []Prior{DefaultPrior(), {Mu: 0.5, Var: 2.5, LogAlpha: 1.2}, {Mu: -1, Var: 0.3, LogAlpha: -3}}[rng.IntN(3)]
		cfg := DefaultClip(privacy.ModePrincipled, []float64{0.1, 2, 10}[rng.IntN(3)], cAmax)
		cfg.Order = order
		cfg.CAlphaMin = PrincipledAlphaMin(order, cAmax)
		cfg.ClipPrior = trial%2 == 0
		if err := cfg.GuaranteesFiniteBound(); err != nil {
			t.Fatalf("config %+v: %v", cfg, err)
		}
		ref := DefaultClip(privacy.ModeReference, cfg.CMu, cAmax)
		ref.Order = order
		const M = 8
		views, refViews := make([]privacy.PosteriorView, M), make([]privacy.PosteriorView, M)
		for e := 0; e < M; e++ {
			mu, lv, la := adversarialPreclip(rng, N, P, prior)
			views[e] = clipped(cfg, prior, mu, lv, la, N, P)
			refViews[e] = clipped(ref, prior, mu, lv, la, N, P)
		}
		for a := 0; a < M; a++ {
			for b := 0; b < M; b++ {
				if a == b {
					continue
				}
				tb, err := privacy.PairBound(order, views[a], views[b])
				if err != nil {
					t.Fatal(err)
				}
				if tb.Undefined != "" || math.IsInf(tb.Total, 0) || math.IsNaN(tb.Total) {
					t.Fatalf("trial %d (order %v, C_amax %v, prior %+v, clip prior %v): pair (%d,%d) bound %v: %s",
						trial, order, cAmax, prior, cfg.ClipPrior, a, b, tb.Total, tb.Undefined)
				}
				if rb, _ := privacy.PairBound(order, refViews[a], refViews[b]); rb.Undefined != "" {
					undefinedRef++
				}
			}
		}
	}
	if undefinedRef == 0 {
		t.Errorf("reference clipping never produced an undefined bound on adversarial draws")
	}
	t.Logf("reference clipping: %d undefined ordered pairs", undefinedRef)
}

func TestExportPosteriors(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	bb := newFake(rng, 10, 8, 1)
	cfg := DefaultConfig(ModelNVDPClipped, privacy.ModePrincipled, 8, 2, 16, 3)
	cfg.Clip.CMu, cfg.Clip.CAlphaMax = 2, 0.7
	cfg.Clip.CAlphaMin = PrincipledAlphaMin(cfg.Clip.Order, 0.7)
	m, err := NewModel(cfg, bb, rng)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := testBatch()
	path := filepath.Join(t.TempDir(), "post.safetensors")
	mem, err := ExportPosteriors(path, m, []encoder.Input{in, in}, "mrpc", "validation")
	if err != nil {
		t.Fatal(err)
	}
	p, err := privacy.ReadPosteriors(path)
	if err != nil {
		t.Fatal(err)
	}
	// the posteriors returned for an audit in memory are the file's, value for value
	if !reflect.DeepEqual(mem, p) {
		t.Fatalf("returned posteriors differ from the file's: %+v\nfile %+v", mem, p)
	}
	if p.M != 6 || p.N != 5 || p.P != 8 {
		t.Fatalf("shape M=%d N=%d P=%d, want 6 5 8", p.M, p.N, p.P)
	}
	// attention_mask, 1 = real: example 1 has 2 real tokens, so components
	// 3, 4 are padding; the prior component is always real
	wantMask := []uint8{1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1}
	for k, v := range wantMask {
		if p.AttentionMask[k] != v {
			t.Fatalf("attention mask %v, want %v", p.AttentionMask[:15], wantMask)
		}
	}
	for k, v := range map[string]string{"task": "mrpc", "split": "validation", "model": "nvdp-clipped", "mode": "principled", "clip_mu": "2", "clip_alpha_max": "0.7", "clip_order": "1.1", "clip_cap_sigma": "true"} {
		if p.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q", k, p.Metadata[k], v)
		}
	}
	if v, ok := p.Metadata["variant"]; ok {
		t.Errorf("metadata variant = %q: the mode is written under \"mode\" only", v)
	}
	if mode, err := MetadataMode(p.Metadata); err != nil || mode != privacy.ModePrincipled {
		t.Errorf("MetadataMode = %q, %v", mode, err)
	}
	post, _ := m.Posterior(in)
	for k, v := range post.Alpha.Data {
		if p.Alpha[k] != v || p.Alpha[15+k] != v {
			t.Fatalf("alpha[%d] %v / %v, want %v", k, p.Alpha[k], p.Alpha[15+k], v)
		}
	}
	// every exported token alpha is within the clip range
	for k, v := range p.Alpha {
		if k%5 != 0 && (float64(v) < cfg.Clip.CAlphaMin*(1-1e-6) || float64(v) > 0.7*(1+1e-6)) {
			t.Errorf("alpha[%d] = %v outside [%v, 0.7]", k, v, cfg.Clip.CAlphaMin)
		}
	}
	if _, err := (&Model{Cfg: Config{Model: ModelBaseline}}).Posterior(in); err == nil {
		t.Errorf("baseline exported a posterior")
	}
}

// TestMetadataMode: the mode of a posterior file is read from "mode", and
// from "variant" in files written before (which stored the mode there).
func TestMetadataMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   map[string]string
		want privacy.Mode
		err  string
	}{
		{"mode", map[string]string{"mode": "reference", "model": "nvdp-clipped"}, privacy.ModeReference, ""},
		{"legacy variant", map[string]string{"variant": "reference", "model": "nvdp-clipped"}, privacy.ModeReference, ""},
		{"both agree", map[string]string{"variant": "principled", "mode": "principled"}, privacy.ModePrincipled, ""},
		{"neither", map[string]string{"model": "nvdp"}, privacy.ModePrincipled, ""},
		{"both disagree", map[string]string{"variant": "principled", "mode": "reference"}, "", "disagree"},
		{"unknown", map[string]string{"mode": "exact"}, "", `mode "exact"`},
		{"empty", map[string]string{"variant": ""}, "", `mode ""`},
	} {
		got, err := MetadataMode(tc.md)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %q, %v; want an error with %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestConfigRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := DefaultConfig(ModelNVDPClipped, privacy.ModeReference, 16, 2, 32, 1)
	c.KLSchedule, c.KLWarmup = ScheduleWarmupDecay, 0.2
	if err := SaveConfig(dir, c); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Errorf("round trip: %+v\nwant %+v", got, c)
	}
	for _, tc := range []struct {
		step int
		want float64
	}{{0, 0}, {10, 0.5}, {20, 1}, {60, 0.5}, {100, 0}} {
		if s := c.KLScale(tc.step, 100); math.Abs(s-tc.want) > 1e-12 {
			t.Errorf("warmup-decay s(%d) = %v, want %v", tc.step, s, tc.want)
		}
	}
	c.KLSchedule = ScheduleLinearDecay
	if s := c.KLScale(25, 100); s != 0.75 {
		t.Errorf("linear decay s(25) = %v", s)
	}
	bad := c
	bad.Model = "nvdp-x"
	if bad.Validate() == nil {
		t.Errorf("unknown model accepted")
	}
}
