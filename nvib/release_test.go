package nvib

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
	"github.com/nvdp-project/nvdp/privacy"
)

// releaseModel is a small nvdp-clipped model on the embedding-table backbone
// (whose output does not depend on the mask, so that any dependence of the
// model's outputs on the mask comes from the NVIB layer onwards).
func releaseModel(t *testing.T, mode privacy.Mode, P int) *Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(61, 62))
	bb := newFake(rng, 10, P, 0.8)
	cfg := DefaultConfig(ModelNVDPClipped, mode, P, 2, 2*P, 3)
	cfg.Clip.CMu, cfg.Clip.CAlphaMax = 1.5, 1
	cfg.Clip.CAlphaMin = 0.3
	cfg.LambdaG, cfg.LambdaD = 0.5, 0.3
	cfg.KLSchedule = ScheduleConstant
	m, err := NewModel(cfg, bb, rng)
	if err != nil {
		t.Fatal(err)
	}
	// spread the pseudo-counts over [C_amin, C_amax] and make the block O(1)
	for _, p := range m.NVIB.Params() {
		p.InitNormal(rng, 0.4)
	}
	for _, l := range []*nn.Linear{m.Block.Query, m.Block.Key, m.Block.Value, m.Block.AttnOut, m.Block.Inter, m.Block.Out} {
		l.W.InitNormal(rng, 0.3)
		l.B.InitNormal(rng, 0.3)
	}
	for _, p := range m.Head.Params() {
		p.InitNormal(rng, 0.3)
	}
	return m
}

// twoLengths is a batch of two inputs of different lengths (2 and 5 real
// tokens) padded to the same S = 7, so both have N = 8 components.
func twoLengths() (encoder.Input, *Labels) {
	in := encoder.Input{B: 2, S: 7,
		IDs:  []int32{1, 2, 0, 0, 0, 0, 0, 3, 4, 5, 6, 7, 0, 0},
		Mask: []float32{1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0}}
	return in, &Labels{Class: []int{1, 2}}
}

// TestReleaseHasNoLengthZeros: a principled release (Z, pi) of two inputs of
// different lengths has all N components: every pi_i > 0 (ln pi finite), the
// weights sum to 1, every Z row is mu + sigma eps with standard normal eps,
// and each pad's clipped alpha lies in [C_amin, C_amax]. The reference keeps
// pi = 0 exactly at the pads (the zeros count the padding: 5 + 2 = 7).
func TestReleaseHasNoLengthZeros(t *testing.T) {
	for _, tc := range []struct {
		mode      privacy.Mode
		wantZeros int // components with pi = 0 over the batch
	}{{privacy.ModePrincipled, 0}, {privacy.ModeReference, 7}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			m := releaseModel(t, tc.mode, 16)
			in, _ := twoLengths()
			out, _, err := m.Forward(in, nil, ForwardOptions{Rng: rand.New(rand.NewPCG(7, 8)), KLScale: 1})
			if err != nil {
				t.Fatal(err)
			}
			post, s := out.Posterior, out.Sample
			if post.N != 8 || post.PadsReleased != (tc.mode == privacy.ModePrincipled) {
				t.Fatalf("N %d, pads released %v", post.N, post.PadsReleased)
			}
			zeros := 0
			for k, pi := range s.Dir.Pi {
				isPad := post.Mask[k] == 0
				switch {
				case pi == 0:
					zeros++
					if !isPad || !math.IsInf(s.Dir.LogPi[k], -1) {
						t.Errorf("component %d (pad %v): pi 0, ln pi %v", k, isPad, s.Dir.LogPi[k])
					}
				case !(pi > 0) || math.IsInf(s.Dir.LogPi[k], 0) || math.Abs(math.Exp(s.Dir.LogPi[k])-float64(pi)) > 1e-6*float64(pi)+1e-30:
					t.Errorf("component %d: pi %v, ln pi %v", k, pi, s.Dir.LogPi[k])
				}
			}
			if zeros != tc.wantZeros {
				t.Errorf("%d components with pi = 0, want %d", zeros, tc.wantZeros)
			}
			for b := 0; b < post.B; b++ {
				var sum float64
				for i := 0; i < post.N; i++ {
					sum += float64(s.Dir.Pi[b*post.N+i])
				}
				if math.Abs(sum-1) > 1e-5 {
					t.Errorf("example %d: sum pi = %v", b, sum)
				}
			}
			// every Z row is a draw mu + sigma eps; the eps of the pad rows are N(0, 1)
			var e1, e2, n float64
			for k, z := range s.Z.Data {
				mu, sd, e := float64(post.Mu.Data[k]), math.Exp(0.5*float64(post.Logvar.Data[k])), float64(s.Eps.Data[k])
				if math.Abs(float64(z)-(mu+sd*e)) > 1e-5*(1+math.Abs(mu)+sd*math.Abs(e)) {
					t.Fatalf("Z[%d] = %v, want mu + sigma eps = %v", k, z, mu+sd*e)
				}
				if post.Mask[k/post.P] == 0 {
					e1 += e
					e2 += e * e
					n++
				}
			}
			if n != 7*16 || math.Abs(e1/n) > 5/math.Sqrt(n) || math.Abs(e2/n-1) > 5*math.Sqrt(2/n) {
				t.Errorf("pad eps over %v values: mean %v, mean square %v, want 0, 1", n, e1/n, e2/n)
			}
			for k, a := range post.Alpha.Data {
				if k%post.N != 0 && (a < 0.3*(1-1e-6) || a > 1+1e-6) {
					t.Errorf("alpha[%d] = %v outside [0.3, 1]", k, a)
				}
			}
		})
	}
}

// TestReleaseDirichletMassAtPads: over many draws from a fixed posterior, the
// mean Dirichlet weight of every component is alpha_i / sum_j alpha_j with
// the sum over all N components in principled mode (pads are ordinary
// components), over the real ones in reference mode (pads exactly 0); within
// 5 standard errors of the Dirichlet variance a_i (A - a_i) / (A^2 (A + 1)).
func TestReleaseDirichletMassAtPads(t *testing.T) {
	for _, mode := range []privacy.Mode{privacy.ModePrincipled, privacy.ModeReference} {
		t.Run(string(mode), func(t *testing.T) {
			m := releaseModel(t, mode, 8)
			in, _ := twoLengths()
			post, err := m.Posterior(in)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(9, 10))
			const draws = 4000
			mean := make([]float64, post.B*post.N)
			for d := 0; d < draws; d++ {
				for k, pi := range Draw(post, rng).Dir.Pi {
					mean[k] += float64(pi) / draws
				}
			}
			for b := 0; b < post.B; b++ {
				var A float64
				for i := 0; i < post.N; i++ {
					if k := b*post.N + i; mode == privacy.ModePrincipled || post.Mask[k] != 0 {
						A += float64(post.Alpha.Data[k])
					}
				}
				for i := 0; i < post.N; i++ {
					k := b*post.N + i
					if mode == privacy.ModeReference && post.Mask[k] == 0 {
						if mean[k] != 0 {
							t.Errorf("reference pad %d: mean pi %v, want 0", k, mean[k])
						}
						continue
					}
					a := float64(post.Alpha.Data[k])
					se := math.Sqrt(a * (A - a) / (A * A * (A + 1)) / draws)
					if math.Abs(mean[k]-a/A) > 5*se {
						t.Errorf("component %d (mask %v): mean pi %.4f, want alpha/A = %.4f (se %.4f)", k, post.Mask[k], mean[k], a/A, se)
					}
				}
			}
		})
	}
}

// TestOutputIgnoresMask: the embedding-table backbone ignores the mask, so
// any dependence of the outputs on it comes from the NVIB layer onwards. In
// principled mode logits, loss, the sample and every parameter gradient are
// bit-for-bit the same for three different masks of the same ids (the
// forward reads the mask only to label Posterior.Mask); in reference mode
// they differ (pi = 0 at pads, masked pooling), so the test can fail.
func TestOutputIgnoresMask(t *testing.T) {
	in, labels := twoLengths()
	masks := [][]float32{in.Mask, nil, {1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0}}
	for _, tc := range []struct {
		mode      privacy.Mode
		invariant bool
	}{{privacy.ModePrincipled, true}, {privacy.ModeReference, false}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			m := releaseModel(t, tc.mode, 8)
			m.testLogGamma = quantileGamma
			type result struct {
				logits, pi, grads []float32
				loss              float64
			}
			run := func(mask []float32) result {
				x := in
				x.Mask = mask
				out, c, err := m.Forward(x, labels, ForwardOptions{Train: true, Rng: rand.New(rand.NewPCG(3, 4)), KLScale: 0.7})
				if err != nil {
					t.Fatal(err)
				}
				nn.ZeroGrads(m.Params())
				if err := m.Backward(c); err != nil {
					t.Fatal(err)
				}
				r := result{logits: out.Logits.Data, pi: out.Sample.Dir.Pi, loss: out.Loss}
				for _, p := range m.Params() {
					r.grads = append(r.grads, p.Grad.Data...)
				}
				return r
			}
			same := func(a, b []float32) bool {
				for i := range a {
					if a[i] != b[i] {
						return false
					}
				}
				return len(a) == len(b)
			}
			r0 := run(masks[0])
			for j, mask := range masks[1:] {
				r := run(mask)
				eq := same(r0.logits, r.logits) && same(r0.pi, r.pi) && same(r0.grads, r.grads) && r0.loss == r.loss
				if eq != tc.invariant {
					t.Errorf("mask %d: outputs equal %v, want %v (logits %v vs %v, loss %v vs %v)", j+1, eq, tc.invariant, r0.logits, r.logits, r0.loss, r.loss)
				}
			}
		})
	}
}

// TestBlockGradientReleasedPads checks the principled block's dZ (every row,
// pads included: they feed queries, keys and values) and d ln pi (finite at
// every component) by finite differences of sum(w ⊙ y), with the sample of a
// posterior whose pads are released.
func TestBlockGradientReleasedPads(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	B, S, P := 2, 4, 8
	N := S + 1
	blk, err := NewBlock("nvdp", BlockConfig{Hidden: P, Heads: 2, Intermediate: 16, Mode: privacy.ModePrincipled}, rng)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*nn.Linear{blk.Query, blk.Key, blk.Value, blk.AttnOut, blk.Inter, blk.Out} {
		l.W.InitNormal(rng, 0.3)
		l.B.InitNormal(rng, 0.3)
	}
	post := &Posterior{B: B, N: N, P: P, Mu: nntest.RandTensor(rng, B, N, P), Logvar: nntest.RandTensor(rng, B, N, P),
		Alpha: nn.New(B, N), Mask: []float32{1, 1, 1, 0, 0, 1, 1, 1, 1, 0}, PadsReleased: true}
	for k := range post.Alpha.Data {
		post.Alpha.Data[k] = float32(0.3 + 0.7*rng.Float64())
	}
	s := drawWith(post, rng, quantileGamma)
	w := nntest.RandTensor(rng, B, S, P)
	loss := func() float64 {
		y, _ := blk.Forward(nil, post, s, false, nil)
		return nntest.Dot(w, y)
	}
	y, c := blk.Forward(nil, post, s, false, nil)
	if len(y.Data) != B*S*P {
		t.Fatalf("y %v", y.Shape)
	}
	dZ, dLogPi, dx := blk.Backward(c, s, w.Clone())
	if dx != nil {
		t.Errorf("principled block returned a gradient for x")
	}
	// the pad rows get gradient from their query rows as well as keys/values
	for k, m := range post.Mask {
		if m != 0 || k%N == 0 {
			continue
		}
		var g float64
		for _, v := range dZ.Data[k*P : (k+1)*P] {
			g += math.Abs(float64(v))
		}
		if !(g > 1e-4) || dLogPi[k] == 0 {
			t.Errorf("pad component %d: |dZ| %v, d ln pi %v", k, g, dLogPi[k])
		}
	}
	nntest.CheckGradStrict(t, "block dZ", loss, s.Z.Data, dZ.Data, nntest.GradOpts{Eps: 1e-3, RelTol: 2e-2, AbsTol: 5e-3})
	// d ln pi by float64 central differences
	for k := range s.Dir.LogPi {
		orig := s.Dir.LogPi[k]
		h := 1e-3
		s.Dir.LogPi[k] = orig + h
		fp := loss()
		s.Dir.LogPi[k] = orig - h
		fm := loss()
		s.Dir.LogPi[k] = orig
		num := (fp - fm) / (2 * h)
		if math.Abs(num-dLogPi[k]) > 2e-2*math.Abs(num)+2e-3 {
			t.Errorf("d ln pi[%d]: analytic %v, numeric %v", k, dLogPi[k], num)
		}
	}
}

// TestPadEmbeddingGradient: pad token id 0 appears only at padding positions
// of twoLengths. In principled mode the pads are released, so its embedding
// row gets a gradient (through the KL terms, the Dirichlet weights, keys,
// values, queries and the pooled head), checked by finite differences with
// the Gamma draws at fixed quantiles, with and without the KL terms (the
// release path alone). In reference mode without the KL terms it is exactly
// zero: pads have pi = 0, float32-min key bias and are left out of the pooling
// (the queries there come from x, but their rows are not pooled).
func TestPadEmbeddingGradient(t *testing.T) {
	for _, tc := range []struct {
		mode     privacy.Mode
		lambda   float64
		wantZero bool
	}{{privacy.ModePrincipled, 0.5, false}, {privacy.ModePrincipled, 0, false}, {privacy.ModeReference, 0, true}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			m := releaseModel(t, tc.mode, 8)
			m.Cfg.LambdaG, m.Cfg.LambdaD = tc.lambda, tc.lambda
			m.testLogGamma = quantileGamma
			in, labels := twoLengths()
			fwd := func() (*Output, *Cache) {
				out, c, err := m.Forward(in, labels, ForwardOptions{Train: true, Rng: rand.New(rand.NewPCG(3, 4)), KLScale: 1})
				if err != nil {
					t.Fatal(err)
				}
				return out, c
			}
			_, c := fwd()
			nn.ZeroGrads(m.Params())
			if err := m.Backward(c); err != nil {
				t.Fatal(err)
			}
			emb := m.Backbone.Params()[0]
			row, grad := emb.Value.Data[:8], emb.Grad.Data[:8] // id 0
			var g float64
			for _, v := range grad {
				g += math.Abs(float64(v))
			}
			if (g == 0) != tc.wantZero {
				t.Fatalf("|d loss/d E[pad]| = %v, want zero %v", g, tc.wantZero)
			}
			if !tc.wantZero {
				nntest.CheckGradStrict(t, "pad embedding", func() float64 { o, _ := fwd(); return o.Loss }, row, grad,
					nntest.GradOpts{Eps: 2e-3, RelTol: 3e-2, AbsTol: 1e-2})
			}
		})
	}
}

// TestPadsReleased: only principled NVDP models and the gaussian model
// release the padding components (and so need evaluation at the release
// length, model.EvalPadLen); the baseline has no release and the reference
// gives pads pi = 0.
func TestPadsReleased(t *testing.T) {
	for _, tc := range []struct {
		model string
		mode  privacy.Mode
		want  bool
	}{
		{ModelNVDPClipped, privacy.ModePrincipled, true}, {ModelNVDP, privacy.ModePrincipled, true}, {ModelNVDPClipped, "", true},
		{ModelNVDPClipped, privacy.ModeReference, false}, {ModelNVDP, privacy.ModeReference, false}, {ModelBaseline, privacy.ModePrincipled, false},
		{ModelGaussian, privacy.ModePrincipled, true},
	} {
		rng := rand.New(rand.NewPCG(1, 2))
		cfg := DefaultConfig(tc.model, tc.mode, 8, 2, 16, 2)
		cfg.ReleaseLen = 7
		m, err := NewModel(cfg, newFake(rng, 10, 8, 1), rng)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.PadsReleased(); got != tc.want {
			t.Errorf("%s/%q: PadsReleased %v, want %v", tc.model, tc.mode, got, tc.want)
		}
		if !m.Releases() {
			continue
		}
		in, _ := twoLengths()
		post, err := m.Posterior(in)
		if err != nil {
			t.Fatal(err)
		}
		if post.PadsReleased != tc.want || (post.SampleMask() == nil) != tc.want {
			t.Errorf("%s/%q: posterior pads released %v, sample mask nil %v, want %v", tc.model, tc.mode, post.PadsReleased, post.SampleMask() == nil, tc.want)
		}
		if md := m.ExportMetadata("sst2", "dev"); md["pads_released"] != map[bool]string{true: "true", false: "false"}[tc.want] || md["kl_mask_pads"] != "false" {
			t.Errorf("%s/%q: metadata pads_released %q kl_mask_pads %q", tc.model, tc.mode, md["pads_released"], md["kl_mask_pads"])
		}
	}
}
