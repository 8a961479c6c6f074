package nn_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
)

// conv1dDirect is an independent Conv1d: the defining sum in torch's
// [B, C, T] index order, in float64, with explicit zero padding.
func conv1dDirect(c *nn.Conv1d, x *nn.Tensor) []float64 {
	B, T := x.Shape[0], x.Shape[1]
	tout := c.OutLen(T)
	cg, og := c.In/c.Groups, c.Out/c.Groups
	y := make([]float64, B*tout*c.Out)
	for b := 0; b < B; b++ {
		for o := 0; o < c.Out; o++ {
			g := o / og
			for t := 0; t < tout; t++ {
				var s float64
				if c.B != nil {
					s = float64(c.B.Value.Data[o])
				}
				for i := 0; i < cg; i++ {
					for k := 0; k < c.Kernel; k++ {
						src := t*c.Stride + k - c.PadLeft
						if src < 0 || src >= T {
							continue
						}
						s += float64(c.W.Value.Data[(o*cg+i)*c.Kernel+k]) * float64(x.Data[(b*T+src)*c.In+g*cg+i])
					}
				}
				y[(b*tout+t)*c.Out+o] = s
			}
		}
	}
	return y
}

type convShape struct {
	in, out, kernel, stride, groups, padL, padR int
	bias                                        bool
	T                                           int
}

var convShapes = []convShape{
	{in: 1, out: 4, kernel: 10, stride: 5, groups: 1, T: 47},                             // wav2vec2's first layer (Tout 8)
	{in: 4, out: 6, kernel: 3, stride: 2, groups: 1, bias: true, T: 9},                   // strided, overlapping fields
	{in: 6, out: 6, kernel: 4, stride: 1, groups: 3, padL: 2, padR: 1, T: 7},             // same padding, even kernel (HF SamePad)
	{in: 4, out: 8, kernel: 3, stride: 1, groups: 2, padL: 1, padR: 1, bias: true, T: 5}, // odd kernel, grouped
	{in: 3, out: 2, kernel: 2, stride: 3, groups: 1, padL: 1, bias: true, T: 8},          // stride > kernel, left padding only
}

func (s convShape) String() string {
	return fmt.Sprintf("in%d_out%d_k%d_s%d_g%d_pad%d+%d_bias%v", s.in, s.out, s.kernel, s.stride, s.groups, s.padL, s.padR, s.bias)
}

func (s convShape) layer(seed uint64) (*nn.Conv1d, *nn.Tensor) {
	rng := rngFor(seed)
	c := nn.NewConv1d("conv", s.in, s.out, s.kernel, s.stride, s.groups, s.bias)
	c.PadLeft, c.PadRight = s.padL, s.padR
	c.W.InitNormal(rng, 0.5)
	if s.bias {
		c.B.InitNormal(rng, 0.5)
	}
	return c, nntest.RandTensor(rng, 2, s.T, s.in)
}

func TestConv1dMatchesDirectSum(t *testing.T) {
	for i, s := range convShapes {
		t.Run(s.String(), func(t *testing.T) {
			c, x := s.layer(uint64(30 + i))
			y, _ := c.Forward(x)
			want := conv1dDirect(c, x)
			if tout := c.OutLen(s.T); !slices.Equal(y.Shape, []int{2, tout, s.out}) {
				t.Fatalf("shape %v, want [2 %d %d]", y.Shape, tout, s.out)
			}
			for j, w := range want {
				if math.Abs(float64(y.Data[j])-w) > 1e-5*(1+math.Abs(w)) {
					t.Fatalf("y[%d] = %v, want %v", j, y.Data[j], w)
				}
			}
		})
	}
}

func TestConv1dOutLen(t *testing.T) {
	for _, tc := range []struct {
		k, s, pl, pr, T, want int
	}{
		{10, 5, 0, 0, 16000, 3199}, {3, 2, 0, 0, 3199, 1599}, {2, 2, 0, 0, 99, 49},
		{128, 1, 64, 63, 50, 50}, {4, 1, 2, 1, 1, 1}, {10, 5, 0, 0, 9, 0}, {10, 5, 0, 0, 10, 1},
	} {
		c := nn.NewConv1d("c", 1, 1, tc.k, tc.s, 1, false)
		c.PadLeft, c.PadRight = tc.pl, tc.pr
		if got := c.OutLen(tc.T); got != tc.want {
			t.Errorf("kernel %d stride %d pad %d+%d: OutLen(%d) = %d, want %d", tc.k, tc.s, tc.pl, tc.pr, tc.T, got, tc.want)
		}
	}
}

func TestConvNormGradients(t *testing.T) {
	var cases []gradCase
	for i, s := range convShapes {
		c, x := s.layer(uint64(40 + i))
		w := nntest.RandTensor(rngFor(uint64(50+i)), 2, c.OutLen(s.T), s.out)
		in := map[string][]float32{"x": x.Data, "W": c.W.Value.Data}
		if s.bias {
			in["b"] = c.B.Value.Data
		}
		cases = append(cases, gradCase{
			name: "Conv1d/" + s.String(), inputs: in,
			loss: func() float64 { y, _ := c.Forward(x); return nntest.Dot(w, y) },
			grads: func() map[string][]float32 {
				nn.ZeroGrads(c.Params())
				_, cc := c.Forward(x)
				dx := c.Backward(cc, w)
				g := map[string][]float32{"x": dx.Data, "W": c.W.Grad.Data}
				if s.bias {
					g["b"] = c.B.Grad.Data
				}
				return g
			},
		})
	}
	for _, groups := range []int{6, 2, 1} {
		rng := rngFor(uint64(60 + groups))
		gn := nn.NewGroupNorm("gn", groups, 6, 1e-5)
		gn.Weight.InitNormal(rng, 1)
		gn.Bias.InitNormal(rng, 1)
		x := nntest.RandTensor(rng, 2, 5, 6)
		Scale(x, 3)
		w := nntest.RandTensor(rng, 2, 5, 6)
		cases = append(cases, gradCase{
			name: fmt.Sprintf("GroupNorm/groups%d", groups), inputs: map[string][]float32{"x": x.Data, "weight": gn.Weight.Value.Data, "bias": gn.Bias.Value.Data},
			loss: func() float64 { y, _ := gn.Forward(x); return nntest.Dot(w, y) },
			grads: func() map[string][]float32 {
				nn.ZeroGrads(gn.Params())
				_, c := gn.Forward(x)
				dx := gn.Backward(c, w)
				return map[string][]float32{"x": dx.Data, "weight": gn.Weight.Grad.Data, "bias": gn.Bias.Grad.Data}
			},
		})
	}
	for _, dim := range []int{2, 0, 1} {
		rng := rngFor(uint64(70 + dim))
		wn := nn.NewWeightNorm("conv", dim, 4, 3, 5)
		wn.InitNormal(rng, 1)
		for i := range wn.G.Value.Data { // magnitudes away from the norms
			wn.G.Value.Data[i] *= float32(0.5 + rng.Float64())
		}
		w := nntest.RandTensor(rng, 4, 3, 5)
		cases = append(cases, gradCase{
			name: fmt.Sprintf("WeightNorm/dim%d", dim), inputs: map[string][]float32{"g": wn.G.Value.Data, "v": wn.V.Value.Data},
			loss: func() float64 { y, _ := wn.Weight(); return nntest.Dot(w, y) },
			grads: func() map[string][]float32 {
				nn.ZeroGrads(wn.Params())
				_, c := wn.Weight()
				wn.Backward(c, w)
				return map[string][]float32{"g": wn.G.Grad.Data, "v": wn.V.Grad.Data}
			},
		})
	}
	runGradCases(t, cases)
}

// TestGroupNormValues: each (row, group) has mean Bias and variance
// Weight^2 var/(var+eps) after normalisation, checked against float64 statistics.
func TestGroupNormValues(t *testing.T) {
	rng := rngFor(80)
	gn := nn.NewGroupNorm("gn", 2, 4, 1e-5)
	x := nntest.RandTensor(rng, 3, 7, 4)
	for i := range x.Data {
		x.Data[i] = x.Data[i]*4 + float32(i%4) // per-channel offsets
	}
	y, _ := gn.Forward(x)
	for b := 0; b < 3; b++ {
		for g := 0; g < 2; g++ {
			var s, ss, ys, yss float64
			for tt := 0; tt < 7; tt++ {
				for c := 2 * g; c < 2*g+2; c++ {
					v, w := float64(x.Data[(b*7+tt)*4+c]), float64(y.Data[(b*7+tt)*4+c])
					s, ss, ys, yss = s+v, ss+v*v, ys+w, yss+w*w
				}
			}
			n := 14.0
			vr := ss/n - (s/n)*(s/n)
			if m := ys / n; math.Abs(m) > 1e-5 {
				t.Errorf("row %d group %d: mean %v after GroupNorm", b, g, m)
			}
			if got, want := yss/n-(ys/n)*(ys/n), vr/(vr+1e-5); math.Abs(got-want) > 1e-4 {
				t.Errorf("row %d group %d: variance %v, want %v", b, g, got, want)
			}
		}
	}
}

// TestWeightNormValues pins weight = g v / ||v|| with the norm over every
// axis but dim (torch.nn.utils.weight_norm(conv, dim=2): a norm per kernel
// tap) on a hand-computed case, and InitFrom's fixed point.
func TestWeightNormValues(t *testing.T) {
	wn := nn.NewWeightNorm("c", 2, 2, 1, 2)
	if !slices.Equal(wn.G.Value.Shape, []int{1, 1, 2}) {
		t.Fatalf("g shape %v, want [1 1 2]", wn.G.Value.Shape)
	}
	// v[o][0][k]: tap 0 = (3, 4) norm 5; tap 1 = (1, 0) norm 1.
	copy(wn.V.Value.Data, []float32{3, 1, 4, 0})
	copy(wn.G.Value.Data, []float32{10, 2})
	w, _ := wn.Weight()
	for i, want := range []float32{6, 2, 8, 0} {
		if math.Abs(float64(w.Data[i]-want)) > 1e-6 {
			t.Errorf("weight %v, want [6 2 8 0]", w.Data)
			break
		}
	}
	target := nntest.RandTensor(rngFor(81), 2, 1, 2)
	wn.InitFrom(target)
	w, _ = wn.Weight()
	for i, v := range target.Data {
		if math.Abs(float64(w.Data[i]-v)) > 1e-6 {
			t.Fatalf("InitFrom: weight %v, want %v", w.Data, target.Data)
		}
	}
}
