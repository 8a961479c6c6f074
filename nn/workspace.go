package nn

import "sync"

// Workspace lends the tensors of inference forward passes from memory kept across calls, so that
// a forward pass repeated on batches of the same shape allocates nothing: the k-th tensor asked
// of a workspace after [Workspace.Reset] is the k-th of the previous call, grown when it is too
// small and so sized to the largest batch seen. A tensor it lends is zeroed, as [New]'s, so a
// forward pass computes the same bits from a workspace as from fresh memory.
//
// A tensor lent is valid until the next Reset; whoever holds the workspace owns what it lends and
// must not let it escape the call (copy a result out, or take it from [New]). A workspace is not
// safe for concurrent use: its owner serialises the calls that use it, or keeps one per goroutine
// ([Workspaces] of them where calls run concurrently). The nil *Workspace is valid and lends
// nothing: its New is [New].
type Workspace struct {
	ts   []*Tensor // the tensors lent, in the order they were asked for
	next int       // ts[next] is the next tensor to lend
}

// Workspaces is a free list of workspaces for calls that run concurrently: a call takes one with
// Get and gives it back with Put. Unlike a sync.Pool, it keeps them across garbage collections
// and hands any of them to any goroutine, so a server's forward passes reuse their memory rather
// than growing new workspaces from nothing (with a sync.Pool and GOGC=20, 5% of the release
// service's CPU went to allocating, faulting in and clearing activations: docs/performance.md).
// It holds as many workspaces as were ever in use at once. The zero value is empty; it is safe
// for concurrent use.
type Workspaces struct {
	mu   sync.Mutex
	free []*Workspace
}

// Get returns a free workspace, a new one when none is free.
func (p *Workspaces) Get() *Workspace {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free)
	if n == 0 {
		return new(Workspace)
	}
	w := p.free[n-1]
	p.free = p.free[:n-1]
	return w
}

// Put gives w back for another call; the caller no longer uses it or what it lent.
func (p *Workspaces) Put(w *Workspace) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append(p.free, w)
}

// New returns a zero tensor of the given shape, from the workspace's memory (from [New] for a
// nil workspace). Its Data and Shape are the workspace's until [Workspace.Reset].
func (w *Workspace) New(shape ...int) *Tensor {
	t := w.NewUninit(shape...)
	if w != nil {
		clear(t.Data)
	}
	return t
}

// NewUninit is [Workspace.New] without the zeroing: the values are whatever the workspace's
// memory held (zero for a nil workspace or memory newly allocated). It is for outputs whose
// every value the caller writes before any is read (a copy, a LayerNorm, a GEMM with beta 0),
// which then do not depend on what the memory held.
func (w *Workspace) NewUninit(shape ...int) *Tensor {
	if w == nil {
		return New(shape...)
	}
	n := numel(shape)
	if w.next == len(w.ts) {
		w.ts = append(w.ts, &Tensor{})
	}
	t := w.ts[w.next]
	w.next++
	if cap(t.Data) < n {
		t.Data = make([]float32, n)
	} else {
		t.Data = t.Data[:n]
	}
	t.Shape = append(t.Shape[:0], shape...)
	return t
}

// Floats returns a zeroed slice of n float32 from the workspace's memory (make for a nil
// workspace), valid until [Workspace.Reset].
func (w *Workspace) Floats(n int) []float32 { return w.New(n).Data }

// Reset makes every tensor lent since the last Reset available again: a caller calls it at the
// start of each forward pass. It keeps the memory. Reset of a nil workspace does nothing.
func (w *Workspace) Reset() {
	if w != nil {
		w.next = 0
	}
}

// Bytes returns the size of the workspace's memory, in bytes.
func (w *Workspace) Bytes() int {
	if w == nil {
		return 0
	}
	n := 0
	for _, t := range w.ts {
		n += 4 * cap(t.Data)
	}
	return n
}
