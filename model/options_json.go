package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
)

// OptionsVersion is the format of train_options.json that SaveOptions
// writes: every option explicit, and no target written as null in
// target_epsilon and target_rd, where 0 is an error. Version 2 files left
// target_epsilon and target_rd out for no target, where 0 also meant none;
// version 0 files used 0 for "default" in c_alpha_min, logvar_margin,
// clip_order, target_delta, target_order and releases, -1 for "off" in
// patience and grad_clip, and left dropout out for "the preset's". Version
// 3 trained a clipped variant without a target with its hand-set constants;
// version 4 says so (hand_set_clipping) and refuses it otherwise. All are
// read as they were written (Upgrade).
const OptionsVersion = 4

// SaveOptions validates o and writes it as JSON to dir/train_options.json,
// in format [OptionsVersion].
func SaveOptions(dir string, o *Options) error {
	path := filepath.Join(dir, OptionsFile)
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c := *o
	c.Version = OptionsVersion
	c.RunTime = RunTime{} // the run's choices are no part of the model
	return atomicfile.WriteJSON(path, &c)
}

// LoadOptions reads dir/train_options.json, upgrades a file of version 0, 2
// or 3 with [Upgrade], and resolves and validates the options. What a resumed
// run or an evaluation uses is thus checked as a new run's options are: a
// version-3 target of 0 is an error, and so is a version-4 clipped variant
// without a target or hand_set_clipping.
//
// The options' Out is dir and Resume is false: the "out" and "resume" keys
// of files written before they moved to [RunTime] are read and ignored.
//
// Its errors name the file; a missing file wraps fs.ErrNotExist.
func LoadOptions(dir string) (*Options, error) {
	path := filepath.Join(dir, OptionsFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model dir %s: %w", dir, err)
	}
	var probe struct {
		Version int `json:"options_version"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !slices.Contains(readVersions, probe.Version) {
		return nil, fmt.Errorf("%s: %w", path, versionError(probe.Version))
	}
	if probe.Version == 0 {
		if b, err = dropRetiredV0(b); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	o := &Options{}
	if err := json.Unmarshal(b, o); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := o.Upgrade(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	o.RunTime = RunTime{Out: dir}
	o.Resolve()
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// Differences returns the options whose values differ between saved, a run's
// options as [LoadOptions] reads them, and given, those a resume of the run
// is asked for. They are listed by JSON key in the order of Options' fields,
// compared as [option.Differences] does, pointers by value and Auto equal to
// Auto.
//
// It leaves out the file's format, options_version; where the run is and
// whether it continues are [RunTime]'s, no options. Tasks are compared by the GLUE task
// they name, so "SST-2" is sst2; see [glue.LookupTask].
//
// A resumed run, train.Run with Resume, continues with the saved options: a
// caller that was given options explicitly refuses those that differ, as
// cmd/nvdp does naming their flags, rather than resume a run other than the
// one asked for.
func Differences(saved, given *Options) []option.Difference {
	var out []option.Difference
	for _, d := range option.Differences(saved, given) {
		switch d.Option {
		case "options_version":
			continue
		case "task":
			a, errA := glue.LookupTask(saved.Task)
			b, errB := glue.LookupTask(given.Task)
			if errA == nil && errB == nil && a.Name == b.Name {
				continue
			}
		}
		out = append(out, d)
	}
	return out
}

// readVersions are the options_version values this program reads.
var readVersions = []int{0, 2, 3, OptionsVersion}

func versionError(v int) error {
	return fmt.Errorf("options_version %d: this program reads versions 0, 2, 3 and %d", v, OptionsVersion)
}

// Upgrade gives options decoded from a file of an older format, version 0, 2
// or 3, their meaning in [OptionsVersion], and sets Version to it:
//
//   - version 0 is upgraded as upgradeV0 says;
//   - in versions 0 and 2 a target_epsilon or target_rd of 0 meant "no
//     target", which is [NoTarget] now. Those versions left the key out
//     then, so only a hand-edited file holds a 0. In version 3 a 0 target is
//     an error, reported by [Options.Validate];
//   - versions 0 to 3 trained a clipped variant, see [nvib.Calibratable], in
//     principled mode without a target with its hand-set constants. Version 4
//     says so with HandSetClipping, which Upgrade sets for such options.
//
// It returns an error for a version this program does not read.
func (o *Options) Upgrade() error {
	switch o.Version {
	case 0:
		o.upgradeV0()
		fallthrough
	case 2:
		for _, v := range []*float64{&o.TargetEpsilon, &o.TargetRD} {
			if *v == 0 {
				*v = NoTarget()
			}
		}
		fallthrough
	case 3:
		o.HandSetClipping = !o.HasTarget() && nvib.Calibratable(o.Variant) && !o.Mode.IsReference()
	case OptionsVersion:
	default:
		return versionError(o.Version)
	}
	o.Version = OptionsVersion
	return nil
}

// retiredV0 are the keys of version-0 files that no option reads any more
// (lambda_set recorded an explicit lambda; every value is explicit now).
var retiredV0 = []string{"lambda_set"}

// dropRetiredV0 removes the retired keys from a version-0 file, so that the
// strict decoding (Options.UnmarshalJSON) reads it.
func dropRetiredV0(b []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for _, k := range retiredV0 {
		delete(m, k)
	}
	return json.Marshal(m)
}

// upgradeV0 gives the options of a version-0 file their explicit values:
// there 0 meant "the default" in c_alpha_min and logvar_margin (unless
// calibrated) and in clip_order, target_delta, target_order and releases,
// and -1 meant "off" in patience and grad_clip (a missing dropout or
// nvib_init, "the preset's" or "the mode's", decodes as Auto or "" already).
// The result resolves to the model those files were trained with
// (TestLoadOptionsVersion0).
func (o *Options) upgradeV0() {
	if !o.Calibrated {
		if o.CAlphaMin == 0 {
			o.CAlphaMin = Auto()
		}
		if o.LogvarMargin == 0 {
			o.LogvarMargin = Auto()
		}
	}
	for _, d := range []struct {
		v   *float64
		def float64
	}{{&o.ClipOrder, privacy.DefaultOrder}, {&o.TargetDelta, privacy.DefaultDelta}, {&o.TargetOrder, privacy.DefaultOrder}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.Releases == 0 {
		o.Releases = 1
	}
	if o.Patience < 0 {
		o.Patience = 0
	}
	if o.GradClip < 0 {
		o.GradClip = 0
	}
}

// optionsFields is Options without its JSON methods.
type optionsFields Options

// optionsJSON is the JSON form of Options: the options that may be Auto,
// and the targets that may be NoTarget, as pointers: NaN (Auto, NoTarget)
// written as null and null or a missing key read as NaN (the shallower
// fields here hide the embedded ones of the same name).
type optionsJSON struct {
	*optionsFields
	CMu           *float64 `json:"c_mu"`
	CAlphaMax     *float64 `json:"c_alpha_max"`
	CAlphaMin     *float64 `json:"c_alpha_min"`
	LogvarMargin  *float64 `json:"logvar_margin"`
	LR            *float64 `json:"lr"`
	Dropout       *float64 `json:"dropout"`
	TargetEpsilon *float64 `json:"target_epsilon"`
	TargetRD      *float64 `json:"target_rd"`
	// Out and Resume are RunTime's, written when set (a sweep cell's
	// options) and read, as in files written before they moved there.
	Out    string `json:"out,omitempty"`
	Resume bool   `json:"resume,omitempty"`
}

func (j *optionsJSON) autoFields(o *Options) []struct {
	v *float64
	p **float64
} {
	return []struct {
		v *float64
		p **float64
	}{{&o.CMu, &j.CMu}, {&o.CAlphaMax, &j.CAlphaMax}, {&o.CAlphaMin, &j.CAlphaMin},
		{&o.LogvarMargin, &j.LogvarMargin}, {&o.LR, &j.LR}, {&o.Dropout, &j.Dropout},
		{&o.TargetEpsilon, &j.TargetEpsilon}, {&o.TargetRD, &j.TargetRD}}
}

// MarshalJSON writes o with Auto options and NoTarget targets as null.
// Resolved options, as in every train_options.json, have no Auto. Unresolved
// ones travel as JSON too, as a sweep's base options do to its cells.
func (o Options) MarshalJSON() ([]byte, error) {
	f := optionsFields(o)
	j := optionsJSON{optionsFields: &f, Out: o.Out, Resume: o.Resume}
	for _, a := range j.autoFields(&o) {
		if !IsAuto(*a.v) {
			v := *a.v
			*a.p = &v
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads o as MarshalJSON writes it: null or a missing key is
// Auto in the options that may be Auto and NoTarget in target_epsilon and
// target_rd; a key that is no option is an error.
func (o *Options) UnmarshalJSON(b []byte) error {
	j := optionsJSON{optionsFields: (*optionsFields)(o)}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt or newer option is an error, never ignored
	if err := dec.Decode(&j); err != nil {
		return err
	}
	o.Out, o.Resume = j.Out, j.Resume
	for _, a := range j.autoFields(o) {
		*a.v = Auto()
		if *a.p != nil {
			*a.v = **a.p
		}
	}
	return nil
}
