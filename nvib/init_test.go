package nvib

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/privacy"
)

// initPosterior is the posterior of x [B,S,H] under a principled NVIB layer
// of latent width P (from H = x's width), initialised by init with the
// reference scripts' taus (mu 1, stdev 0.1, alpha -10) and the clip.
func initPosterior(t *testing.T, x *nn.Tensor, P, heads int, init string, clip ClipConfig) *Posterior {
	t.Helper()
	l, err := NewLayer("nvib", LayerConfig{Hidden: x.Shape[2], Latent: P, Heads: heads, Mode: privacy.ModePrincipled, Prior: DefaultPrior(),
		Clip: clip, Init: init, MuTau: 1, StdevTau: 0.1, AlphaTau: -10}, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	post, _, err := l.Forward(x, nil)
	if err != nil {
		t.Fatal(err)
	}
	return post
}

// TestInitClipStartsInsideClipRegion: under InitClip every token component's
// logvar and alpha start strictly inside their clip bounds (so the clamps
// pass gradient), nvdp and nvdp-clipped start from the same posterior, and the
// intended "nvib" init, by contrast, starts with every logvar clamped (the
// failure InitClip exists to avoid, ref §1).
func TestInitClipStartsInsideClipRegion(t *testing.T) {
	const P, heads = 16, 2
	x := nn.New(2, 5, P)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range x.Data { // LayerNorm-like encoder output: unit scale per dimension
		x.Data[i] = float32(rng.NormFloat64())
	}
	posterior := func(init string, enabled bool) *Posterior {
		clip := DefaultClip(privacy.ModePrincipled, 2, 1)
		clip.Enabled = enabled
		return initPosterior(t, x, P, heads, init, clip)
	}
	clip := DefaultClip(privacy.ModePrincipled, 2, 1)
	floor, cap := clip.LogvarBounds(1)
	inside := func(post *Posterior) (lv, al int) {
		for b := 0; b < post.B; b++ {
			for i := 1; i < post.N; i++ {
				for j := 0; j < post.P; j++ {
					v := float64(post.Logvar.Data[(b*post.N+i)*post.P+j])
					if v > floor+1e-5 && v < cap-1e-5 { // float32 storage of a clamped value sits within 1e-6 of its bound
						lv++
					}
				}
				a := float64(post.Alpha.Data[b*post.N+i])
				if a > clip.CAlphaMin*(1+1e-5) && a < clip.CAlphaMax*(1-1e-5) {
					al++
				}
			}
		}
		return lv, al
	}
	clipped := posterior(InitClip, true)
	lv, al := inside(clipped)
	if want := 2 * 5 * P; lv != want || al != 2*5 {
		t.Errorf("InitClip: %d of %d logvars and %d of %d alphas strictly inside the clip bounds", lv, want, al, 2*5)
	}
	free := posterior(InitClip, false)
	for i := range free.Logvar.Data {
		if free.Logvar.Data[i] != clipped.Logvar.Data[i] {
			t.Fatalf("nvdp and nvdp-clipped start from different logvars at %d: %v vs %v", i, free.Logvar.Data[i], clipped.Logvar.Data[i])
		}
	}
	for i := range free.Alpha.Data {
		if free.Alpha.Data[i] != clipped.Alpha.Data[i] {
			t.Fatalf("nvdp and nvdp-clipped start from different alphas at %d", i)
		}
	}
	// The token means are the inputs projected onto the C_mu ball: norm C_mu (inputs have norm ~4 > 2).
	for r := 1; r < clipped.N; r++ {
		var n float64
		for j := 0; j < P; j++ {
			v := float64(clipped.Mu.Data[r*P+j])
			n += v * v
		}
		if math.Abs(math.Sqrt(n)-2) > 1e-5 {
			t.Errorf("component %d: ||mu|| = %v, want C_mu = 2", r, math.Sqrt(n))
		}
	}
	if lv, _ := inside(posterior(InitNVIB, true)); lv != 0 {
		t.Errorf("nvib init under clipping: %d logvars inside the bounds, want 0 (all clamped at the floor)", lv)
	}
}
