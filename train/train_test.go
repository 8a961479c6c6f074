package train

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/internal/jsonl"
	"github.com/nvdp-project/nvdp/internal/loop"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/safetensors"
	"github.com/nvdp-project/nvdp/tokenize"
)

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

var synthWords = struct{ pos, neg, filler []string }{
	pos:    []string{"good", "great", "fine", "lovely"},
	neg:    []string{"bad", "awful", "poor", "dull"},
	filler: []string{"the", "movie", "is", "very", "a", "plot", "and", "acting"},
}

// synthGlue writes a synthetic SST-2 (train, dev, test) whose label is the
// sentiment word it contains, and a WordPiece vocab.txt; returns (glueDir, vocab).
func synthGlue(t *testing.T, nTrain, nDev int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	vocab := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	vocab = append(vocab, synthWords.pos...)
	vocab = append(vocab, synthWords.neg...)
	vocab = append(vocab, synthWords.filler...)
	vpath := filepath.Join(dir, "vocab.txt")
	if err := os.WriteFile(vpath, []byte(strings.Join(vocab, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	sentence := func() (string, int) {
		n := 2 + rng.IntN(8)
		w := make([]string, n)
		for i := range w {
			w[i] = synthWords.filler[rng.IntN(len(synthWords.filler))]
		}
		label := rng.IntN(2)
		src := synthWords.neg
		if label == 1 {
			src = synthWords.pos
		}
		w[rng.IntN(n)] = src[rng.IntN(len(src))]
		return strings.Join(w, " "), label
	}
	gd := filepath.Join(dir, "glue", "SST-2")
	if err := os.MkdirAll(gd, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sp := range []struct {
		name string
		n    int
	}{{"train", nTrain}, {"dev", nDev}, {"test", nDev}} {
		var b strings.Builder
		if sp.name == "test" {
			b.WriteString("index\tsentence\n")
		} else {
			b.WriteString("sentence\tlabel\n")
		}
		for i := 0; i < sp.n; i++ {
			s, l := sentence()
			if sp.name == "test" {
				fmt.Fprintf(&b, "%d\t%s\n", i, s)
			} else {
				fmt.Fprintf(&b, "%s\t%d\n", s, l)
			}
		}
		if err := os.WriteFile(filepath.Join(gd, sp.name+".tsv"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "glue"), vpath
}

func synthOptions(t *testing.T, glueDir, vocab, out string) model.Options {
	o := model.DefaultOptions()
	o.Task, o.GlueDir, o.Encoder, o.Vocab, o.Variant = "sst2", glueDir, "scratch:bert-tiny", vocab, nvib.ModelNVDPClipped
	o.Epochs, o.BatchSize, o.EvalBatchSize, o.LR, o.MaxSeqLen, o.Seed, o.CheckpointEach = 2, 8, 8, 3e-3, 16, 3, 3
	o.Out, o.ScratchConfig, o.Patience = out, tinyConfig(t, 16, 1, 32), 0
	o.HandSetClipping = true // no privacy target: the tests that calibrate set one and clear this
	return o
}

func loadOptimizer(t *testing.T, dir string) *nn.AdamW {
	t.Helper()
	b, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	opt := nn.NewAdamW(1, nn.AdamBeta1, nn.AdamBeta2, nn.AdamEps, 0)
	if _, err := nn.LoadCheckpoint(filepath.Join(dir, CheckpointFile), b.Model.Params(), opt); err != nil {
		t.Fatal(err)
	}
	return opt
}

func readTextModel(t *testing.T, dir string) *model.TextModel {
	t.Helper()
	b, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readWeights(t *testing.T, dir string) map[string][]float32 {
	t.Helper()
	b, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for _, p := range b.Model.Params() {
		out[p.Name] = append([]float32(nil), p.Value.Data...)
	}
	return out
}

// metricsWithoutTime returns metrics.jsonl without the wall-time field.
func metricsWithoutTime(t *testing.T, dir string) []EpochMetrics {
	t.Helper()
	h, err := ReadMetrics(filepath.Join(dir, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	for i := range h {
		h[i].Seconds = 0
	}
	return h
}

// TestResumeEqualsUninterrupted stops a run twice (mid epoch 1 and mid epoch
// 2, off the checkpoint grid) and resumes it; the final weights and the
// metrics must equal those of an uninterrupted run bit for bit.
func TestResumeEqualsUninterrupted(t *testing.T) {
	glueDir, vocab := synthGlue(t, 64, 24)
	ctx := context.Background()
	full := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "full"))
	rFull, err := Run(ctx, full, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rFull.Steps != 16 || rFull.Epochs != 2 || rFull.Interrupted {
		t.Fatalf("full run: steps %d epochs %d interrupted %v, want 16, 2, false", rFull.Steps, rFull.Epochs, rFull.Interrupted)
	}
	outB := filepath.Join(t.TempDir(), "resumed")
	part := synthOptions(t, glueDir, vocab, outB)
	part.StopAfterSteps = 5
	r1, err := Run(ctx, part, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r1.Interrupted || r1.Steps != 5 {
		t.Fatalf("first part: interrupted %v steps %d, want true 5", r1.Interrupted, r1.Steps)
	}
	// Running again without Resume must refuse to overwrite the run.
	if _, err := Run(ctx, synthOptions(t, glueDir, vocab, outB), nil); !errors.Is(err, ErrRunExists) || !strings.Contains(err.Error(), "resume it") {
		t.Fatalf("rerun into a used output directory: err %v, want ErrRunExists with a resume hint", err)
	}
	r2, err := Run(ctx, model.Options{RunTime: model.RunTime{Out: outB, Resume: true, StopAfterSteps: 11}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r2.Interrupted || r2.Steps != 11 || r2.Epochs != 1 {
		t.Fatalf("second part: interrupted %v steps %d epochs %d, want true 11 1", r2.Interrupted, r2.Steps, r2.Epochs)
	}
	// Third part: cancelled (as SIGTERM does) after step 13, mid epoch 2,
	// off the checkpoint grid: a final checkpoint and an error that says so.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var seen []int64
	stopAt13 := func(e progress.Event) {
		seen = append(seen, e.Done)
		if e.Done == 13 {
			cancel(errors.New("terminated signal received"))
		}
	}
	_, err = Run(cctx, model.Options{RunTime: model.RunTime{Out: outB, Resume: true}}, stopAt13)
	var intr *loop.Interrupted
	if !errors.As(err, &intr) || intr.Step != 13 || !errors.Is(err, context.Canceled) ||
		!strings.Contains(err.Error(), "terminated signal received") || !strings.Contains(err.Error(), "resume the run") {
		t.Fatalf("cancelled run: err %v, want an interruption after step 13 (context.Canceled) with its cause and a resume hint", err)
	}
	if want := []int64{11, 12, 13}; !slices.Equal(seen, want) {
		t.Fatalf("progress of the cancelled session: steps %v, want %v", seen, want)
	}
	if m, err := nn.LoadCheckpoint(filepath.Join(outB, CheckpointFile), readTextModel(t, outB).Model.Params(), nil); err != nil ||
		!strings.Contains(m[stateKey], `"step":13`) {
		t.Fatalf("checkpoint after the cancel: %v, state %s; want step 13", err, m[stateKey])
	}
	r3, err := Run(ctx, model.Options{RunTime: model.RunTime{Out: outB, Resume: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r3.Steps != 16 || r3.Epochs != 2 || r3.BestEpoch != rFull.BestEpoch {
		t.Fatalf("resumed: steps %d epochs %d best %d, want 16 2 %d", r3.Steps, r3.Epochs, r3.BestEpoch, rFull.BestEpoch)
	}
	wa, wb := readWeights(t, full.Out), readWeights(t, outB)
	for name, a := range wa {
		b := wb[name]
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s[%d]: uninterrupted %v, resumed %v", name, i, a[i], b[i])
			}
		}
	}
	// The last checkpoints (final weights + AdamW state) are identical too.
	oa, ob := loadOptimizer(t, full.Out), loadOptimizer(t, outB)
	if oa.Step != 16 || ob.Step != 16 {
		t.Fatalf("AdamW steps %d / %d, want 16", oa.Step, ob.Step)
	}
	for name, m := range oa.M {
		for i := range m {
			if m[i] != ob.M[name][i] || oa.V[name][i] != ob.V[name][i] {
				t.Fatalf("AdamW state %s[%d] differs", name, i)
			}
		}
	}
	ma, mb := metricsWithoutTime(t, full.Out), metricsWithoutTime(t, outB)
	ja, _ := json.Marshal(ma)
	jb, _ := json.Marshal(mb)
	if !bytes.Equal(ja, jb) {
		t.Fatalf("metrics differ:\nuninterrupted %s\nresumed       %s", ja, jb)
	}
	if len(ma) != 2 {
		t.Fatalf("metrics.jsonl has %d lines, want 2", len(ma))
	}
	// A finished run resumes as a no-op.
	r4, err := Run(ctx, model.Options{RunTime: model.RunTime{Out: outB, Resume: true}}, nil)
	if err != nil || r4.Steps != 16 {
		t.Fatalf("resume of a finished run: %v, steps %d", err, r4.Steps)
	}
}

// TestResumeAfterCrashArtifacts resumes runs that a crash left in the states
// a SIGKILL produces: a torn last metrics line and a temporary checkpoint file
// (resume drops the line, removes the file and ends with the metrics of the
// uninterrupted run), and an emptied metrics file (resume refuses, naming the
// file and the lost epoch, instead of silently losing it); and one whose
// checkpoint an earlier build wrote.
func TestResumeAfterCrashArtifacts(t *testing.T) {
	glueDir, vocab := synthGlue(t, 64, 24)
	ctx := context.Background()
	full := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "full"))
	if _, err := Run(ctx, full, nil); err != nil {
		t.Fatal(err)
	}
	stopped := func() string {
		o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "run"))
		o.StopAfterSteps = 11 // epoch 1 done, mid epoch 2
		if _, err := Run(ctx, o, nil); err != nil {
			t.Fatal(err)
		}
		return o.Out
	}
	metrics := func(dir string) string { return filepath.Join(dir, MetricsFile) }

	dir := stopped()
	f, err := os.OpenFile(metrics(dir), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"epoch":2,"step":16,"tra`)
	f.Close()
	stale := filepath.Join(dir, "."+CheckpointFile+".tmp4242")
	if err := os.WriteFile(stale, make([]byte, 1<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, model.Options{RunTime: model.RunTime{Out: dir, Resume: true}}, nil); err != nil {
		t.Fatalf("resume after a torn metrics line: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale temporary checkpoint %s is still there (%v)", stale, err)
	}
	ja, _ := json.Marshal(metricsWithoutTime(t, full.Out))
	jb, _ := json.Marshal(metricsWithoutTime(t, dir))
	if !bytes.Equal(ja, jb) {
		t.Fatalf("metrics after resuming past a torn line:\n%s\nuninterrupted:\n%s", jb, ja)
	}

	dir = stopped()
	if err := os.WriteFile(metrics(dir), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Run(ctx, model.Options{RunTime: model.RunTime{Out: dir, Resume: true}}, nil)
	if err == nil || !strings.Contains(err.Error(), metrics(dir)) || !strings.Contains(err.Error(), "epoch(s) 1") {
		t.Fatalf("resume with an emptied metrics file: %v, want an error naming %s and epoch 1", err, metrics(dir))
	}

	// A checkpoint of a build before the training loop moved into
	// internal/loop: its train_state has the same keys, without the metrics
	// line count. It resumes to the uninterrupted run's end.
	dir = stopped()
	path := filepath.Join(dir, CheckpointFile)
	sf, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]json.RawMessage
	if err := json.Unmarshal([]byte(sf.Metadata[stateKey]), &state); err != nil {
		t.Fatal(err)
	}
	legacy := []string{"epoch", "batch", "step", "best_ep", "bad", "sums", "count", "ep_secs", "secs", "done", "stopped", "rng", "best"}
	if keys, want := slices.Sorted(maps.Keys(state)), slices.Sorted(slices.Values(append(legacy, "lines"))); !slices.Equal(keys, want) {
		t.Fatalf("train_state keys %v, want the legacy ones and lines: %v", keys, want)
	}
	delete(state, "lines")
	b, _ := json.Marshal(state)
	sf.Metadata[stateKey] = string(b)
	if err := safetensors.WriteFile(path, sf.Tensors, sf.Metadata); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, model.Options{RunTime: model.RunTime{Out: dir, Resume: true}}, nil); err != nil {
		t.Fatalf("resume of a legacy checkpoint: %v", err)
	}
	if paramDigest(readWeights(t, full.Out)) != paramDigest(readWeights(t, dir)) {
		t.Errorf("the legacy resume ends with other weights than the uninterrupted run")
	}
	if jb, _ := json.Marshal(metricsWithoutTime(t, dir)); !bytes.Equal(ja, jb) {
		t.Errorf("metrics after a legacy resume:\n%s\nuninterrupted:\n%s", jb, ja)
	}
}

// TestTrainingLearns checks that the loop actually optimises: on the
// synthetic task (label = the sentiment word) the baseline's dev accuracy
// after a few epochs is far above chance and its training loss decreases; the
// NVDP-Clipped run logs finite, positive KL terms (80 steps are too few for
// the noisy bottleneck to learn reliably; real-data figures in docs/training.md).
func TestTrainingLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	glueDir, vocab := synthGlue(t, 256, 64)
	for _, variant := range []string{nvib.ModelBaseline, nvib.ModelNVDPClipped} {
		t.Run(variant, func(t *testing.T) {
			o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), variant))
			o.Variant, o.Epochs, o.BatchSize = variant, 5, 16
			o.ScratchConfig = tinyConfig(t, 32, 1, 32)
			r, err := Run(context.Background(), o, nil)
			if err != nil {
				t.Fatal(err)
			}
			h, err := ReadMetrics(filepath.Join(o.Out, MetricsFile))
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != 5 {
				t.Fatalf("%d metrics lines, want 5", len(h))
			}
			if variant == nvib.ModelBaseline {
				if float64(r.BestMetric) < 0.9 {
					t.Errorf("best dev accuracy %.3f, want >= 0.9 (metrics %+v)", float64(r.BestMetric), h)
				}
				if !(h[4].Train["task"] < 0.5*h[0].Train["task"]) {
					t.Errorf("training task loss did not halve: %v -> %v", h[0].Train["task"], h[4].Train["task"])
				}
				return
			}
			for _, em := range h {
				if !(em.Train["kl_g"] > 0 && em.Train["kl_d"] > 0) || math.IsNaN(float64(em.Train["loss"])) {
					t.Errorf("epoch %d: KL terms %+v", em.Epoch, em.Train)
				}
			}
		})
	}
}

// TestPipelineBaselineSynthetic: `nvdp run` on the baseline has no posterior;
// the report says so, with privacy null.
func TestPipelineBaselineSynthetic(t *testing.T) {
	glueDir, vocab := synthGlue(t, 32, 16)
	o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "base"))
	o.Variant, o.Epochs = nvib.ModelBaseline, 1
	rep, err := RunPipeline(context.Background(), TextPipeline(), PipelineOptions{Train: o, Audit: audit.DefaultOptions()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Privacy != nil || rep.Note == "" {
		t.Fatalf("baseline privacy %+v note %q, want nil and a note", rep.Privacy, rep.Note)
	}
	raw := readJSON(t, filepath.Join(o.Out, ReportFile))
	if p, ok := raw["privacy"]; !ok || p != nil {
		t.Fatalf("report.json privacy = %v (present %v), want null", p, ok)
	}
	if _, ok := raw["utility"].(map[string]any)["accuracy"]; !ok {
		t.Fatalf("report.json utility %v has no accuracy", raw["utility"])
	}
	// the collapse check: chance = majority rate of the dev labels; no posterior, never "on the prior"
	devDS, err := glue.Load(glueDir, mustLookup(t, "sst2"), "dev", glue.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantChance, _ := ChanceLevel(mustLookup(t, "sst2"), devDS.Targets())
	if c := rep.Collapse; c == nil || float64(c.Chance) != wantChance || float64(c.Value) != rep.Utility["accuracy"] || c.PosteriorOnPrior || c.Collapsed {
		t.Fatalf("collapse check %+v, want chance %v and accuracy %v", c, wantChance, rep.Utility["accuracy"])
	}
	// Test split: GLUE submission file, no metrics.
	b, err := model.Load(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	eo := DefaultEvalOptions(b)
	eo.Split, eo.Out = "test", filepath.Join(t.TempDir(), "ev")
	er, err := Evaluate(b, eo)
	if err != nil {
		t.Fatal(err)
	}
	if er.Metrics != nil || er.Posteriors != "" || filepath.Base(er.Predictions) != "SST-2.tsv" {
		t.Fatalf("test eval: metrics %v posteriors %q predictions %q", er.Metrics, er.Posteriors, er.Predictions)
	}
	sub, err := os.ReadFile(er.Predictions)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(sub)), "\n")
	if lines[0] != "index\tprediction" || len(lines) != 17 {
		t.Fatalf("submission: header %q, %d lines, want index\\tprediction and 17", lines[0], len(lines))
	}
	// --skip-train evaluates the model already in the directory (QNLI: trained
	// elsewhere), on its own task only.
	skip := o
	skip.Task = "SST-2"
	if rep, err = RunPipeline(context.Background(), TextPipeline(), PipelineOptions{Train: skip, SkipTrain: true, Audit: audit.DefaultOptions()}, nil); err != nil || rep.Training != nil {
		t.Fatalf("skip-train on the model's own task: report %+v, err %v", rep, err)
	}
	skip.Task = "qnli"
	if _, err := RunPipeline(context.Background(), TextPipeline(), PipelineOptions{Train: skip, SkipTrain: true, Audit: audit.DefaultOptions()}, nil); err == nil || !strings.Contains(err.Error(), "trained on task") {
		t.Fatalf("skip-train on another task: err %v, want a task mismatch error", err)
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func sharedPath(t *testing.T, env, rel string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join("..", "..", "shared", rel)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not available (%v); set %s", p, err, env)
	}
	return p
}

// TestEndToEndSST2 is the CI end-to-end test on real data: 300 SST-2
// training rows, one epoch of a tiny bert-tiny-shaped NVDP-Clipped model,
// then eval (dev metrics, posterior file with max-seq-len + 1 components)
// and the audit, with report.json checked field by field.
func TestEndToEndSST2(t *testing.T) {
	glueDir := sharedPath(t, "NVDP_GLUE_DIR", "data/glue")
	vocab := sharedPath(t, "NVDP_VOCAB", "models/bert-base-uncased-vocab/vocab.txt")
	out := filepath.Join(t.TempDir(), "run")
	o := model.DefaultOptions()
	o.Task, o.GlueDir, o.Encoder, o.Vocab, o.Variant = "sst2", glueDir, "scratch:bert-tiny", vocab, nvib.ModelNVDPClipped
	o.Epochs, o.BatchSize, o.TrainLimit, o.DevLimit, o.MaxSeqLen, o.Seed, o.Out = 1, 16, 300, 120, 48, 1, out
	o.ScratchConfig, o.HandSetClipping = tinyConfig(t, 32, 1, 64), true
	po := DefaultPipelineOptions()
	po.Train, po.EvalSeed = o, 5
	rep, err := RunPipeline(context.Background(), TextPipeline(), po, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", nvib.ConfigFile, model.WeightsFile, "vocab.txt", model.OptionsFile, MetricsFile,
		CheckpointFile, ReportFile, "eval_dev.json", "predictions_dev.tsv", PosteriorsFile("dev")} {
		if !fsutil.IsFile(filepath.Join(out, f)) {
			t.Errorf("missing %s in %s", f, out)
		}
	}
	raw := readJSON(t, filepath.Join(out, ReportFile))
	for _, k := range []string{"task", "variant", "encoder", "utility", "privacy", "seconds"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("report.json lacks %q", k)
		}
	}
	pr, ok := raw["privacy"].(map[string]any)
	if !ok {
		t.Fatalf("report privacy = %v", raw["privacy"])
	}
	for _, k := range []string{"mode", "order", "delta", "rd_max", "rd_mean", "bdp_epsilon", "invalid_pairs"} {
		if _, ok := pr[k]; !ok {
			t.Errorf("report privacy lacks %q", k)
		}
	}
	if rep.Task != "sst2" || rep.Variant != nvib.ModelNVDPClipped || rep.Encoder != "scratch:bert-tiny" {
		t.Errorf("report identity %q %q %q", rep.Task, rep.Variant, rep.Encoder)
	}
	acc := rep.Utility["accuracy"]
	if !(acc >= 0 && acc <= 1) {
		t.Errorf("dev accuracy %v", acc)
	}
	p := rep.Privacy
	// Principled clipping guarantees a finite bound for every aligned pair.
	if p.InvalidPairs != 0 || p.Pairs != 120*119 || p.Components != 49 || p.Examples != 120 {
		t.Errorf("audit: invalid %d pairs %d components %d examples %d, want 0, %d, 49, 120", p.InvalidPairs, p.Pairs, p.Components, p.Examples, 120*119)
	}
	for name, v := range map[string]float64{"rd_max": float64(p.RDMax), "rd_mean": float64(*p.RDMean), "bdp_epsilon": float64(*p.BDPEpsilon)} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Errorf("%s = %v, want finite >= 0", name, v)
		}
	}
	if !(float64(*p.RDMean) <= float64(p.RDMax)) {
		t.Errorf("rd_mean %v > rd_max %v", p.RDMean, p.RDMax)
	}
	// The posterior file: fixed length max-seq-len + 1, pads flagged, clipped values.
	post, err := privacy.ReadPosteriors(filepath.Join(out, PosteriorsFile("dev")))
	if err != nil {
		t.Fatal(err)
	}
	if post.M != 120 || post.N != 49 || post.P != 32 {
		t.Fatalf("posteriors [M,N,P] = [%d,%d,%d], want [120,49,32]", post.M, post.N, post.P)
	}
	cfg, err := nvib.LoadConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	pads := 0
	for i, a := range post.Alpha {
		if post.AttentionMask[i] == 0 {
			pads++
			continue
		}
		if i%post.N == 0 {
			continue // prior component (unclipped in principled mode)
		}
		if float64(a) > cfg.Clip.CAlphaMax*(1+1e-6) || float64(a) < cfg.Clip.CAlphaMin*(1-1e-6) {
			t.Fatalf("alpha[%d] = %v outside [%v, %v]", i, a, cfg.Clip.CAlphaMin, cfg.Clip.CAlphaMax)
		}
	}
	if pads == 0 {
		t.Errorf("no padding components in a file padded to 48 tokens")
	}
	h, err := ReadMetrics(filepath.Join(out, MetricsFile))
	if err != nil || len(h) != 1 || h[0].Step != 300/16 {
		t.Fatalf("metrics %+v err %v, want one epoch of %d steps", h, err, 300/16)
	}
}

// TestBadInputs: every bad option fails with an error naming the problem
// (options by their train_options.json names: the library knows no flags),
// before any file is written: --out is not created.
func TestBadInputs(t *testing.T) {
	glueDir, vocab := synthGlue(t, 16, 8)
	// QNLI without a training split.
	qnli := filepath.Join(glueDir, "..", "qglue")
	if err := os.MkdirAll(filepath.Join(qnli, "QNLI"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(qnli, "QNLI", "dev.tsv"), []byte("index\tquestion\tsentence\tlabel\n0\twhat?\tthis.\tentailment\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// SST-2 whose dev file is a header without rows.
	headerOnly := filepath.Join(glueDir, "..", "hglue")
	if err := os.MkdirAll(filepath.Join(headerOnly, "SST-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	train, err := os.ReadFile(filepath.Join(glueDir, "SST-2", "train.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(headerOnly, "SST-2", "train.tsv"), train, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(headerOnly, "SST-2", "dev.tsv"), []byte("sentence\tlabel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	used := filepath.Join(t.TempDir(), "used")
	if err := os.MkdirAll(used, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(used, CheckpointFile), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		mod  func(o *model.Options)
		want string
	}{
		{"unknown task", func(o *model.Options) { o.Task = "cola2" }, `task "cola2"`},
		{"bad variant", func(o *model.Options) { o.Variant = "dp-sgd" }, `variant "dp-sgd"`},
		{"bad mode", func(o *model.Options) { o.Mode = "exact" }, `mode "exact"`},
		{"negative lambda", func(o *model.Options) { o.Lambda = -1 }, "lambda -1: must be >= 0"},
		{"NaN lambda", func(o *model.Options) { o.Lambda = math.NaN() }, "lambda NaN: must be a finite number"},
		{"negative c-mu", func(o *model.Options) { o.CMu = -2 }, "c_mu -2"},
		{"c-mu 0 is not replaced", func(o *model.Options) { o.CMu = 0 }, "c_mu 0: the radius C_mu must be > 0"},
		{"c-alpha-min above max", func(o *model.Options) { o.CAlphaMin, o.CAlphaMax = 2, 1 }, "c_alpha_min 2"},
		{"negative dropout", func(o *model.Options) { o.Dropout = -0.5 }, "dropout -0.5"},
		{"epochs 0 is not replaced", func(o *model.Options) { o.Epochs = 0 }, "epochs 0: must be >= 1"},
		{"batch size 0 is not replaced", func(o *model.Options) { o.BatchSize = 0 }, "batch_size 0: must be >= 1"},
		{"lr 0 is not replaced", func(o *model.Options) { o.LR = 0 }, "lr 0: must be > 0"},
		{"negative patience", func(o *model.Options) { o.Patience = -1 }, "patience -1"},
		{"NaN grad clip", func(o *model.Options) { o.GradClip = math.NaN() }, "grad_clip NaN: must be a finite number"},
		{"NaN warm-up", func(o *model.Options) { o.WarmupRatio = math.NaN() }, "warmup_ratio NaN"},
		{"NaN KL warm-up", func(o *model.Options) { o.KLWarmup = math.NaN() }, "kl_warmup NaN"},
		{"unknown KL schedule", func(o *model.Options) { o.KLSchedule = "cosine" }, `kl_schedule "cosine"`},
		{"unknown NVIB init", func(o *model.Options) { o.NVIBInit = "zeros" }, `nvib_init "zeros"`},
		{"no glue dir", func(o *model.Options) { o.GlueDir = "" }, "glue_dir: required"},
		{"missing glue dir", func(o *model.Options) { o.GlueDir = "/nonexistent" }, `glue_dir "/nonexistent": not a directory`},
		{"no out", func(o *model.Options) { o.Out = "" }, "out: required"},
		{"no vocab for scratch", func(o *model.Options) { o.Vocab = "" }, "vocab: required for a scratch encoder"},
		{"missing vocab file", func(o *model.Options) { o.Vocab = "/nonexistent/vocab.txt" }, `vocab "/nonexistent/vocab.txt"`},
		{"unknown preset", func(o *model.Options) { o.Encoder, o.ScratchConfig = "scratch:bert-huge", nil }, "bert-huge"},
		{"bad encoder spec", func(o *model.Options) { o.Encoder = "bert" }, `encoder "bert": want scratch:PRESET`},
		{"missing train split", func(o *model.Options) { o.Task, o.GlueDir = "qnli", qnli }, "no training split"},
		{"header-only dev split", func(o *model.Options) { o.GlueDir = headerOnly }, filepath.Join("SST-2", "dev.tsv") + ": no data rows"},
		{"batch larger than data", func(o *model.Options) { o.BatchSize = 64 }, "fewer than the batch size 64"},
		{"seq len beyond positions", func(o *model.Options) { o.MaxSeqLen = 100 }, "max_seq_len 100: exceeds the encoder's 32 positions"},
		{"used out dir", func(o *model.Options) { o.Out = used }, "already holds a run"},
		{"resume without checkpoint", func(o *model.Options) { o.Out, o.Resume = t.TempDir(), true }, CheckpointFile + " does not exist"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "out"))
			o.Epochs = 1
			c.mod(&o)
			_, existed := os.Stat(o.Out)
			_, err := Run(context.Background(), o, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
			if _, err := os.Stat(o.Out); o.Out != "" && existed != nil && !os.IsNotExist(err) {
				t.Errorf("%s written before the error (%v)", o.Out, err)
			}
		})
	}
	// The two states of the output directory are typed errors (the CLI names its flag).
	o := synthOptions(t, glueDir, vocab, used)
	if _, err := Run(context.Background(), o, nil); !errors.Is(err, ErrRunExists) {
		t.Errorf("used output directory: %v, want ErrRunExists", err)
	}
	o.Out, o.Resume = t.TempDir(), true
	if _, err := Run(context.Background(), o, nil); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("resume without a checkpoint: %v, want ErrNoCheckpoint", err)
	}
	if _, err := model.Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), model.OptionsFile) {
		t.Fatalf("model of an empty dir: %v", err)
	}
}

// TestDynamicPadding: training batches are padded to their longest sequence,
// export batches to the fixed length.
func TestDynamicPadding(t *testing.T) {
	glueDir, vocab := synthGlue(t, 16, 8)
	tok, err := tokenize.Load(vocab)
	if err != nil {
		t.Fatal(err)
	}
	task, _ := glue.LookupTask("sst2")
	ds, err := glue.Load(glueDir, task, "train", glue.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := model.Encode(tok, ds, 6)
	if err != nil {
		t.Fatal(err)
	}
	longest, trunc := 0, 0
	for i, enc := range e.Encs {
		if enc.Len() > 6 {
			t.Fatalf("example %d has %d tokens > max 6", i, enc.Len())
		}
		longest = max(longest, enc.Len())
		words := len(strings.Fields(ds.Examples[i].TextA))
		if words+2 > 6 {
			trunc++
		}
	}
	if e.Truncated != trunc {
		t.Errorf("truncated %d, want %d", e.Truncated, trunc)
	}
	in, lab := e.Batch([]int{0, 1, 2}, 0)
	want := max(e.Encs[0].Len(), e.Encs[1].Len(), e.Encs[2].Len())
	if in.S != want || in.B != 3 || len(lab.Class) != 3 {
		t.Fatalf("dynamic batch S %d B %d, want S %d", in.S, in.B, want)
	}
	real := 0
	for _, v := range in.Mask {
		real += int(v)
	}
	if real != e.Encs[0].Len()+e.Encs[1].Len()+e.Encs[2].Len() {
		t.Errorf("mask counts %d real tokens", real)
	}
	ins, _ := e.Batches(5, 6)
	if len(ins) != 4 || ins[3].B != 1 || ins[0].S != 6 {
		t.Errorf("fixed batches: %d, last B %d, S %d", len(ins), ins[3].B, ins[0].S)
	}
}

// TestKLScheduleAndLRUsed checks the logged schedule means of one epoch
// against the closed forms (linear warm-up/decay, linear-decay KL).
func TestKLScheduleAndLRUsed(t *testing.T) {
	glueDir, vocab := synthGlue(t, 64, 8)
	o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "s"))
	o.Epochs, o.WarmupRatio = 1, 0.25
	if _, err := Run(context.Background(), o, nil); err != nil {
		t.Fatal(err)
	}
	h, err := ReadMetrics(filepath.Join(o.Out, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	T := 8
	var lr, s float64
	for step := 0; step < T; step++ {
		lr += o.LR * nn.LinearWarmupDecay(step, 2, T)
		s += float64(T-step) / float64(T)
	}
	if got := float64(h[0].Train["lr"]); math.Abs(got-lr/8) > 1e-12 {
		t.Errorf("mean lr %v, want %v", got, lr/8)
	}
	if got := float64(h[0].Train["kl_scale"]); math.Abs(got-s/8) > 1e-12 {
		t.Errorf("mean KL scale %v, want %v", got, s/8)
	}
}

// TestPipelineAuditOptionsPassThrough: the audit options reach audit.Audit
// (reference mode, batch size, order), and the test split can be audited.
func TestPipelineAuditOptionsPassThrough(t *testing.T) {
	glueDir, vocab := synthGlue(t, 32, 24)
	o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "ref"))
	o.Mode, o.Epochs = "reference", 1
	rep, err := RunPipeline(context.Background(), TextPipeline(), PipelineOptions{Train: o, AuditSplit: "test",
		Audit: func() audit.Options {
			a := audit.DefaultOptions()
			a.Mode, a.BatchSize, a.Order = privacy.ModeReference, 8, 1.5
			return a
		}()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Privacy
	if p == nil || p.Mode != privacy.ModeReference || p.Order != 1.5 || p.Full.BatchSize != 8 || p.Split != "test" || p.Examples != 24 || p.Components != 17 {
		t.Fatalf("privacy summary %+v", p)
	}
	if !fsutil.IsFile(filepath.Join(o.Out, PosteriorsFile("test"))) || fsutil.IsFile(filepath.Join(o.Out, PosteriorsFile("dev"))) {
		t.Errorf("want posteriors of the test split only")
	}
	if rep.Mode != "reference" || rep.CAlphaMin != 0 {
		t.Errorf("reference run: mode %q C_amin %v, want reference and 0", rep.Mode, rep.CAlphaMin)
	}
}

func mustLookup(t *testing.T, name string) *glue.Task {
	t.Helper()
	task, err := glue.LookupTask(name)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestResumeValidatesSavedOptions: a resume checks the options saved in
// train_options.json again before any work (an edited file with batch size 0
// divided by zero; a learning rate of -1 trained), with an error naming the
// file.
func TestResumeValidatesSavedOptions(t *testing.T) {
	glueDir, vocab := synthGlue(t, 64, 24)
	o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "run"))
	o.StopAfterSteps = 3
	if _, err := Run(context.Background(), o, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(o.Out, model.OptionsFile)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ckpt, err := os.ReadFile(filepath.Join(o.Out, CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ field, value, want string }{
		{"batch_size", "0", "batch"},
		{"lr", "-1", "-1"},
		{"epochs", "0", "epoch"},
		{"warmup_ratio", "1.5", "1.5"},
		{"task", `"cola2"`, "cola2"},
	} {
		t.Run(c.field, func(t *testing.T) {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(orig, &m); err != nil {
				t.Fatal(err)
			}
			m[c.field] = json.RawMessage(c.value)
			b, _ := json.Marshal(m)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Run(context.Background(), model.Options{RunTime: model.RunTime{Out: o.Out, Resume: true}}, nil)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s = %s: err %v, want one naming %s and %q", c.field, c.value, err, path, c.want)
			}
			if now, _ := os.ReadFile(filepath.Join(o.Out, CheckpointFile)); !bytes.Equal(now, ckpt) {
				t.Errorf("the checkpoint changed")
			}
		})
	}
}

// TestMetricsNonFinite: metrics.jsonl spells non-finite values out ("NaN",
// "Infinity") and reads them back; a line written before that, with null in
// their place, reads as NaN.
func TestMetricsNonFinite(t *testing.T) {
	path := filepath.Join(t.TempDir(), MetricsFile)
	em := EpochMetrics{Epoch: 1, Step: 8, Train: map[string]jsonfloat.Float{"loss": jsonfloat.Float(math.NaN()), "task": 0.5},
		Dev:       map[string]jsonfloat.Float{"pearson": jsonfloat.Float(math.NaN()), "dev_loss": jsonfloat.Float(math.Inf(1))},
		Selection: jsonfloat.Float(math.NaN()), SelectionName: "pearson", Best: true, Seconds: 2}
	if err := jsonl.Append(path, em); err != nil {
		t.Fatal(err)
	}
	legacy := `{"best":false,"dev":{"dev_loss":0.7,"pearson":null},"epoch":2,"seconds":3,"selection":null,"selection_name":"pearson","step":16,"train":{"loss":null,"task":0.25}}` + "\n"
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(legacy)
	f.Close()
	raw, _ := os.ReadFile(path)
	if line := strings.SplitN(string(raw), "\n", 2)[0]; !strings.Contains(line, `"loss":"NaN"`) || !strings.Contains(line, `"dev_loss":"Infinity"`) || !strings.Contains(line, `"selection":"NaN"`) {
		t.Fatalf("line %s does not spell out NaN and Infinity", line)
	}
	h, err := ReadMetrics(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 {
		t.Fatalf("%d lines, want 2", len(h))
	}
	nan := func(v jsonfloat.Float) bool { return math.IsNaN(float64(v)) }
	if a := h[0]; !nan(a.Train["loss"]) || a.Train["task"] != 0.5 || !nan(a.Dev["pearson"]) || !math.IsInf(float64(a.Dev["dev_loss"]), 1) || !nan(a.Selection) || !a.Best {
		t.Errorf("line 1 read back as %+v", a)
	}
	if b := h[1]; !nan(b.Train["loss"]) || b.Train["task"] != 0.25 || !nan(b.Dev["pearson"]) || b.Dev["dev_loss"] != 0.7 || !nan(b.Selection) || b.Epoch != 2 || b.Step != 16 {
		t.Errorf("legacy line read back as %+v", b)
	}
}

// TestSelectionState: train's own checkpoint state round-trips every value,
// the non-finite ones too (a NaN loss in the epoch's sums made every
// checkpoint fail to encode), and reads the form checkpoints have always had.
func TestSelectionState(t *testing.T) {
	s := Selection{BestMetric: math.Inf(-1), BestEpoch: 0, BadEpochs: 2, Count: 3}
	s.Sums[0], s.Sums[2], s.Sums[5] = jsonfloat.Float(math.NaN()), jsonfloat.Float(math.Inf(1)), 0.1
	b, err := json.Marshal(&s)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	var got Selection
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(got.BestMetric, -1) || got.BadEpochs != 2 || got.Count != 3 || !math.IsNaN(float64(got.Sums[0])) ||
		!math.IsInf(float64(got.Sums[2]), 1) || got.Sums[5] != 0.1 {
		t.Errorf("round trip of %s: %+v", b, got)
	}
	old := `{"epoch":1,"batch":3,"step":11,"best_ep":1,"bad":0,"sums":[2.0898225418378993,2.067645390185322,2.1515105292613814,2.9162781297825653,1.3125,0.004200000000000001],"count":3,"ep_secs":0.025267457,"secs":0.117420811,"done":false,"stopped":false,"rng":"cGNnOiZ5Uds2Sr0zz5Pvmxih75A=","best":"0.5"}`
	got = Selection{}
	if err := json.Unmarshal([]byte(old), &got); err != nil || got.BestMetric != 0.5 || got.BestEpoch != 1 || got.Count != 3 || got.Sums[4] != 1.3125 {
		t.Errorf("a checkpoint state of the code before the loop: %+v, %v", got, err)
	}
}
