package nn_test

import (
	"runtime"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
)

// TestParallelDeterminism: results are bitwise independent of GOMAXPROCS.
func TestParallelDeterminism(t *testing.T) {
	run := func(procs int) [][]float32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		rng := rngFor(50)
		ln := nn.NewLayerNorm("ln", 64, 1e-12)
		x := nntest.RandTensor(rng, 8, 64, 64)
		dy := nntest.RandTensor(rng, 8, 64, 64)
		_, c := ln.Forward(x)
		dx := ln.Backward(c, dy)
		q := nntest.RandTensor(rng, 4, 32, 64)
		bias := nntest.RandTensor(rng, 4, 32)
		a, ac := nn.AttentionDropout(q, q, q, 4, bias, 0.2, rngFor(3), true)
		dq, dk, dv, db := nn.AttentionBackward(ac, a)
		g := nn.GELU(x)
		return [][]float32{dx.Data, ln.Weight.Grad.Data, ln.Bias.Grad.Data, a.Data, dq.Data, dk.Data, dv.Data, db.Data, g.Data}
	}
	one, four := run(1), run(4)
	for i := range one {
		for j := range one[i] {
			if one[i][j] != four[i][j] {
				t.Fatalf("output %d element %d: %v with 1 proc, %v with 4", i, j, one[i][j], four[i][j])
			}
		}
	}
}
