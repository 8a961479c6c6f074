package nvib

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
	"github.com/nvdp-project/nvdp/privacy"
	"gonum.org/v1/gonum/mathext"
)

// fakeBackbone is an embedding table: x[b,s] = E[id[b,s]] (a stand-in for the encoder).
type fakeBackbone struct{ emb *nn.Embedding }

func newFake(rng *rand.Rand, vocab, dim int, std float64) *fakeBackbone {
	e := nn.NewEmbedding("embeddings.word_embeddings", vocab, dim)
	e.InitHF(rng, std)
	return &fakeBackbone{emb: e}
}
func (f *fakeBackbone) Forward(in encoder.Input, train bool, rng *rand.Rand) (*nn.Tensor, any) {
	return f.emb.Forward(in.IDs, in.B, in.S), in.IDs
}
func (f *fakeBackbone) Backward(c any, dx *nn.Tensor) { f.emb.Backward(c.([]int32), dx) }
func (f *fakeBackbone) Params() []*nn.Param           { return f.emb.Params() }
func (f *fakeBackbone) Hidden() int                   { return f.emb.Dim() }

// quantileGamma draws ln g = ln P^{-1}(a, u_k) with fixed u_k: the implicit
// reparameterisation made deterministic, so finite differences see exactly
// the gradient the model computes.
func quantileGamma(k int, a float64) float64 {
	u := 0.05 + 0.9*math.Mod(float64(k)*0.6180339887, 1)
	g := mathext.GammaIncRegInv(a, u)
	if !(g > 0) {
		return -700
	}
	return math.Log(g)
}

func testBatch() (encoder.Input, *Labels) {
	in := encoder.Input{B: 3, S: 4, IDs: []int32{1, 2, 3, 0, 4, 5, 0, 0, 6, 7, 8, 9},
		Mask: []float32{1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1}}
	return in, &Labels{Class: []int{0, 1, 2}}
}

// TestModelGradient checks d loss/d param for every parameter tensor of the
// nvdp and nvdp-clipped models in both modes, the gaussian model (through the
// clip of the encoder output: every embedding row the batch uses is outside
// the C = 1 ball) and the baseline, by finite differences (Gaussian noise
// fixed by the seed, Gamma draws at fixed quantiles); and of the principled
// models at a latent width P != H = 8 (rectangular NVIB projections, the
// gaussian release's projection, the block and head at width P with the
// block's FFN at 16 P/8).
func TestModelGradient(t *testing.T) {
	cases := []struct {
		model  string
		mode   privacy.Mode
		init   string
		head   string
		latent int    // P; 0: H
		reads  string // Config.HeadReads
	}{
		{ModelBaseline, privacy.ModePrincipled, InitHF, HeadMean, 0, ""},
		{ModelNVDP, privacy.ModePrincipled, InitHF, HeadMean, 0, ""},
		{ModelNVDP, privacy.ModeReference, InitHF, HeadFirstToken, 0, ""},
		{ModelNVDPClipped, privacy.ModePrincipled, InitHF, HeadMean, 0, ""},
		{ModelNVDPClipped, privacy.ModeReference, InitHF, HeadMean, 0, ""},
		{ModelNVDP, privacy.ModePrincipled, InitNVIB, HeadFirstToken, 0, ""},
		{ModelGaussian, privacy.ModePrincipled, InitHF, HeadMean, 0, ""},
		{ModelGaussian, privacy.ModePrincipled, InitHF, HeadFirstToken, 0, ""},
		{ModelNVDPClipped, privacy.ModePrincipled, InitHF, HeadMean, 6, ""},
		{ModelNVDPClipped, privacy.ModePrincipled, InitClip, HeadFirstToken, 12, ""},
		{ModelNVDP, privacy.ModePrincipled, InitNVIB, HeadMean, 4, ""},
		{ModelGaussian, privacy.ModePrincipled, InitHF, HeadMean, 6, ""},
		{ModelGaussian, privacy.ModePrincipled, InitHF, HeadFirstToken, 12, ""},
		{ModelNVDPClipped, privacy.ModePrincipled, InitHF, HeadMean, 0, HeadReadsRelease},
		{ModelNVDP, privacy.ModePrincipled, InitNVIB, HeadMean, 4, HeadReadsRelease},
		{ModelGaussian, privacy.ModePrincipled, InitHF, HeadMean, 6, HeadReadsRelease},
	}
	for _, tc := range cases {
		name := tc.model + "/" + string(tc.mode) + "/" + tc.init + "/" + tc.head
		if tc.latent != 0 {
			name += fmt.Sprintf("/P=%d", tc.latent)
		}
		if tc.reads != "" {
			name += "/reads=" + tc.reads
		}
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, 22))
			bb := newFake(rng, 10, 8, 0.8)
			cfg := DefaultConfig(tc.model, tc.mode, 8, 2, 16, 3)
			cfg.Init, cfg.Head, cfg.LatentDim, cfg.HeadReads = tc.init, tc.head, tc.latent, tc.reads
			cfg.LambdaG, cfg.LambdaD = 0.5, 0.3
			cfg.KLSchedule = ScheduleConstant
			cfg.Clip.CMu, cfg.Clip.CAlphaMax = 1.0, 1.2
			cfg.ReleaseLen = 6 // gaussian: the release has 6 positions, the batch 4
			if tc.mode == privacy.ModePrincipled {
				cfg.Clip.CAlphaMin = PrincipledAlphaMin(cfg.Clip.Order, 1.2)
			}
			m, err := NewModel(cfg, bb, rng)
			if err != nil {
				t.Fatal(err)
			}
			if P := tc.latent; P != 0 {
				headIn := m.Head.Out.In
				if m.Head.Dense != nil {
					headIn = m.Head.Dense.In
				}
				if m.Block != nil && (m.Block.Cfg.Hidden != P || m.Block.Inter.Out != 2*P) || headIn != P {
					t.Fatalf("P = %d: block %+v, head input %d", P, m.Block, headIn)
				}
				if m.NVIB != nil && (m.NVIB.Mu.W.Value.Shape[0] != P || m.NVIB.Mu.W.Value.Shape[1] != 8 || m.NVIB.AlphaQuad.Value.Shape[1] != 8) {
					t.Fatalf("P = %d: mu_proj %v, alpha quadratic %v, want [%d 8], [1 8]", P, m.NVIB.Mu.W.Value.Shape, m.NVIB.AlphaQuad.Value.Shape, P)
				}
				if m.Gauss != nil && (m.Gauss.Proj == nil || m.Gauss.Proj.Out != P || m.Gauss.Proj.In != 8) {
					t.Fatalf("P = %d: gaussian projection %+v", P, m.Gauss.Proj)
				}
			}
			if tc.init == InitHF && m.NVIB != nil {
				// larger weights so that clipping and alpha gradients are exercised
				for _, p := range m.NVIB.Params() {
					p.InitNormal(rng, 0.4)
				}
			}
			if tc.model != ModelBaseline && (m.Block == nil) != (tc.reads == HeadReadsRelease) {
				t.Fatalf("head_reads %q: block %v", tc.reads, m.Block != nil)
			}
			if m.Block != nil {
				// O(1) pre-LayerNorm activations: a finite-difference step must be small against them
				for _, l := range []*nn.Linear{m.Block.Query, m.Block.Key, m.Block.Value, m.Block.AttnOut, m.Block.Inter, m.Block.Out} {
					l.W.InitNormal(rng, 0.3)
					l.B.InitNormal(rng, 0.3)
				}
			}
			for _, p := range m.Head.Params() {
				p.InitNormal(rng, 0.3)
			}
			m.testLogGamma = quantileGamma
			in, labels := testBatch()
			loss := func() float64 {
				out, _, err := m.Forward(in, labels, ForwardOptions{Train: true, Rng: rand.New(rand.NewPCG(5, 5)), KLScale: 0.7})
				if err != nil {
					t.Fatal(err)
				}
				return out.Loss
			}
			out, c, err := m.Forward(in, labels, ForwardOptions{Train: true, Rng: rand.New(rand.NewPCG(5, 5)), KLScale: 0.7})
			if err != nil {
				t.Fatal(err)
			}
			if m.NVIB != nil && !(out.LG > 0 && out.LD != 0) {
				t.Errorf("KL terms L_G %v, L_D %v", out.LG, out.LD)
			}
			nn.ZeroGrads(m.Params())
			if err := m.Backward(c); err != nil {
				t.Fatal(err)
			}
			for _, p := range m.Params() {
				if p.Name == "nvdp.attention.self.key.bias" {
					// softmax is invariant to a per-query constant: exactly 0
					for _, g := range p.Grad.Data {
						if math.Abs(float64(g)) > 1e-6 {
							t.Errorf("key bias gradient %v, want 0", g)
						}
					}
					continue
				}
				nntest.CheckGrad(t, p.Name, loss, p.Value.Data, p.Grad.Data,
					nntest.GradOpts{Eps: 2e-3, RelTol: 3e-2, AbsTol: 1e-2, MaxChecks: 24})
			}
		})
	}
}

// synthetic task: the class is the identity of token 1 (ids 1..3), other tokens are noise.
func synthBatch(rng *rand.Rand, B, S int) (encoder.Input, *Labels) {
	in := encoder.Input{B: B, S: S, IDs: make([]int32, B*S), Mask: make([]float32, B*S)}
	lab := &Labels{Class: make([]int, B)}
	for b := 0; b < B; b++ {
		n := 2 + rng.IntN(S-1)
		c := rng.IntN(3)
		lab.Class[b] = c
		for s := 0; s < S; s++ {
			if s < n {
				in.Mask[b*S+s] = 1
				in.IDs[b*S+s] = int32(4 + rng.IntN(12))
			}
		}
		in.IDs[b*S+rng.IntN(n)] = int32(1 + c)
	}
	return in, lab
}

// TestTrainSynthetic: a small NVDP model learns a token-identity task, with
// and without clipping, in both modes, and so does the gaussian model (C 3,
// sigma 0.5, L 8), also at latent widths P = 8, 12, 24 from H = 16; the loss must
// fall well below ln 3.
func TestTrainSynthetic(t *testing.T) {
	for _, tc := range []struct {
		model  string
		mode   privacy.Mode
		latent int // P; 0: H
	}{{ModelNVDP, privacy.ModePrincipled, 0}, {ModelNVDPClipped, privacy.ModePrincipled, 0}, {ModelNVDPClipped, privacy.ModeReference, 0},
		{ModelBaseline, privacy.ModePrincipled, 0}, {ModelGaussian, privacy.ModePrincipled, 0},
		{ModelNVDPClipped, privacy.ModePrincipled, 8}, {ModelGaussian, privacy.ModePrincipled, 12}, {ModelNVDPClipped, privacy.ModePrincipled, 24}} {
		name := tc.model + "/" + string(tc.mode)
		if tc.latent != 0 {
			name += fmt.Sprintf("/P=%d", tc.latent)
		}
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(31, 32))
			bb := newFake(rng, 16, 16, 1)
			cfg := DefaultConfig(tc.model, tc.mode, 16, 2, 32, 3)
			cfg.LatentDim = tc.latent
			cfg.Clip.CMu = 3
			cfg.Clip.CAlphaMax = 1
			if tc.mode == privacy.ModePrincipled {
				cfg.Clip.CAlphaMin = PrincipledAlphaMin(cfg.Clip.Order, 1)
			}
			cfg.LambdaG, cfg.LambdaD = 1e-2, 1e-2
			if tc.model == ModelGaussian {
				cfg.ReleaseLen, cfg.Prior.Var = 8, 0.25
			}
			m, err := NewModel(cfg, bb, rng)
			if err != nil {
				t.Fatal(err)
			}
			opt := nn.NewAdamW(3e-3, 0.9, 0.999, 1e-8, 0)
			steps := 300
			var first, last float64
			for step := 0; step < steps; step++ {
				in, lab := synthBatch(rng, 16, 6)
				out, c, err := m.Forward(in, lab, ForwardOptions{Train: true, Rng: rng, KLScale: cfg.KLScale(step, steps)})
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				nn.ZeroGrads(m.Params())
				if err := m.Backward(c); err != nil {
					t.Fatal(err)
				}
				nn.ClipGradNorm(m.Params(), 1)
				opt.Update(m.Params(), 3e-3)
				if step < 10 {
					first += out.Task / 10
				}
				if step >= steps-10 {
					last += out.Task / 10
				}
			}
			t.Logf("task loss: first 10 steps %.3f, last 10 steps %.3f", first, last)
			if !(last < 0.5*first) || !(last < 0.5) {
				t.Errorf("loss did not fall: %.3f -> %.3f", first, last)
			}
		})
	}
}

// TestHeadReadsRelease: with HeadReadsRelease the logits are W_c m + b_c,
// m the mean of the released atoms z_1..z_S (the prior component 0 left
// out), computed here from the sample independently; and the configurations
// it does not apply to are refused.
func TestHeadReadsRelease(t *testing.T) {
	for _, model := range []string{ModelNVDPClipped, ModelGaussian} {
		rng := rand.New(rand.NewPCG(3, 4))
		cfg := DefaultConfig(model, privacy.ModePrincipled, 8, 2, 16, 3)
		cfg.HeadReads, cfg.ReleaseLen = HeadReadsRelease, 4
		cfg.Clip.CMu, cfg.Clip.CAlphaMin = 1, PrincipledAlphaMin(cfg.Clip.Order, cfg.Clip.CAlphaMax)
		m, err := NewModel(cfg, newFake(rng, 10, 8, 0.8), rng)
		if err != nil {
			t.Fatal(err)
		}
		m.Head.Out.W.InitNormal(rng, 0.5)
		m.Head.Out.B.InitNormal(rng, 0.5)
		in, _ := testBatch()
		out, _, err := m.Forward(in, nil, ForwardOptions{Rng: rand.New(rand.NewPCG(1, 1)), KLScale: 1})
		if err != nil {
			t.Fatal(err)
		}
		B, N, P := out.Sample.Z.Shape[0], out.Sample.Z.Shape[1], out.Sample.Z.Shape[2]
		if N != in.S+1 {
			t.Fatalf("%s: N = %d, want S+1 = %d", model, N, in.S+1)
		}
		for b := 0; b < B; b++ {
			for c := 0; c < 3; c++ {
				want := float64(m.Head.Out.B.Value.Data[c])
				for p := 0; p < P; p++ {
					mean := 0.0
					for j := 1; j < N; j++ {
						mean += float64(out.Sample.Z.Data[(b*N+j)*P+p])
					}
					want += float64(m.Head.Out.W.Value.Data[c*P+p]) * mean / float64(N-1)
				}
				if got := float64(out.Logits.Data[b*3+c]); math.Abs(got-want) > 1e-5 {
					t.Errorf("%s: logit [%d,%d] = %v, want %v", model, b, c, got, want)
				}
			}
		}
	}
	for _, tc := range []struct {
		model string
		mode  privacy.Mode
		head  string
		reads string
	}{
		{ModelBaseline, privacy.ModePrincipled, HeadMean, HeadReadsRelease},
		{ModelNVDPClipped, privacy.ModeReference, HeadMean, HeadReadsRelease},
		{ModelNVDPClipped, privacy.ModePrincipled, HeadFirstToken, HeadReadsRelease},
		{ModelNVDPClipped, privacy.ModePrincipled, HeadMean, "rows"},
	} {
		cfg := DefaultConfig(tc.model, tc.mode, 8, 2, 16, 3)
		cfg.Head, cfg.HeadReads = tc.head, tc.reads
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "head_reads") {
			t.Errorf("%+v: error %v, want one naming head_reads", tc, err)
		}
	}
}
