package nn_test

import (
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
)

// bert-tiny training shapes: batch 32, sequence 128, hidden 128, 2 heads, FF 512.
const bB, bS, bD, bH, bFF = 32, 128, 128, 2, 512

func reportGFLOPs(b *testing.B, flopsPerOp float64) {
	b.ReportMetric(flopsPerOp*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkAttentionFwdBwd: scores, softmax, PV and their backward at bert-tiny shapes.
func BenchmarkAttentionFwdBwd(b *testing.B) {
	rng := rngFor(1)
	q := nntest.RandTensor(rng, bB, bS, bD)
	k := nntest.RandTensor(rng, bB, bS, bD)
	v := nntest.RandTensor(rng, bB, bS, bD)
	mask := make([]float32, bB*bS)
	for i := range mask {
		if i%bS < 100 {
			mask[i] = 1
		}
	}
	bias := nn.PaddingBias(mask, bB, bS)
	dout := nntest.RandTensor(rng, bB, bS, bD)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, c := nn.Attention(q, k, v, bH, bias)
		nn.AttentionBackward(c, dout)
	}
	// forward 2 matmuls, backward 4, each 2*B*S*S*D flops
	reportGFLOPs(b, 6*2*float64(bB*bS*bS*bD))
}

func BenchmarkLinearFwdBwd(b *testing.B) {
	for _, sh := range []struct {
		name    string
		in, out int
	}{{"128x512", bD, bFF}, {"512x128", bFF, bD}} {
		b.Run(sh.name, func(b *testing.B) {
			rng := rngFor(2)
			l := nn.NewLinear("fc", sh.in, sh.out, true)
			l.InitHF(rng, 0.02)
			x := nntest.RandTensor(rng, bB, bS, sh.in)
			dy := nntest.RandTensor(rng, bB, bS, sh.out)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, c := l.Forward(x)
				l.Backward(c, dy)
			}
			reportGFLOPs(b, 3*2*float64(bB*bS*sh.in*sh.out))
		})
	}
}

func BenchmarkLayerNormFwdBwd(b *testing.B) {
	rng := rngFor(3)
	ln := nn.NewLayerNorm("ln", bD, 1e-12)
	x := nntest.RandTensor(rng, bB, bS, bD)
	dy := nntest.RandTensor(rng, bB, bS, bD)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, c := ln.Forward(x)
		ln.Backward(c, dy)
	}
}

// BenchmarkGELUInfer is the inference GELU of one feed-forward layer's activations, the shape of
// BenchmarkGELUFwdBwd, into a reused workspace.
func BenchmarkGELUInfer(b *testing.B) {
	x := nntest.RandTensor(rngFor(4), bB, bS, bFF)
	ws := new(nn.Workspace)
	for b.Loop() {
		ws.Reset()
		nn.GELUInfer(x, ws)
	}
}

func BenchmarkGELUFwdBwd(b *testing.B) {
	rng := rngFor(4)
	x := nntest.RandTensor(rng, bB, bS, bFF)
	dy := nntest.RandTensor(rng, bB, bS, bFF)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nn.GELU(x)
		nn.GELUBackward(x, dy)
	}
}
