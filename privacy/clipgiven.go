package privacy

import "github.com/nvdp-project/nvdp/option"

// ClipSetConstants are the option names of a [ClipSet]'s constants, as
// [ClipSet.Validate] names them: what a program gives one by one to
// certify a clipping without a model.
var ClipSetConstants = []string{"components", "dims", "c_mu", "prior_mu", "prior_var", "logvar_margin", "logvar_floor",
	"logvar_cap", "clip_order", "c_alpha_min", "c_alpha_max", "prior_alpha"}

// requiredConstants are the constants of a [ClipSet] that have no default.
var requiredConstants = []string{"components", "dims", "c_mu", "c_alpha_min", "c_alpha_max"}

// Resolve returns s with the constants that given says were not given
// explicitly resolved, and checks it ([ClipSet.Validate]). The logvar
// range is either derived, from LogvarMargin and ClipOrder (order, that of
// the certificate, when clip_order is not given), or explicit, from
// LogvarFloor and LogvarCap when either is given: then the margin and the
// clip order are cleared. The floor and cap of s are used only where
// given.
//
// Errors: a [*option.CombinationError] for a required constant not given
// (components, dims, c_mu, c_alpha_min, c_alpha_max: "or model", a model
// directory, which has its own), logvar_margin or clip_order given with an
// explicit range; those of [ClipSet.Validate].
func (s ClipSet) Resolve(given option.Given, order float64) (ClipSet, error) {
	for _, c := range requiredConstants {
		if !given.Has(c) {
			return s, option.Combination("%s is required (or %s DIR)", c, "model")
		}
	}
	_, explicit := given.Any("logvar_floor", "logvar_cap")
	switch {
	case explicit && given.Has("logvar_margin"):
		return s, option.Combination("%s and %s/%s: give the margin (the range is derived) or the range, not both",
			"logvar_margin", "logvar_floor", "logvar_cap")
	case explicit && given.Has("clip_order"):
		return s, option.Combination("%s derives the floor from %s; with %s/%s the range is explicit",
			"clip_order", "logvar_margin", "logvar_floor", "logvar_cap")
	case explicit:
		s.ClipOrder, s.LogvarMargin = 0, 0
	case !given.Has("clip_order"):
		s.ClipOrder = order
	}
	if !given.Has("logvar_floor") {
		s.LogvarFloor = nil
	}
	if !given.Has("logvar_cap") {
		s.LogvarCap = nil
	}
	return s, s.Validate()
}

// NoConstantsGiven checks that none of [ClipSetConstants] was given with a
// model directory, whose clip set is its own: its error is a
// [*option.CombinationError] naming the first constant given and "model".
func NoConstantsGiven(given option.Given) error {
	if c, ok := given.Any(ClipSetConstants...); ok {
		return option.Combination("%s and %s: the model's own constants are certified", c, "model")
	}
	return nil
}
