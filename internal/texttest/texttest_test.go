package texttest

import (
	"fmt"
	"testing"
)

// recorder counts the failures a check reports instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}
func (r *recorder) Failed() bool                    { return len(r.errs) > 0 }
func (r *recorder) Logf(format string, args ...any) {}

// TestChecks: each check reports exactly the failures it should, and none on text that passes.
func TestChecks(t *testing.T) {
	const s = "model  m\nepsilon  8\nseconds  1\n"
	cases := []struct {
		name  string
		check func(tb testing.TB)
		fails int
	}{
		{"in order", func(tb testing.TB) { InOrder(tb, "c", s, []string{"model", "epsilon  8", "seconds"}) }, 0},
		{"out of order", func(tb testing.TB) { InOrder(tb, "c", s, []string{"epsilon", "model", "seconds"}) }, 1}, // stops at the first
		{"missing", func(tb testing.TB) { InOrder(tb, "c", s, []string{"delta"}) }, 1},
		{"absent", func(tb testing.TB) { Absent(tb, "c", s, []string{"delta", "gamma"}) }, 0},
		{"present", func(tb testing.TB) { Absent(tb, "c", s, []string{"model", "seconds", "delta"}) }, 2},
		{"contains", func(tb testing.TB) { Contains(tb, s, []string{"seconds", "epsilon"}, []string{"NaN"}) }, 0},
		{"lacks and has", func(tb testing.TB) { Contains(tb, s, []string{"delta", "model"}, []string{"epsilon"}) }, 2},
	}
	for _, c := range cases {
		r := &recorder{TB: t}
		c.check(r)
		if len(r.errs) != c.fails {
			t.Errorf("%s: %d failures %q, want %d", c.name, len(r.errs), r.errs, c.fails)
		}
	}
}
