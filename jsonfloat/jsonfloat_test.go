package jsonfloat

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func same(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {1.5, "1.5"}, {-2e-300, "-2e-300"}, {math.MaxFloat64, "1.7976931348623157e+308"},
		{math.SmallestNonzeroFloat64, "5e-324"}, {0.1, "0.1"},
		{math.Inf(1), `"Infinity"`}, {math.Inf(-1), `"-Infinity"`}, {math.NaN(), `"NaN"`},
	} {
		b, err := json.Marshal(Float(tc.v))
		if err != nil || string(b) != tc.want {
			t.Fatalf("Marshal(%v) = %s, %v; want %s", tc.v, b, err, tc.want)
		}
		var f Float
		if err := json.Unmarshal(b, &f); err != nil || !same(float64(f), tc.v) {
			t.Fatalf("Unmarshal(%s) = %v, %v; want %v", b, f, err, tc.v)
		}
	}
}

// TestNullIsNotComputed: an optional *Float distinguishes +Inf from absent
// and null.
func TestNullIsNotComputed(t *testing.T) {
	type rep struct {
		RD  *Float `json:"rd_max,omitempty"`
		Eps Float  `json:"eps"`
	}
	b, _ := json.Marshal(rep{RD: New(math.Inf(1)), Eps: 3})
	if string(b) != `{"rd_max":"Infinity","eps":3}` {
		t.Fatalf("got %s", b)
	}
	b, _ = json.Marshal(rep{})
	if string(b) != `{"eps":0}` {
		t.Fatalf("got %s", b)
	}
	for _, in := range []string{`{"rd_max":null,"eps":null}`, `{}`} {
		r := rep{Eps: 7}
		if err := json.Unmarshal([]byte(in), &r); err != nil || r.RD != nil || r.Eps != 7 {
			t.Fatalf("%s: %+v %v", in, r, err)
		}
	}
	var r rep
	if err := json.Unmarshal([]byte(`{"rd_max":"Infinity"}`), &r); err != nil {
		t.Fatal(err)
	}
	if v, ok := Value(r.RD); !ok || !math.IsInf(v, 1) {
		t.Fatalf("rd_max %v %v", v, ok)
	}
}

func TestUnmarshalErrors(t *testing.T) {
	for _, in := range []string{`"inf"`, `"1.5"`, `true`, `[1]`, `1e999`, `"Infinit"`, `{}`} {
		var f Float
		err := json.Unmarshal([]byte(in), &f)
		if err == nil {
			t.Errorf("%s: no error (got %v)", in, f)
		} else if !strings.Contains(err.Error(), "jsonfloat") && !strings.Contains(err.Error(), "cannot unmarshal") {
			t.Errorf("%s: error %v does not say what failed", in, err)
		}
	}
	for _, in := range []string{`"+Inf"`, `"Inf"`, `"+Infinity"`} {
		var f Float
		if err := json.Unmarshal([]byte(in), &f); err != nil || !math.IsInf(float64(f), 1) {
			t.Errorf("%s: %v %v", in, f, err)
		}
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"0", "1e308", `"NaN"`, `"Infinity"`, "-0", "null", `"x"`, "1e999"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v Float
		if err := json.Unmarshal(b, &v); err != nil {
			return
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("marshal %v: %v", v, err)
		}
		var w Float
		if err := json.Unmarshal(out, &w); err != nil || !same(float64(v), float64(w)) {
			t.Fatalf("%s -> %v -> %s -> %v (%v)", b, v, out, w, err)
		}
	})
}
