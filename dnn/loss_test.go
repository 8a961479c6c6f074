package dnn_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/nn"
)

// Tolerances of the loss twins. Both compute in double as nn does; the
// losses differ only by the order of the batch's sum (a tree on the device,
// a loop in nn) and the last bits of the device's exp and log: 1e-12
// relative. The gradients are those doubles rounded once to float32: at
// most an ulp apart where a double lies at a rounding boundary.
const (
	// Derivation: double sums of B terms in another order and exp/log within 2 ulps of double: B * 1.1e-16 ~ 1e-14 for the batches tested; FMAs in double change no more.
	tolLoss = 1e-12
	// Derivation: doubles rounded once to float32: 1 ulp (6e-8) where a double sits at a rounding boundary; 1e-6 = 16 ulps.
	tolLossGrad = 1e-6
)

// relErr64 is |got - want| / max(|want|, 1e-300).
func relErr64(got, want float64) float64 {
	return math.Abs(got-want) / math.Max(math.Abs(want), 1e-300)
}

// testSoftmaxCrossEntropyTwin: the device cross-entropy's loss and gradient
// equal nn's, for 2 classes, a few, and more than the block's threads (a
// row strided over them, its maximum at a class beyond the first 256),
// with logits large enough to need the max subtraction, and for an empty
// batch.
func testSoftmaxCrossEntropyTwin(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, tc := range []struct {
		B, C  int
		scale float64
	}{{6, 2, 1}, {5, 3, 40}, {3, 300, 5}, {2, 1, 1}, {0, 4, 1}} {
		logits := randn(rng, tc.scale, tc.B, tc.C)
		if tc.C > 280 {
			logits.Data[280] = 800 // beyond the first 256 classes, exp(800) overflows a double: the row's maximum must see it
		}
		labels := make([]int, tc.B)
		ids := make([]int32, tc.B)
		for b := range labels {
			labels[b] = (b * 7) % tc.C
			if b == tc.B-1 {
				labels[b] = tc.C - 1
			}
			ids[b] = int32(labels[b])
		}
		loss, dl := nn.SoftmaxCrossEntropy(logits, labels)
		dloss, ddl := e.SoftmaxCrossEntropy(e.Upload(logits), e.UploadInts(ids))
		if r := relErr64(dloss, loss); !(r <= tolLoss) {
			t.Errorf("B %d C %d: loss %v, nn %v (relative %.3g > %g)", tc.B, tc.C, dloss, loss, r, tolLoss)
		}
		near(t, e, "cross-entropy dlogits", ddl, dl, tolLossGrad)
	}
}

// testSoftmaxCrossEntropyBadLabel: a label outside [0, C) panics naming the
// example, as in nn (Do returns the panic as an error).
func testSoftmaxCrossEntropyBadLabel(t *testing.T, d *cuda.Device) {
	for _, bad := range []int32{-1, 3} {
		err := d.Do(func() error {
			e, err := dnn.NewEngine(d)
			if err != nil {
				return err
			}
			defer e.Close()
			e.SoftmaxCrossEntropy(e.Upload(nn.New(4, 3)), e.UploadInts([]int32{0, 2, bad, 1}))
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "of example 2 outside [0, 3)") {
			t.Errorf("label %d: error %v", bad, err)
		}
	}
}

// testSoftmaxCrossEntropyNaN: NaN logits make the loss NaN (no panic: the
// labels are valid), as in nn.
func testSoftmaxCrossEntropyNaN(t *testing.T, e *dnn.Engine) {
	x := nn.New(2, 3)
	x.Data[4] = float32(math.NaN())
	loss, _ := nn.SoftmaxCrossEntropy(x, []int{0, 1})
	dloss, _ := e.SoftmaxCrossEntropy(e.Upload(x), e.UploadInts([]int32{0, 1}))
	if !math.IsNaN(loss) || !math.IsNaN(dloss) {
		t.Errorf("loss %v, nn %v: want NaN", dloss, loss)
	}
}

// testMSETwin: the device MSE's loss and gradient equal nn's for pred [B]
// and [B,1], batches below and above the block size, and an empty batch.
func testMSETwin(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, shape := range [][]int{{7}, {5, 1}, {300}, {0}} {
		pred := randn(rng, 3, shape...)
		target := randn(rng, 2, pred.Len())
		loss, dp := nn.MSE(pred, target.Data)
		dloss, ddp := e.MSE(e.Upload(pred), e.Upload(target))
		if r := relErr64(dloss, loss); !(r <= tolLoss) {
			t.Errorf("%v: loss %v, nn %v (relative %.3g > %g)", shape, dloss, loss, r, tolLoss)
		}
		if len(ddp.Shape) != len(shape) {
			t.Errorf("%v: dpred shape %v", shape, ddp.Shape)
		}
		near(t, e, "mse dpred", ddp, dp, tolLossGrad)
	}
}
