package nn_test

import (
	"math"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
)

func TestDropoutStatistics(t *testing.T) {
	for _, p := range []float32{0.1, 0.5} {
		n := 200000
		x := nn.New(n)
		for i := range x.Data {
			x.Data[i] = 1
		}
		y, c := nn.Dropout{P: p}.Forward(x, rngFor(4), true)
		zeros, sum := 0, 0.0
		for i, v := range y.Data {
			if v == 0 {
				zeros++
			} else if math.Abs(float64(v)-1/float64(1-p)) > 1e-6 {
				t.Fatalf("p=%v: survivor %d = %v, want 1/(1-p)", p, i, v)
			}
			sum += float64(v)
		}
		frac := float64(zeros) / float64(n)
		sd := math.Sqrt(float64(p) * float64(1-p) / float64(n))
		if math.Abs(frac-float64(p)) > 5*sd {
			t.Errorf("p=%v: dropped fraction %v (more than 5 sd from p)", p, frac)
		}
		if mean := sum / float64(n); math.Abs(mean-1) > 5*sd/float64(1-p) {
			t.Errorf("p=%v: mean after dropout %v, want 1", p, mean)
		}
		// Backward: same mask.
		dy := nntest.RandTensor(rngFor(5), n)
		dx := nn.Dropout{P: p}.Backward(c, dy)
		for i := range dx.Data {
			if want := dy.Data[i] * y.Data[i]; dx.Data[i] != want {
				t.Fatalf("dx[%d] = %v, want %v", i, dx.Data[i], want)
			}
		}
	}
	// Identity at inference and for P = 0.
	x := nntest.RandTensor(rngFor(6), 10)
	for _, tc := range []struct {
		p     float32
		train bool
	}{{0.5, false}, {0, true}} {
		d := nn.Dropout{P: tc.p}
		y, c := d.Forward(x, rngFor(7), tc.train)
		if y != x || d.Backward(c, x) != x {
			t.Errorf("p=%v train=%v: not the identity", tc.p, tc.train)
		}
	}
}

func TestPoolingAndDropoutGradients(t *testing.T) {
	rng := rngFor(20)
	B, S, D := 3, 4, 5
	x := nntest.RandTensor(rng, B, S, D)
	mask := []float32{1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0}
	w := nntest.RandTensor(rng, B, D)
	xd := nntest.RandTensor(rng, 6, 7)
	wd := nntest.RandTensor(rng, 6, 7)
	drop := nn.Dropout{P: 0.4}
	runGradCases(t, []gradCase{
		{
			name: "MaskedMeanPool", inputs: map[string][]float32{"x": x.Data},
			loss: func() float64 { return nntest.Dot(w, nn.MaskedMeanPool(x, mask)) },
			grads: func() map[string][]float32 {
				return map[string][]float32{"x": nn.MaskedMeanPoolBackward(mask, w, S).Data}
			},
		},
		{
			name: "FirstToken", inputs: map[string][]float32{"x": x.Data},
			loss: func() float64 { return nntest.Dot(w, nn.FirstToken(x)) },
			grads: func() map[string][]float32 {
				return map[string][]float32{"x": nn.FirstTokenBackward(w, S).Data}
			},
		},
		{
			name: "Dropout", inputs: map[string][]float32{"x": xd.Data},
			loss: func() float64 { y, _ := drop.Forward(xd, rngFor(8), true); return nntest.Dot(wd, y) },
			grads: func() map[string][]float32 {
				_, c := drop.Forward(xd, rngFor(8), true)
				return map[string][]float32{"x": drop.Backward(c, wd).Data}
			},
		},
	})
}

func TestMaskedMeanPoolValues(t *testing.T) {
	x := nn.FromData([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 2, 3, 2)
	// batch 0: positions 0,2 real -> mean of (1,2),(5,6) = (3,4); batch 1: all padding -> 0 (ref §3.3 floor 1e-9)
	y := nn.MaskedMeanPool(x, []float32{1, 0, 1, 0, 0, 0})
	want := []float32{3, 4, 0, 0}
	for i := range want {
		if y.Data[i] != want[i] {
			t.Fatalf("pool = %v, want %v", y.Data, want)
		}
	}
	if f := nn.FirstToken(x); f.Data[0] != 1 || f.Data[2] != 7 {
		t.Fatalf("FirstToken = %v", f.Data)
	}
}

func TestLosses(t *testing.T) {
	logits := nn.FromData([]float32{1, 2, 3, 0, 0, 0}, 2, 3)
	loss, d := nn.SoftmaxCrossEntropy(logits, []int{2, 0})
	// (log(e+e^2+e^3) - 3 + log 3) / 2
	if want := (0.40760596444438 + math.Log(3)) / 2; math.Abs(loss-want) > 1e-9 {
		t.Errorf("CE loss = %v, want %v", loss, want)
	}
	if math.Abs(float64(d.Data[3])-(1.0/3-1)/2) > 1e-7 {
		t.Errorf("dlogits[1,0] = %v", d.Data[3])
	}
	pred := nn.FromData([]float32{1, 2, 4}, 3, 1)
	mse, dp := nn.MSE(pred, []float32{1, 0, 1})
	if math.Abs(mse-13.0/3) > 1e-12 || dp.Data[1] != float32(4.0/3) || len(dp.Shape) != 2 {
		t.Errorf("MSE = %v, dpred %v %v", mse, dp.Data, dp.Shape)
	}

	rng := rngFor(30)
	lg := nntest.RandTensor(rng, 4, 5)
	labels := []int{0, 4, 2, 2}
	pr := nntest.RandTensor(rng, 4)
	tg := []float32{0.5, -1, 2, 0}
	runGradCases(t, []gradCase{
		{
			name: "SoftmaxCrossEntropy", inputs: map[string][]float32{"logits": lg.Data},
			loss: func() float64 { l, _ := nn.SoftmaxCrossEntropy(lg, labels); return l },
			grads: func() map[string][]float32 {
				_, d := nn.SoftmaxCrossEntropy(lg, labels)
				return map[string][]float32{"logits": d.Data}
			},
		},
		{
			name: "MSE", inputs: map[string][]float32{"pred": pr.Data},
			loss:  func() float64 { l, _ := nn.MSE(pr, tg); return l },
			grads: func() map[string][]float32 { _, d := nn.MSE(pr, tg); return map[string][]float32{"pred": d.Data} },
			opts:  nntest.GradOpts{Eps: 1e-3},
		},
	})
}

func TestHelpers(t *testing.T) {
	a := nn.FromData([]float32{1, 2}, 2)
	b := nn.FromData([]float32{3, 5}, 2)
	c := nn.Add(a, b)
	nn.AddInPlace(a, b)
	nn.Scale(b, 2)
	if c.Data[1] != 7 || a.Data[0] != 4 || b.Data[1] != 10 {
		t.Fatalf("Add %v AddInPlace %v Scale %v", c.Data, a.Data, b.Data)
	}
}

// TestDropoutApply: in place, byte mask, survivors scaled by 1/(1-p).
func TestDropoutApply(t *testing.T) {
	d := nn.Dropout{P: 0.1}
	x := nn.New(100000)
	for i := range x.Data {
		x.Data[i] = 2
	}
	c := d.Apply(x, rngFor(1), true)
	mask := c.Mask
	kept := 0
	for i, m := range mask {
		switch {
		case m == 1 && math.Abs(float64(x.Data[i])-2/0.9) < 1e-6:
			kept++
		case m == 0 && x.Data[i] == 0:
		default:
			t.Fatalf("element %d: mask %d value %v", i, m, x.Data[i])
		}
	}
	// Binomial(1e5, 0.9): sd 95.
	if kept < 90000-500 || kept > 90000+500 {
		t.Fatalf("kept %d of 100000, want about 90000", kept)
	}
	dy := nn.New(100000)
	for i := range dy.Data {
		dy.Data[i] = 1
	}
	dx := d.Backward(c, dy)
	for i, m := range mask {
		if want := float32(m) / 0.9; math.Abs(float64(dx.Data[i]-want)) > 1e-6 {
			t.Fatalf("backward %d: %v want %v", i, dx.Data[i], want)
		}
	}
	if d.Apply(x, nil, false).Mask != nil || (nn.Dropout{}).Apply(x, nil, true).Mask != nil {
		t.Fatal("identity dropout returned a mask")
	}
}

// TestNonFinite: the first NaN or ±Inf, at every position of a slice, and
// none among the extremes of the finite float32s.
func TestNonFinite(t *testing.T) {
	finite := []float32{0, float32(math.Copysign(0, -1)), 1, -1, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 0x1p-126, 3.4e38}
	if i := nn.NonFinite(finite); i != -1 {
		t.Fatalf("finite values: NonFinite %d, want -1", i)
	}
	if i := nn.NonFinite(nil); i != -1 {
		t.Fatalf("nil: NonFinite %d, want -1", i)
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.Float32frombits(0xffffffff), math.Float32frombits(0x7f800001)} {
		for at := range 19 {
			xs := make([]float32, 19)
			for i := range xs {
				xs[i] = finite[i%len(finite)]
			}
			xs[at] = bad
			if at+3 < len(xs) {
				xs[at+3] = bad
			}
			if i := nn.NonFinite(xs); i != at {
				t.Errorf("%v at %d: NonFinite %d", bad, at, i)
			}
		}
	}
}

// BenchmarkNonFinite: a release's 65 x 128 values, by exponent bits and by
// math.IsNaN and math.IsInf.
func BenchmarkNonFinite(b *testing.B) {
	xs := make([]float32, 65*128)
	for i := range xs {
		xs[i] = float32(i) * 0.37
	}
	b.Run("bits", func(b *testing.B) {
		for b.Loop() {
			if nn.NonFinite(xs) >= 0 {
				b.Fatal("non-finite")
			}
		}
	})
	b.Run("float64", func(b *testing.B) {
		for b.Loop() {
			for _, v := range xs {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					b.Fatal("non-finite")
				}
			}
		}
	})
}
