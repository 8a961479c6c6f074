package nn

import (
	"fmt"
	"math"
)

// SoftmaxCrossEntropy returns the mean over the batch of
// -log softmax(logits[b])[labels[b]] and its gradient
// dlogits = (softmax(logits) - onehot(labels)) / B. This is
// torch.nn.CrossEntropyLoss with reduction "mean".
//
// logits is [B,C]. A label outside [0, C) or a length mismatch is a
// programmer error, since loaders validate labels, and panics. The loss is
// computed in float64 with the max-subtraction trick.
func SoftmaxCrossEntropy(logits *Tensor, labels []int) (loss float64, dlogits *Tensor) {
	if len(logits.Shape) != 2 || logits.Shape[0] != len(labels) {
		panic(fmt.Sprintf("nn.SoftmaxCrossEntropy: logits %v with %d labels", logits.Shape, len(labels)))
	}
	B, C := logits.Shape[0], logits.Shape[1]
	dlogits = New(B, C)
	if B == 0 {
		return 0, dlogits
	}
	inv := 1 / float64(B)
	for b := 0; b < B; b++ {
		y := labels[b]
		if y < 0 || y >= C {
			panic(fmt.Sprintf("nn.SoftmaxCrossEntropy: label %d of example %d outside [0, %d)", y, b, C))
		}
		row := logits.Data[b*C : (b+1)*C]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		lse := mx + math.Log(z)
		loss += lse - float64(row[y])
		d := dlogits.Data[b*C : (b+1)*C]
		for j, v := range row {
			p := math.Exp(float64(v) - lse)
			if j == y {
				p--
			}
			d[j] = float32(p * inv)
		}
	}
	return loss * inv, dlogits
}

// MSE returns mean_b (pred[b] - target[b])^2 and dpred = 2 (pred - target)
// / B, shaped like pred. This is torch.nn.MSELoss with reduction "mean".
// pred is [B] or [B,1]; a size mismatch panics.
func MSE(pred *Tensor, target []float32) (loss float64, dpred *Tensor) {
	if pred.Len() != len(target) || (len(pred.Shape) == 2 && pred.Shape[1] != 1) || len(pred.Shape) > 2 {
		panic(fmt.Sprintf("nn.MSE: pred %v with %d targets", pred.Shape, len(target)))
	}
	dpred = New(pred.Shape...)
	B := len(target)
	if B == 0 {
		return 0, dpred
	}
	for i, t := range target {
		d := float64(pred.Data[i]) - float64(t)
		loss += d * d
		dpred.Data[i] = float32(2 * d / float64(B))
	}
	return loss / float64(B), dpred
}
