// Package jsonfloat is the one JSON encoding of nvdp's float64 results that
// may be infinite or NaN (a Renyi bound that is +Inf, an epsilon that is
// undefined). JSON numbers cannot hold them, so Float writes them as the
// strings of the Protocol Buffers JSON mapping, "Infinity", "-Infinity" and
// "NaN", and reads them back: every value round-trips exactly.
//
// JSON null is not a value of Float: it is left for "not computed". A result
// that may be absent is a *Float with `omitempty`, so +Inf ("Infinity") and
// "not computed" (absent or null) can never be confused.
package jsonfloat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Float is a float64 whose JSON form round-trips ±Inf and NaN.
type Float float64

// The string forms of the non-finite values (Protocol Buffers JSON mapping).
const (
	PosInf = "Infinity"
	NegInf = "-Infinity"
	NaN    = "NaN"
)

// New returns a pointer to v as a Float (for optional fields).
func New(v float64) *Float { f := Float(v); return &f }

// Value returns the float64 of a possibly nil *Float and whether it was set.
func Value(f *Float) (float64, bool) {
	if f == nil {
		return 0, false
	}
	return float64(*f), true
}

// MarshalJSON writes finite values as JSON numbers (shortest form that
// parses back to the same float64) and ±Inf, NaN as "Infinity",
// "-Infinity", "NaN".
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"` + NaN + `"`), nil
	case math.IsInf(v, 1):
		return []byte(`"` + PosInf + `"`), nil
	case math.IsInf(v, -1):
		return []byte(`"` + NegInf + `"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON reads a JSON number or one of the strings "Infinity",
// "-Infinity", "NaN" (also Go's "+Inf", "-Inf", "Inf"). null leaves f
// unchanged (encoding/json's convention; optional values are *Float and
// become nil). Anything else, including a number out of float64 range, is an
// error.
func (f *Float) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("jsonfloat: %w", err)
		}
		switch s {
		case PosInf, "+Infinity", "+Inf", "Inf":
			*f = Float(math.Inf(1))
		case NegInf, "-Inf":
			*f = Float(math.Inf(-1))
		case NaN:
			*f = Float(math.NaN())
		default:
			return fmt.Errorf("jsonfloat: string %q is not %q, %q or %q", s, PosInf, NegInf, NaN)
		}
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("jsonfloat: %s is not a number or a non-finite string: %w", truncate(b), err)
	}
	v, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return fmt.Errorf("jsonfloat: %s: %w", truncate(b), err)
	}
	*f = Float(v)
	return nil
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
