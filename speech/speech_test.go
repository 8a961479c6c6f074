package speech

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/internal/lidtest"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/train"
	"github.com/nvdp-project/nvdp/wav2vec2"
)

// TestScores: accuracy and macro-F1 against hand-computed values
// (scikit-learn's f1_score(average="macro") gives the same numbers).
func TestScores(t *testing.T) {
	for _, tc := range []struct {
		name          string
		preds, labels []int
		acc, f1       float64
	}{
		{"perfect", []int{0, 1, 2}, []int{0, 1, 2}, 1, 1},
		// class 0: TP 1 FP 1 FN 1 -> 0.5; class 1: TP 1 FP 0 FN 1 -> 2/3; class 2: TP 0 FP 1 FN 0 -> 0
		{"mixed", []int{0, 1, 0, 2}, []int{0, 1, 1, 0}, 0.5, (0.5 + 2.0/3) / 3},
		// a constant predictor of the majority: class 3 F1 = 2*2/(2*2+2) = 2/3, class 5 0
		{"constant", []int{3, 3, 3, 3}, []int{3, 3, 5, 5}, 0.5, (2.0 / 3) / 2},
	} {
		acc, f1, err := Scores(tc.preds, tc.labels)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(acc-tc.acc) > 1e-15 || math.Abs(f1-tc.f1) > 1e-15 {
			t.Errorf("%s: accuracy %v macro-F1 %v, want %v %v", tc.name, acc, f1, tc.acc, tc.f1)
		}
	}
	if got := Chance([]int{3, 3, 5, 5, 5}); math.Abs(got-(2*3.0/(2*3+2))/2) > 1e-15 {
		t.Errorf("chance = %v, want %v", got, (2*3.0/(2*3+2))/2)
	}
	if _, _, err := Scores([]int{1}, []int{1, 2}); err == nil {
		t.Error("length mismatch accepted")
	}
	if _, _, err := Scores(nil, nil); err == nil {
		t.Error("no example accepted")
	}
}

// TestRunPipelineEndToEnd trains each variant for one epoch on the tone
// corpus and checks report.json: the task, the utility metrics, the audit's
// pair count over the dev utterances (frames as components, N = F + 1), a
// certified epsilon of 64 for nvdp-clipped and the gaussian mechanism
// calibrated to that target, an infinite one for nvdp, none for the
// baseline; then evaluates
// the saved nvdp-clipped model again and gets the same numbers.
func TestRunPipelineEndToEnd(t *testing.T) {
	root := t.TempDir()
	lidtest.WriteToneCorpus(t, root, map[string]int{"train": 4, "dev": 4, "test": 4})
	for _, variant := range []string{nvib.ModelNVDPClipped, nvib.ModelNVDP, nvib.ModelBaseline, nvib.ModelGaussian} {
		t.Run(variant, func(t *testing.T) {
			po := train.DefaultPipelineOptions()
			po.Train = DefaultOptions().Train
			o := &po.Train
			o.Variant, o.Epochs, o.BatchSize, o.EvalBatchSize, o.Out = variant, 1, 4, 12, filepath.Join(t.TempDir(), "run")
			if nvib.Calibratable(variant) {
				o.TargetEpsilon = 64
			}
			rep, err := train.RunPipeline(context.Background(), Pipeline(root, 0.5), po, nil)
			if err != nil {
				t.Fatal(err)
			}
			const F = 24 // frames of 8000 samples: floor((8000-400)/320) + 1
			if rep.Task != TaskName || rep.UtilitySplit != "test" || rep.Training == nil || rep.Training.Steps != 3 {
				t.Fatalf("report %+v", rep)
			}
			for _, k := range []string{MetricAccuracy, MetricF1} {
				if v := rep.Utility[k]; !(v >= 0 && v <= 1) {
					t.Errorf("%s = %v", k, v)
				}
			}
			if variant == nvib.ModelBaseline {
				if rep.Privacy != nil {
					t.Errorf("baseline has a privacy summary")
				}
				return
			}
			p := rep.Privacy
			if p.Examples != 12 || p.Pairs != 12*11 || p.Components != F+1 || p.Split != "dev" {
				t.Errorf("audit: %d examples, %d pairs, N = %d, split %s; want 12, 132, %d, dev", p.Examples, p.Pairs, p.Components, p.Split, F+1)
			}
			if p.Empirical.Label != privacy.LabelEmpirical || !strings.Contains(p.Empirical.Scope, "dev utterances") {
				t.Errorf("empirical label %+v", p.Empirical)
			}
			eps := float64(p.Certified.Epsilon)
			switch variant {
			case nvib.ModelNVDPClipped, nvib.ModelGaussian:
				c, err := model.LoadCalibration(o.Out)
				if err != nil {
					t.Fatal(err)
				}
				if c.Components != F+1 || math.Abs(float64(c.Guarantee.Epsilon)-64) > 1e-6*64 {
					t.Errorf("certificate: N %d, epsilon %v; want %d, 64", c.Components, float64(c.Guarantee.Epsilon), F+1)
				}
				if !(float64(p.RDMax) <= float64(p.Certified.RD)*(1+1e-9)) {
					t.Errorf("empirical RD max %v above the certified RD %v", float64(p.RDMax), float64(p.Certified.RD))
				}
				if math.IsInf(eps, 0) || !(eps > 0) {
					t.Errorf("certified epsilon %v", eps)
				}
			case nvib.ModelNVDP:
				if !math.IsInf(eps, 1) {
					t.Errorf("nvdp (no clipping) certified epsilon %v, want +Inf", eps)
				}
			}
			if variant != nvib.ModelNVDPClipped {
				return
			}
			// the saved model evaluates to the report's numbers again
			m, so, err := LoadModel(o.Out)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Evaluate(context.Background(), o.Out, m, so, EvalOptions{Split: "test", BatchSize: 12, Seed: po.EvalSeed, Out: t.TempDir(), NoPost: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Metrics[MetricF1] != rep.Utility[MetricF1] {
				t.Errorf("re-evaluation macro-F1 %v, report %v", r.Metrics[MetricF1], rep.Utility[MetricF1])
			}
		})
	}
}

// TestOptionsErrors: every bad option is refused before any work, naming
// the option; an explicit 0 is not replaced by a default.
func TestOptionsErrors(t *testing.T) {
	root := t.TempDir()
	for _, tc := range []struct {
		name, option string
		edit         func(o *Options)
	}{
		{"reference", "mode", func(o *Options) { o.Train.Mode = privacy.ModeReference }},
		{"zero seconds", "max_seconds", func(o *Options) { o.MaxSeconds = 0 }},
		{"no frame", "max_seconds", func(o *Options) { o.MaxSeconds = 0.01 }},
		{"NaN seconds", "max_seconds", func(o *Options) { o.MaxSeconds = math.NaN() }},
		{"no data", "data_dir", func(o *Options) { o.DataDir = "" }},
		{"text encoder", "encoder", func(o *Options) { o.Train.Encoder = "scratch:bert-tiny" }},
		{"zero lambda kept, negative refused", "lambda", func(o *Options) { o.Train.Lambda = -1 }},
		{"zero epochs", "epochs", func(o *Options) { o.Train.Epochs = 0 }},
		{"other task", "task", func(o *Options) { o.Train.Task = "sst2" }},
		{"target epsilon 0", "target_epsilon", func(o *Options) { o.Train.TargetEpsilon = 0 }},
		{"target RD 0", "target_rd", func(o *Options) { o.Train.TargetRD = 0 }},
	} {
		o := DefaultOptions()
		o.DataDir, o.Train.Out, o.Train.HandSetClipping = root, filepath.Join(root, "out"), true
		tc.edit(&o)
		o.Resolve()
		err := o.Validate()
		var oe *option.Error
		if !errors.As(err, &oe) || oe.Option != tc.option {
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.option)
		}
	}
	o := DefaultOptions()
	o.DataDir, o.Train.Out, o.Train.Lambda, o.Train.HandSetClipping = root, filepath.Join(root, "out"), 0, true
	o.Resolve()
	if err := o.Validate(); err != nil || o.Train.Lambda != 0 || o.Train.MaxSeqLen != 99 {
		t.Errorf("explicit lambda 0: %v, lambda %v, frames %d (want nil, 0, 99)", err, o.Train.Lambda, o.Train.MaxSeqLen)
	}
	for _, v := range []string{nvib.ModelNVDPClipped, nvib.ModelNVDP} {
		o := DefaultOptions()
		o.Train.Variant = v
		o.Resolve()
		want := map[string]float64{nvib.ModelNVDPClipped: PaperLambdaClip, nvib.ModelNVDP: PaperLambdaNVDP}[v]
		if o.Train.Lambda != want || o.Train.CMu != PaperCMu || o.Train.CAlphaMax != PaperCAlphaMax {
			t.Errorf("%s defaults: lambda %v C_mu %v C_amax %v", v, o.Train.Lambda, o.Train.CMu, o.Train.CAlphaMax)
		}
	}
}

// TestLoadOptionsTarget: speech_options.json of version 2, where a target
// of 0 meant none, reads as before (no target, the current version); in a
// version-3 file a target of 0 is an error naming the file and the option;
// a version newer than this program's is an error.
func TestLoadOptionsTarget(t *testing.T) {
	o := DefaultOptions()
	o.DataDir, o.Train.Out, o.Train.HandSetClipping = t.TempDir(), t.TempDir(), true
	o.Resolve()
	for _, tc := range []struct {
		name    string
		version int
		set     map[string]any // keys of "train"
		eps     float64        // -1: no target
		err     string
	}{
		{"v2 epsilon 0", 2, map[string]any{"target_epsilon": 0}, -1, ""},
		{"v2 RD 0", 2, map[string]any{"target_rd": 0}, -1, ""},
		{"v2 epsilon 32", 2, map[string]any{"target_epsilon": 32}, 32, ""},
		{"v3 null", 3, map[string]any{"target_epsilon": nil}, -1, ""},
		{"v3 epsilon 0", 3, map[string]any{"target_epsilon": 0}, 0, "target_epsilon 0: must be > 0 (leave it out for no target)"},
		{"v3 RD 0", 3, map[string]any{"target_rd": 0}, 0, "target_rd 0: must be > 0 (leave it out for no target)"},
		{"v5", 5, nil, 0, "options_version 5: this program reads versions 2, 3 and 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := saveOptions(dir, &o); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, OptionsFile)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]json.RawMessage
			var tr map[string]any
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw["train"], &tr); err != nil {
				t.Fatal(err)
			}
			if tr["target_epsilon"] != nil || tr["target_rd"] != nil {
				t.Fatalf("no target written as %v, %v; want null", tr["target_epsilon"], tr["target_rd"])
			}
			tr["options_version"] = tc.version
			if tc.version < 4 { // hand_set_clipping is version 4's
				delete(tr, "hand_set_clipping")
			}
			if tc.version == 2 { // version 2 left no target out
				delete(tr, "target_epsilon")
				delete(tr, "target_rd")
			}
			for k, v := range tc.set {
				tr[k] = v
			}
			if raw["train"], err = json.Marshal(tr); err != nil {
				t.Fatal(err)
			}
			if b, err = json.Marshal(raw); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := LoadOptions(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), path+": "+tc.err) {
					t.Errorf("LoadOptions: %v, want an error naming %s and %q", err, path, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e := got.Train.TargetEpsilon
			if tc.eps == -1 && (!model.IsNoTarget(e) || got.Train.HasTarget()) || tc.eps != -1 && e != tc.eps || got.Train.Version != model.OptionsVersion {
				t.Errorf("read target epsilon %v (RD %v), version %d; want %v (-1: none), version %d", e, got.Train.TargetRD, got.Train.Version, tc.eps, model.OptionsVersion)
			}
		})
	}
}

// TestLoadOptionsHandSet (issue 31, "A guarantee by default"): a speech
// model of version 2 or 3 trained its clipped variant without a target
// with the hand-set constants: it reads with hand_set_clipping (and loads,
// evaluates and resumes as before); with a target it does not. A version-4
// file of a clipped variant with neither is an error naming the file and
// target_epsilon.
func TestLoadOptionsHandSet(t *testing.T) {
	o := DefaultOptions()
	o.DataDir, o.Train.Out, o.Train.HandSetClipping = t.TempDir(), t.TempDir(), true
	o.Resolve()
	for _, tc := range []struct {
		name    string
		version int
		set     map[string]any // keys of "train"
		handSet bool
		err     string
	}{
		{"v2 no target", 2, nil, true, ""},
		{"v3 no target", 3, nil, true, ""},
		{"v3 gaussian", 3, map[string]any{"variant": nvib.ModelGaussian, "c_alpha_min": 0, "logvar_margin": 0}, true, ""},
		{"v3 epsilon 32", 3, map[string]any{"target_epsilon": 32}, false, ""},
		{"v3 nvdp", 3, map[string]any{"variant": nvib.ModelNVDP, "lambda": PaperLambdaNVDP}, false, ""},
		{"v4 hand-set", 4, map[string]any{"hand_set_clipping": true}, true, ""},
		{"v4 neither", 4, nil, false, "target_epsilon: required for the nvdp-clipped variant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := saveOptions(dir, &o); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, OptionsFile)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]json.RawMessage
			var tr map[string]any
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw["train"], &tr); err != nil {
				t.Fatal(err)
			}
			tr["options_version"] = tc.version
			delete(tr, "hand_set_clipping") // only version 4 has it, and only where set below
			if tc.version == 2 {
				delete(tr, "target_epsilon")
				delete(tr, "target_rd")
			}
			for k, v := range tc.set {
				tr[k] = v
			}
			if raw["train"], err = json.Marshal(tr); err != nil {
				t.Fatal(err)
			}
			if b, err = json.Marshal(raw); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := LoadOptions(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), path+": "+tc.err) {
					t.Errorf("LoadOptions: %v, want an error naming %s and %q", err, path, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Train.HandSetClipping != tc.handSet || got.Train.Version != model.OptionsVersion {
				t.Errorf("read hand_set_clipping %v, version %d; want %v, version %d", got.Train.HandSetClipping, got.Train.Version, tc.handSet, model.OptionsVersion)
			}
		})
	}
}

// TestPretrainedModelMoves: a model trained from an hf:DIR checkpoint keeps
// the encoder's configuration in its own directory, so it loads and
// evaluates to the same numbers after DIR is gone (moved, deleted, another
// machine). The checkpoint's configuration has SpecAugment (time masking
// of 5 frames): training masks frames and learns masked_spec_embed, which
// the model directory keeps; a crop of fewer frames than a span is refused.
func TestPretrainedModelMoves(t *testing.T) {
	cfg, err := wav2vec2.Preset("small")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaskTimeProb, cfg.MaskTimeLength = 0.2, 5
	enc, err := wav2vec2.New(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	hf := filepath.Join(t.TempDir(), "w2v")
	if err := wav2vec2.Save(hf, enc); err != nil {
		t.Fatal(err)
	}
	o, eval := tinyTrained(t, "hf:"+hf, func(m *Model) {
		if e := m.Encoder.MaskedSpecEmbed; e == nil || slices.Equal(e.Value.Data, enc.MaskedSpecEmbed.Value.Data) {
			t.Errorf("masked_spec_embed not trained or not kept: %v", e)
		}
	})
	before := eval()
	short := o
	short.MaxSeconds = 0.1 // 4 frames, fewer than a span of 5
	short.Resolve()
	if err := short.Validate(); err == nil || !strings.Contains(err.Error(), "mask_time_length") {
		t.Errorf("a crop shorter than a SpecAugment span: error %v", err)
	}
	if err := os.RemoveAll(hf); err != nil {
		t.Fatal(err)
	}
	if after := eval(); after != before {
		t.Errorf("macro-F1 %v after the checkpoint directory was removed, %v before", after, before)
	}
}

// TestModelDirBeforeSpecAugment: a model directory whose config.json has no
// SpecAugment fields (written before they were) loads with the parameters
// it was saved with and evaluates to the same macro-F1; read as a
// checkpoint's config.json, the same file would take transformers' defaults
// and ask for a masked_spec_embed the model file does not have.
func TestModelDirBeforeSpecAugment(t *testing.T) {
	o, eval := tinyTrained(t, "", func(m *Model) {
		if m.Encoder.MaskedSpecEmbed != nil {
			t.Error("a model trained without SpecAugment has masked_spec_embed")
		}
	})
	before := eval()
	path := filepath.Join(o.Train.Out, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for k := range raw {
		if strings.HasPrefix(k, "mask_") || k == "apply_spec_augment" {
			delete(raw, k)
		}
	}
	if b, err = json.Marshal(raw); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := wav2vec2.ReadConfig(path); err != nil || cfg.MaskTimeProb != 0.05 {
		t.Fatalf("the old file as a checkpoint's config: mask_time_prob %v, %v; want transformers' 0.05", cfg.MaskTimeProb, err)
	}
	if after := eval(); after != before {
		t.Errorf("macro-F1 %v from the old config.json, %v before", after, before)
	}
}

// tinyTrained trains nvdp-clipped for one epoch (3 steps) of a 12-utterance
// tone corpus with encoder spec enc (scratch:small when "") into a new
// model directory, and returns its options and a function that loads the
// directory and gives its test macro-F1 (checking the model with check).
func tinyTrained(t *testing.T, enc string, check func(*Model)) (Options, func() float64) {
	t.Helper()
	root := t.TempDir()
	lidtest.WriteToneCorpus(t, root, map[string]int{"train": 4, "dev": 4, "test": 4})
	o := DefaultOptions()
	o.DataDir, o.MaxSeconds = root, 0.5
	if enc != "" {
		o.Train.Encoder = enc
	}
	o.Train.Variant, o.Train.Epochs, o.Train.BatchSize, o.Train.EvalBatchSize = nvib.ModelNVDPClipped, 1, 4, 12
	o.Train.Out, o.Train.HandSetClipping = filepath.Join(t.TempDir(), "model"), true
	o.Resolve()
	if _, err := Run(context.Background(), o, nil); err != nil {
		t.Fatal(err)
	}
	return o, func() float64 {
		t.Helper()
		m, so, err := LoadModel(o.Train.Out)
		if err != nil {
			t.Fatal(err)
		}
		if check != nil {
			check(m)
		}
		r, err := Evaluate(context.Background(), o.Train.Out, m, so, EvalOptions{Split: "test", BatchSize: 12, Seed: 1, Out: t.TempDir(), NoPost: true})
		if err != nil {
			t.Fatal(err)
		}
		return r.Metrics[MetricF1]
	}
}
