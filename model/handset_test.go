package model

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestHandSetClipping (issue 31, "A guarantee by default"): a clipped
// variant (nvdp-clipped, gaussian) in principled mode needs a privacy
// target or HandSetClipping: without either Validate refuses it, naming
// target_epsilon and mentioning hand_set_clipping (Mentions, so that the
// CLI names its flag); with both it refuses naming hand_set_clipping and
// the target given. Each alone is accepted, and so are reference mode and
// the variants without a clipping (baseline, nvdp) with neither. Before,
// a clipped variant without a target trained with the hand-set constants
// (the paper's certify epsilon in the thousands) without a word.
func TestHandSetClipping(t *testing.T) {
	const required = ` variant: a certified epsilon per release to calibrate the clipping to (e.g. 8; docs/privacy.md, "A guarantee by default"), ` +
		"or hand_set_clipping for the given constants and whatever epsilon they certify"
	for _, tc := range []struct {
		name     string
		mod      func(*Options)
		option   string // "": valid
		want     string // the whole error
		mentions []string
	}{
		{"nvdp-clipped, neither", func(*Options) {}, "target_epsilon", "target_epsilon: required for the nvdp-clipped" + required, []string{"hand_set_clipping"}},
		{"gaussian, neither", func(o *Options) { o.Variant = nvib.ModelGaussian }, "target_epsilon", "target_epsilon: required for the gaussian" + required, []string{"hand_set_clipping"}},
		{"NaN target is none", func(o *Options) { o.TargetEpsilon, o.TargetRD = NoTarget(), NoTarget() }, "target_epsilon", "target_epsilon: required for the nvdp-clipped" + required, []string{"hand_set_clipping"}},
		{"epsilon and hand-set", func(o *Options) { o.TargetEpsilon, o.HandSetClipping = 8, true }, "hand_set_clipping",
			"hand_set_clipping: and a target (target_epsilon 8) are both given: give one", []string{"target_epsilon"}},
		{"RD and hand-set", func(o *Options) { o.TargetRD, o.HandSetClipping = 3, true }, "hand_set_clipping",
			"hand_set_clipping: and a target (target_rd 3) are both given: give one", []string{"target_rd"}},
		{"gaussian, epsilon and hand-set", func(o *Options) { o.Variant, o.TargetEpsilon, o.HandSetClipping = nvib.ModelGaussian, 16, true }, "hand_set_clipping",
			"hand_set_clipping: and a target (target_epsilon 16) are both given: give one", []string{"target_epsilon"}},
		{"epsilon alone", func(o *Options) { o.TargetEpsilon = 8 }, "", "", nil},
		{"RD alone", func(o *Options) { o.TargetRD = 3 }, "", "", nil},
		{"hand-set alone", func(o *Options) { o.HandSetClipping = true }, "", "", nil},
		{"hand-set with the main job's constants", func(o *Options) { o.HandSetClipping, o.CMu, o.LogvarMargin, o.CAlphaMin = true, 2, 0.6931, 0.3 }, "", "", nil},
		{"gaussian, epsilon alone", func(o *Options) { o.Variant, o.TargetEpsilon = nvib.ModelGaussian, 8 }, "", "", nil},
		{"gaussian, hand-set alone", func(o *Options) { o.Variant, o.CMu, o.HandSetClipping = nvib.ModelGaussian, 0.5, true }, "", "", nil},
		{"reference mode, neither", func(o *Options) { o.Mode = privacy.ModeReference }, "", "", nil},
		{"baseline, neither", func(o *Options) { o.Variant = nvib.ModelBaseline }, "", "", nil},
		{"nvdp, neither", func(o *Options) { o.Variant = nvib.ModelNVDP }, "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := targetOptions(tc.mod)
			err := o.Validate()
			if tc.option == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Option != tc.option || err.Error() != tc.want || !slices.Equal(oe.Mentions, tc.mentions) {
				t.Fatalf("Validate = %v (mentions %v), want the %s error %q (mentions %v)", err, mentionsOf(oe), tc.option, tc.want, tc.mentions)
			}
		})
	}
}

func mentionsOf(oe *OptionError) []string {
	if oe == nil {
		return nil
	}
	return oe.Mentions
}

// TestLoadOptionsHandSet: train_options.json files of versions 0 to 3
// trained a clipped variant in principled mode without a target with its
// hand-set constants, so they read with HandSetClipping set (and run,
// resume and evaluate as before); with a target, in reference mode or for
// a variant without a clipping it stays unset. A version-4 file says so
// itself: without a target or hand_set_clipping it is an error naming the
// file and target_epsilon; SaveOptions writes hand_set_clipping and
// LoadOptions reads it back.
func TestLoadOptionsHandSet(t *testing.T) {
	good := DefaultOptions()
	good.Task, good.GlueDir, good.Encoder, good.Vocab, good.HandSetClipping = "sst2", "glue", "scratch:bert-tiny", "vocab.txt", true
	good.Resolve()
	for _, tc := range []struct {
		name    string
		version any            // nil: no options_version key (version 0)
		set     map[string]any // keys of the file
		handSet bool           // read with HandSetClipping
		err     string         // after the file's name
	}{
		{"v3 no target", 3, nil, true, ""},
		{"v3 epsilon 8", 3, map[string]any{"target_epsilon": 8}, false, ""},
		{"v3 RD 4", 3, map[string]any{"target_rd": 4}, false, ""},
		{"v3 gaussian no target", 3, map[string]any{"variant": nvib.ModelGaussian, "c_alpha_min": 0, "logvar_margin": 0}, true, ""},
		{"v3 reference", 3, map[string]any{"mode": "reference", "c_alpha_min": 0, "logvar_margin": 0}, false, ""},
		{"v3 baseline", 3, map[string]any{"variant": nvib.ModelBaseline}, false, ""},
		{"v3 nvdp", 3, map[string]any{"variant": nvib.ModelNVDP}, false, ""},
		{"v2 no target", 2, nil, true, ""},
		{"v2 epsilon 0 (none)", 2, map[string]any{"target_epsilon": 0}, true, ""},
		{"v2 epsilon 32", 2, map[string]any{"target_epsilon": 32}, false, ""},
		{"v0 no target", nil, nil, true, ""},
		{"v4 hand-set", 4, map[string]any{"hand_set_clipping": true}, true, ""},
		{"v4 epsilon 8", 4, map[string]any{"target_epsilon": 8}, false, ""},
		{"v4 neither", 4, nil, false, "target_epsilon: required for the nvdp-clipped variant"},
		{"v4 gaussian, neither", 4, map[string]any{"variant": nvib.ModelGaussian, "c_alpha_min": 0, "logvar_margin": 0}, false, "target_epsilon: required for the gaussian variant"},
		{"v4 both", 4, map[string]any{"hand_set_clipping": true, "target_epsilon": 8}, false, "hand_set_clipping: and a target (target_epsilon 8) are both given"},
		{"v4 baseline, neither", 4, map[string]any{"variant": nvib.ModelBaseline}, false, ""},
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
			delete(m, "hand_set_clipping") // only version 4 has it, and only where set below
			if tc.version != nil {
				m["options_version"] = tc.version
			}
			if tc.version != 3 && tc.version != 4 { // versions 0 and 2 left no target out
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
			if got.HandSetClipping != tc.handSet || got.Version != OptionsVersion {
				t.Errorf("read hand_set_clipping %v, version %d; want %v, version %d", got.HandSetClipping, got.Version, tc.handSet, OptionsVersion)
			}
			// what is read saves as the current version and reads back the same
			if err := SaveOptions(dir, got); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var saved map[string]any
			if err := json.Unmarshal(raw, &saved); err != nil {
				t.Fatal(err)
			}
			if v, ok := saved["hand_set_clipping"]; ok != tc.handSet || ok && v != true {
				t.Errorf("saved again: hand_set_clipping %v (written: %v); want it written as true: %v", v, ok, tc.handSet)
			}
			back, err := LoadOptions(dir)
			if err != nil || !sameOptions(*back, *got) {
				t.Errorf("saved and read again: %+v, %v; want %+v", back, err, got)
			}
		})
	}
	// The files of the model directories of before the option (version 0):
	// the clipped principled runs without a target were hand-set.
	for name, want := range map[string]bool{"clipped-principled": true, "clipped-explicit": true, "gaussian": true,
		"calibrated": false, "clipped-reference": false, "baseline": false, "nvdp": false} {
		o, err := LoadOptions(filepath.Join("testdata", "legacy", name))
		if err != nil || o.HandSetClipping != want {
			t.Errorf("testdata/legacy/%s: hand_set_clipping %v (%v), want %v", name, o != nil && o.HandSetClipping, err, want)
		}
	}
}
