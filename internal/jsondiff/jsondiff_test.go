package jsondiff

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

// Diff names each difference by its path: numbers beyond the tolerance
// (relative, absolute below 1), keys on either side, lengths, strings; an
// ignored key is not compared.
func TestDiff(t *testing.T) {
	decode := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := `{"a": 100, "b": [0, "x"], "seconds": 3}`
	for _, tc := range []struct {
		got    string
		ignore []string
		diffs  []string
	}{
		{`{"a": 100.00001, "b": [1e-7, "x"], "seconds": 3}`, nil, nil},
		{`{"a": 100.001, "b": [0, "x"], "seconds": 9}`, []string{"seconds"}, []string{"r.a: 100.001, want 100"}},
		{`{"a": 100, "b": [0, "x"], "seconds": 9}`, nil, []string{"r.seconds: 9, want 3"}},
		{`{"a": 100, "b": [0, "y"], "seconds": 3, "c": 1}`, nil, []string{"r.c: only in the report compared", "r.b[1]: y, want x"}},
		{`{"b": [0], "seconds": 3}`, nil, []string{"r.a: missing", "r.b: [0], want [0 x]"}},
	} {
		got := Diff("r", decode(tc.got), decode(want), 1e-6, tc.ignore...)
		slices.Sort(got)
		slices.Sort(tc.diffs)
		if !slices.Equal(got, tc.diffs) {
			t.Errorf("%s: %q, want %q", tc.got, got, tc.diffs)
		}
	}
	if !Close(math.Inf(1), math.Inf(1), 0) || Close(1, 1.1, 1e-3) || !Close(0, 1e-7, 1e-6) {
		t.Error("Close: infinities, the relative and the absolute tolerance")
	}
}
