package dnn

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/nn"
)

//go:embed kernels/*.cu
var kernelFS embed.FS

// Source is the CUDA C source of every kernel of the package: the files of
// kernels/ in name order, one module.
func Source() string {
	names, err := fs.Glob(kernelFS, "kernels/*.cu")
	if err != nil {
		panic(err)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		src, err := kernelFS.ReadFile(n)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(&b, "// ---- %s\n%s\n", n, src)
	}
	return b.String()
}

// Engine runs the device layers: the device, the compiled kernels and the
// arena of a step's activations.
type Engine struct {
	Dev     *cuda.Device
	mod     *cuda.Module
	kernels map[string]*cuda.Kernel
	arena   arena

	bf16    bool        // the device's GEMMs take BF16 inputs (dnn/bf16.go)
	scratch cuda.Buffer // the GEMMs' BF16 operands (bf16Scratch)
}

// NewEngine compiles the kernels of [Source] for d, cached by package cuda. It runs on the device
// goroutine and returns the compiler's and the driver's errors.
func NewEngine(d *cuda.Device) (*Engine, error) {
	m, err := d.Compile("nvdp-dnn", Source())
	if err != nil {
		return nil, err
	}
	return &Engine{Dev: d, mod: m, kernels: map[string]*cuda.Kernel{}, arena: arena{dev: d}, bf16: d.Precision() == cuda.PrecisionBF16}, nil
}

// Close frees the arena and the BF16 scratch buffer. Parameters are freed by their owners, with
// [Engine.FreeParams].
func (e *Engine) Close() {
	e.arena.free()
	e.Dev.Free(e.scratch)
	e.scratch = cuda.Buffer{}
}

// must panics with err (a *cuda.Error or its wrapping): a failed launch or
// allocation in the middle of a step, which cuda.Device.Do returns.
func must(err error) {
	if err != nil {
		panic(err)
	}
}

// launch runs the kernel name on grid x block with shared bytes of dynamic
// shared memory.
func (e *Engine) launch(name string, grid, block cuda.Dim3, shared int, args ...any) {
	k, ok := e.kernels[name]
	if !ok {
		var err error
		k, err = e.mod.Kernel(e.Dev, name)
		must(err)
		e.kernels[name] = k
	}
	must(e.Dev.Launch(k, grid, block, shared, args...))
}

// threads is the block size of the element-wise and row kernels.
const threads = 256

// launch1D runs the kernel name with one thread per item of n (blocks of
// threads).
func (e *Engine) launch1D(name string, n int, args ...any) {
	if n == 0 {
		return
	}
	e.launch(name, cuda.Blocks(n, threads), cuda.Threads(threads), 0, args...)
}

// launchRows runs the kernel name with one block of threads per row.
func (e *Engine) launchRows(name string, rows int, args ...any) {
	if rows == 0 {
		return
	}
	e.launch(name, cuda.Dim3{X: rows, Y: 1, Z: 1}, cuda.Threads(threads), 0, args...)
}

// Tensor is a dense float32 array on the device in row-major order, the device twin of
// [nn.Tensor].
type Tensor struct {
	Buf   cuda.Buffer
	Shape []int
}

func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		if s < 0 {
			panic(fmt.Sprintf("dnn: negative dimension in shape %v", shape))
		}
		n *= s
	}
	return n
}

// Len returns the number of elements.
func (t *Tensor) Len() int { return numel(t.Shape) }

// Dim returns the size of dimension i; a negative i counts from the end.
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += len(t.Shape)
	}
	return t.Shape[i]
}

// Rows returns the product of all dimensions but the last.
func (t *Tensor) Rows() int { return t.Len() / t.Dim(-1) }

// View returns t with another shape of the same size, without a copy.
func (t *Tensor) View(shape ...int) *Tensor {
	if numel(shape) != t.Len() {
		panic(fmt.Sprintf("dnn: view of %v as %v", t.Shape, shape))
	}
	return &Tensor{Buf: t.Buf, Shape: append([]int(nil), shape...)}
}

// Offset returns the part of t from element off on, with shape, without a copy.
func (t *Tensor) Offset(off int, shape ...int) *Tensor {
	if off < 0 || off+numel(shape) > t.Len() {
		panic(fmt.Sprintf("dnn: %v at element %d of %v", shape, off, t.Shape))
	}
	return &Tensor{Buf: t.Buf.Offset(4 * off), Shape: append([]int(nil), shape...)}
}

// New returns an uninitialised arena tensor of the given shape, valid until the next Reset.
func (e *Engine) New(shape ...int) *Tensor {
	return &Tensor{Buf: e.arena.alloc(4 * numel(shape)), Shape: append([]int(nil), shape...)}
}

// Zeros returns an arena tensor of the given shape set to 0.
func (e *Engine) Zeros(shape ...int) *Tensor {
	t := e.New(shape...)
	must(e.Dev.Zero(t.Buf, 4*t.Len()))
	return t
}

// Reset releases every arena tensor, at the start of a step.
func (e *Engine) Reset() { e.arena.reset() }

// Upload returns an arena tensor holding the host tensor x.
func (e *Engine) Upload(x *nn.Tensor) *Tensor {
	t := e.New(x.Shape...)
	must(cuda.Upload(e.Dev, t.Buf, x.Data))
	return t
}

// UploadInts returns an arena buffer holding v, such as token ids or labels.
func (e *Engine) UploadInts(v []int32) cuda.Buffer {
	b := e.arena.alloc(4 * max(1, len(v)))
	must(cuda.Upload(e.Dev, b, v))
	return b
}

// Download returns the host copy of t.
func (e *Engine) Download(t *Tensor) *nn.Tensor {
	x := nn.New(t.Shape...)
	must(cuda.Download(e.Dev, x.Data, t.Buf))
	return x
}

// Param is a trained tensor on the device, with its gradient: the twin of an [nn.Param] of the
// same name.
type Param struct {
	Name        string
	Value, Grad *Tensor
	NoDecay     bool

	// bf16 is Value rounded to bfloat16, on a bf16 device, for a weight
	// that a GEMM reads (allocated by its first GEMM: weightBF16); the
	// writers of Value keep it equal to the rounding of Value: AdamW's
	// update (in the same kernel), PushParam (a checkpoint loaded),
	// RefreshBF16 for any other.
	bf16 cuda.Buffer
}

// Param allocates the device twin of p, with its value uploaded and its gradient zero. Free it with
// [Engine.FreeParams].
func (e *Engine) Param(p *nn.Param) *Param {
	n := p.Value.Len()
	v, err := e.Dev.Alloc(4 * max(1, n))
	must(err)
	g, err := e.Dev.Alloc(4 * max(1, n))
	must(err)
	dp := &Param{Name: p.Name, Value: &Tensor{Buf: v, Shape: append([]int(nil), p.Value.Shape...)},
		Grad: &Tensor{Buf: g, Shape: append([]int(nil), p.Value.Shape...)}, NoDecay: p.NoDecay}
	must(cuda.Upload(e.Dev, v, p.Value.Data))
	must(e.Dev.Zero(g, 4*n))
	return dp
}

// FreeParams frees the device memory of ps.
func (e *Engine) FreeParams(ps []*Param) {
	for _, p := range ps {
		e.Dev.Free(p.Value.Buf)
		e.Dev.Free(p.Grad.Buf)
		e.Dev.Free(p.bf16)
		p.bf16 = cuda.Buffer{}
	}
}

// PullParam copies the value of dp, and with grad its gradient, into the host parameter p of the
// same name and shape.
func (e *Engine) PullParam(dp *Param, p *nn.Param, grad bool) {
	if dp.Name != p.Name || dp.Value.Len() != p.Value.Len() {
		panic(fmt.Sprintf("dnn: pull %s %v into %s %v", dp.Name, dp.Value.Shape, p.Name, p.Value.Shape))
	}
	must(cuda.Download(e.Dev, p.Value.Data, dp.Value.Buf))
	if grad {
		must(cuda.Download(e.Dev, p.Grad.Data, dp.Grad.Buf))
	}
}

// PushParam copies the value of the host parameter p into dp, and its rounding into dp's bfloat16
// copy where it has one.
func (e *Engine) PushParam(p *nn.Param, dp *Param) {
	if dp.Name != p.Name || dp.Value.Len() != p.Value.Len() {
		panic(fmt.Sprintf("dnn: push %s %v into %s %v", p.Name, p.Value.Shape, dp.Name, dp.Value.Shape))
	}
	must(cuda.Upload(e.Dev, dp.Value.Buf, p.Value.Data))
	e.RefreshBF16(dp)
}

// ZeroGrads clears the gradients of ps.
func (e *Engine) ZeroGrads(ps []*Param) {
	for _, p := range ps {
		must(e.Dev.Zero(p.Grad.Buf, 4*p.Grad.Len()))
	}
}

// arena is a bump allocator of device memory: chunks allocated once and
// reused after each reset, 256-byte aligned (cuMemAlloc's alignment).
type arena struct {
	dev    *cuda.Device
	chunks []cuda.Buffer
	cur    int // chunk in use
	off    int // bytes used in it
}

// arenaChunk is the smallest chunk the arena allocates.
const arenaChunk = 64 << 20

func (a *arena) alloc(bytes int) cuda.Buffer {
	bytes = (bytes + 255) &^ 255
	for a.cur < len(a.chunks) {
		if c := a.chunks[a.cur]; a.off+bytes <= c.Bytes {
			b := cuda.Buffer{Ptr: c.Ptr + uintptr(a.off), Bytes: bytes}
			a.off += bytes
			return b
		}
		a.cur++
		a.off = 0
	}
	c, err := a.dev.Alloc(max(arenaChunk, bytes))
	must(err)
	a.chunks = append(a.chunks, c)
	a.cur, a.off = len(a.chunks)-1, bytes
	return cuda.Buffer{Ptr: c.Ptr, Bytes: bytes}
}

func (a *arena) reset() { a.cur, a.off = 0, 0 }

func (a *arena) free() {
	for _, c := range a.chunks {
		a.dev.Free(c)
	}
	a.chunks, a.cur, a.off = nil, 0, 0
}
