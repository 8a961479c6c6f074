package mlm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/fma"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/option"
)

// validOptions are DefaultOptions with the required options given.
func validOptions() Options {
	o := DefaultOptions()
	o.Corpus, o.Vocab, o.Out, o.Steps = "corpus.txt", "vocab.txt", "out", 100
	return o
}

// TestDefaultOptions: the defaults, once, as the CLI's help and
// docs/pretraining.md state them; the options that depend on others are
// Auto, not 0.
func TestDefaultOptions(t *testing.T) {
	d := DefaultOptions()
	want := Options{Version: optionsVersion, Config: "bert-mini", Seq: 128, BatchSize: 64, LR: 5e-4, WarmupRatio: 0.06,
		WeightDecay: 0.01, GradClip: 1, MaskProb: 0.15, Holdout: option.AutoInt, MaxEvalSeqs: 1024, Seed: 1,
		SaveEvery: 500, EvalEvery: option.AutoInt}
	if !option.IsAuto(d.Dropout) {
		t.Errorf("dropout %v, want Auto", d.Dropout)
	}
	d.Dropout = 0
	if d != want {
		t.Errorf("DefaultOptions()\n %+v, want\n %+v", d, want)
	}
}

// TestValidate: every bad value is an *option.Error naming the option by its
// JSON key (an explicit 0 where it means nothing included: it used to be
// replaced by the default); an explicit 0 where it is a choice is valid.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(o *Options)
		want string // "" : valid
	}{
		{"defaults", func(o *Options) {}, ""},
		{"grad_clip 0 (off)", func(o *Options) { o.GradClip = 0 }, ""},
		{"save_every 0", func(o *Options) { o.SaveEvery = 0 }, ""},
		{"eval_every 0", func(o *Options) { o.EvalEvery = 0 }, ""},
		{"dropout 0", func(o *Options) { o.Dropout = 0 }, ""},
		{"warm-up 0, decay 0", func(o *Options) { o.WarmupRatio, o.WeightDecay = 0, 0 }, ""},
		{"init_from without vocab", func(o *Options) { o.Vocab, o.InitFrom = "", "ckpt" }, ""},
		{"no corpus", func(o *Options) { o.Corpus = "" }, "corpus: required"},
		{"no out", func(o *Options) { o.Out = "" }, "out: required"},
		{"no vocab", func(o *Options) { o.Vocab = "" }, "vocab: required"},
		{"no config", func(o *Options) { o.Config = "" }, "config: required"},
		{"steps 0", func(o *Options) { o.Steps = 0 }, "steps 0: must be >= 1"},
		{"seq 0", func(o *Options) { o.Seq = 0 }, "seq 0: must be >= 8"},
		{"batch_size 0", func(o *Options) { o.BatchSize = 0 }, "batch_size 0: must be >= 1"},
		{"batch_size -1", func(o *Options) { o.BatchSize = -1 }, "batch_size -1: must be >= 1"},
		{"holdout 0", func(o *Options) { o.Holdout = 0 }, "holdout 0: must be >= 1"},
		{"holdout -2", func(o *Options) { o.Holdout = -2 }, "holdout -2: must be >= 1"},
		{"max_eval_seqs 0", func(o *Options) { o.MaxEvalSeqs = 0 }, "max_eval_seqs 0: must be >= 1"},
		{"save_every -1", func(o *Options) { o.SaveEvery = -1 }, "save_every -1: must be >= 0"},
		{"eval_every -3", func(o *Options) { o.EvalEvery = -3 }, "eval_every -3: must be >= 0"},
		{"stop_after_steps -1", func(o *Options) { o.StopAfterSteps = -1 }, "stop_after_steps -1: must be >= 0"},
		{"lr 0", func(o *Options) { o.LR = 0 }, "lr 0: must be > 0"},
		{"lr -1", func(o *Options) { o.LR = -1 }, "lr -1: must be > 0"},
		{"lr NaN", func(o *Options) { o.LR = math.NaN() }, "lr NaN: must be a finite number"},
		{"lr +Inf", func(o *Options) { o.LR = math.Inf(1) }, "lr +Inf: must be a finite number"},
		{"grad_clip -1", func(o *Options) { o.GradClip = -1 }, "grad_clip -1: must be >= 0 (0: no clipping)"},
		{"grad_clip NaN", func(o *Options) { o.GradClip = math.NaN() }, "grad_clip NaN: must be a finite number"},
		{"mask_prob 0", func(o *Options) { o.MaskProb = 0 }, "mask_prob 0: must be in (0, 1)"},
		{"mask_prob 1", func(o *Options) { o.MaskProb = 1 }, "mask_prob 1: must be in (0, 1)"},
		{"warmup_ratio 1", func(o *Options) { o.WarmupRatio = 1 }, "warmup_ratio 1: must be in [0, 1)"},
		{"weight_decay -0.1", func(o *Options) { o.WeightDecay = -0.1 }, "weight_decay -0.1: must be >= 0"},
		{"dropout 1", func(o *Options) { o.Dropout = 1 }, "dropout 1: must be in [0, 1)"},
		{"dropout -Inf", func(o *Options) { o.Dropout = math.Inf(-1) }, "dropout -Inf: must be a finite number"},
	} {
		o := validOptions()
		tc.set(&o)
		err := o.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var oe *option.Error
		if !errors.As(err, &oe) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an *option.Error %q", tc.name, err, tc.want)
		}
	}
}

// TestResolve: the Auto options take their defaults from what they depend
// on; explicit values, 0 included, stay; a config with two dropouts cannot
// resolve the one value.
func TestResolve(t *testing.T) {
	cfg, err := encoder.Preset("bert-tiny")
	if err != nil {
		t.Fatal(err)
	}
	o := validOptions()
	o.Steps = 2500
	if err := o.Resolve(cfg, 91507); err != nil {
		t.Fatal(err)
	}
	if o.EvalEvery != 125 || o.Holdout != 915 || o.Dropout != 0.1 {
		t.Errorf("resolved eval_every %d holdout %d dropout %v, want 125, 915, 0.1", o.EvalEvery, o.Holdout, o.Dropout)
	}
	again := o
	if err := again.Resolve(cfg, 10); err != nil || again != o {
		t.Errorf("Resolve is not idempotent: %+v, %v", again, err)
	}
	o = validOptions()
	o.Steps, o.EvalEvery, o.Holdout, o.Dropout = 10, 0, 3, 0
	if err := o.Resolve(cfg, 91507); err != nil || o.EvalEvery != 0 || o.Holdout != 3 || o.Dropout != 0 {
		t.Errorf("explicit values replaced: eval_every %d holdout %d dropout %v (%v)", o.EvalEvery, o.Holdout, o.Dropout, err)
	}
	o = validOptions()
	o.Steps = 10
	if err := o.Resolve(cfg, 5); err != nil || o.EvalEvery != 1 || o.Holdout != 1 {
		t.Errorf("small run: eval_every %d holdout %d (%v), want 1, 1", o.EvalEvery, o.Holdout, err)
	}
	cfg.AttentionProbsDropoutProb = 0.2
	o = validOptions()
	var oe *option.Error
	if err := o.Resolve(cfg, 100); !errors.As(err, &oe) || oe.Option != "dropout" {
		t.Errorf("hidden dropout 0.1, attention 0.2: %v, want an error on dropout", err)
	}
}

// TestOptionsJSON: Auto options are written as null and read back as Auto
// (a missing key too); explicit zeros survive; an unknown key is an error.
func TestOptionsJSON(t *testing.T) {
	o := validOptions()
	o.GradClip, o.SaveEvery = 0, 0
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"holdout":null`, `"dropout":null`, `"eval_every":null`, `"grad_clip":0`, `"save_every":0`, `"options_version":1`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("%s lacks %s", b, s)
		}
	}
	var back Options
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Holdout != option.AutoInt || back.EvalEvery != option.AutoInt || !option.IsAuto(back.Dropout) {
		t.Errorf("Auto options read back as %d, %d, %v", back.Holdout, back.EvalEvery, back.Dropout)
	}
	back.Dropout, o.Dropout = 0, 0
	if back != o {
		t.Errorf("round trip\n %+v, want\n %+v", back, o)
	}
	if err := json.Unmarshal([]byte(`{"corpus":"c","holdout":5,"eval_every":0,"dropout":0}`), &back); err != nil ||
		back.Holdout != 5 || back.EvalEvery != 0 || back.Dropout != 0 {
		t.Errorf("explicit values: %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"corpus":"c","bach_size":5}`), &back); err == nil || !strings.Contains(err.Error(), "bach_size") {
		t.Errorf("unknown key: %v", err)
	}
}

// TestReadOptions: a saved options file is validated again (a batch_size 0
// in a current file is an error naming the file and the option, not the
// default), a version-0 file's zeros are that code's defaults, and an
// unknown version is refused.
func TestReadOptions(t *testing.T) {
	dir := t.TempDir()
	write := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, OptionsFile)
		writeFile(t, path, string(b))
		return path
	}
	o := validOptions()
	o.BatchSize = 0
	path := write(o)
	if _, err := readOptions(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "batch_size 0: must be >= 1") {
		t.Errorf("batch_size 0: %v", err)
	}
	o.BatchSize, o.Version = 8, 7
	if _, err := readOptions(write(o)); err == nil || !strings.Contains(err.Error(), "options_version 7") {
		t.Errorf("version 7: %v", err)
	}
	v0 := map[string]any{"corpus": "c", "config": "bert-tiny", "vocab": "v", "out": "o", "steps": 40, "seq": 0, "batch_size": 0,
		"lr": 0, "grad_clip": 0, "mask_prob": 0, "holdout": 0, "max_eval_seqs": 0, "save_every": 0, "eval_every": 0, "seed": 5}
	got, err := readOptions(write(v0))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultOptions()
	want.Corpus, want.Config, want.Vocab, want.Out, want.Steps, want.Seed, want.WarmupRatio, want.WeightDecay = "c", "bert-tiny", "v", "o", 40, 5, 0, 0
	got.Dropout, want.Dropout = 0, 0
	if got != want {
		t.Errorf("version 0 with zeros:\n %+v, want\n %+v", got, want)
	}
	v0["grad_clip"] = -1
	if got, err := readOptions(write(v0)); err != nil || got.GradClip != 0 {
		t.Errorf("version 0 grad_clip -1: %v (%v), want 0 (off)", got.GradClip, err)
	}
}

// TestRunChecksBeforeWork: bad options and missing files fail before any
// work and before the output directory exists; the errors about the options
// given are bare *option.Errors (a program maps them to its names).
func TestRunChecksBeforeWork(t *testing.T) {
	loadVocab(t)
	corpus := filepath.Join(t.TempDir(), "c.txt")
	writeFile(t, corpus, strings.Repeat("a line of text\nanother line\n", 20))
	for _, tc := range []struct {
		name   string
		set    func(o *Options)
		option string // the *option.Error's option; "" : another error
		want   string
	}{
		{"grad_clip NaN", func(o *Options) { o.GradClip = math.NaN() }, "grad_clip", "must be a finite number"},
		{"holdout 0", func(o *Options) { o.Holdout = 0 }, "holdout", "must be >= 1"},
		{"missing corpus", func(o *Options) { o.Corpus = "/nonexistent/corpus.txt" }, "corpus", "no such file"},
		{"glue: not a directory", func(o *Options) { o.Corpus = "glue:" + corpus }, "corpus", "not a directory"},
		{"missing vocab", func(o *Options) { o.Vocab = "/nonexistent/vocab.txt" }, "vocab", "no such file"},
		{"unknown preset", func(o *Options) { o.ModelConfig, o.Config = nil, "bert-huge" }, "config", "neither a config.json file nor a preset"},
		{"init_from without config.json", func(o *Options) { o.ModelConfig, o.InitFrom = nil, t.TempDir() }, "init_from", "no config.json"},
		{"seq beyond the positions", func(o *Options) { o.Seq = 100 }, "seq", "exceeds the model's 64 positions"},
		{"holdout of every document", func(o *Options) { o.Holdout = 40 }, "", "leaves none of the 2 for training"},
		{"change without resume", func(o *Options) { o.Change.Steps = new(5) }, "", "Change changes a resumed run's options"},
	} {
		o := smallOptions(corpus, filepath.Join(t.TempDir(), "run"), 5)
		tc.set(&o)
		_, err := Run(context.Background(), o, nil)
		oe, isOption := err.(*option.Error)
		switch {
		case err == nil || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		case tc.option != "" && (!isOption || oe.Option != tc.option):
			t.Errorf("%s: %v, want a bare *option.Error on %s", tc.name, err, tc.option)
		}
		if _, err := os.Stat(o.Out); !os.IsNotExist(err) {
			t.Errorf("%s: %s was created (%v)", tc.name, o.Out, err)
		}
	}
}

// TestExplicitZeros: an explicit 0 is what the run uses, never the default
// it used to be replaced by: grad_clip 0 trains without clipping (the model
// of a bound no gradient reaches, not the model of the default bound 1),
// eval_every 0 evaluates only at the end (not every steps/20), dropout 0
// with a given ModelConfig is the model's dropout (it was ignored), and the
// saved options keep the zeros.
func TestExplicitZeros(t *testing.T) {
	corpus := glueCorpus(t)
	run := func(gradClip float64, set func(o *Options)) (string, *Result) {
		t.Helper()
		o := smallOptions(corpus, filepath.Join(t.TempDir(), "run"), 4)
		o.GradClip = gradClip
		set(&o)
		r, err := Run(context.Background(), o, nil)
		if err != nil {
			t.Fatal(err)
		}
		return o.Out, r
	}
	weights := func(dir string) string {
		w, err := os.ReadFile(filepath.Join(dir, encoder.WeightsFile))
		if err != nil {
			t.Fatal(err)
		}
		return string(w)
	}
	zero, _ := run(0, func(o *Options) { o.EvalEvery, o.SaveEvery, o.Dropout = 0, 0, 0 })
	unclipped, _ := run(1e9, func(o *Options) { o.Dropout = 0 })
	clipped, _ := run(1, func(o *Options) { o.Dropout = 0 })
	if weights(zero) != weights(unclipped) || weights(zero) == weights(clipped) {
		t.Error("grad_clip 0 did not train as an unreachable bound (no clipping), or clipping at 1 changed nothing")
	}
	saved, err := readOptions(filepath.Join(zero, OptionsFile))
	if err != nil {
		t.Fatal(err)
	}
	if saved.GradClip != 0 || saved.EvalEvery != 0 || saved.SaveEvery != 0 || saved.Dropout != 0 || saved.Holdout != 30 ||
		saved.ModelConfig.HiddenDropoutProb != 0 || saved.ModelConfig.AttentionProbsDropoutProb != 0 {
		t.Errorf("saved options %+v (model config %+v): the explicit zeros changed", saved, *saved.ModelConfig)
	}
	var steps []string
	for _, m := range readMetrics(t, filepath.Join(zero, metricsFile)) {
		steps = append(steps, fmt.Sprintf("%s@%d", m.Split, m.Step))
	}
	if got := strings.Join(steps, " "); got != "heldout@0 train@4 heldout@4" {
		t.Errorf("eval_every 0: metrics lines %s, want heldout@0 train@4 heldout@4", got)
	}
}

// TestResumeVersion0: testdata/pretrain_options_v0.json was written by the
// code before the explicit defaults (`grad_clip: -1` for no clipping,
// `holdout: 0` for the default slice, no dropout for the config's). A run
// stopped after 5 steps whose options file is that one resumes (with its
// steps changed to 12) to the model of the straight 12-step run with the
// same options written today (grad_clip 0, holdout and dropout Auto); with
// the pure-Go backend on amd64 that model is the old code's (digest taken
// at 30cff79), so the upgrade keeps the numbers. The rewritten file is
// version 1 with the resolved values.
func TestResumeVersion0(t *testing.T) {
	if testing.Short() {
		t.Skip("two short pretraining runs")
	}
	corpus := glueCorpus(t)
	fixture, err := os.ReadFile(filepath.Join("testdata", "pretrain_options_v0.json"))
	if err != nil {
		t.Fatal(err)
	}
	options := func(out string) Options {
		o := smallOptions(corpus, out, 12)
		o.GradClip, o.Holdout = 0, DefaultOptions().Holdout
		return o
	}
	straight := filepath.Join(t.TempDir(), "straight")
	if _, err := Run(context.Background(), options(straight), nil); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "v0")
	o := options(dir)
	o.StopAfterSteps = 5
	if _, err := Run(context.Background(), o, nil); err != nil {
		t.Fatal(err)
	}
	v0 := strings.NewReplacer("$CORPUS", corpus, "$VOCAB", bertVocab, "$OUT", dir).Replace(string(fixture))
	writeFile(t, filepath.Join(dir, OptionsFile), v0)
	r, err := Run(context.Background(), Options{Out: dir, Resume: true, Change: Change{Steps: new(12)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Steps != 12 || r.HeldOutDocs != 36 {
		t.Errorf("resumed run: %d steps, %d held-out documents; want 12, 36 (1%% of 360, at least 10%%)", r.Steps, r.HeldOutDocs)
	}
	sameRun(t, straight, dir, true)
	saved, err := readOptions(filepath.Join(dir, OptionsFile))
	if err != nil {
		t.Fatal(err)
	}
	if saved.Version != optionsVersion || saved.GradClip != 0 || saved.Holdout != 36 || saved.Dropout != 0.1 || saved.EvalEvery != 10 || saved.Steps != 12 {
		t.Errorf("rewritten options %+v", saved)
	}
	if nn.Backend() != "gonum (pure Go)" || fma.Fuses {
		t.Skipf("the old code's digest is for the pure-Go backend on amd64 without fused multiply-adds (GOAMD64 < v3), not %s on %s", nn.Backend(), runtime.GOARCH)
	}
	w, err := os.ReadFile(filepath.Join(straight, encoder.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if s := sha256.Sum256(w); hex.EncodeToString(s[:8]) != "c756ac0c90b492d3" {
		t.Errorf("model.safetensors digest %s, want the old code's c756ac0c90b492d3", hex.EncodeToString(s[:8]))
	}
}
