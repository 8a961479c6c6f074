package nn

import (
	"fmt"
	"math/rand/v2"
)

// Embedding is a lookup table W [Vocab, Dim]. Its parameter is named
// prefix+".weight", the Hugging Face layout.
type Embedding struct {
	W *Param
	// PaddingIdx, when >= 0, is a row that receives no gradient, as with
	// PyTorch's nn.Embedding(padding_idx=...). NewEmbedding sets -1, for
	// none.
	PaddingIdx int
}

// NewEmbedding returns a zero [vocab, dim] table without a padding row; see
// [Embedding.InitHF].
func NewEmbedding(prefix string, vocab, dim int) *Embedding {
	return &Embedding{W: NewParam(prefix+".weight", vocab, dim), PaddingIdx: -1}
}

// InitHF fills the table with draws from N(0, std^2). std is Hugging Face's
// initializer_range, 0.02 for BERT.
func (e *Embedding) InitHF(rng *rand.Rand, std float64) { e.W.InitNormal(rng, std) }

// Params returns the layer's parameters.
func (e *Embedding) Params() []*Param { return []*Param{e.W} }

// Vocab returns the number of rows of the table.
func (e *Embedding) Vocab() int { return e.W.Value.Shape[0] }

// Dim returns the embedding width.
func (e *Embedding) Dim() int { return e.W.Value.Shape[1] }

// Forward gathers the rows out[i] = W[ids[i]] and returns them with shape
// [shape..., Dim]; shape defaults to [len(ids)]. An id outside [0, Vocab)
// or a shape that does not match len(ids) is a programmer error, since
// callers validate input ids first, and panics naming the id.
func (e *Embedding) Forward(ids []int32, shape ...int) *Tensor { return e.Infer(ids, nil, shape...) }

// Infer is [Embedding.Forward] with the output taken from ws ([Workspace.New]; nil: newly
// allocated).
func (e *Embedding) Infer(ids []int32, ws *Workspace, shape ...int) *Tensor {
	if len(shape) == 0 {
		shape = []int{len(ids)}
	}
	if numel(shape) != len(ids) {
		panic(fmt.Sprintf("nn.Embedding(%s): %d ids for shape %v", e.W.Name, len(ids), shape))
	}
	V, D := e.Vocab(), e.Dim()
	var buf [4]int // the shape, on the stack for up to 4 dimensions
	// every row is copied: no zeroing
	out := ws.NewUninit(append(append(buf[:0], shape...), D)...)
	w := e.W.Value.Data
	for i, id := range ids {
		if id < 0 || int(id) >= V {
			panic(fmt.Sprintf("nn.Embedding(%s): id %d at position %d outside [0, %d)", e.W.Name, id, i, V))
		}
		copy(out.Data[i*D:(i+1)*D], w[int(id)*D:int(id+1)*D])
	}
	return out
}

// Backward scatter-adds dy [len(ids), Dim], or any leading shape, into
// W.Grad: W.Grad[ids[i]] += dy[i]. Repeated ids accumulate; PaddingIdx gets
// nothing.
func (e *Embedding) Backward(ids []int32, dy *Tensor) {
	D := e.Dim()
	if len(dy.Data) != len(ids)*D {
		panic(fmt.Sprintf("nn.Embedding(%s).Backward: dy shape %v for %d ids", e.W.Name, dy.Shape, len(ids)))
	}
	g := e.W.Grad.Data
	for i, id := range ids {
		if int(id) == e.PaddingIdx {
			continue
		}
		row := g[int(id)*D : int(id+1)*D]
		src := dy.Data[i*D : (i+1)*D]
		for j := range row {
			row[j] += src[j]
		}
	}
}
