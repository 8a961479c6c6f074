package dnn

import (
	"fmt"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/nn"
)

// Embedding is the twin of [nn.Embedding]: a lookup table W [Vocab, Dim] named prefix+".weight".
// PaddingIdx, when >= 0, is a row that receives no gradient; -1 means none.
//
// The ids stay on the host, as in nn: they are checked there and uploaded by each call. Backward
// is deterministic and equals nn's bit for bit on the same dy. A counting pass on the host groups
// the positions of each distinct id, and one block per id adds its rows of dy to W.Grad in
// increasing position order, nn's order, with no atomics.
type Embedding struct {
	W          *Param
	PaddingIdx int
}

// NewEmbedding uploads l's table.
func (e *Engine) NewEmbedding(l *nn.Embedding) *Embedding {
	return &Embedding{W: e.Param(l.W), PaddingIdx: l.PaddingIdx}
}

// Params returns the layer's parameters.
func (l *Embedding) Params() []*Param { return []*Param{l.W} }

// Vocab returns the number of rows of the table.
func (l *Embedding) Vocab() int { return l.W.Value.Shape[0] }

// Dim returns the embedding width.
func (l *Embedding) Dim() int { return l.W.Value.Shape[1] }

// checkIDs panics unless every id is a row of the table and shape holds
// len(ids) elements (programmer errors, as in nn); it returns the output
// shape [shape..., Dim].
func (l *Embedding) checkIDs(ids []int32, shape []int) []int {
	if len(shape) == 0 {
		shape = []int{len(ids)}
	}
	if numel(shape) != len(ids) {
		panic(fmt.Sprintf("dnn.Embedding(%s): %d ids for shape %v", l.W.Name, len(ids), shape))
	}
	V := l.Vocab()
	for i, id := range ids {
		if id < 0 || int(id) >= V {
			panic(fmt.Sprintf("dnn.Embedding(%s): id %d at position %d outside [0, %d)", l.W.Name, id, i, V))
		}
	}
	return append(append([]int(nil), shape...), l.Dim())
}

// Forward gathers the rows out[i] = W[ids[i]] with shape [shape..., Dim], as
// [nn.Embedding.Forward] does; shape defaults to [len(ids)]. An id outside [0, Vocab) or a shape
// that does not match len(ids) panics, naming it.
func (l *Embedding) Forward(e *Engine, ids []int32, shape ...int) *Tensor {
	out := e.New(l.checkIDs(ids, shape)...)
	D := l.Dim()
	e.launch1D("embedding_fwd", len(ids)*D, out.Buf, l.W.Value.Buf, e.UploadInts(ids), len(ids), D)
	return out
}

// Backward scatter-adds dy [len(ids), Dim], or any leading shape, into W.Grad:
// W.Grad[ids[i]] += dy[i]. Repeated ids accumulate in order of i and PaddingIdx receives nothing,
// giving the same sums as [nn.Embedding.Backward].
func (l *Embedding) Backward(e *Engine, ids []int32, dy *Tensor) {
	D := l.Dim()
	if dy.Len() != len(ids)*D {
		panic(fmt.Sprintf("dnn.Embedding(%s).Backward: dy shape %v for %d ids", l.W.Name, dy.Shape, len(ids)))
	}
	scatterAdd(e, l.W.Grad, dy, ids, l.PaddingIdx)
}

// scatterAdd adds row i of dy [n, D] to row ids[i] of g [V, D] for every i
// with ids[i] != skip, in order of i per row (embedding_bwd).
func scatterAdd(e *Engine, g, dy *Tensor, ids []int32, skip int) {
	V, D := g.Dim(0), g.Dim(-1)
	// Counting sort of the positions by id: rows (the ids present, in
	// increasing order), start (nr+1 offsets), order (positions).
	count := make([]int32, V)
	nr, n := 0, 0
	for _, id := range ids {
		if int(id) == skip {
			continue
		}
		if id < 0 || int(id) >= V {
			panic(fmt.Sprintf("dnn.Embedding.Backward: id %d outside [0, %d)", id, V))
		}
		if count[id] == 0 {
			nr++
		}
		count[id]++
		n++
	}
	if nr == 0 || D == 0 {
		return
	}
	buf := make([]int32, nr+(nr+1)+n) // rows | start | order
	rows, start, order := buf[:nr], buf[nr:2*nr+1], buf[2*nr+1:]
	next := make([]int32, V) // where the next position of an id goes
	r := 0
	var off int32
	for id, c := range count {
		if c == 0 {
			continue
		}
		rows[r], start[r], next[id] = int32(id), off, off
		off += c
		r++
	}
	start[nr] = off
	for i, id := range ids {
		if int(id) == skip {
			continue
		}
		order[next[id]] = int32(i)
		next[id]++
	}
	dev := e.UploadInts(buf)
	e.launch("embedding_bwd", cuda.Dim3{X: nr, Y: (D + threads - 1) / threads, Z: 1}, cuda.Threads(threads), 0,
		g.Buf, dy.Buf, dev, dev.Offset(4*nr), dev.Offset(4*(2*nr+1)), D)
}
