package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Conv1d is a 1-D convolution over channels-last sequences, the engine's
// torch.nn.Conv1d. It maps x [B, T, In] to y [B, Tout, Out] with
//
//	y[b,t,o] = bias[o] + sum_{k<Kernel} sum_{c<In/Groups} W[o,c,k] xpad[b, t*Stride+k, g(o)*In/Groups + c]
//
// where g(o) = o / (Out/Groups) is the group of output channel o, and xpad
// is x with PadLeft zero frames before and PadRight after, so that
// Tout = floor((T + PadLeft + PadRight - Kernel) / Stride) + 1.
//
// The weight is stored as [Out, In/Groups, Kernel], the PyTorch and Hugging
// Face layout, and named prefix+".weight". The bias [Out] is named
// prefix+".bias"; it is nil for a bias-free layer.
//
// torch's symmetric padding p is PadLeft = PadRight = p. Hugging Face's
// Wav2Vec2SamePadLayer pads Kernel/2 frames on both sides and then removes
// the last output frame for an even Kernel; that is PadLeft = Kernel/2 and
// PadRight = Kernel/2 - 1, since the removed frame is the only one that
// reads the last right padding frame.
//
// Activations are channels-last, the engine's [B, T, D] convention, while
// torch's Conv1d works on [B, C, T]; the results are the same numbers
// transposed. Forward multiplies with BLAS per batch row and per group, on
// the [Tout, Kernel*In/Groups] matrix of receptive fields, or patches. The
// patches are copied from the input, or read in place as a window of
// Kernel*In contiguous floats every Stride*In when there is one group, no
// padding and Stride >= Kernel.
type Conv1d struct {
	In, Out, Kernel, Stride, Groups int
	PadLeft, PadRight               int
	W, B                            *Param
}

// NewConv1d returns a Conv1d with zero parameters; see
// [Conv1d.InitKaiming]. groups must divide in and out, and kernel and
// stride must be positive; a wiring error panics.
func NewConv1d(prefix string, in, out, kernel, stride, groups int, bias bool) *Conv1d {
	if in <= 0 || out <= 0 || kernel <= 0 || stride <= 0 || groups <= 0 || in%groups != 0 || out%groups != 0 {
		panic(fmt.Sprintf("nn.NewConv1d(%s): in %d, out %d, kernel %d, stride %d, groups %d", prefix, in, out, kernel, stride, groups))
	}
	c := &Conv1d{In: in, Out: out, Kernel: kernel, Stride: stride, Groups: groups,
		W: NewParam(prefix+".weight", out, in/groups, kernel)}
	if bias {
		c.B = NewParam(prefix+".bias", out)
		c.B.NoDecay = true
	}
	return c
}

// FanIn returns the number of inputs of one output: In/Groups * Kernel.
func (c *Conv1d) FanIn() int { return c.In / c.Groups * c.Kernel }

// InitKaiming applies the initialisation of transformers'
// Wav2Vec2PreTrainedModel._init_weights for nn.Conv1d. W is drawn first,
// from N(0, 2/FanIn) as torch.nn.init.kaiming_normal_ in fan_in mode with
// the ReLU gain; then a bias, if any, from U(-1/sqrt(FanIn), 1/sqrt(FanIn)).
func (c *Conv1d) InitKaiming(rng *rand.Rand) {
	c.W.InitNormal(rng, math.Sqrt(2/float64(c.FanIn())))
	if c.B != nil {
		k := 1 / math.Sqrt(float64(c.FanIn()))
		for i := range c.B.Value.Data {
			c.B.Value.Data[i] = float32((2*rng.Float64() - 1) * k)
		}
	}
}

// Params returns the layer's parameters: the weight, then the bias.
func (c *Conv1d) Params() []*Param {
	if c.B == nil {
		return []*Param{c.W}
	}
	return []*Param{c.W, c.B}
}

// OutLen returns the number of output frames for t input frames. It is 0
// when the padded input is shorter than the kernel.
func (c *Conv1d) OutLen(t int) int {
	n := t + c.PadLeft + c.PadRight - c.Kernel
	if n < 0 {
		return 0
	}
	return n/c.Stride + 1
}

// Conv1dCache holds what [Conv1d.Backward] needs.
type Conv1dCache struct {
	xpad     *Tensor   // padded input [B, Tp, In] (the input itself without padding)
	wp       []float32 // weight as [Out, Kernel, In/Groups] (patch order)
	B, T, Tp int
	Tout     int
}

// Forward convolves x [B, T, In] and returns y [B, Tout, Out] with the cache
// for Backward. A wrong channel count or an input shorter than the kernel
// is a wiring error and panics; models check lengths before.
func (c *Conv1d) Forward(x *Tensor) (*Tensor, *Conv1dCache) { return c.ForwardWith(x, c.W.Value) }

// ForwardWith is [Conv1d.Forward] with the weight w, of W's shape, in place
// of W's value, for a weight computed from other parameters as in
// [WeightNorm]. The layer is not modified, so concurrent inference calls
// are safe. Backward accumulates dL/dw into W.Grad.
func (c *Conv1d) ForwardWith(x, w *Tensor) (*Tensor, *Conv1dCache) {
	MustSameShape("Conv1d.ForwardWith", c.W.Value, w)
	if len(x.Shape) != 3 || x.Shape[2] != c.In {
		panic(fmt.Sprintf("nn.Conv1d(%s): input %v, want [B, T, %d]", c.W.Name, x.Shape, c.In))
	}
	B, T := x.Shape[0], x.Shape[1]
	tout := c.OutLen(T)
	if tout <= 0 {
		panic(fmt.Sprintf("nn.Conv1d(%s): %d input frames (padding %d+%d) for a kernel of %d", c.W.Name, T, c.PadLeft, c.PadRight, c.Kernel))
	}
	cc := &Conv1dCache{xpad: c.pad(x), wp: c.patchWeight(w.Data), B: B, T: T, Tp: T + c.PadLeft + c.PadRight, Tout: tout}
	y := New(B, tout, c.Out)
	if c.B != nil {
		for r := 0; r < B*tout; r++ {
			copy(y.Data[r*c.Out:(r+1)*c.Out], c.B.Value.Data)
		}
	}
	cg, og := c.In/c.Groups, c.Out/c.Groups
	kc := c.Kernel * cg
	c.eachGroup(tout, func(g int, patch []float32) {
		for b := 0; b < B; b++ {
			a, lda := c.patches(cc, b, g, patch)
			GemmStrided(false, true, tout, og, kc, 1, a, lda, cc.wp[g*og*kc:], kc,
				1, y.Data[b*tout*c.Out+g*og:], c.Out)
		}
	})
	return y, cc
}

// Backward takes the cache and dy [B, Tout, Out], accumulates the gradients
// of the weight and the bias, and returns dx [B, T, In].
func (c *Conv1d) Backward(cc *Conv1dCache, dy *Tensor) *Tensor {
	if dy.Len() != cc.B*cc.Tout*c.Out {
		panic(fmt.Sprintf("nn.Conv1d(%s).Backward: dy %v, want [%d, %d, %d]", c.W.Name, dy.Shape, cc.B, cc.Tout, c.Out))
	}
	B, tout := cc.B, cc.Tout
	cg, og := c.In/c.Groups, c.Out/c.Groups
	kc := c.Kernel * cg
	dwp := make([]float32, len(cc.wp))
	dxpad := New(B, cc.Tp, c.In)
	c.eachGroup(tout, func(g int, patch []float32) {
		dpatch := make([]float32, tout*kc)
		for b := 0; b < B; b++ {
			dyb := dy.Data[b*tout*c.Out+g*og:]
			a, lda := c.patches(cc, b, g, patch)
			// dW_g [og, kc] += dy_g^T [og, tout] patches [tout, kc]
			GemmStrided(true, false, og, kc, tout, 1, dyb, c.Out, a, lda, 1, dwp[g*og*kc:], kc)
			// dpatches [tout, kc] = dy_g [tout, og] W_g [og, kc], scattered back (col2im).
			GemmStrided(false, false, tout, kc, og, 1, dyb, c.Out, cc.wp[g*og*kc:], kc, 0, dpatch, kc)
			base := dxpad.Data[b*cc.Tp*c.In:]
			for t := 0; t < tout; t++ {
				row := dpatch[t*kc : (t+1)*kc]
				for k := 0; k < c.Kernel; k++ {
					dst := base[(t*c.Stride+k)*c.In+g*cg:][:cg]
					for i, v := range row[k*cg : (k+1)*cg] {
						dst[i] += v
					}
				}
			}
		}
	})
	gw := c.W.Grad.Data
	for o := 0; o < c.Out; o++ {
		for k := 0; k < c.Kernel; k++ {
			for i := 0; i < cg; i++ {
				gw[(o*cg+i)*c.Kernel+k] += dwp[(o*c.Kernel+k)*cg+i]
			}
		}
	}
	if c.B != nil {
		db := c.B.Grad.Data
		for r := 0; r < B*tout; r++ {
			for j, v := range dy.Data[r*c.Out : (r+1)*c.Out] {
				db[j] += v
			}
		}
	}
	return c.unpad(dxpad, cc)
}

// eachGroup runs fn once per group with a patch buffer of its own
// ([tout, Kernel*In/Groups]; nil when the patches are read in place): groups
// in parallel with single-threaded BLAS when there are several (their
// outputs and weight gradients are disjoint), else one call with BLAS's own
// threads.
func (c *Conv1d) eachGroup(tout int, fn func(g int, patch []float32)) {
	size := tout * c.Kernel * (c.In / c.Groups)
	if c.Groups == 1 {
		var patch []float32
		if !c.inPlace() {
			patch = make([]float32, size)
		}
		fn(0, patch)
		return
	}
	serialBLAS(func() {
		Parallel(c.Groups, 1<<20, func(lo, hi int) {
			patch := make([]float32, size)
			for g := lo; g < hi; g++ {
				fn(g, patch)
			}
		})
	})
}

// inPlace reports whether the receptive fields can be read from the input
// as a matrix with row stride Stride*In: one group, no padding, and windows
// that do not overlap (BLAS needs a row stride of at least Kernel*In).
func (c *Conv1d) inPlace() bool {
	return c.Groups == 1 && c.PadLeft == 0 && c.PadRight == 0 && c.Stride >= c.Kernel
}

// patches returns the receptive fields of batch row b, group g as a
// [Tout, Kernel*In/Groups] matrix and its row stride: the padded input
// itself (stride Stride*In) when buf is nil, else a copy in buf
// ([Tout, Kernel*In/Groups], one per goroutine).
func (c *Conv1d) patches(cc *Conv1dCache, b, g int, buf []float32) ([]float32, int) {
	x := cc.xpad.Data[b*cc.Tp*c.In:]
	if buf == nil {
		return x, c.Stride * c.In
	}
	cg := c.In / c.Groups
	kc := c.Kernel * cg
	for t := 0; t < cc.Tout; t++ {
		row := buf[t*kc : (t+1)*kc]
		for k := 0; k < c.Kernel; k++ {
			copy(row[k*cg:(k+1)*cg], x[(t*c.Stride+k)*c.In+g*cg:])
		}
	}
	return buf, kc
}

// patchWeight returns a weight w [Out, In/Groups, Kernel] reordered to
// [Out, Kernel, In/Groups], the column order of the patch matrices.
func (c *Conv1d) patchWeight(w []float32) []float32 {
	cg := c.In / c.Groups
	wp := make([]float32, len(w))
	for o := 0; o < c.Out; o++ {
		for i := 0; i < cg; i++ {
			for k := 0; k < c.Kernel; k++ {
				wp[(o*c.Kernel+k)*cg+i] = w[(o*cg+i)*c.Kernel+k]
			}
		}
	}
	return wp
}

// pad returns x [B, T, C] with PadLeft and PadRight zero frames (x itself without padding).
func (c *Conv1d) pad(x *Tensor) *Tensor {
	if c.PadLeft == 0 && c.PadRight == 0 {
		return x
	}
	B, T, C := x.Shape[0], x.Shape[1], x.Shape[2]
	tp := T + c.PadLeft + c.PadRight
	xp := New(B, tp, C)
	for b := 0; b < B; b++ {
		copy(xp.Data[(b*tp+c.PadLeft)*C:], x.Data[b*T*C:(b+1)*T*C])
	}
	return xp
}

// unpad drops the padding frames of a [B, Tp, C] gradient.
func (c *Conv1d) unpad(dxp *Tensor, cc *Conv1dCache) *Tensor {
	if c.PadLeft == 0 && c.PadRight == 0 {
		return dxp
	}
	C := c.In
	dx := New(cc.B, cc.T, C)
	for b := 0; b < cc.B; b++ {
		copy(dx.Data[b*cc.T*C:(b+1)*cc.T*C], dxp.Data[(b*cc.Tp+c.PadLeft)*C:])
	}
	return dx
}
