package privacy

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestTargetValidate: a target has a kind, and the kind's value is finite
// and > 0: an explicit 0 epsilon or RD is an error naming the field, never
// "no target", and so is the zero Target; the other kind's value must be
// unset. Calibrate refuses the same targets before any work.
func TestTargetValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Target
		want string // "": valid
	}{
		{"epsilon 8", EpsilonTarget(8, 1e-5, 1), ""},
		{"RD 3 at order 2, 4 releases", RDTarget(3, 2, 4), ""},
		{"RD with the guarantee's delta", Target{Kind: KindRD, RD: 3, Order: 1.1, Delta: 1e-6, Releases: 1}, ""},
		{"zero value", Target{}, "target: no kind"},
		{"epsilon 0", EpsilonTarget(0, 1e-5, 1), "target: epsilon 0: want a finite value > 0"},
		{"RD 0", RDTarget(0, 1.1, 1), "target: RD 0: want a finite value > 0"},
		{"negative epsilon", EpsilonTarget(-1, 1e-5, 1), "target: epsilon -1: want a finite value > 0"},
		{"negative RD", RDTarget(-2, 1.1, 1), "target: RD -2: want a finite value > 0"},
		{"NaN epsilon", EpsilonTarget(math.NaN(), 1e-5, 1), "target: epsilon NaN"},
		{"infinite RD", RDTarget(math.Inf(1), 1.1, 1), "target: RD +Inf"},
		{"delta 0", EpsilonTarget(8, 0, 1), "target: epsilon 8: delta 0: must be in (0, 1)"},
		{"delta 1", EpsilonTarget(8, 1, 1), "target: epsilon 8: delta 1: must be in (0, 1)"},
		{"RD's delta 2", Target{Kind: KindRD, RD: 3, Order: 1.1, Delta: 2, Releases: 1}, "target: RD 3: delta 2: must be in (0, 1)"},
		{"order 1", RDTarget(3, 1, 1), "target: RD 3: Renyi order lambda = 1"},
		{"no releases", EpsilonTarget(8, 1e-5, 0), "target: releases = 0"},
		{"epsilon kind with an RD", Target{Kind: KindEpsilon, Epsilon: 8, Delta: 1e-5, RD: 3, Releases: 1}, "epsilon target with RD 3: give exactly one"},
		{"RD kind with an epsilon", Target{Kind: KindRD, RD: 3, Order: 1.1, Epsilon: 8, Releases: 1}, "RD target with epsilon 8: give exactly one"},
		{"epsilon without a kind", Target{Epsilon: 8, Delta: 1e-5, Releases: 1}, "target: no kind"},
		{"unknown kind", Target{Kind: "renyi", RD: 3, Order: 1.1, Releases: 1}, `target: kind "renyi"`},
	} {
		err := tc.t.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
		if cal, err := Calibrate(mainJobSet(), tc.t, Split{}, nil, ""); err == nil || cal != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Calibrate = %v, %v; want the error %q", tc.name, cal, err, tc.want)
		}
	}
}

// TestTargetJSON: a target is written with its kind and reads back
// unchanged; a target written before the kind (certificate.json of older
// runs: no "kind" key) reads with the kind of its value, and so does the
// calibration that holds it.
func TestTargetJSON(t *testing.T) {
	for _, want := range []Target{EpsilonTarget(8, 1e-5, 2), RDTarget(4, 2, 1)} {
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"kind":"`+string(want.Kind)+`"`) {
			t.Errorf("%+v as JSON: %s, want its kind", want, b)
		}
		var got Target
		if err := json.Unmarshal(b, &got); err != nil || got != want {
			t.Errorf("%s read back as %+v, %v; want %+v", b, got, err, want)
		}
	}
	for _, tc := range []struct {
		json string
		want Target
	}{
		{`{"epsilon":8,"delta":0.00001,"order":1.1,"releases":1}`, Target{Kind: KindEpsilon, Epsilon: 8, Delta: 1e-5, Order: 1.1, Releases: 1}},
		{`{"delta":0.00001,"rd":4,"order":2,"releases":3}`, Target{Kind: KindRD, RD: 4, Delta: 1e-5, Order: 2, Releases: 3}},
		{`{"releases":1}`, Target{Releases: 1}}, // no value: no kind, which Validate refuses
	} {
		var got Target
		if err := json.Unmarshal([]byte(tc.json), &got); err != nil || got != tc.want {
			t.Errorf("old target %s read as %+v, %v; want %+v", tc.json, got, err, tc.want)
		}
		if err := got.Validate(); (err == nil) != (tc.want.Kind != "") {
			t.Errorf("old target %s: Validate = %v", tc.json, err)
		}
		var cal Calibration
		old := `{"target":` + tc.json + `,"split":{"variance_share":0,"dirichlet_share":0},"order":1.1,"guarantee":null,"achieved":3.9}`
		if err := json.Unmarshal([]byte(old), &cal); err != nil || cal.Target != tc.want || cal.Achieved != 3.9 {
			t.Errorf("old calibration %s read as %+v, %v; want target %+v", old, cal, err, tc.want)
		}
	}
	var bad Target
	if err := json.Unmarshal([]byte(`{"kind":"epsilon","epsilon":"8"}`), &bad); err == nil {
		t.Errorf("a string epsilon read as %+v", bad)
	}
}
