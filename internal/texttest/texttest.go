// Package texttest checks text a command or a report writes, for the tests of the packages whose
// types render themselves (WriteText) and of the CLI.
package texttest

import (
	"strings"
	"testing"
)

// InOrder fails tb, naming the case name, when s does not hold each string of want after the
// previous one; it reports the first one missing and stops there.
func InOrder(tb testing.TB, name, s string, want []string) {
	tb.Helper()
	at := 0
	for _, w := range want {
		i := strings.Index(s[at:], w)
		if i < 0 {
			tb.Errorf("%s: %q not found after byte %d in\n%s", name, w, at, s)
			return
		}
		at += i + len(w)
	}
}

// Absent fails tb, naming the case name, for each string of absent that s holds.
func Absent(tb testing.TB, name, s string, absent []string) {
	tb.Helper()
	for _, a := range absent {
		if strings.Contains(s, a) {
			tb.Errorf("%s: has %q:\n%s", name, a, s)
		}
	}
}

// Contains fails tb when out lacks a string of want or holds one of absent, and then logs out.
func Contains(tb testing.TB, out string, want, absent []string) {
	tb.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			tb.Errorf("output lacks %q", w)
		}
	}
	for _, a := range absent {
		if strings.Contains(out, a) {
			tb.Errorf("output has %q", a)
		}
	}
	if tb.Failed() {
		tb.Logf("output:\n%s", out)
	}
}
