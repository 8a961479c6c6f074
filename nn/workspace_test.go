package nn

import "testing"

// A workspace lends zeroed tensors of the shapes asked, the k-th of a pass in the k-th's memory of
// the last (grown when too small), and a nil workspace allocates.
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
	var nilWS *Workspace
	nilWS.Reset()
	if x := nilWS.New(2, 2); len(x.Data) != 4 || nilWS.Bytes() != 0 || len(nilWS.Floats(3)) != 3 {
		t.Errorf("nil workspace: New gave %d values, Bytes %d", len(x.Data), nilWS.Bytes())
	}
}
