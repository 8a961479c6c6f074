package nvib

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
)

// TestEncodePosterior: EncodePosterior returns the posterior Posterior
// returns and the backbone's output it was computed from (the fake
// backbone's embedding rows, x[b,s] = E[id[b,s]]), for an nvdp-clipped and a
// gaussian model; the baseline has neither.
func TestEncodePosterior(t *testing.T) {
	in, _ := testBatch()
	for _, model := range []string{ModelNVDPClipped, ModelGaussian} {
		rng := rand.New(rand.NewPCG(5, 6))
		cfg := DefaultConfig(model, privacy.ModePrincipled, 8, 2, 16, 3)
		cfg.ReleaseLen = 0
		if model == ModelGaussian {
			cfg.Clip.CMu, cfg.ReleaseLen = 0.9, 6
		}
		bb := newFake(rng, 10, 8, 0.8)
		m, err := NewModel(cfg, bb, rng)
		if err != nil {
			t.Fatal(err)
		}
		post, x, err := m.EncodePosterior(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := m.Posterior(in)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(post.Mu.Data, want.Mu.Data) || !slices.Equal(post.Logvar.Data, want.Logvar.Data) ||
			!slices.Equal(post.Alpha.Data, want.Alpha.Data) || post.N != want.N {
			t.Errorf("%s: EncodePosterior's posterior differs from Posterior's", model)
		}
		if !slices.Equal(x.Shape, []int{in.B, in.S, 8}) {
			t.Fatalf("%s: x shape %v", model, x.Shape)
		}
		for k, id := range in.IDs {
			if row, emb := x.Data[k*8:(k+1)*8], bb.emb.W.Value.Data[int(id)*8:(int(id)+1)*8]; !slices.Equal(row, emb) {
				t.Fatalf("%s: x row %d is not the embedding of token %d", model, k, id)
			}
		}
	}
	if _, _, err := (&Model{Cfg: Config{Model: ModelBaseline}}).EncodePosterior(in); err == nil {
		t.Error("the baseline has a posterior")
	}
}
