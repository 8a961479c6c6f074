package model

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// sameOptions is reflect.DeepEqual of a and b with NoTarget (NaN, which
// equals nothing, itself included) equal to NoTarget.
func sameOptions(a, b Options) bool {
	for _, p := range [][2]*float64{{&a.TargetEpsilon, &b.TargetEpsilon}, {&a.TargetRD, &b.TargetRD}} {
		if IsNoTarget(*p[0]) != IsNoTarget(*p[1]) {
			return false
		}
		if IsNoTarget(*p[0]) {
			*p[0], *p[1] = 0, 0
		}
	}
	return reflect.DeepEqual(a, b)
}

// TestTargetValues: no target is NoTarget (the default; Resolve keeps it,
// Validate accepts it with hand-set clipping: TestHandSetClipping); a given target is finite and > 0, so that an
// explicit 0 or a negative target is an *OptionError naming the option
// (issue 27: --target-epsilon 0 trained with the hand-set clipping), for
// every variant; Target gives the privacy target of the kind given.
func TestTargetValues(t *testing.T) {
	const reason = "must be > 0 (leave it out for no target)"
	for _, tc := range []struct {
		name   string
		mod    func(*Options)
		option string // "": valid
		want   string
		target bool // HasTarget
	}{
		{"no target", func(o *Options) { o.HandSetClipping = true }, "", "", false},
		{"NaN is no target", func(o *Options) { o.TargetEpsilon, o.TargetRD, o.HandSetClipping = math.NaN(), math.NaN(), true }, "", "", false},
		{"epsilon 8", func(o *Options) { o.TargetEpsilon = 8 }, "", "", true},
		{"RD 3, epsilon NaN", func(o *Options) { o.TargetEpsilon, o.TargetRD = math.NaN(), 3 }, "", "", true},
		{"epsilon 0", func(o *Options) { o.TargetEpsilon = 0 }, "target_epsilon", "target_epsilon 0: " + reason, true},
		{"RD 0", func(o *Options) { o.TargetRD = 0 }, "target_rd", "target_rd 0: " + reason, true},
		{"negative epsilon", func(o *Options) { o.TargetEpsilon = -1 }, "target_epsilon", "target_epsilon -1: " + reason, true},
		{"negative RD", func(o *Options) { o.TargetRD = -0.5 }, "target_rd", "target_rd -0.5: " + reason, true},
		{"epsilon 0 of the baseline", func(o *Options) { o.TargetEpsilon, o.Variant = 0, nvib.ModelBaseline }, "target_epsilon", "target_epsilon 0: " + reason, true},
		{"epsilon 0 of gaussian", func(o *Options) { o.TargetEpsilon, o.Variant = 0, nvib.ModelGaussian }, "target_epsilon", "target_epsilon 0: " + reason, true},
		{"epsilon 0 beside RD 3", func(o *Options) { o.TargetEpsilon, o.TargetRD = 0, 3 }, "target_epsilon", "target_epsilon 0: " + reason, true},
		{"epsilon -0", func(o *Options) { o.TargetEpsilon = math.Copysign(0, -1) }, "target_epsilon", "target_epsilon -0: " + reason, true},
		{"infinite epsilon", func(o *Options) { o.TargetEpsilon = math.Inf(1) }, "target_epsilon", "target_epsilon +Inf: must be a finite number", true},
		{"both", func(o *Options) { o.TargetEpsilon, o.TargetRD = 8, 3 }, "target_epsilon", "target_epsilon 8: and a target RD 3 are both given: give one", true},
		{"RD of nvdp", func(o *Options) { o.TargetRD, o.Variant = 3, nvib.ModelNVDP }, "target_rd", "target_rd 3: only the nvdp-clipped and gaussian variants", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := targetOptions(tc.mod)
			if o.HasTarget() != tc.target {
				t.Errorf("HasTarget %v, want %v (epsilon %v, RD %v)", o.HasTarget(), tc.target, o.TargetEpsilon, o.TargetRD)
			}
			err := o.Validate()
			if tc.option == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Option != tc.option || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want the %s error %q", err, tc.option, tc.want)
			}
		})
	}
	d := DefaultOptions()
	if !IsNoTarget(d.TargetEpsilon) || !IsNoTarget(d.TargetRD) || d.HasTarget() {
		t.Errorf("defaults: target epsilon %v, RD %v, want none", d.TargetEpsilon, d.TargetRD)
	}
	d.Resolve()
	if !IsNoTarget(d.TargetEpsilon) || !IsNoTarget(d.TargetRD) {
		t.Errorf("resolved: target epsilon %v, RD %v, want none", d.TargetEpsilon, d.TargetRD)
	}
	// Target: the kind given, never a zero standing for "absent".
	e := targetOptions(func(o *Options) { o.TargetEpsilon, o.Releases = 8, 2 })
	r := targetOptions(func(o *Options) { o.TargetRD, o.TargetOrder = 3, 2 })
	if got, want := e.Target(), privacy.EpsilonTarget(8, privacy.DefaultDelta, 2); got != want {
		t.Errorf("epsilon target %+v, want %+v", got, want)
	}
	want := privacy.RDTarget(3, 2, 1)
	want.Delta = privacy.DefaultDelta
	if got := r.Target(); got != want || got.Validate() != nil {
		t.Errorf("RD target %+v, want %+v", got, want)
	}
}

// TestTargetJSON: no target is written as null and read back as NoTarget, as
// is a missing key; a given target travels as its number.
func TestTargetJSON(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mod     func(*Options)
		eps, rd string // as written
	}{
		{"none", func(*Options) {}, "null", "null"},
		{"epsilon 8", func(o *Options) { o.TargetEpsilon = 8 }, "8", "null"},
		{"RD 2.5", func(o *Options) { o.TargetRD = 2.5 }, "null", "2.5"},
	} {
		o := targetOptions(tc.mod)
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if string(m["target_epsilon"]) != tc.eps || string(m["target_rd"]) != tc.rd {
			t.Errorf("%s: target_epsilon %s, target_rd %s; want %s, %s", tc.name, m["target_epsilon"], m["target_rd"], tc.eps, tc.rd)
		}
		var back Options
		if err := json.Unmarshal(b, &back); err != nil || !sameOptions(back, o) || back.HasTarget() != o.HasTarget() {
			t.Errorf("%s: read back %+v, %v; want %+v", tc.name, back, err, o)
		}
		delete(m, "target_epsilon")
		delete(m, "target_rd")
		if b, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		var missing Options
		if err := json.Unmarshal(b, &missing); err != nil || !IsNoTarget(missing.TargetEpsilon) || !IsNoTarget(missing.TargetRD) {
			t.Errorf("%s: keys left out read as epsilon %v, RD %v (%v), want none", tc.name, missing.TargetEpsilon, missing.TargetRD, err)
		}
	}
}

// TestLoadOptionsTarget: train_options.json of versions 0 and 2, where a
// target of 0 meant none (those versions left the key out, a hand-edited
// file may hold 0), read as before: no target, upgraded to version 3; in a
// version-3 file a target of 0 is an error naming the file and the option.
func TestLoadOptionsTarget(t *testing.T) {
	good := DefaultOptions()
	good.Task, good.GlueDir, good.Encoder, good.Vocab = "sst2", "glue", "scratch:bert-tiny", "vocab.txt"
	good.Resolve()
	const none = -1 // want no target
	for _, tc := range []struct {
		name    string
		version any // nil: no options_version key (version 0)
		set     map[string]any
		eps, rd float64 // none: NoTarget
		err     string
	}{
		{"v2 epsilon 0", 2, map[string]any{"target_epsilon": 0}, none, none, ""},
		{"v2 RD 0", 2, map[string]any{"target_rd": 0}, none, none, ""},
		{"v2 both 0", 2, map[string]any{"target_epsilon": 0, "target_rd": 0}, none, none, ""},
		{"v2 left out", 2, nil, none, none, ""},
		{"v2 epsilon 8", 2, map[string]any{"target_epsilon": 8}, 8, none, ""},
		{"v0 epsilon 0", nil, map[string]any{"target_epsilon": 0}, none, none, ""},
		{"v0 RD 4", nil, map[string]any{"target_rd": 4}, none, 4, ""},
		{"v3 null", 3, map[string]any{"target_epsilon": nil, "target_rd": nil}, none, none, ""},
		{"v3 RD 4", 3, map[string]any{"target_rd": 4}, none, 4, ""},
		{"v3 epsilon 0", 3, map[string]any{"target_epsilon": 0}, 0, 0, "target_epsilon 0: must be > 0 (leave it out for no target)"},
		{"v3 RD 0", 3, map[string]any{"target_rd": 0}, 0, 0, "target_rd 0: must be > 0 (leave it out for no target)"},
		{"v2 negative epsilon", 2, map[string]any{"target_epsilon": -1}, 0, 0, "target_epsilon -1: must be > 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := good
			o.Out = dir
			b, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			delete(m, "options_version")
			if tc.version != nil {
				m["options_version"] = tc.version
			}
			if tc.version != 3 { // the older versions left no target out
				delete(m, "target_epsilon")
				delete(m, "target_rd")
			}
			for k, v := range tc.set {
				m[k] = v
			}
			if b, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, OptionsFile)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := LoadOptions(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), path+": "+tc.err) {
					t.Errorf("LoadOptions = %+v, %v; want an error naming %s and %q", got, err, path, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			same := func(v, want float64) bool { return want == none && IsNoTarget(v) || v == want }
			if !same(got.TargetEpsilon, tc.eps) || !same(got.TargetRD, tc.rd) || got.Version != OptionsVersion {
				t.Errorf("read target epsilon %v, RD %v, version %d; want %v, %v (-1: none), version %d",
					got.TargetEpsilon, got.TargetRD, got.Version, tc.eps, tc.rd, OptionsVersion)
			}
		})
	}
}

// TestLoadCalibrationWithoutKind: certificate.json written before
// privacy.Target had a kind (no "kind" key) reads with the kind of its
// target's value, as the run's summary and certify read it.
func TestLoadCalibrationWithoutKind(t *testing.T) {
	for _, want := range []privacy.Target{privacy.EpsilonTarget(8, 1e-5, 1), privacy.RDTarget(4, 2, 3)} {
		cert := &Calibration{Label: privacy.LabelCertified, Scope: "s", Calibration: &privacy.Calibration{Target: want, Order: 1.1, Achieved: 3.5},
			Components: 17, Dims: 16, CMu: 0.25}
		b, err := json.Marshal(cert)
		if err != nil {
			t.Fatal(err)
		}
		old := strings.Replace(string(b), `"kind":"`+string(want.Kind)+`",`, "", 1)
		if old == string(b) {
			t.Fatalf("no kind written: %s", b)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, CertificateFile), []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := LoadCalibration(dir)
		if err != nil || got.Calibration == nil || got.Target != want || got.Achieved != 3.5 || got.Components != 17 || got.CMu != 0.25 {
			t.Errorf("old certificate %s read as %+v, %v; want target %+v", old, got, err, want)
		}
	}
}
