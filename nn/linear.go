package nn

import (
	"fmt"
	"math/rand/v2"
)

// Linear is y = x W^T + b with W stored [Out, In] (PyTorch / Hugging Face
// layout) and b [Out].
type Linear struct {
	In, Out int
	W, B    *Param // B is nil for a bias-free layer
}

// NewLinear creates a Linear layer with parameters named prefix+".weight" and
// prefix+".bias" (zero-initialised; see InitHF).
func NewLinear(prefix string, in, out int, bias bool) *Linear {
	l := &Linear{In: in, Out: out, W: NewParam(prefix+".weight", out, in)}
	if bias {
		l.B = NewParam(prefix+".bias", out)
		l.B.NoDecay = true
	}
	return l
}

// InitHF applies Hugging Face initialisation: W ~ N(0, std^2), b = 0.
func (l *Linear) InitHF(rng *rand.Rand, std float64) {
	l.W.InitNormal(rng, std)
	if l.B != nil {
		l.B.Value.Zero()
	}
}

// Params returns the layer's parameters.
func (l *Linear) Params() []*Param {
	if l.B == nil {
		return []*Param{l.W}
	}
	return []*Param{l.W, l.B}
}

// Forward maps x [..., In] to y [..., Out]. The cache is x itself.
func (l *Linear) Forward(x *Tensor) (*Tensor, *Tensor) {
	return l.Infer(x, nil), x
}

// Infer is [Linear.Forward] with y taken from ws ([Workspace.New]; nil: newly allocated), for
// passes that keep no cache: the same operations in the same order.
func (l *Linear) Infer(x *Tensor, ws *Workspace) *Tensor {
	if x.Dim(-1) != l.In {
		panic(fmt.Sprintf("nn.Linear(%s): input last dim %d, want %d", l.W.Name, x.Dim(-1), l.In))
	}
	rows := x.Rows()
	var buf [4]int // the shape, on the stack for up to 4 dimensions
	shape := append(append(buf[:0], x.Shape[:len(x.Shape)-1]...), l.Out)
	var y *Tensor
	if l.B == nil {
		y = ws.New(shape...) // the GEMM adds to y
	} else {
		y = ws.NewUninit(shape...) // every row the bias
		b := l.B.Value.Data
		for r := 0; r < rows; r++ {
			copy(y.Data[r*l.Out:(r+1)*l.Out], b)
		}
	}
	Gemm(false, true, rows, l.Out, l.In, 1, x.Data, l.W.Value.Data, 1, y.Data)
	return y
}

// Backward takes the cached input x and dy [..., Out], accumulates dW and db
// and returns dx [..., In].
func (l *Linear) Backward(x, dy *Tensor) *Tensor {
	rows := x.Rows()
	// dW [Out, In] += dy^T [Out, rows] x [rows, In]
	Gemm(true, false, l.Out, l.In, rows, 1, dy.Data, x.Data, 1, l.W.Grad.Data)
	if l.B != nil {
		db := l.B.Grad.Data
		for r := 0; r < rows; r++ {
			row := dy.Data[r*l.Out : (r+1)*l.Out]
			for j, g := range row {
				db[j] += g
			}
		}
	}
	dx := New(x.Shape...)
	Gemm(false, false, rows, l.In, l.Out, 1, dy.Data, l.W.Value.Data, 0, dx.Data)
	return dx
}
