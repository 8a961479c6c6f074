package attack

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
)

// InvertFile and AttributeFile are the conventional names of the JSON of
// `nvdp attack invert --json` and `nvdp attack attribute --json`. An
// attribute report is usually named by its property, as
// attack_attribute_<property>.json. `nvdp report --attacks` finds the
// reports under a directory by these prefixes.
const (
	InvertFile    = "attack_invert.json"
	AttributeFile = "attack_attribute.json"
)

// AttackInvert and AttackAttribute name the learned attacks, as
// AttackDistinguish names the distinguishing test, where reports of several
// attacks are read together, as by `nvdp report --attacks`.
const (
	AttackInvert    = "invert"
	AttackAttribute = "attribute"
)

// readReport reads the JSON report of an attack (what names it in errors)
// from path and checks it (check errors are wrapped with the file).
func readReport[R any](what, path string, check func(*R) error) (*R, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r R
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s report %s: %w", what, path, err)
	}
	if err := check(&r); err != nil {
		return nil, fmt.Errorf("%s report %s: %w", what, path, err)
	}
	return &r, nil
}

// checkSetup checks what every learned attack's report carries: the model
// attacked (directory, task, variant) and the certified guarantee.
func checkSetup(s Setup) error {
	switch {
	case s.Model.Dir == "" || s.Model.Task == "" || s.Model.Variant == "":
		return fmt.Errorf("no model (directory %q, task %q, variant %q)", s.Model.Dir, s.Model.Task, s.Model.Variant)
	case s.Certified == nil:
		return fmt.Errorf("no certified guarantee")
	}
	return nil
}

// checkResults checks that a learned attack's results hold the reference of
// chance (FeaturesNone) and each attacker on both the release and the
// encoder output; name and features give a result's attacker and features.
func checkResults[T any](results []T, name, features func(T) string) error {
	if len(results) == 0 {
		return fmt.Errorf("no result")
	}
	has := func(f, a string) bool {
		return slices.ContainsFunc(results, func(r T) bool { return features(r) == f && (a == "" || name(r) == a) })
	}
	if !has(FeaturesNone, "") {
		return fmt.Errorf("no %s result (the chance reference)", FeaturesNone)
	}
	for _, r := range results {
		switch f := features(r); f {
		case FeaturesNone:
		case FeaturesRelease, FeaturesEncoder:
			other := FeaturesEncoder
			if f == FeaturesEncoder {
				other = FeaturesRelease
			}
			if !has(other, name(r)) {
				return fmt.Errorf("attacker %s reads the %s but not the %s", name(r), f, other)
			}
		default:
			return fmt.Errorf("attacker %s: unknown features %q", name(r), f)
		}
	}
	return nil
}

// ReadInvertReport reads an [InvertReport] written by `nvdp attack invert
// --json`. Its errors name the file: not JSON, no model or certified
// guarantee, no chance reference, a decoder on the release without its
// encoder-output reference or the other way round, and unknown features.
func ReadInvertReport(path string) (*InvertReport, error) {
	return readReport("invert", path, func(r *InvertReport) error {
		if err := checkSetup(r.Setup); err != nil {
			return err
		}
		return checkResults(r.Results, func(x InvertResult) string { return x.Decoder }, func(x InvertResult) string { return x.Features })
	})
}

// ReadAttributeReport reads an AttributeReport written by `nvdp attack
// attribute --json`. Errors name the file, as ReadInvertReport's, and a
// report without its property.
func ReadAttributeReport(path string) (*AttributeReport, error) {
	return readReport("attribute", path, func(r *AttributeReport) error {
		if err := checkSetup(r.Setup); err != nil {
			return err
		}
		if r.Property.Name == "" {
			return fmt.Errorf("no property")
		}
		return checkResults(r.Results, func(x AttributeResult) string { return x.Classifier }, func(x AttributeResult) string { return x.Features })
	})
}
