package model

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
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
	for _, k := range []string{"out", "resume"} { // run-time choices (RunTime), no part of the model
		if _, ok := m[k]; ok {
			t.Errorf("%s holds %q: %v", OptionsFile, k, m[k])
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

// tinyConfig is a bert-tiny-shaped encoder small enough for CI on 2 cores.
func tinyConfig(t *testing.T, hidden, layers, maxPos int) *encoder.Config {
	t.Helper()
	c, err := encoder.Preset("bert-tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize, c.MaxPositionEmbeddings = hidden, layers, 2, 2*hidden, maxPos
	return &c
}

// TestDefaults pins the defaults: the per-task constants of the paper's
// hyperparameter table, the learning rate by backbone and variant, the
// dropout by backbone, the generic ones; an explicit value, 0 included, is
// kept.
func TestDefaults(t *testing.T) {
	cases := []struct {
		task, enc, variant string
		cmu, camax, lr     float64
	}{
		{"mrpc", "hf:bert-base-uncased", "", 2, 0.5, 7e-5},
		{"qnli", "hf:bert-base-uncased", "", 7, 1, 7e-5},
		{"SST-2", "scratch:bert-tiny", "", 2, 1, 5e-4},
		{"SST-2", "scratch:bert-tiny", nvib.ModelGaussian, 2, 1, 5e-4},
		{"SST-2", "scratch:bert-tiny", nvib.ModelNVDP, 2, 1, 5e-4},
		{"SST-2", "scratch:bert-tiny", nvib.ModelBaseline, 2, 1, 1e-3},
		{"sst2", "hf:bert-base-uncased", nvib.ModelBaseline, 2, 1, 7e-5},
		{"rte", "hf:FacebookAI/roberta-base", "", 6, 0.5, 2e-5},
		{"stsb", "hf:/models/bert", "", 10, 1, 7e-5},
	}
	for _, c := range cases {
		o := DefaultOptions()
		o.Task, o.Encoder = c.task, c.enc
		if c.variant != "" {
			o.Variant = c.variant
		}
		o.Resolve()
		if o.CMu != c.cmu || o.CAlphaMax != c.camax || o.LR != c.lr {
			t.Errorf("%s %s %s: c_mu %v c_amax %v lr %v, want %v %v %v", c.task, c.enc, c.variant, o.CMu, o.CAlphaMax, o.LR, c.cmu, c.camax, c.lr)
		}
		wantVariant := c.variant
		if wantVariant == "" {
			wantVariant = nvib.ModelNVDPClipped
		}
		if o.Epochs != 10 || o.BatchSize != 32 || o.EvalBatchSize != 16 || o.WarmupRatio != 0.06 || o.MaxSeqLen != 128 || o.Patience != 3 ||
			o.GradClip != 1 || o.Lambda != 1e-2 || o.Variant != wantVariant || o.Mode != "principled" || o.CheckpointEach != 500 ||
			o.ClipOrder != privacy.DefaultOrder || o.KLSchedule != nvib.ScheduleLinearDecay || o.NVIBInit != nvib.InitClip {
			t.Errorf("%s: generic defaults %+v", c.task, o)
		}
		if want := map[bool]float64{true: 0, false: 0.1}[strings.HasPrefix(c.enc, "hf:")]; o.Dropout != want {
			t.Errorf("%s: dropout %v, want %v", c.enc, o.Dropout, want)
		}
		wantMin, wantMargin := nvib.PrincipledAlphaMin(privacy.DefaultOrder, c.camax), nvib.DefaultLogvarMargin
		if o.Variant == nvib.ModelGaussian {
			wantMin, wantMargin = 0, 0
		}
		if o.CAlphaMin != wantMin || o.LogvarMargin != wantMargin {
			t.Errorf("%s %s: C_amin %v margin %v, want %v %v", c.task, o.Variant, o.CAlphaMin, o.LogvarMargin, wantMin, wantMargin)
		}
	}
	// Explicit values, 0 included, are kept; the mode decides the rest.
	o := DefaultOptions()
	o.Task, o.Encoder, o.Mode = "sst2", "scratch:bert-tiny", "reference"
	o.Lambda, o.CAlphaMin, o.LogvarMargin, o.Dropout, o.GradClip, o.Patience, o.CheckpointEach, o.WarmupRatio = 0, 0.25, 0, 0, 0, 0, 0, 0
	o.Resolve()
	if o.Lambda != 0 || o.CAlphaMin != 0.25 || o.LogvarMargin != 0 || o.Dropout != 0 || o.GradClip != 0 || o.Patience != 0 ||
		o.CheckpointEach != 0 || o.WarmupRatio != 0 || o.NVIBInit != nvib.InitHF {
		t.Errorf("explicit zeros replaced: %+v", o)
	}
	p := DefaultOptions()
	p.Task, p.Encoder, p.LogvarMargin, p.CAlphaMin = "sst2", "scratch:bert-tiny", 0, 0
	p.Resolve()
	if p.LogvarMargin != 0 || p.CAlphaMin != 0 {
		t.Errorf("principled explicit margin / C_amin 0 became %v / %v", p.LogvarMargin, p.CAlphaMin)
	}
	// Principled C_amin default: (lambda-1)/lambda C_amax (1 + 1e-3), at the clip order.
	for _, order := range []float64{privacy.DefaultOrder, 1.5} {
		o := DefaultOptions()
		o.Task, o.Encoder, o.ClipOrder = "sst2", "scratch:bert-tiny", order
		o.Resolve()
		cfg, err := o.ModelConfig(*tinyConfig(t, 16, 1, 32), 2)
		if err != nil {
			t.Fatal(err)
		}
		if want := nvib.PrincipledAlphaMin(order, 1); cfg.Clip.CAlphaMin != want || cfg.Clip.Order != order || cfg.LambdaG != 1e-2 || cfg.LambdaD != 1e-2 {
			t.Errorf("order %v: clip %+v lambda %v/%v, want C_amin %v", order, cfg.Clip, cfg.LambdaG, cfg.LambdaD, want)
		}
	}
}

// TestLoadOptionsOutResume: a train_options.json written when out and resume
// were saved with the model (through 2c0eea9) loads, with both ignored: Out
// is the directory read and Resume false. In a cell's options (JSON) both
// travel.
func TestLoadOptionsOutResume(t *testing.T) {
	dir := t.TempDir()
	o := DefaultOptions()
	o.Task, o.GlueDir, o.Vocab, o.Out, o.HandSetClipping = "rte", "glue", "vocab.txt", dir, true
	o.Resolve()
	if err := SaveOptions(dir, &o); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, OptionsFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(raw), "{", `{"out": "runs/elsewhere", "resume": true,`, 1)
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := LoadOptions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Out != dir || back.Resume || !sameOptions(*back, o) {
		t.Errorf("old file: out %q resume %v, want %q false; options\n got %+v\nwant %+v", back.Out, back.Resume, dir, *back, o)
	}

	o.Resume = true
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var cell Options
	if err := json.Unmarshal(b, &cell); err != nil || cell.Out != dir || !cell.Resume {
		t.Errorf("cell options: out %q resume %v (%v), want %q true: %s", cell.Out, cell.Resume, err, dir, b)
	}
}

// TestFixGivenTargetAt: FixGiven fixes exactly the clipping constants
// given; TargetAt sets the order of a target RD and the delta of a target
// epsilon, and leaves those of a target not given.
func TestFixGivenTargetAt(t *testing.T) {
	for _, given := range [][]string{nil, {"c_mu"}, {"logvar_margin", "c_alpha_min"}, {"c_mu", "logvar_margin", "c_alpha_min", "lr"}} {
		o := DefaultOptions()
		o.FixGiven(func(name string) bool { return slices.Contains(given, name) })
		got := [3]bool{o.FixCMu, o.FixLogvarMargin, o.FixCAlphaMin}
		want := [3]bool{slices.Contains(given, "c_mu"), slices.Contains(given, "logvar_margin"), slices.Contains(given, "c_alpha_min")}
		if got != want {
			t.Errorf("given %v: fixed %v, want %v", given, got, want)
		}
	}
	def := DefaultOptions()
	for _, tc := range []struct {
		eps, rd      float64
		order, delta float64 // want
	}{
		{NoTarget(), NoTarget(), def.TargetOrder, def.TargetDelta},
		{8, NoTarget(), def.TargetOrder, 1e-3},
		{NoTarget(), 2, 4, def.TargetDelta},
	} {
		o := DefaultOptions()
		o.TargetEpsilon, o.TargetRD = tc.eps, tc.rd
		o.TargetAt(4, 1e-3)
		if o.TargetOrder != tc.order || o.TargetDelta != tc.delta {
			t.Errorf("target epsilon %v rd %v: order %v delta %v, want %v %v", tc.eps, tc.rd, o.TargetOrder, o.TargetDelta, tc.order, tc.delta)
		}
	}
	if got, want := PaperClips(func(c glue.Clip) float64 { return c.CMu }), "MRPC 2, QNLI 7, RTE 6, SST-2 2, STS-B 10"; got != want {
		t.Errorf("PaperClips C_mu: %q, want %q", got, want)
	}
}

// TestCheckTargetGiven: the order given without a target RD and the delta
// given without a target epsilon are refused, naming both options; with
// their target, or not given, they are fine.
func TestCheckTargetGiven(t *testing.T) {
	given := option.GivenNames
	for _, tc := range []struct {
		name    string
		eps, rd float64
		given   option.Given
		want    []string // the options of the error; nil: none
	}{
		{"none given", NoTarget(), NoTarget(), nil, nil},
		{"order without rd", NoTarget(), NoTarget(), given("target_order"), []string{"target_order", "target_rd", "target_rd"}},
		{"order with rd", NoTarget(), 2, given("target_order"), nil},
		{"order with epsilon", 8, NoTarget(), given("target_order"), []string{"target_order", "target_rd", "target_rd"}},
		{"delta without epsilon", NoTarget(), NoTarget(), given("target_delta"), []string{"target_delta", "target_epsilon", "target_epsilon"}},
		{"delta with rd", NoTarget(), 2, given("target_delta"), []string{"target_delta", "target_epsilon", "target_epsilon"}},
		{"delta with epsilon", 8, NoTarget(), given("target_delta"), nil},
		{"not given", NoTarget(), NoTarget(), given("c_mu"), nil},
	} {
		o := DefaultOptions()
		o.TargetEpsilon, o.TargetRD = tc.eps, tc.rd
		err := o.CheckTargetGiven(tc.given)
		var ce *option.CombinationError
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		} else if !errors.As(err, &ce) || !slices.Equal(ce.Options, tc.want) {
			t.Errorf("%s: %v, want the combination of %v", tc.name, err, tc.want)
		}
	}
}

// TestParseRadiusSchedule: "off" is nil, START:FRACTION is kept as given
// (Validate judges the numbers), anything else is an error naming the
// syntax; FormatRadiusSchedule writes back what was read.
func TestParseRadiusSchedule(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want *RadiusSchedule
		err  bool
	}{
		{"off", nil, false},
		{"4:0.5", &RadiusSchedule{Start: 4, Fraction: 0.5}, false},
		{"0:1.5", &RadiusSchedule{Start: 0, Fraction: 1.5}, false},
		{"4", nil, true},
		{"4:x", nil, true},
		{"4:0.5:1", nil, true},
		{"", nil, true},
	} {
		r, err := ParseRadiusSchedule(tc.s)
		if tc.err {
			if err == nil || err.Error() != `"`+tc.s+`" is not START:FRACTION (e.g. 4:0.5) or off` {
				t.Errorf("ParseRadiusSchedule(%q) = %v, %v; want the syntax error", tc.s, r, err)
			}
			continue
		}
		if err != nil || (r == nil) != (tc.want == nil) || r != nil && *r != *tc.want || FormatRadiusSchedule(r) != tc.s {
			t.Errorf("ParseRadiusSchedule(%q) = %v, %v; FormatRadiusSchedule %q", tc.s, r, err, FormatRadiusSchedule(r))
		}
	}
}

// FuzzParseRadiusSchedule: the parser never panics, and a schedule it accepts is written back by
// FormatRadiusSchedule to text it reads as the same schedule.
func FuzzParseRadiusSchedule(f *testing.F) {
	for _, s := range []string{"off", "4:0.5", "1:1", ":", "4:", "a:b", "4:0.5:1", "inf:NaN", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRadiusSchedule(s)
		if err != nil {
			return
		}
		back, err := ParseRadiusSchedule(FormatRadiusSchedule(r))
		same := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) || a != a && b != b }
		if err != nil || (r == nil) != (back == nil) || r != nil && (!same(r.Start, back.Start) || !same(r.Fraction, back.Fraction)) {
			t.Fatalf("ParseRadiusSchedule(%q) = %+v; written back and read: %+v, %v", s, r, back, err)
		}
	})
}
