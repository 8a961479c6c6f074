package mlm

import (
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
)

// benchBatch is a random batch of B sequences of S tokens with 15% of the
// positions predicted.
func benchBatch(rng *rand.Rand, B, S, V int) *Batch {
	b := &Batch{In: encoder.Input{IDs: make([]int32, B*S), B: B, S: S}}
	for i := range b.In.IDs {
		b.In.IDs[i] = int32(1000 + rng.IntN(V-1000))
		if rng.Float64() < 0.15 {
			b.Positions = append(b.Positions, i)
			b.Labels = append(b.Labels, 1000+rng.IntN(V-1000))
		}
	}
	return b
}

// BenchmarkStep times one MLM training step (forward, backward, AdamW) at
// bert-tiny and bert-mini shapes, batch 32 x 128, vocab 30522; and the head
// alone (gather, transform, tied decoder, cross-entropy, backward).
//
//	go test -tags openblas -run XXX -bench Step -benchtime 3x ./mlm/
func BenchmarkStep(b *testing.B) {
	for _, name := range []string{"bert-tiny", "bert-mini"} {
		cfg, _ := encoder.Preset(name)
		rng := rand.New(rand.NewPCG(1, 2))
		enc, err := encoder.New(cfg, rng)
		if err != nil {
			b.Fatal(err)
		}
		m := NewModel(enc, rng)
		batch := benchBatch(rng, 32, 128, cfg.VocabSize)
		params := m.Params()
		opt := nn.NewAdamW(1e-4, nn.AdamBeta1, nn.AdamBeta2, nn.BERTAdamEps, 0.01)
		b.Run(name+"/step", func(b *testing.B) {
			for range b.N {
				nn.ZeroGrads(params)
				m.LossAndGrad(batch, rng)
				opt.Update(params, 1e-4)
			}
		})
		hidden := nn.New(32, 128, cfg.HiddenSize)
		b.Run(name+"/head", func(b *testing.B) {
			for range b.N {
				logits, c := m.Head.Forward(hidden, batch.Positions, m.logitsBuf(len(batch.Positions)*cfg.VocabSize))
				crossEntropy(logits, batch.Labels, true)
				m.Head.Backward(c, logits)
			}
		})
	}
}
