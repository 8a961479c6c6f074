package dnn

import (
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/cuda"
)

// SoftmaxCrossEntropy is the twin of [nn.SoftmaxCrossEntropy]. It returns the mean over the batch
// of -log softmax(logits[b])[labels[b]] for logits [B,C], and its gradient
// dlogits = (softmax(logits) - onehot(labels)) / B. labels holds B int32 values on the device,
// uploaded with [Engine.UploadInts].
//
// Each row's log-sum-exp and the gradient are computed in double, as nn does. The loss is summed
// on the device in double over a fixed tree, which is deterministic but in another order than
// nn's loop, and comes back in one download of 8 bytes. A label outside [0, C) panics as in nn;
// it is found after the download, as a row whose loss is NaN.
func (e *Engine) SoftmaxCrossEntropy(logits *Tensor, labels cuda.Buffer) (loss float64, dlogits *Tensor) {
	if len(logits.Shape) != 2 || labels.Bytes < 4*logits.Shape[0] {
		panic(fmt.Sprintf("dnn.SoftmaxCrossEntropy: logits %v with labels of %d bytes", logits.Shape, labels.Bytes))
	}
	B, C := logits.Shape[0], logits.Shape[1]
	dlogits = e.New(B, C)
	if B == 0 {
		return 0, dlogits
	}
	inv := 1 / float64(B)
	rows := e.arena.alloc(8 * B)
	sum := e.arena.alloc(8)
	e.launchRows("ce_rows", B, dlogits.Buf, rows, logits.Buf, labels, C, inv)
	e.launch("sum_f64", cuda.Threads(1), cuda.Threads(threads), 0, sum, rows, B)
	s := make([]float64, 1)
	must(cuda.Download(e.Dev, s, sum))
	if math.IsNaN(s[0]) { // a bad label, or NaN logits (nn's loss is NaN then too)
		ls := make([]int32, B)
		must(cuda.Download(e.Dev, ls, labels))
		for b, y := range ls {
			if y < 0 || int(y) >= C {
				panic(fmt.Sprintf("dnn.SoftmaxCrossEntropy: label %d of example %d outside [0, %d)", y, b, C))
			}
		}
	}
	return s[0] * inv, dlogits
}

// MSE is the twin of [nn.MSE]. It returns mean_b (pred[b] - target[b])^2 and
// dpred = 2 (pred - target) / B, shaped like pred, for pred [B] or [B,1] and target [B] on the
// device. It computes in double as nn does; the loss is summed on the device over a fixed tree and
// downloaded, 8 bytes.
func (e *Engine) MSE(pred, target *Tensor) (loss float64, dpred *Tensor) {
	if pred.Len() != target.Len() || (len(pred.Shape) == 2 && pred.Shape[1] != 1) || len(pred.Shape) > 2 {
		panic(fmt.Sprintf("dnn.MSE: pred %v with target %v", pred.Shape, target.Shape))
	}
	dpred = e.New(pred.Shape...)
	n := pred.Len()
	if n == 0 {
		return 0, dpred
	}
	out := e.arena.alloc(8)
	e.launch("mse_loss", cuda.Threads(1), cuda.Threads(threads), 0, dpred.Buf, out, pred.Buf, target.Buf, n)
	s := make([]float64, 1)
	must(cuda.Download(e.Dev, s, out))
	return s[0], dpred
}
