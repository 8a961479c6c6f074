package option

import (
	"errors"
	"fmt"
	"math"
	"strings"
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
		{Errorf("out", Show("/a b"), "x"), "out /a b: x"},
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

// TestReasonWith: the options a reason mentions are renamed where they
// are whole words, every time, and nowhere else (not inside a longer name,
// not a mention the reason does not have); the Error's own text keeps the
// options file's names.
func TestReasonWith(t *testing.T) {
	flag := func(o string) string { return "--" + strings.ReplaceAll(o, "_", "-") }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{MentionErrorf([]string{"hand_set_clipping"}, "target_epsilon", nil, "required: a target, or hand_set_clipping"),
			"required: a target, or --hand-set-clipping"},
		{MentionErrorf([]string{"target_epsilon"}, "hand_set_clipping", nil, "and a target (target_epsilon 8) are both given: give one"),
			"and a target (--target-epsilon 8) are both given: give one"},
		{MentionErrorf([]string{"target_epsilon", "target_rd"}, "x", nil, "target_epsilons, target_epsilon or target_rd; target_epsilon_x, xtarget_rd"),
			"target_epsilons, --target-epsilon or --target-rd; target_epsilon_x, xtarget_rd"},
		{MentionErrorf([]string{"c_mu"}, "x", nil, "c_mu and c_mu again"), "--c-mu and --c-mu again"},
		{MentionErrorf([]string{"lr"}, "x", nil, "no mention here"), "no mention here"},
		{Errorf("batch_size", 0, "as batch_size says"), "as batch_size says"},
	} {
		var oe *Error
		if !errors.As(tc.err, &oe) {
			t.Fatalf("%v is not an *Error", tc.err)
		}
		if got := oe.ReasonWith(flag); got != tc.want {
			t.Errorf("ReasonWith = %q, want %q", got, tc.want)
		}
		if got := tc.err.Error(); got != oe.Option+FormatValue(oe.Value)+": "+oe.Reason {
			t.Errorf("Error() = %q renames the mentions", got)
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

// TestWrap: the reason is the wrapped error's message, which errors.Is
// still finds; nil stays nil.
func TestWrap(t *testing.T) {
	cause := errors.New("no such file")
	err := Wrap("model", fmt.Errorf("read m: %w", cause))
	var oe *Error
	if !errors.As(err, &oe) || oe.Option != "model" || err.Error() != "model: read m: no such file" {
		t.Errorf("Wrap = %v", err)
	}
	if !errors.Is(err, cause) {
		t.Error("the cause is lost")
	}
	if Wrap("model", nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}
