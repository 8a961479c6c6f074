package option

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestParseFloat: the word is Auto, any other number is kept as given (0
// and negatives too: the options' Validate judges them), NaN is refused, and
// ±Inf where the option is finite; FormatFloat writes what ParseFloat reads.
func TestParseFloat(t *testing.T) {
	for _, tc := range []struct {
		s, word string
		finite  bool
		want    float64 // NaN: Auto
		ok      bool
	}{
		{"auto", "auto", true, math.NaN(), true},
		{"none", "none", false, math.NaN(), true},
		{"none", "auto", true, 0, false},
		{"0", "auto", true, 0, true},
		{"-1.5", "none", false, -1.5, true},
		{"1e-3", "auto", true, 1e-3, true},
		{"nan", "auto", true, 0, false},
		{"NaN", "none", false, 0, false},
		{"inf", "auto", true, 0, false},
		{"-Inf", "auto", true, 0, false},
		{"inf", "none", false, math.Inf(1), true},
		{"", "auto", true, 0, false},
		{"x", "none", false, 0, false},
	} {
		v, ok := ParseFloat(tc.s, tc.word, tc.finite)
		if ok != tc.ok || ok && !(v == tc.want || math.IsNaN(v) && math.IsNaN(tc.want)) {
			t.Errorf("ParseFloat(%q, %q, %v) = %v, %v; want %v, %v", tc.s, tc.word, tc.finite, v, ok, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		v    float64
		want string
	}{{Auto(), "none"}, {0, "0"}, {-1.5, "-1.5"}, {1e-3, "0.001"}, {8, "8"}, {math.Inf(1), "+Inf"}} {
		if got := FormatFloat(tc.v, "none"); got != tc.want {
			t.Errorf("FormatFloat(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestParseCount: "auto" is AutoInt, counts >= 0 are kept, a negative count
// (AutoInt itself among them) and other text are errors.
func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
		err  string
	}{
		{"auto", AutoInt, ""},
		{"0", 0, ""},
		{"12", 12, ""},
		{"-1", 0, `"-1" is neither a count >= 0 nor auto`},
		{"1.5", 0, `"1.5" is neither a count >= 0 nor auto`},
	} {
		v, err := ParseCount(tc.s)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseCount(%q) = %v, %v; want error %q", tc.s, v, err, tc.err)
			}
			continue
		}
		if err != nil || v != tc.want || FormatCount(v) != tc.s {
			t.Errorf("ParseCount(%q) = %v, %v; FormatCount %q", tc.s, v, err, FormatCount(v))
		}
	}
}

// TestParseIntPtr: "auto" is nil, every integer is kept (0 and negatives
// for Validate), other text is an error; FormatIntPtr writes it back.
func TestParseIntPtr(t *testing.T) {
	for _, s := range []string{"auto", "0", "-3", "128"} {
		v, err := ParseIntPtr(s)
		if err != nil || (s == "auto") != (v == nil) || FormatIntPtr(v) != s {
			t.Errorf("ParseIntPtr(%q) = %v, %v; FormatIntPtr %q", s, v, err, FormatIntPtr(v))
		}
	}
	if _, err := ParseIntPtr("x"); err == nil || err.Error() != `"x" is neither an integer nor auto` {
		t.Errorf("ParseIntPtr(x): %v", err)
	}
}

// TestParseLists: items are trimmed and empty ones dropped; an empty list
// and an item that does not parse are errors that quote the item.
func TestParseLists(t *testing.T) {
	if got, err := ParseFloats(" 1e-3, 1e-2,,1 "); err != nil || !slices.Equal(got, []float64{1e-3, 1e-2, 1}) {
		t.Errorf("floats: %v, %v", got, err)
	}
	if s := FormatFloats([]float64{0.05, 1.1, 2, 1e-7}); s != "0.05,1.1,2,1e-07" {
		t.Errorf("FormatFloats: %q", s)
	} else if got, err := ParseFloats(s); err != nil || !slices.Equal(got, []float64{0.05, 1.1, 2, 1e-7}) {
		t.Errorf("FormatFloats does not read back: %v, %v", got, err)
	}
	if got, err := ParseUints("1,2,3"); err != nil || !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("uints: %v, %v", got, err)
	}
	if got, err := ParseList(" sst2 ,rte,"); err != nil || !slices.Equal(got, []string{"sst2", "rte"}) {
		t.Errorf("strings: %v, %v", got, err)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{func() error { _, err := ParseUints("1,-2"); return err }(), `"-2" is not a non-negative integer`},
		{func() error { _, err := ParseFloats("0.1,x"); return err }(), `"x" is not a number`},
		{func() error { _, err := ParseList(" , "); return err }(), "empty list"},
		{func() error { _, err := ParseFloats(""); return err }(), "empty list"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("error %v, want %q", tc.err, tc.want)
		}
	}
}

// FuzzParseText: the option parsers never panic, and what they accept their Format twin writes
// back to text they read as the same value (NaN never accepted; ±Inf only when not finite).
func FuzzParseText(f *testing.F) {
	for _, s := range []string{"auto", "none", "0", "-1.5", "1e308", "inf", "-Inf", "NaN", "3,4, 5", ",", "", " 7 ", "0x10", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, finite := range []bool{true, false} {
			if v, ok := ParseFloat(s, "auto", finite); ok {
				if !IsAuto(v) && (math.IsNaN(v) || finite && math.IsInf(v, 0)) {
					t.Fatalf("ParseFloat(%q, finite %v) accepted %v", s, finite, v)
				}
				if w, ok := ParseFloat(FormatFloat(v, "auto"), "auto", finite); !ok || math.Float64bits(w) != math.Float64bits(v) && !(IsAuto(v) && IsAuto(w)) {
					t.Fatalf("ParseFloat(FormatFloat(%v)) = %v, %v", v, w, ok)
				}
			}
		}
		if v, err := ParseCount(s); err == nil {
			if w, err := ParseCount(FormatCount(v)); err != nil || w != v || v < 0 && v != AutoInt {
				t.Fatalf("ParseCount(%q) = %d; round trip %d, %v", s, v, w, err)
			}
		}
		if v, err := ParseIntPtr(s); err == nil {
			if w, err := ParseIntPtr(FormatIntPtr(v)); err != nil || (v == nil) != (w == nil) || v != nil && *v != *w {
				t.Fatalf("ParseIntPtr(%q) round trip: %v, %v", s, w, err)
			}
		}
		if v, err := ParseFloats(s); err == nil {
			if len(v) == 0 {
				t.Fatalf("ParseFloats(%q) accepted an empty list", s)
			}
			if w, err := ParseFloats(FormatFloats(v)); err != nil || len(w) != len(v) {
				t.Fatalf("ParseFloats(FormatFloats(%v)) = %v, %v", v, w, err)
			}
		}
		if items, err := ParseList(s); err == nil {
			for _, it := range items {
				if it == "" || strings.Contains(it, ",") || strings.TrimSpace(it) != it {
					t.Fatalf("ParseList(%q) gave the item %q", s, it)
				}
			}
		}
	})
}
