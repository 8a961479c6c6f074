package option

import (
	"errors"
	"strings"
	"testing"
)

// TestCombinationError: a program names each option of the error its own
// way, in the order of Options; Error writes the JSON keys.
func TestCombinationError(t *testing.T) {
	err := Combination("%s and %s: give one", "keys", "keys_in_ledger")
	var e *CombinationError
	if !errors.As(err, &e) {
		t.Fatalf("%T is not a *CombinationError", err)
	}
	if got := e.With(func(o string) string { return "--" + strings.ReplaceAll(o, "_", "-") }); got != "--keys and --keys-in-ledger: give one" {
		t.Errorf("With = %q", got)
	}
	if got := err.Error(); got != "keys and keys_in_ledger: give one" {
		t.Errorf("Error = %q", got)
	}
}

// TestGiven: a nil Given gives nothing; Any is the first given of its
// names, in their order.
// Escape keeps text spliced into a format literal: a path with %s and %d
// in it is written as it is, the options still named where their %s are.
func TestEscape(t *testing.T) {
	err := Combination("%s "+Escape("runs/100%s %d%")+" and %s", "out", "resume")
	if got, want := err.Error(), "out runs/100%s %d% and resume"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestGiven(t *testing.T) {
	var none Given
	if none.Has("x") {
		t.Error("nil Given has x")
	}
	if n, ok := none.Any("x", "y"); ok || n != "" {
		t.Errorf("nil Given: Any = %q, %v", n, ok)
	}
	g := GivenNames("b", "c")
	for _, n := range []string{"a", "b", "c", "bc", ""} {
		if g.Has(n) != (n == "b" || n == "c") {
			t.Errorf("GivenNames(b, c).Has(%q) = %v", n, g.Has(n))
		}
	}
	for _, tc := range []struct {
		names []string
		want  string
	}{{[]string{"a", "b", "c"}, "b"}, {[]string{"c", "b"}, "c"}, {[]string{"a"}, ""}} {
		if n, ok := g.Any(tc.names...); n != tc.want || ok != (tc.want != "") {
			t.Errorf("Any(%v) = %q, %v, want %q", tc.names, n, ok, tc.want)
		}
	}
}
