package train

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestLoadOptionsVersion0: train_options.json files written before the
// explicit defaults (testdata/legacy: by `nvdp train` at 7b92b44, where 0
// meant "the default" and -1 "off") load, resolve and validate to the
// options of the model they trained: ModelConfig gives the nvdp_config.json
// the old code wrote, field for field, and the dropout is config.json's.
func TestLoadOptionsVersion0(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "legacy", "*"))
	if err != nil || len(dirs) < 7 {
		t.Fatalf("fixtures %v: %v", dirs, err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			o, err := LoadOptions(dir)
			if err != nil {
				t.Fatal(err)
			}
			ecfg, err := encoder.ReadConfig(filepath.Join(dir, encoder.ConfigFile))
			if err != nil {
				t.Fatal(err)
			}
			want, err := nvib.LoadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, again, err := PrepareModelConfig(o, ecfg, want.NumLabels)
			if err != nil {
				t.Fatal(err)
			}
			if got != want || again != nil {
				t.Errorf("model config\n got %+v\nwant %+v (calibrated again: %v)", got, want, again != nil)
			}
			if o.Dropout != ecfg.HiddenDropoutProb || o.Dropout != ecfg.AttentionProbsDropoutProb {
				t.Errorf("dropout %v, the model's %v / %v", o.Dropout, ecfg.HiddenDropoutProb, ecfg.AttentionProbsDropoutProb)
			}
			if o.Version != OptionsVersion || o.ClipOrder != want.Clip.Order || o.Releases != 1 || o.Patience < 0 || o.GradClip < 0 {
				t.Errorf("upgraded options %+v", o)
			}
		})
	}
	// -1 meant "off" in version 0: patience and grad clip 0 now.
	o, err := LoadOptions(filepath.Join("testdata", "legacy", "clipped-reference"))
	if err != nil {
		t.Fatal(err)
	}
	if o.Patience != 0 || o.GradClip != 0 || o.CAlphaMin != 0 || o.LogvarMargin != 0 {
		t.Errorf("reference run: patience %d grad clip %v C_amin %v margin %v, want all 0", o.Patience, o.GradClip, o.CAlphaMin, o.LogvarMargin)
	}
}

// TestOptionsJSON: SaveOptions writes the current version with every option
// explicit and LoadOptions reads it back unchanged; options with Auto
// (unresolved, as a sweep passes its base to a cell) travel as null and come
// back Auto.
func TestOptionsJSON(t *testing.T) {
	dir := t.TempDir()
	o := DefaultOptions()
	o.Task, o.GlueDir, o.Encoder, o.Vocab, o.Out = "rte", "glue", "scratch:bert-mini", "vocab.txt", dir
	o.Lambda, o.LogvarMargin, o.Patience, o.GradClip, o.HandSetClipping = 0, 0.25, 0, 0, true
	o.Resolve()
	if err := SaveOptions(dir, &o); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, OptionsFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"options_version": float64(OptionsVersion), "lambda": 0.0, "patience": 0.0, "grad_clip": 0.0,
		"c_mu": 6.0, "c_alpha_max": 0.5, "logvar_margin": 0.25, "lr": DefaultLRScratchPrivate, "dropout": 0.1, "clip_order": privacy.DefaultOrder} {
		if m[k] != want {
			t.Errorf("%s: %s = %v, want %v", OptionsFile, k, m[k], want)
		}
	}
	back, err := LoadOptions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !sameOptions(*back, o) {
		t.Errorf("round trip:\n got %+v\nwant %+v", *back, o)
	}

	auto := DefaultOptions()
	auto.CMu = 3
	b, err := json.Marshal(auto)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"c_alpha_max":null`) || !strings.Contains(string(b), `"c_mu":3`) || !strings.Contains(string(b), `"dropout":null`) {
		t.Errorf("unresolved options as JSON: %s", b)
	}
	var got Options
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.CMu != 3 || !IsAuto(got.CAlphaMax) || !IsAuto(got.CAlphaMin) || !IsAuto(got.LogvarMargin) || !IsAuto(got.LR) || !IsAuto(got.Dropout) ||
		got.Epochs != 10 || got.Lambda != 1e-2 {
		t.Errorf("unresolved options back from JSON: %+v", got)
	}
}

// TestLoadOptionsValidates: a saved options file is checked as new options
// are (a resumed run must not divide by a batch size 0 or train at lr -1);
// SaveOptions refuses what LoadOptions would refuse. Errors name the file
// and the option.
func TestLoadOptionsValidates(t *testing.T) {
	good := DefaultOptions()
	good.Task, good.GlueDir, good.Encoder, good.Vocab, good.HandSetClipping = "sst2", "glue", "scratch:bert-tiny", "vocab.txt", true
	good.Resolve()
	for _, tc := range []struct {
		name string
		mod  func(m map[string]any)
		want string
	}{
		{"batch size 0", func(m map[string]any) { m["batch_size"] = 0 }, "batch_size 0: must be >= 1"},
		{"negative lr", func(m map[string]any) { m["lr"] = -1 }, "lr -1: must be > 0"},
		{"epochs 0", func(m map[string]any) { m["epochs"] = 0 }, "epochs 0"},
		{"newer version", func(m map[string]any) { m["options_version"] = 5 }, "options_version 5: this program reads versions 0, 2, 3 and 4"},
		{"version 0 with batch size 0", func(m map[string]any) { delete(m, "options_version"); m["batch_size"] = 0 }, "batch_size 0"},
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
			tc.mod(m)
			if b, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, OptionsFile)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadOptions(dir); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v, want one naming %s and containing %q", err, path, tc.want)
			}
			// a resumed run reads them so (beside a checkpoint): no division by a batch size 0
			if err := os.WriteFile(filepath.Join(dir, CheckpointFile), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Run(context.Background(), Options{Out: dir, Resume: true}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("resume: err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	bad := good
	bad.BatchSize = 0
	dir := t.TempDir()
	if err := SaveOptions(dir, &bad); err == nil || !strings.Contains(err.Error(), "batch_size 0") {
		t.Errorf("SaveOptions of batch size 0: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, OptionsFile)); !os.IsNotExist(err) {
		t.Errorf("invalid options written (%v)", err)
	}
}

// TestResolveAuto: Resolve fills only Auto options and is idempotent; an
// Auto it cannot derive (an unknown task) stays for Validate, which names
// the option; Validate without Resolve says so.
func TestResolveAuto(t *testing.T) {
	o := DefaultOptions()
	o.Task, o.Encoder = "mrpc", "hf:some/roberta-base"
	o.Resolve()
	once := o
	o.Resolve()
	if !sameOptions(o, once) || o.LR != DefaultLRRoberta || o.Dropout != 0 || o.CMu != 2 || o.CAlphaMax != 0.5 {
		t.Errorf("resolved %+v, again %+v", once, o)
	}
	u := DefaultOptions()
	u.Task = "cola"
	u.Resolve()
	if !IsAuto(u.CMu) || !IsAuto(u.CAlphaMax) {
		t.Errorf("unknown task: C_mu %v C_amax %v, want Auto", u.CMu, u.CAlphaMax)
	}
	n := DefaultOptions()
	n.Task, n.GlueDir, n.Encoder, n.Vocab, n.Out, n.HandSetClipping = "sst2", "g", "scratch:bert-tiny", "v", "o", true
	err := n.Validate()
	var oe *OptionError
	if !errors.As(err, &oe) || oe.Option != "c_mu" || !strings.Contains(err.Error(), "not resolved") {
		t.Errorf("unresolved options: %v", err)
	}
	n.Resolve()
	if err := n.Validate(); err != nil {
		t.Errorf("resolved options: %v", err)
	}
	if !math.IsNaN(Auto()) || !IsAuto(math.NaN()) || IsAuto(0) {
		t.Error("Auto is NaN")
	}
}

// Every preset has equal hidden and attention dropout, so that the Auto
// dropout resolved from the hidden one is the preset's exactly.
func TestPresetDropoutsEqual(t *testing.T) {
	for _, name := range encoder.PresetNames() {
		c, err := encoder.Preset(name)
		if err != nil || c.HiddenDropoutProb != c.AttentionProbsDropoutProb {
			t.Errorf("%s: hidden dropout %v, attention %v (%v)", name, c.HiddenDropoutProb, c.AttentionProbsDropoutProb, err)
		}
	}
}

// TestDifferences: the options a resume was given that differ from the
// saved ones, by JSON key, without where the run is and whether it
// continues (out, resume, options_version) and with tasks compared by the
// GLUE task they name (issue 32: cmd/nvdp refuses their flags).
func TestDifferences(t *testing.T) {
	saved := DefaultOptions()
	saved.Task, saved.GlueDir, saved.Out, saved.HandSetClipping = "sst2", "g", "/old/run", true
	saved.Resolve()
	for _, tc := range []struct {
		name string
		mod  func(o *Options)
		want []string
	}{
		{"same", func(o *Options) {}, nil},
		{"where and whether", func(o *Options) {
			o.Out, o.Resume, o.Version, o.StopAfterSteps, o.LogSteps = "/new/run", true, 3, 7, true
		}, nil},
		{"task by another name", func(o *Options) { o.Task = "SST-2" }, nil},
		{"task, variant, lr", func(o *Options) { o.Task, o.Variant, o.LR = "rte", "baseline", 1e10 }, []string{"task", "variant", "lr"}},
		{"auto lr", func(o *Options) { o.LR = Auto() }, []string{"lr"}},
		{"target", func(o *Options) { o.TargetEpsilon = 8 }, []string{"target_epsilon"}},
		{"latent dim", func(o *Options) { p := 8; o.LatentDim = &p }, []string{"latent_dim"}},
	} {
		given := saved
		tc.mod(&given)
		var keys []string
		for _, d := range Differences(&saved, &given) {
			keys = append(keys, d.Option)
		}
		if !slices.Equal(keys, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, keys, tc.want)
		}
	}
}
