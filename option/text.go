package option

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// FormatFloat writes the float option v as text, as a command line gives
// it: word ("auto", "none") for [Auto], else the shortest decimal that
// [ParseFloat] reads back as v.
func FormatFloat(v float64, word string) string {
	if IsAuto(v) {
		return word
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// ParseFloat reads the text of a float option that [FormatFloat] writes:
// word is [Auto], and every other number, 0 and negatives included, is
// returned as it is for the options' Validate (an explicit 0 is never
// [Auto]). It reports false for other text, for NaN, and for ±Inf when
// finite.
func ParseFloat(s, word string, finite bool) (float64, bool) {
	if s == word {
		return Auto(), true
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && !math.IsNaN(v) && !(finite && math.IsInf(v, 0))
}

// FormatCount writes the count option v: "auto" for [AutoInt], else the
// integer.
func FormatCount(v int) string {
	if v == AutoInt {
		return "auto"
	}
	return strconv.Itoa(v)
}

// ParseCount reads the text of a count option that [FormatCount] writes:
// "auto" ([AutoInt]) or an integer >= 0; other text is an error.
func ParseCount(s string) (int, error) {
	if s == "auto" {
		return AutoInt, nil
	}
	if v, err := strconv.Atoi(s); err == nil && v >= 0 {
		return v, nil
	}
	return 0, fmt.Errorf("%q is neither a count >= 0 nor auto", s)
}

// FormatIntPtr writes an integer option whose default is derived and that
// is nil until set (model.Options.LatentDim): "auto" for nil, else the
// integer.
func FormatIntPtr(v *int) string {
	if v == nil {
		return "auto"
	}
	return strconv.Itoa(*v)
}

// ParseIntPtr reads the text that [FormatIntPtr] writes: "auto" is nil,
// every other integer, 0 and negatives included, is returned for the
// options' Validate; other text is an error.
func ParseIntPtr(s string) (*int, error) {
	if s == "auto" {
		return nil, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return nil, fmt.Errorf("%q is neither an integer nor auto", s)
	}
	return &v, nil
}

// ParseList splits the comma-separated list s into its non-empty, trimmed
// items; a list without any is an error.
func ParseList(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// ParseListOf parses every item of the comma-separated list s ([ParseList])
// with parse; an item it rejects is an error quoting the item and saying it
// is not want.
func ParseListOf[T any](s, want string, parse func(string) (T, error)) ([]T, error) {
	items, err := ParseList(s)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(items))
	for i, f := range items {
		if out[i], err = parse(f); err != nil {
			return nil, fmt.Errorf("%q is not %s", f, want)
		}
	}
	return out, nil
}

// ParseFloats parses a comma-separated list of numbers ([ParseListOf]).
func ParseFloats(s string) ([]float64, error) {
	return ParseListOf(s, "a number", func(f string) (float64, error) { return strconv.ParseFloat(f, 64) })
}

// ParseUints parses a comma-separated list of integers >= 0 ([ParseListOf]).
func ParseUints(s string) ([]uint64, error) {
	return ParseListOf(s, "a non-negative integer", func(f string) (uint64, error) { return strconv.ParseUint(f, 10, 64) })
}

// FormatFloats writes v as the comma-separated list that [ParseFloats]
// reads back, each number its shortest decimal.
func FormatFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}
