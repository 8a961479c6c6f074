package privacy

import (
	"errors"
	"slices"
	"testing"

	"github.com/nvdp-project/nvdp/option"
)

// TestClipSetResolve: the constants without a default are required, the
// logvar range is derived from the margin (at the certificate's order
// unless clip_order is given) or explicit, never both, and what is not
// given of the explicit range is dropped.
func TestClipSetResolve(t *testing.T) {
	required := []string{"components", "dims", "c_mu", "c_alpha_min", "c_alpha_max"}
	set := mainJobSet()
	set.ClipOrder = 3 // the flag's value: used only where given
	set.LogvarFloor, set.LogvarCap = []float64{-1}, []float64{0}
	for _, tc := range []struct {
		name     string
		given    []string
		want     []string // the combination's options; nil: valid
		order    float64  // valid: the clip order resolved
		explicit bool     // valid: an explicit range
	}{
		{"all required", nil, nil, 2, false},
		{"clip order given", []string{"clip_order"}, nil, 3, false},
		{"margin given", []string{"logvar_margin"}, nil, 2, false},
		{"explicit range", []string{"logvar_floor", "logvar_cap"}, nil, 0, true},
		{"margin and range", []string{"logvar_floor", "logvar_margin"}, []string{"logvar_margin", "logvar_floor", "logvar_cap"}, 0, false},
		{"clip order and range", []string{"logvar_cap", "clip_order"}, []string{"clip_order", "logvar_margin", "logvar_floor", "logvar_cap"}, 0, false},
	} {
		got, err := set.Resolve(option.GivenNames(append(slices.Clone(required), tc.given...)...), 2)
		var ce *option.CombinationError
		switch {
		case tc.want != nil:
			if !errors.As(err, &ce) || !slices.Equal(ce.Options, tc.want) {
				t.Errorf("%s: %v, want a combination of %q", tc.name, err, tc.want)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case got.ClipOrder != tc.order || (got.LogvarFloor != nil) != tc.explicit || (got.LogvarCap != nil) != tc.explicit:
			t.Errorf("%s: clip order %v, floor %v, cap %v", tc.name, got.ClipOrder, got.LogvarFloor, got.LogvarCap)
		case tc.explicit && got.LogvarMargin != 0:
			t.Errorf("%s: margin %v kept with an explicit range", tc.name, got.LogvarMargin)
		}
	}
	for i, c := range required {
		_, err := set.Resolve(option.GivenNames(slices.Delete(slices.Clone(required), i, i+1)...), 2)
		var ce *option.CombinationError
		if !errors.As(err, &ce) || !slices.Equal(ce.Options, []string{c, "model"}) || err.Error() != c+" is required (or model DIR)" {
			t.Errorf("without %s: %v", c, err)
		}
	}
	// one given of the explicit pair: Validate names the other
	_, err := set.Resolve(option.GivenNames(append(slices.Clone(required), "logvar_floor")...), 2)
	var oe *option.Error
	if !errors.As(err, &oe) || oe.Option != "logvar_cap" {
		t.Errorf("floor without cap: %v", err)
	}
	// the resolved set is validated
	bad := set
	bad.CMu = -1
	if _, err := bad.Resolve(option.GivenNames(required...), 2); !errors.As(err, &oe) || oe.Option != "c_mu" {
		t.Errorf("C_mu -1: %v", err)
	}
}

// TestNoConstantsGiven: a model's clip set is its own; the first constant
// given is named with the model.
func TestNoConstantsGiven(t *testing.T) {
	if err := NoConstantsGiven(option.GivenNames("model", "order", "delta")); err != nil {
		t.Errorf("no constant: %v", err)
	}
	for _, c := range ClipSetConstants {
		err := NoConstantsGiven(option.GivenNames("model", c))
		var ce *option.CombinationError
		if !errors.As(err, &ce) || !slices.Equal(ce.Options, []string{c, "model"}) {
			t.Errorf("%s: %v", c, err)
		}
	}
	if err := NoConstantsGiven(option.GivenNames("prior_alpha", "dims")); err == nil || err.Error() != "dims and model: the model's own constants are certified" {
		t.Errorf("first in order: %v", err)
	}
}
