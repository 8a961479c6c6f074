package nn

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// A workspace lends zeroed tensors of the shapes asked (NewUninit: as the last pass left them), the
// k-th of a pass in the k-th's memory of the last (grown when too small), and a nil workspace
// allocates.
func TestWorkspace(t *testing.T) {
	var ws Workspace
	a := ws.New(2, 3)
	b := ws.New(4)
	for i := range a.Data {
		a.Data[i] = 1
	}
	for i := range b.Data {
		b.Data[i] = 2
	}
	ws.Reset()
	for _, c := range []struct {
		shape []int
		same  *Tensor // the memory it must reuse; nil: any
	}{{[]int{3, 2}, a}, {[]int{2}, b}, {[]int{5}, nil}} {
		got := ws.New(c.shape...)
		if !SameShape(got, &Tensor{Shape: c.shape}) || len(got.Data) != numel(c.shape) {
			t.Fatalf("New(%v): shape %v, %d values", c.shape, got.Shape, len(got.Data))
		}
		for i, v := range got.Data {
			if v != 0 {
				t.Fatalf("New(%v): value %d is %v, want 0", c.shape, i, v)
			}
		}
		if c.same != nil && &got.Data[0] != &c.same.Data[0] {
			t.Errorf("New(%v) after Reset: new memory, want the previous pass's", c.shape)
		}
	}
	if got, want := ws.Bytes(), 4*(6+4+5); got != want {
		t.Errorf("Bytes = %d, want %d", got, want)
	}
	ws.Reset()
	if big := ws.New(10); len(big.Data) != 10 || ws.Bytes() != 4*(10+4+5) {
		t.Errorf("grown: %d values, %d bytes; want 10 and %d", len(big.Data), ws.Bytes(), 4*(10+4+5))
	}
	ws.Reset()
	if u := ws.NewUninit(3); u.Data[0] != 0 || len(u.Data) != 3 {
		t.Fatalf("NewUninit after a zeroed New: %v", u.Data)
	} else {
		u.Data[0] = 7
	}
	ws.Reset()
	if u := ws.NewUninit(2); u.Data[0] != 7 { // the memory as the last pass left it
		t.Errorf("NewUninit: %v, want the last pass's 7 first", u.Data)
	}
	var nilWS *Workspace
	nilWS.Reset()
	if x := nilWS.New(2, 2); len(x.Data) != 4 || nilWS.Bytes() != 0 || len(nilWS.Floats(3)) != 3 || nilWS.NewUninit(2).Data[1] != 0 {
		t.Errorf("nil workspace: New gave %d values, Bytes %d", len(x.Data), nilWS.Bytes())
	}
}

// The layers' Infer from a workspace whose memory holds other values gives the bits of Forward:
// a bias-free Linear (whose GEMM adds to its output), one with a bias, LayerNorm and GELU.
func TestInferDirtyWorkspace(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 99))
	x := New(3, 4)
	for i := range x.Data {
		x.Data[i] = float32(rng.NormFloat64())
	}
	ln := NewLayerNorm("ln", 5, 1e-12)
	for _, bias := range []bool{false, true} {
		l := NewLinear("l", 4, 5, bias)
		l.InitHF(rng, 0.5)
		if bias {
			for i := range l.B.Value.Data {
				l.B.Value.Data[i] = float32(i)
			}
		}
		want, _ := l.Forward(x)
		wantLN, _ := ln.Forward(want)
		wantG := GELU(wantLN)
		var ws Workspace
		for k := range 3 { // dirty the three tensors the pass will get
			d := ws.New(3, 5).Data
			for i := range d {
				d[i] = float32(k*i) + 0.5
			}
		}
		ws.Reset()
		got := l.Infer(x, &ws)
		gotLN := ln.Infer(got, &ws)
		gotG := GELUInfer(gotLN, &ws)
		for _, c := range []struct {
			name      string
			got, want *Tensor
		}{{"Linear", got, want}, {"LayerNorm", gotLN, wantLN}, {"GELU", gotG, wantG}} {
			for i := range c.want.Data {
				if c.got.Data[i] != c.want.Data[i] {
					t.Fatalf("bias %v: %s value %d: %v from a used workspace, %v from Forward", bias, c.name, i, c.got.Data[i], c.want.Data[i])
				}
			}
		}
	}
}

// TestWorkspacesKeep: a workspace given back is handed out again, after
// garbage collections too (which empty a sync.Pool), with the memory it grew,
// and concurrent calls each get one of their own.
func TestWorkspacesKeep(t *testing.T) {
	var p Workspaces
	w := p.Get()
	data := w.NewUninit(64, 128).Data
	p.Put(w)
	runtime.GC()
	runtime.GC()
	got := p.Get()
	if got != w {
		t.Fatal("Get after two collections: a new workspace, want the one given back")
	}
	got.Reset()
	if d := got.NewUninit(32, 128).Data; &d[0] != &data[0] {
		t.Error("the workspace given back lends new memory, want the memory it grew")
	}
	if other := p.Get(); other == w {
		t.Error("Get handed out a workspace in use")
	}
	p.Put(got)
	var wg sync.WaitGroup
	var mu sync.Mutex
	inUse := map[*Workspace]bool{}
	for range 8 {
		wg.Go(func() {
			for range 100 {
				w := p.Get()
				mu.Lock()
				if inUse[w] {
					t.Error("a workspace handed to two callers at once")
				}
				inUse[w] = true
				mu.Unlock()
				w.Reset()
				w.New(4, 4)
				mu.Lock()
				delete(inUse, w)
				mu.Unlock()
				p.Put(w)
			}
		})
	}
	wg.Wait()
}
