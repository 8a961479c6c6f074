package wav2vec2

import (
	"testing"

	"github.com/nvdp-project/nvdp/audio"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
)

// benchSmall returns the small preset from scratch and a batch of 8
// utterances of 1 s (16,000 samples, 49 frames).
func benchSmall(b *testing.B) (*Model, audio.Batch) {
	cfg, err := Preset("small")
	if err != nil {
		b.Fatal(err)
	}
	m, err := New(cfg, newRng(1))
	if err != nil {
		b.Fatal(err)
	}
	rng := newRng(2)
	in := audio.Batch{B: 8, T: audio.SampleRate, Values: make([]float32, 8*audio.SampleRate)}
	for i := range in.Values {
		in.Values[i] = float32(rng.NormFloat64())
	}
	return m, in
}

// BenchmarkSmallForward: inference of the small preset, batch 8 x 1 s.
func BenchmarkSmallForward(b *testing.B) {
	m, in := benchSmall(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Forward(in, false, nil)
	}
}

// BenchmarkSmallForwardBackward: a training step's forward and backward
// (dropouts of the preset active) of the small preset, batch 8 x 1 s.
func BenchmarkSmallForwardBackward(b *testing.B) {
	m, in := benchSmall(b)
	F := m.Config.FrameLength(in.T)
	dy := nntest.RandTensor(newRng(3), in.B, F, m.Config.HiddenSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nn.ZeroGrads(m.Params())
		_, _, c := m.Forward(in, true, newRng(uint64(i)))
		m.Backward(c, dy)
	}
}
