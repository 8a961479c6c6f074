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
