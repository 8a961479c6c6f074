package nvib

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/privacy"
)

// PosteriorInfer, with workspaces reused across batches or without, gives the bits of the
// training forward pass (the encoder's Forward, then the NVIB layer's or the gaussian release's
// Forward, which records the clipping for the backward pass), for an nvdp-clipped model and a
// gaussian one with its projection (P 6 != H 8); and a posterior not taken from a workspace is
// the caller's: later calls do not change it.
func TestPosteriorInfer(t *testing.T) {
	ecfg, err := encoder.Preset("bert-tiny")
	if err != nil {
		t.Fatal(err)
	}
	ecfg.VocabSize, ecfg.HiddenSize, ecfg.NumHiddenLayers, ecfg.NumAttentionHeads, ecfg.IntermediateSize = 12, 8, 1, 2, 16
	ecfg.MaxPositionEmbeddings = 8
	ecfg.HiddenDropoutProb, ecfg.AttentionProbsDropoutProb = 0, 0 // the training pass is the reference
	big := encoder.Input{B: 2, S: 6, IDs: []int32{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 0},
		Mask: []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}}
	small, _ := testBatch()
	for _, model := range []string{ModelNVDPClipped, ModelGaussian} {
		rng := rand.New(rand.NewPCG(11, 12))
		enc, err := encoder.New(ecfg, rng)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig(model, privacy.ModePrincipled, 8, 2, 16, 2)
		cfg.ReleaseLen = 0
		if model == ModelGaussian {
			cfg.Clip.CMu, cfg.ReleaseLen, cfg.LatentDim = 0.9, 6, 6
		}
		m, err := NewModel(cfg, EncoderBackbone{enc}, rng)
		if err != nil {
			t.Fatal(err)
		}
		var ws, out nn.Workspace
		var kept, keptWant *Posterior
		for i, in := range []encoder.Input{small, big, small, big} {
			want := trainingPosterior(t, m, in)
			ws.Reset()
			out.Reset()
			got, err := m.PosteriorInfer(in, &ws, &out)
			if err != nil {
				t.Fatal(err)
			}
			samePosterior(t, model, i, got, want)
			ws.Reset()
			fresh, err := m.PosteriorInfer(in, &ws, nil)
			if err != nil {
				t.Fatal(err)
			}
			samePosterior(t, model+", posterior newly allocated", i, fresh, want)
			if i == 0 {
				kept, keptWant = fresh, want
			}
		}
		samePosterior(t, model+", the first posterior after later calls", 0, kept, keptWant)
	}
}

// trainingPosterior is the posterior of the training forward pass of m, whose encoder has no
// dropout.
func trainingPosterior(t *testing.T, m *Model, in encoder.Input) *Posterior {
	t.Helper()
	x, _ := m.Backbone.Forward(in, true, nil)
	var post *Posterior
	var err error
	if m.Gauss != nil {
		post, _, err = m.Gauss.Forward(x, in.Mask)
	} else {
		post, _, err = m.NVIB.Forward(x, in.Mask)
	}
	if err != nil {
		t.Fatal(err)
	}
	return post
}

// samePosterior fails unless got and want hold the same bits.
func samePosterior(t *testing.T, name string, call int, got, want *Posterior) {
	t.Helper()
	if got.B != want.B || got.N != want.N || got.P != want.P {
		t.Fatalf("%s, call %d: posterior %d x %d x %d, want %d x %d x %d", name, call, got.B, got.N, got.P, want.B, want.N, want.P)
	}
	for _, c := range []struct {
		name      string
		got, want []float32
	}{{"mu", got.Mu.Data, want.Mu.Data}, {"logvar", got.Logvar.Data, want.Logvar.Data}, {"alpha", got.Alpha.Data, want.Alpha.Data}, {"mask", got.Mask, want.Mask}} {
		for k := range c.want {
			if math.Float32bits(c.got[k]) != math.Float32bits(c.want[k]) {
				t.Fatalf("%s, call %d: %s[%d] = %v, want %v", name, call, c.name, k, c.got[k], c.want[k])
			}
		}
	}
}
