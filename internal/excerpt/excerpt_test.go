package excerpt

import (
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", `""`},
		{"a\tb\r", `"a\tb\r"`},
		{strings.Repeat("x", MaxBytes), `"` + strings.Repeat("x", MaxBytes) + `"`},
		{strings.Repeat("x", MaxBytes+1), `"` + strings.Repeat("x", MaxBytes) + `"... (61 bytes)`},
		// "é" is 2 bytes: byte 60 is inside the 30th é, so the cut moves back to byte 58.
		{"x" + strings.Repeat("é", 40), `"x` + strings.Repeat("é", 29) + `"... (81 bytes)`},
	}
	for _, c := range cases {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%.20q...) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestList(t *testing.T) {
	if got := List([]string{"a", "b", "c"}, 2); got != `"a" "b" ... (3 in all)` {
		t.Errorf("List = %s", got)
	}
	if got := List([]string{"a", "b"}, 2); got != `"a" "b"` {
		t.Errorf("List = %s", got)
	}
	if got := List(nil, 2); got != "" {
		t.Errorf("List(nil) = %q", got)
	}
}
