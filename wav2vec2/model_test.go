package wav2vec2

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nvdp-project/nvdp/audio"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
)

func newRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed+1)) }

// tinyConfig is a model small enough for finite differences and a
// reference fixture: 3 conv layers (stride 20, receptive field 30 samples),
// 2 layers of width 16, a positional conv of even kernel 4 in 2 groups;
// "layer" also has conv biases and the pre-LN encoder, as wav2vec2-large.
func tinyConfig(norm string) Config {
	c := defaultConfig()
	c.ConvDim, c.ConvKernel, c.ConvStride = []int{6, 8, 8}, []int{10, 3, 2}, []int{5, 2, 2}
	c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 16, 2, 2, 24
	c.NumConvPosEmbeddings, c.NumConvPosEmbeddingGroups = 4, 2
	c.FeatExtractNorm = norm
	c.ConvBias, c.DoStableLayerNorm = norm == NormLayer, norm == NormLayer
	c.HiddenDropout, c.AttentionDropout, c.ActivationDropout, c.FeatProjDropout, c.LayerDrop = 0, 0, 0, 0, 0
	c.MaskTimeProb = 0 // no SpecAugment (the SpecAugment tests turn it on)
	return c
}

// randomize sets every parameter from rng in parameter order, at scales
// that keep activations O(1): weights N(0, 1/fan_in), biases N(0, 0.1^2),
// norm weights 1 + N(0, 0.2^2), weight-norm magnitudes |N(0, 1)| + 0.5.
// Tests use it instead of New so that fixtures do not depend on the
// initialisation's draw order.
func randomize(m *Model, rng *rand.Rand) {
	for _, p := range m.Params() {
		n := p.Name
		switch {
		case strings.HasSuffix(n, ".weight_g"):
			for i := range p.Value.Data {
				p.Value.Data[i] = float32(math.Abs(rng.NormFloat64()) + 0.5)
			}
		case strings.Contains(n, "norm.weight"):
			for i := range p.Value.Data {
				p.Value.Data[i] = float32(1 + 0.2*rng.NormFloat64())
			}
		case strings.HasSuffix(n, ".bias"):
			p.InitNormal(rng, 0.1)
		default: // weights and weight_v: fan-in scaled
			p.InitNormal(rng, 1/math.Sqrt(float64(p.Value.Len()/p.Value.Shape[0])))
		}
	}
}

// tinyInput is a batch of 2 waveforms of 400 samples (19 frames); row 1 has
// 300 real samples (14 frames) when masked.
func tinyInput(seed uint64, masked bool) audio.Batch {
	rng := newRng(seed)
	in := audio.Batch{B: 2, T: 400, Values: make([]float32, 800)}
	for i := range in.Values {
		in.Values[i] = float32(rng.NormFloat64())
	}
	if masked {
		in.Mask = make([]float32, 800)
		for i := range in.Mask {
			if i < 400 || i-400 < 300 {
				in.Mask[i] = 1
			}
		}
	}
	return in
}

func tinyModel(t testing.TB, cfg Config, seed uint64) *Model {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := newZero(cfg)
	randomize(m, newRng(seed))
	return m
}

// TestGradientFiniteDifferences checks Backward against central differences
// of loss = sum(last_hidden_state * R) for every parameter (4 entries each)
// and the input waveform, for both layouts, with padding, with every
// dropout and LayerDrop active, and with SpecAugment (masks fixed by
// reseeding the rng; masked_spec_embed is then a parameter).
func TestGradientFiniteDifferences(t *testing.T) {
	for _, tc := range []struct {
		norm             string
		dropout, layDrop float64
		spec             bool
	}{
		{NormGroup, 0, 0, false}, {NormLayer, 0, 0, false}, {NormGroup, 0.2, 0.5, false}, {NormLayer, 0.2, 0, false},
		{NormLayer, 0.2, 0, true}, {NormGroup, 0, 0, true},
	} {
		t.Run(fmt.Sprintf("%s/dropout%v/layerdrop%v/specaugment%v", tc.norm, tc.dropout, tc.layDrop, tc.spec), func(t *testing.T) {
			cfg := tinyConfig(tc.norm)
			cfg.HiddenDropout, cfg.AttentionDropout, cfg.ActivationDropout, cfg.FeatProjDropout = tc.dropout, tc.dropout, tc.dropout, tc.dropout
			cfg.LayerDrop = tc.layDrop
			if tc.spec {
				cfg.MaskTimeProb, cfg.MaskTimeLength, cfg.MaskTimeMinMasks = 0.3, 3, 1
				cfg.MaskFeatureProb, cfg.MaskFeatureLength = 0.2, 2
			}
			cfg.NumHiddenLayers = 3
			m := tinyModel(t, cfg, 1)
			in := tinyInput(2, true)
			F := cfg.FrameLength(in.T)
			R := nntest.RandTensor(newRng(3), in.B, F, cfg.HiddenSize)
			loss := func() float64 {
				y, _, _ := m.Forward(in, true, newRng(7))
				return nntest.Dot(R, y)
			}
			nn.ZeroGrads(m.Params())
			_, _, c := m.Forward(in, true, newRng(7))
			if tc.layDrop > 0 {
				skipped := 0
				for _, lc := range c.layers {
					if lc == nil {
						skipped++
					}
				}
				if skipped == 0 || skipped == len(c.layers) {
					t.Fatalf("LayerDrop skipped %d of %d layers; pick a seed that skips some", skipped, len(c.layers))
				}
			}
			if tc.spec {
				frames, feats := 0, 0
				for _, v := range c.spec.time {
					if v {
						frames++
					}
				}
				for _, v := range c.spec.feat {
					if v {
						feats++
					}
				}
				if frames == 0 || feats == 0 || m.Params()[len(m.Params())-1] != m.MaskedSpecEmbed {
					t.Fatalf("SpecAugment masked %d frames and %d channels, masked_spec_embed a parameter: %v", frames, feats,
						m.Params()[len(m.Params())-1] == m.MaskedSpecEmbed)
				}
			}
			dx := m.Backward(c, R.Clone())
			opts := nntest.GradOpts{Eps: 1e-2, MaxChecks: 4, RelTol: 2e-2}
			for _, p := range m.Params() {
				if strings.HasSuffix(p.Name, "k_proj.bias") {
					// A key bias adds a constant to every score of a query:
					// softmax ignores it, the gradient is 0 up to rounding
					// (finite differences would only measure float32 noise).
					for i, g := range p.Grad.Data {
						if math.Abs(float64(g)) > 1e-5 {
							t.Errorf("%s[%d] gradient %v, want 0", p.Name, i, g)
						}
					}
					continue
				}
				nntest.CheckGrad(t, p.Name, loss, p.Value.Data, p.Grad.Data, opts)
			}
			nntest.CheckGradStrict(t, "input values", loss, in.Values, dx.Data, nntest.GradOpts{Eps: 1e-2, MaxChecks: 24, RelTol: 2e-2})
			// Padded samples beyond the last real frame's field get no gradient
			// from the "layer" encoder (per-frame norms, masked frames).
			if tc.norm == NormLayer {
				for i := 400 + 300; i < 800; i++ {
					if dx.Data[i] != 0 {
						t.Fatalf("gradient %v at padded sample %d", dx.Data[i], i-400)
					}
				}
			}
		})
	}
}

// TestPaddingInvariance: with a "layer" feature encoder, a padded row's
// real frames equal the same waveform run alone (the conv fields of real
// frames read real samples only, padded frames are zeroed before the
// positional conv and masked as keys).
func TestPaddingInvariance(t *testing.T) {
	m := tinyModel(t, tinyConfig(NormLayer), 4)
	in := tinyInput(5, true)
	y, mask, _ := m.Forward(in, false, nil)
	alone := audio.Batch{B: 1, T: 300, Values: in.Values[400:700]}
	ya, _, _ := m.Forward(alone, false, nil)
	F, Fa, H := 19, 14, 16
	if len(mask) != 2*F || mask[F+Fa-1] != 1 || mask[F+Fa] != 0 {
		t.Fatalf("frame mask %v, want 19 + 14 real frames", mask)
	}
	for f := 0; f < Fa; f++ {
		for h := 0; h < H; h++ {
			if d := math.Abs(float64(y.Data[(F+f)*H+h] - ya.Data[f*H+h])); d > 1e-5 {
				t.Fatalf("frame %d dim %d: padded %v, alone %v", f, h, y.Data[(F+f)*H+h], ya.Data[f*H+h])
			}
		}
	}
}

// TestTrainWithoutDropoutEqualsInference: train mode without dropout runs
// the same arithmetic as inference.
func TestTrainWithoutDropoutEqualsInference(t *testing.T) {
	for _, norm := range []string{NormGroup, NormLayer} {
		m := tinyModel(t, tinyConfig(norm), 6)
		in := tinyInput(7, true)
		a, _, _ := m.Forward(in, false, nil)
		b, _, c := m.Forward(in, true, nil)
		if c == nil {
			t.Fatal("training forward returned no cache")
		}
		for i := range a.Data {
			if a.Data[i] != b.Data[i] {
				t.Fatalf("%s: train %v, inference %v at %d", norm, b.Data[i], a.Data[i], i)
			}
		}
	}
}

func TestNewInitialisation(t *testing.T) {
	cfg := tinyConfig(NormLayer)
	cfg.InitializerRange = 0.05
	m, err := New(cfg, newRng(8))
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := New(cfg, newRng(8))
	std := func(d []float32) float64 {
		var s, ss float64
		for _, v := range d {
			s, ss = s+float64(v), ss+float64(v)*float64(v)
		}
		n := float64(len(d))
		return math.Sqrt(ss/n - (s/n)*(s/n))
	}
	// Kaiming normal of the first conv: std sqrt(2/(1*10)).
	if got, want := std(m.FeatureEncoder[0].Conv.W.Value.Data), math.Sqrt(0.2); math.Abs(got-want) > 0.35*want {
		t.Errorf("conv 0 weight std %v, want about %v", got, want)
	}
	w, _ := m.PosConv.Norm.Weight()
	if got, want := std(w.Data), 2/math.Sqrt(4*16); math.Abs(got-want) > 0.2*want {
		t.Errorf("positional conv weight std %v, want about %v", got, want)
	}
	k := 1 / math.Sqrt(8)
	for _, v := range m.Proj.B.Value.Data {
		if math.Abs(float64(v)) > k {
			t.Fatalf("projection bias %v outside U(-%v, %v)", v, k, k)
		}
	}
	if got := std(m.Layers[0].Inter.W.Value.Data); math.Abs(got-0.05) > 0.01 {
		t.Errorf("intermediate weight std %v, want 0.05", got)
	}
	for i, p := range m.Params() {
		if !slices.Equal(p.Value.Data, m2.Params()[i].Value.Data) {
			t.Fatalf("%s differs between two models of the same seed", p.Name)
		}
		if strings.HasSuffix(p.Name, "norm.weight") && p.Value.Data[0] != 1 {
			t.Errorf("%s = %v, want 1", p.Name, p.Value.Data[0])
		}
	}
	if m.MaskedSpecEmbed != nil {
		t.Error("a model from scratch has masked_spec_embed")
	}
	if _, err := New(Config{}, newRng(1)); err == nil {
		t.Error("New accepted an empty config")
	}
}

func TestCheckInput(t *testing.T) {
	m := tinyModel(t, tinyConfig(NormGroup), 1)
	ok := tinyInput(1, true)
	if err := m.CheckInput(ok); err != nil {
		t.Fatal(err)
	}
	nan := tinyInput(1, false)
	nan.Values[405] = float32(math.NaN())
	gap := tinyInput(1, true)
	gap.Mask[420] = 0 // padding inside the real samples of row 1
	half := tinyInput(1, true)
	half.Mask[3] = 0.5
	short := tinyInput(1, true)
	for i := 400 + 29; i < 800; i++ {
		short.Mask[i] = 0 // 29 real samples: one fewer than a frame's field
	}
	for _, tc := range []struct {
		name string
		in   audio.Batch
		want string
	}{
		{"empty", audio.Batch{}, "both must be > 0"},
		{"length", audio.Batch{B: 2, T: 3, Values: make([]float32, 5)}, "5 samples for batch 2 x 3"},
		{"mask length", audio.Batch{B: 1, T: 40, Values: make([]float32, 40), Mask: make([]float32, 3)}, "3 mask values"},
		{"nan", nan, "row 1 sample 5: non-finite"},
		{"gap", gap, "row 1 sample 21: real sample after padding"},
		{"fraction", half, "row 0 sample 3: mask value 0.5"},
		{"short", short, "row 1 has 29 samples, fewer than the 30 of one frame"},
		{"too short", audio.Batch{B: 1, T: 12, Values: make([]float32, 12)}, "row 0 has 12 samples"},
	} {
		err := m.CheckInput(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

// TestConcurrentInference: inference does not write the model (the
// positional conv's weight is computed per call), so parallel calls give
// the sequential result (run under -race to check for data races).
func TestConcurrentInference(t *testing.T) {
	m := tinyModel(t, tinyConfig(NormGroup), 9)
	in := tinyInput(10, true)
	want, _, _ := m.Forward(in, false, nil)
	got := make([]*nn.Tensor, 4)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _, _ = m.Forward(in, false, nil)
		}()
	}
	wg.Wait()
	for i, g := range got {
		if !slices.Equal(g.Data, want.Data) {
			t.Fatalf("call %d differs from the sequential output", i)
		}
	}
}
