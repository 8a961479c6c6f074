package nvib

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestLayerGradientLatent checks the NVIB layer with rectangular projections
// (H = 8 -> P = 4 and P = 12) by finite differences: the gradient of
// dot(w_mu, mu) + dot(w_lv, logvar) + dot(w_a, alpha) over the clipped
// posterior with respect to x [B,S,H] and to every parameter (mu_proj and
// logvar_proj [P,H], the alpha projection over x's H coordinates), with
// weights large enough that the mean ball, the logvar bounds and the alpha
// bounds are active on some components and not on others.
func TestLayerGradientLatent(t *testing.T) {
	const B, S, H = 2, 3, 8
	for _, P := range []int{4, 12} {
		t.Run("P="+strconv.Itoa(P), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(44, uint64(P)))
			clip := DefaultClip(privacy.ModePrincipled, 2, 1.2)
			l, err := NewLayer("nvib", LayerConfig{Hidden: H, Latent: P, Heads: 2, Mode: privacy.ModePrincipled, Prior: DefaultPrior(),
				Clip: clip, Init: InitHF}, rng)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range l.Params() {
				p.InitNormal(rng, 0.4)
			}
			for j := range l.Logvar.B.Value.Data { // centre logvar between the floor and the cap: both are active somewhere
				l.Logvar.B.Value.Data[j] -= 1.2
			}
			x := nntest.RandTensor(rng, B, S, H)
			for _, r := range []int{1, 5} { // two tokens well inside the mean ball
				for j := range H {
					x.Data[r*H+j] *= 0.1
				}
			}
			N := S + 1
			wm, wl, wa := nntest.RandTensor(rng, B, N, P), nntest.RandTensor(rng, B, N, P), nntest.RandTensor(rng, B, N)
			loss := func() float64 {
				post, _, err := l.Forward(x, nil)
				if err != nil {
					t.Fatal(err)
				}
				return nntest.Dot(wm, post.Mu) + nntest.Dot(wl, post.Logvar) + nntest.Dot(wa, post.Alpha)
			}
			post, c, err := l.Forward(x, nil)
			if err != nil {
				t.Fatal(err)
			}
			if post.P != P || post.N != N || len(post.Mu.Data) != B*N*P {
				t.Fatalf("posterior [%d,%d,%d], want [%d,%d,%d]", post.B, post.N, post.P, B, N, P)
			}
			var projected, clamped int
			for r := range B * N {
				if r%N != 0 && c.clip.muNorm[r] > 0 {
					projected++
				}
			}
			for _, pass := range c.clip.lvPass {
				if !pass {
					clamped++
				}
			}
			if projected == 0 || projected == B*S || clamped == 0 {
				t.Fatalf("want some projected means (%d of %d) and clamped logvars (%d): raise the weights", projected, B*S, clamped)
			}
			// no pre-clip logvar within 20 finite-difference steps of a clip bound (a kink)
			lv, _ := l.Logvar.Forward(x)
			floor, cap := clip.LogvarBounds(1)
			for k, v := range lv.Data {
				if d := math.Min(math.Abs(float64(v)-floor), math.Abs(float64(v)-cap)); d < 0.02 {
					t.Fatalf("pre-clip logvar[%d] = %v is %v from a clip bound: choose another seed", k, v, d)
				}
			}
			nn.ZeroGrads(l.Params())
			dx := l.Backward(c, wm.Clone(), wl.Clone(), wa.Clone())
			if len(dx.Shape) != 3 || dx.Shape[2] != H {
				t.Fatalf("dx %v, want [B,S,%d]", dx.Shape, H)
			}
			opts := nntest.GradOpts{Eps: 1e-3, RelTol: 2e-2, AbsTol: 5e-3}
			nntest.CheckGradStrict(t, "dx", loss, x.Data, dx.Data, opts)
			for _, p := range l.Params() {
				nntest.CheckGrad(t, p.Name, loss, p.Value.Data, p.Grad.Data, opts)
			}
		})
	}
}

// TestLatentInit: with P != H the intended initialisations use the
// rectangular identity. InitClip: the token means are the first min(P,H)
// coordinates of x (zero beyond H), projected onto the C_mu ball. InitNVIB
// (no clipping): mu_i = x_i[:P] and ln alpha_i - ||mu_i||^2/(2 sqrt d_h) =
// alpha_tau at every token (the quadratic term cancels the block's L2 key
// bias at init, as at P = H), d_h = P/heads.
func TestLatentInit(t *testing.T) {
	const B, S, H, heads = 2, 4, 8, 2
	rng := rand.New(rand.NewPCG(5, 6))
	x := nntest.RandTensor(rng, B, S, H)
	for _, P := range []int{4, 8, 12} {
		for _, init := range []string{InitClip, InitNVIB} {
			t.Run(init+"/P="+strconv.Itoa(P), func(t *testing.T) {
				clip := DefaultClip(privacy.ModePrincipled, 100, 1)
				clip.Enabled = init == InitClip
				post := initPosterior(t, x, P, heads, init, clip)
				N := S + 1
				dh := float64(P / heads)
				for b := range B {
					for i := 1; i < N; i++ {
						mu := post.Mu.Data[(b*N+i)*P : (b*N+i+1)*P]
						xr := x.Data[(b*S+i-1)*H : (b*S+i)*H]
						var n2 float64
						for j, v := range mu {
							want := float32(0)
							if j < H {
								want = xr[j]
							}
							if v != want { // C_mu = 100: the ball is not active
								t.Fatalf("example %d component %d: mu[%d] = %v, want x[%d] = %v", b, i, j, v, j, want)
							}
							n2 += float64(v) * float64(v)
						}
						if init != InitNVIB {
							continue
						}
						la := math.Log(float64(post.Alpha.Data[b*N+i]))
						if got := la - n2/(2*math.Sqrt(dh)); math.Abs(got+10) > 1e-4 {
							t.Errorf("example %d component %d: ln alpha - ||mu||^2/(2 sqrt d_h) = %v, want alpha_tau = -10", b, i, got)
						}
					}
				}
			})
		}
	}
}

// TestLatentConfig: LatentDim 0 is P = Hidden and is absent from
// nvdp_config.json (files of models without a latent width are the files
// written before it); a latent width round-trips; BlockIntermediate scales
// the encoder's ratio I/H to P; invalid widths (negative, not divisible by
// the heads, in reference mode, for the baseline) are errors naming
// latent_dim.
func TestLatentConfig(t *testing.T) {
	c := DefaultConfig(ModelNVDPClipped, privacy.ModePrincipled, 128, 2, 512, 2)
	if c.Latent() != 128 || c.BlockIntermediate() != 512 {
		t.Errorf("unset: P %d, block FFN %d; want 128, 512", c.Latent(), c.BlockIntermediate())
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "latent_dim") {
		t.Errorf("unset latent_dim written: %s", b)
	}
	for _, tc := range []struct{ P, inter int }{{64, 256}, {32, 128}, {256, 1024}, {2, 8}} {
		c.LatentDim = tc.P
		if c.Latent() != tc.P || c.BlockIntermediate() != tc.inter {
			t.Errorf("P %d: Latent %d, block FFN %d, want %d", tc.P, c.Latent(), c.BlockIntermediate(), tc.inter)
		}
	}
	odd := DefaultConfig(ModelNVDPClipped, privacy.ModePrincipled, 768, 12, 3072, 2)
	odd.LatentDim = 60
	if odd.BlockIntermediate() != 240 {
		t.Errorf("BERT-base ratio at P 60: %d, want 240", odd.BlockIntermediate())
	}

	dir := t.TempDir()
	c = DefaultConfig(ModelGaussian, privacy.ModePrincipled, 128, 2, 512, 2)
	c.LatentDim, c.ReleaseLen, c.Clip.CMu = 64, 16, 0.5
	if err := SaveConfig(dir, c); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"latent_dim": 64`) {
		t.Errorf("nvdp_config.json without the latent width:\n%s", raw)
	}
	got, err := LoadConfig(dir)
	if err != nil || got != c {
		t.Errorf("round trip: %+v (%v)\nwant %+v", got, err, c)
	}

	for _, tc := range []struct {
		name  string
		model string
		mode  privacy.Mode
		P     int
		want  string // "" = valid
	}{
		{"P = H explicit", ModelNVDPClipped, privacy.ModePrincipled, 128, ""},
		{"P = H explicit, reference", ModelNVDPClipped, privacy.ModeReference, 128, ""},
		{"P = H explicit, baseline", ModelBaseline, privacy.ModePrincipled, 128, ""},
		{"P < H", ModelNVDP, privacy.ModePrincipled, 32, ""},
		{"P > H", ModelNVDPClipped, privacy.ModePrincipled, 256, ""},
		{"negative", ModelNVDPClipped, privacy.ModePrincipled, -4, "latent_dim -4: the release's width must be >= 1"},
		{"not divisible", ModelNVDPClipped, privacy.ModePrincipled, 33, "latent_dim 33: not divisible by the NVDP block's 2 attention heads"},
		{"reference", ModelNVDPClipped, privacy.ModeReference, 64, "latent_dim 64: reference mode reproduces the released code"},
		{"baseline", ModelBaseline, privacy.ModePrincipled, 64, "latent_dim 64: the baseline has no release"},
	} {
		c := DefaultConfig(tc.model, tc.mode, 128, 2, 512, 2)
		c.LatentDim = tc.P
		err := c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// latentModel is a small principled model of kind model on the
// embedding-table backbone (H = 8) with latent width P.
func latentModel(t *testing.T, model string, P int, seed uint64) *Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	cfg := DefaultConfig(model, privacy.ModePrincipled, 8, 2, 16, 3)
	cfg.LatentDim, cfg.ReleaseLen = P, 6
	cfg.Clip.CMu, cfg.Clip.CAlphaMax, cfg.Clip.CAlphaMin = 1.5, 1, 0.3
	m, err := NewModel(cfg, newFake(rng, 10, 8, 0.8), rng)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLatentModelRoundTrip: an nvdp-clipped and a gaussian model of latent
// width P = 4 and P = 12 (H = 8) saved (nvdp_config.json and every
// parameter) and loaded into a model built from the loaded configuration
// with another seed give bit-identical posteriors, samples and logits; the
// release has P dimensions.
func TestLatentModelRoundTrip(t *testing.T) {
	for _, model := range []string{ModelNVDPClipped, ModelGaussian} {
		for _, P := range []int{4, 12} {
			t.Run(model+"/P="+strconv.Itoa(P), func(t *testing.T) {
				m := latentModel(t, model, P, 3)
				for _, p := range m.Params() { // trained-looking weights, not the init
					p.InitNormal(rand.New(rand.NewPCG(9, uint64(len(p.Name)))), 0.3)
				}
				dir := t.TempDir()
				if err := SaveConfig(dir, m.Cfg); err != nil {
					t.Fatal(err)
				}
				if err := nn.SaveCheckpoint(filepath.Join(dir, "model.safetensors"), m.Params(), nil, nil); err != nil {
					t.Fatal(err)
				}
				cfg, err := LoadConfig(dir)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(77, 78))
				m2, err := NewModel(cfg, newFake(rng, 10, 8, 0.8), rng)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := nn.LoadCheckpoint(filepath.Join(dir, "model.safetensors"), m2.Params(), nil); err != nil {
					t.Fatal(err)
				}
				in, labels := testBatch()
				run := func(m *Model) *Output {
					out, _, err := m.Forward(in, labels, ForwardOptions{Rng: rand.New(rand.NewPCG(5, 6)), KLScale: 1})
					if err != nil {
						t.Fatal(err)
					}
					return out
				}
				a, b := run(m), run(m2)
				if a.Posterior.P != P || a.Sample.Z.Shape[2] != P {
					t.Fatalf("release width %d / %v, want %d", a.Posterior.P, a.Sample.Z.Shape, P)
				}
				for name, pair := range map[string][2]*nn.Tensor{"mu": {a.Posterior.Mu, b.Posterior.Mu}, "logvar": {a.Posterior.Logvar, b.Posterior.Logvar},
					"alpha": {a.Posterior.Alpha, b.Posterior.Alpha}, "Z": {a.Sample.Z, b.Sample.Z}, "logits": {a.Logits, b.Logits}} {
					for k := range pair[0].Data {
						if pair[0].Data[k] != pair[1].Data[k] {
							t.Fatalf("%s[%d]: %v saved, %v loaded", name, k, pair[0].Data[k], pair[1].Data[k])
						}
					}
				}
				if a.Loss != b.Loss {
					t.Errorf("loss %v saved, %v loaded", a.Loss, b.Loss)
				}
				// a model of another latent width does not load the file
				other := latentModel(t, model, P+2, 4)
				if _, err := nn.LoadCheckpoint(filepath.Join(dir, "model.safetensors"), other.Params(), nil); err == nil {
					t.Errorf("weights of P = %d loaded into a model of P = %d", P, P+2)
				}
			})
		}
	}
}

// TestLatentUnsetIsHidden: a latent width equal to the hidden size builds
// the model of an unset one: the same parameters (names, shapes and values
// from the same seed), the same outputs bit for bit; only nvdp_config.json
// records the explicit width.
func TestLatentUnsetIsHidden(t *testing.T) {
	for _, model := range []string{ModelNVDPClipped, ModelGaussian, ModelNVDP} {
		a, b := latentModel(t, model, 0, 11), latentModel(t, model, 8, 11)
		pa, pb := a.Params(), b.Params()
		if len(pa) != len(pb) {
			t.Fatalf("%s: %d parameters unset, %d at P = H", model, len(pa), len(pb))
		}
		for i := range pa {
			if pa[i].Name != pb[i].Name || !slices.Equal(pa[i].Value.Shape, pb[i].Value.Shape) || !slices.Equal(pa[i].Value.Data, pb[i].Value.Data) {
				t.Fatalf("%s: parameter %d: %s %v vs %s %v", model, i, pa[i].Name, pa[i].Value.Shape, pb[i].Name, pb[i].Value.Shape)
			}
		}
		if b.Gauss != nil && b.Gauss.Proj != nil {
			t.Errorf("gaussian at P = H has a projection")
		}
		in, labels := testBatch()
		oa, _, err := a.Forward(in, labels, ForwardOptions{Train: true, Rng: rand.New(rand.NewPCG(1, 1)), KLScale: 1})
		if err != nil {
			t.Fatal(err)
		}
		ob, _, err := b.Forward(in, labels, ForwardOptions{Train: true, Rng: rand.New(rand.NewPCG(1, 1)), KLScale: 1})
		if err != nil {
			t.Fatal(err)
		}
		if oa.Loss != ob.Loss || !slices.Equal(oa.Logits.Data, ob.Logits.Data) {
			t.Errorf("%s: loss %v vs %v", model, oa.Loss, ob.Loss)
		}
	}
}
