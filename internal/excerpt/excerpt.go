// Package excerpt quotes bounded excerpts of input text for error messages, so that an error
// about a huge line, field or token (a CR-only file read as one line, a corrupt vocabulary)
// stays short.
package excerpt

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxBytes bounds how many bytes of the input Quote keeps.
const MaxBytes = 60

// Quote returns s as a Go-quoted string when it has at most MaxBytes bytes, else its first
// MaxBytes bytes (cut on a rune boundary), quoted, followed by "... (N bytes)".
func Quote(s string) string {
	if len(s) <= MaxBytes {
		return strconv.Quote(s)
	}
	cut := MaxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// List quotes at most max items with Quote, space-separated, and says how many there are
// when it leaves some out.
func List(items []string, max int) string {
	out := ""
	for i, it := range items[:min(len(items), max)] {
		if i > 0 {
			out += " "
		}
		out += Quote(it)
	}
	if len(items) > max {
		out += fmt.Sprintf(" ... (%d in all)", len(items))
	}
	return out
}

// Cut returns s when it has at most maxBytes bytes, else its longest prefix
// of at most maxBytes bytes that ends on a character boundary, followed by
// "...": never half a UTF-8 character.
func Cut(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	cut := maxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Runes returns s when it has at most n characters, else its first n-1
// characters followed by "…" (n characters in all, for tables).
func Runes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
