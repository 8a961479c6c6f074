package excerpt

import (
	"strings"
	"testing"
	"unicode/utf8"
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

// TestCutAndRunes (issue 32): the excerpts of serve's and privacy's errors
// (Cut) and report's tables (Runes) never split a UTF-8 character; ASCII
// excerpts are what the helpers they replace gave.
func TestCutAndRunes(t *testing.T) {
	long := strings.Repeat("a", 39) + "é" + "tail" // é is 2 bytes at offsets 39-40
	cases := []struct {
		name, got, want string
	}{
		{"short", Cut("abc", 40), "abc"},
		{"exact", Cut(strings.Repeat("x", 40), 40), strings.Repeat("x", 40)},
		{"ascii", Cut(strings.Repeat("x", 41), 40), strings.Repeat("x", 40) + "..."},
		{"utf8 boundary", Cut(long, 40), strings.Repeat("a", 39) + "..."},
		{"runes short", Runes("héllo", 20), "héllo"},
		{"runes long", Runes(strings.Repeat("é", 21), 20), strings.Repeat("é", 19) + "…"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
		if !utf8.ValidString(c.got) {
			t.Errorf("%s: %q is not valid UTF-8", c.name, c.got)
		}
	}
}
