package option

import (
	"errors"
	"math"
	"testing"
)

type mode string

func TestError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{Errorf("batch_size", 0, "must be >= %d", 1), "batch_size 0: must be >= 1"},
		{Errorf("corpus", nil, "required"), "corpus: required"},
		{Errorf("vocab", "/x y", "missing"), `vocab "/x y": missing`},
		{Errorf("mode", mode("other"), "want one of a, b"), `mode "other": want one of a, b`},
		{Errorf("grad_clip", math.NaN(), "must be a finite number"), "grad_clip NaN: must be a finite number"},
		{Errorf("lr", 5e-4, "x"), "lr 0.0005: x"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
		var oe *Error
		if !errors.As(tc.err, &oe) || oe.Option == "" {
			t.Errorf("%v is not an *Error", tc.err)
		}
	}
}

func TestAuto(t *testing.T) {
	if !IsAuto(Auto()) || IsAuto(0) || IsAuto(math.Inf(1)) {
		t.Error("IsAuto: only Auto is Auto")
	}
	if AutoInt >= 0 {
		t.Errorf("AutoInt %d is a valid count", AutoInt)
	}
}

// TestResolve: Auto takes the default; a given value, 0 included, stays.
func TestResolve(t *testing.T) {
	for _, tc := range []struct{ v, def, want float64 }{{Auto(), 3, 3}, {0, 3, 0}, {-1.5, 3, -1.5}} {
		v := tc.v
		Resolve(&v, tc.def)
		if v != tc.want {
			t.Errorf("Resolve(%v, %v) = %v, want %v", tc.v, tc.def, v, tc.want)
		}
	}
}
