package option

import (
	"math"
	"slices"
	"testing"
)

// TestDifferences: the options of two values of one struct type that
// differ, by JSON key in field order: pointers, nested structs, slices and
// maps by value, NaN (Auto) equal to NaN, untagged fields by their Go
// name, "-" and unexported fields never.
func TestDifferences(t *testing.T) {
	type inner struct {
		A float64
		B []int
	}
	type opts struct {
		Name    string            `json:"name"`
		LR      float64           `json:"lr"`
		Width   *int              `json:"width,omitempty"`
		In      *inner            `json:"in"`
		Tags    map[string]string `json:"tags"`
		Plain   int
		Runtime int `json:"-"`
		hidden  int
	}
	one, two := 1, 2
	base := func() opts {
		return opts{Name: "a", LR: math.NaN(), Width: &one, In: &inner{A: math.NaN(), B: []int{1}}, Tags: map[string]string{"k": "v"}}
	}
	for _, tc := range []struct {
		name string
		mod  func(o *opts)
		want []string
	}{
		{"same (NaN, pointers to equal values)", func(o *opts) { w := 1; o.Width = &w; o.In = &inner{A: math.NaN(), B: []int{1}} }, nil},
		{"name and lr", func(o *opts) { o.Name, o.LR = "b", 0.5 }, []string{"name", "lr"}},
		{"pointer nil", func(o *opts) { o.Width = nil }, []string{"width"}},
		{"pointer value", func(o *opts) { o.Width = &two }, []string{"width"}},
		{"nested", func(o *opts) { o.In.B = []int{1, 2} }, []string{"in"}},
		{"map", func(o *opts) { o.Tags = map[string]string{"k": "w"} }, []string{"tags"}},
		{"untagged", func(o *opts) { o.Plain = 3 }, []string{"Plain"}},
		{"not options", func(o *opts) { o.Runtime, o.hidden = 3, 4 }, nil},
	} {
		saved, given := base(), base()
		tc.mod(&given)
		var keys []string
		for _, d := range Differences(&saved, given) {
			keys = append(keys, d.Option)
		}
		if !slices.Equal(keys, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, keys, tc.want)
		}
	}
	saved, given := base(), base()
	given.LR = 0.5
	if d := Differences(saved, &given); len(d) != 1 || !math.IsNaN(d[0].Saved.(float64)) || d[0].Given != 0.5 {
		t.Errorf("values of lr: %+v", d)
	}
	defer func() {
		if recover() == nil {
			t.Error("no panic for two types")
		}
	}()
	Differences(saved, inner{})
}

// TestKeys: the JSON keys of the exported fields in order, the Go name of
// an untagged one, none for "-" or unexported fields.
func TestKeys(t *testing.T) {
	type opts struct {
		Name    string  `json:"name"`
		LR      float64 `json:"lr,omitempty"`
		Plain   int
		Runtime int `json:"-"`
		hidden  int
	}
	if got := Keys(&opts{}); !slices.Equal(got, []string{"name", "lr", "Plain"}) {
		t.Errorf("Keys = %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("no panic for a non-struct")
		}
	}()
	Keys(3)
}
