// Package jsondiff compares decoded JSON values for tests: two reports of
// one computation made by different engines (the CPU and a GPU, a process
// and a pipeline) that agree up to the rounding of their numbers.
package jsondiff

import (
	"fmt"
	"math"
)

// Close reports whether a and b are equal (infinities included) or within
// tol relative of b (absolute below 1: a value of 0 in exact arithmetic is
// a rounding error of either sign).
func Close(a, b, tol float64) bool {
	return a == b || math.Abs(a-b) <= tol*max(math.Abs(b), 1)
}

// Diff lists where the decoded JSON values got and want differ, each with
// its path below path: keys, strings, booleans and lengths exactly, numbers
// by more than tol (Close). Object keys named in ignore are not compared
// (in want; a key only in got is still a difference).
func Diff(path string, got, want any, tol float64, ignore ...string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v, want an object", path, got)}
		}
		var d []string
		for k := range g {
			if _, ok := w[k]; !ok {
				d = append(d, fmt.Sprintf("%s.%s: only in the report compared", path, k))
			}
		}
	keys:
		for k, v := range w {
			for _, skip := range ignore {
				if k == skip {
					continue keys
				}
			}
			if _, ok := g[k]; !ok {
				d = append(d, fmt.Sprintf("%s.%s: missing", path, k))
				continue
			}
			d = append(d, Diff(path+"."+k, g[k], v, tol, ignore...)...)
		}
		return d
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
		}
		var d []string
		for i := range w {
			d = append(d, Diff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i], tol, ignore...)...)
		}
		return d
	case float64:
		g, ok := got.(float64)
		if !ok || !Close(g, w, tol) {
			return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
		}
		return nil
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
	}
	return nil
}
