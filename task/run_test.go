package task

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/gluetest"
	"github.com/nvdp-project/nvdp/internal/lidtest"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/speech"
	"github.com/nvdp-project/nvdp/train"
)

// textFixture writes a tiny SST-2 (gluetest.Write: 16 training, 6 dev and
// 6 test rows, each with one sentiment word) and its vocabulary, and returns the
// options of a baseline run of a 1-layer, 16-wide scratch encoder on it
// into out: 2 steps of 8 per epoch.
func textFixture(t *testing.T, out string) model.Options {
	t.Helper()
	glueDir, vocab := gluetest.Write(t, t.TempDir(), "sst2")
	cfg, err := encoder.Preset("bert-tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize, cfg.MaxPositionEmbeddings = 16, 1, 2, 32, 16
	o := model.DefaultOptions()
	o.Task, o.GlueDir, o.Encoder, o.Vocab, o.Variant, o.ScratchConfig = "sst2", glueDir, "scratch:bert-tiny", vocab, nvib.ModelBaseline, &cfg
	o.Epochs, o.BatchSize, o.EvalBatchSize, o.MaxSeqLen, o.Patience, o.Out = 1, 8, 4, 8, 0, out
	return o
}

// speechFixture writes a tone corpus of 4 utterances per language and
// split and returns the options of a 1-epoch nvdp-clipped run on it (a
// privacy target of epsilon 64) into out, with its data.
func speechFixture(t *testing.T, out string) (model.Options, *Data) {
	t.Helper()
	root := t.TempDir()
	lidtest.WriteToneCorpus(t, root, map[string]int{"train": 4, "dev": 4, "test": 4})
	o := model.DefaultOptions()
	sp, _ := Lookup("lid")
	if err := sp.Apply(&o, nil); err != nil {
		t.Fatal(err)
	}
	o.Variant, o.Epochs, o.BatchSize, o.EvalBatchSize, o.TargetEpsilon, o.Out = nvib.ModelNVDPClipped, 1, 4, 12, 64, out
	return o, &Data{DataDir: root, MaxSeconds: 0.5}
}

// optionErr is the option an error names (*option.Error), "" for another
// error or none.
func optionErr(err error) string {
	var oe *option.Error
	if errors.As(err, &oe) {
		return oe.Option
	}
	return ""
}

// TestTrainLoadEvaluate trains a model of each modality through its task,
// reads it back (Open, Load) and evaluates it: the training's steps, the
// evaluation's split, examples and metric, the options that do not apply
// to a speech model refused, given options used.
func TestTrainLoadEvaluate(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		task                 string
		steps, dev, examples int // training steps; examples of dev and of a limited evaluation
		metric               string
	}{
		{"sst2", 2, 6, 3, "accuracy"},
		{"lid", 3, 12, 3, speech.MetricF1}, // 3 languages x 4 utterances, batches of 4
	} {
		t.Run(c.task, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			tk, _ := Lookup(c.task)
			var o model.Options
			d := &Data{}
			if c.task == "lid" {
				o, d = speechFixture(t, out)
			} else {
				o = textFixture(t, out)
			}
			tr, err := tk.Prepare(o, d)
			if err != nil {
				t.Fatal(err)
			}
			r, err := tr.Train(ctx, nil, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Steps != c.steps || r.Epochs != 1 || r.Interrupted || r.Dir != out {
				t.Errorf("training: %d steps, %d epochs, interrupted %v, dir %s; want %d, 1, false, %s", r.Steps, r.Epochs, r.Interrupted, r.Dir, c.steps, out)
			}
			m, err := Open(out)
			if err != nil {
				t.Fatal(err)
			}
			if m.Task.Info().Name != c.task || m.Options.Epochs != 1 || (c.task == "lid") != (m.Data.MaxSeconds == 0.5) {
				t.Errorf("Open: task %s, epochs %d, data %+v", m.Task.Info().Name, m.Options.Epochs, m.Data)
			}
			ev, err := tk.Load(m)
			if err != nil {
				t.Fatal(err)
			}
			evalOut := t.TempDir()
			given := func(names ...string) Given {
				return func(n string) bool { return n == "out" || strings.Contains(strings.Join(names, ","), n) }
			}
			res, err := ev.Evaluate(ctx, EvalOptions{Split: "dev", Seed: 1, Out: evalOut, Given: given()})
			if err != nil {
				t.Fatal(err)
			}
			if res.Split != "dev" || res.Examples != c.dev || res.SelectionName != c.metric || !res.Labelled || res.Model != out {
				t.Errorf("evaluation: split %s, %d examples, selection %s, labelled %v, model %s", res.Split, res.Examples, res.SelectionName, res.Labelled, res.Model)
			}
			if _, err := os.Stat(filepath.Join(evalOut, "eval_dev.json")); err != nil {
				t.Errorf("eval_dev.json not in the given out: %v", err)
			}
			lim, err := ev.Evaluate(ctx, EvalOptions{Split: "dev", Seed: 1, Limit: c.examples, NoPost: true, Out: t.TempDir(), Given: given()})
			if err != nil || lim.Examples != c.examples || lim.Posteriors != "" {
				t.Errorf("limited evaluation: %v examples, posteriors %q, %v; want %d, none", lim.Examples, lim.Posteriors, err, c.examples)
			}
			// EvalDir: the device opened for a task with a GPU twin only,
			// refused (before it is opened) for one without; a directory
			// that is not a model named as the model.
			opened := 0
			open := func() (*cuda.Device, error) { opened++; return nil, nil }
			eo := EvalOptions{Split: "dev", Seed: 1, Limit: c.examples, NoPost: true, Out: t.TempDir(), Given: given()}
			ed, err := EvalDir(ctx, out, eo, cuda.DeviceAuto, open)
			if wantOpened := map[bool]int{true: 0, false: 1}[c.task == "lid"]; err != nil || ed.Examples != c.examples || opened != wantOpened {
				t.Errorf("EvalDir: %v, %d examples, device opened %d times; want %d, %d", err, ed.Examples, opened, c.examples, wantOpened)
			}
			var ce *option.CombinationError
			if _, err := EvalDir(ctx, out, eo, cuda.DeviceCUDA, open); (c.task == "lid") != (errors.As(err, &ce) && ce.Options[0] == "device") {
				t.Errorf("EvalDir on cuda: %v", err)
			}
			if _, err := EvalDir(ctx, t.TempDir(), eo, cuda.DeviceCPU, open); optionErr(err) != "model" || opened > 2 {
				t.Errorf("EvalDir of a directory without a model: %v, device opened %d times", err, opened)
			}
			// ModelClipSet: the clipped speech model's set, o given the
			// model's labels; the text baseline, without a posterior, and
			// a constant given are refused, naming model.
			var co privacy.ClipSetOptions
			set, err := ModelClipSet(out, nil, &co)
			if c.task == "lid" && (err != nil || set.Components != 25 || co.Model != out || co.Variant != nvib.ModelNVDPClipped || co.Source != train.ModelSource(out)) {
				t.Errorf("ModelClipSet: %v, %d components, options %+v", err, set.Components, co)
			}
			if c.task != "lid" && optionErr(err) != "model" {
				t.Errorf("ModelClipSet of the baseline: %v, want the option error of model", err)
			}
			if _, err := ModelClipSet(out, given("c_mu"), &co); !errors.As(err, &ce) || !slices.Equal(ce.Options, []string{"c_mu", "model"}) {
				t.Errorf("ModelClipSet given c_mu: %v", err)
			}
			if c.task == "lid" {
				if lim.Release != nil || res.Release == nil || res.Components != 25 {
					t.Errorf("speech release: %d components (want 25 = F + 1), kept with NoPost %v", res.Components, lim.Release != nil)
				}
				for _, name := range []string{"glue_dir", "max_seq_len", "skip_bad_rows"} {
					_, err := ev.Evaluate(ctx, EvalOptions{Split: "dev", Given: given(name)})
					if optionErr(err) != name {
						t.Errorf("speech evaluation given %s: %v, want its option error", name, err)
					}
				}
				return
			}
			if _, err := ev.Evaluate(ctx, EvalOptions{Split: "dev", GlueDir: "/nonexistent", Out: t.TempDir(), Given: given("glue_dir")}); err == nil {
				t.Errorf("text evaluation with a given glue_dir that does not exist: no error")
			}
			if _, err := ev.Evaluate(ctx, EvalOptions{Split: "dev", BatchSize: 0, Out: t.TempDir(), Given: given("batch_size")}); optionErr(err) != "batch_size" {
				t.Errorf("text evaluation given batch size 0: %v, want its option error", err)
			}
		})
	}
}

// TestRunPipelineTasks: RunPipeline runs each task's pipeline (utility on
// the task's split into report.json); the speech task refuses a stored
// baseline before any work.
func TestRunPipelineTasks(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "run")
	po := train.DefaultPipelineOptions()
	po.Train = textFixture(t, out)
	tx, _ := Lookup("sst2")
	rep, err := RunPipeline(ctx, tx, po, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Task != "sst2" || rep.UtilitySplit != tx.Info().UtilitySplit || rep.Privacy != nil || rep.Training == nil || rep.Training.Steps != 2 {
		t.Errorf("text report: %+v", rep)
	}
	if back, err := train.ReadReport(out); err != nil || back.UtilitySplit != "dev" {
		t.Errorf("report.json: %v, %v", back, err)
	}
	sp, _ := Lookup("lid")
	lout := filepath.Join(t.TempDir(), "run")
	po.Train, _ = speechFixture(t, lout)
	po.Baseline = filepath.Join(out, train.ReportFile)
	_, data := speechFixture(t, lout)
	if _, err := RunPipeline(ctx, sp, po, data, nil); optionErr(err) != "baseline" {
		t.Errorf("speech pipeline with a baseline: %v, want the option error of baseline", err)
	}
	if _, err := os.Stat(lout); !os.IsNotExist(err) {
		t.Errorf("the refused speech run wrote %s (%v)", lout, err)
	}
}

// TestPrepare: Prepare checks a run once before any work, for each
// modality, and writes nothing: bad options and files are refused with the
// option named (a text run's options resolved, the speech task's
// data), before the directory is checked; a new
// run in a directory that holds one is train.ErrRunExists, a resume of a
// directory without a checkpoint train.ErrNoCheckpoint; a text run refuses
// a device with a radius schedule when it trains (model.Checked.OnDevice),
// a speech run any device.
func TestPrepare(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	text := textFixture(t, out)
	lid, data := speechFixture(t, out)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	taken := t.TempDir()
	if err := os.WriteFile(filepath.Join(taken, train.CheckpointFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		task   string
		mod    func(o *model.Options, d *Data)
		option string // of an option error; "": none
		is     error  // else this error; nil: valid
	}{
		{"text", "sst2", func(*model.Options, *Data) {}, "", nil},
		{"text epochs 0", "sst2", func(o *model.Options, _ *Data) { o.Epochs = 0 }, "epochs", nil},
		{"text vocab", "sst2", func(o *model.Options, _ *Data) { o.Vocab = "/nonexistent/vocab.txt" }, "vocab", nil},
		{"text glue dir", "sst2", func(o *model.Options, _ *Data) { o.GlueDir = "/nonexistent" }, "glue_dir", nil},
		{"text run exists", "sst2", func(o *model.Options, _ *Data) { o.Out = taken }, "", train.ErrRunExists},
		{"text resume", "sst2", func(o *model.Options, _ *Data) { o.Resume = true }, "", train.ErrNoCheckpoint},
		{"speech", "lid", func(*model.Options, *Data) {}, "", nil},
		{"speech max seconds", "lid", func(_ *model.Options, d *Data) { d.MaxSeconds = -1 }, "max_seconds", nil},
		{"speech data dir", "lid", func(_ *model.Options, d *Data) { d.DataDir = "/nonexistent" }, "data_dir", nil},
		{"speech reference", "lid", func(o *model.Options, _ *Data) { o.Mode = "reference" }, "mode", nil},
		{"speech run exists", "lid", func(o *model.Options, _ *Data) { o.Out = taken }, "", train.ErrRunExists},
		{"speech resume", "lid", func(o *model.Options, _ *Data) { o.Resume = true }, "", train.ErrNoCheckpoint},
		// the directory is checked last: ErrRunExists says the rest is valid (sweep's checkCells)
		{"text run exists, vocab", "sst2", func(o *model.Options, _ *Data) { o.Out, o.Vocab = taken, "/nonexistent/vocab.txt" }, "vocab", nil},
		{"speech run exists, data dir", "lid", func(o *model.Options, d *Data) { o.Out, d.DataDir = taken, "/nonexistent" }, "data_dir", nil},
	} {
		tk, _ := Lookup(c.task)
		o, d := text, &Data{}
		if c.task == "lid" {
			o, d = lid, new(*data)
		}
		c.mod(&o, d)
		tr, err := tk.Prepare(o, d)
		if left, _ := os.ReadDir(out); len(left) > 0 {
			t.Fatalf("%s: Prepare wrote into %s: %v", c.name, out, left)
		}
		switch {
		case c.option != "" && optionErr(err) != c.option,
			c.is != nil && !errors.Is(err, c.is),
			c.option == "" && c.is == nil && err != nil:
			t.Errorf("%s: %v, want option %q or %v", c.name, err, c.option, c.is)
		case err == nil && c.task == "lid":
			if _, err := tr.Train(context.Background(), &cuda.Device{}, false, nil); optionErr(err) != "device" {
				t.Errorf("%s on a device: %v, want the device refused", c.name, err)
			}
		case err == nil:
			sched := text
			sched.Variant, sched.HandSetClipping = nvib.ModelNVDPClipped, true
			sched.RadiusSchedule = &model.RadiusSchedule{Start: 2, Fraction: 0.5}
			tr, err := tk.Prepare(sched, d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Train(context.Background(), &cuda.Device{}, false, nil); optionErr(err) != "radius_schedule" {
				t.Errorf("%s with a radius schedule on a device: %v, want radius_schedule refused", c.name, err)
			}
		}
	}
}

// TestRunPrepared: the pipeline of a prepared run trains with the options
// Prepare checked and does not check the training options again (given
// options that Prepare would refuse, it runs the prepared ones); a
// prepared run that is not the pipeline's (another out) is refused before
// any work.
func TestRunPrepared(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		task    string
		steps   int
		utility string
		refused func(o *model.Options) // options that Prepare refuses
	}{
		{"sst2", 2, "dev", func(o *model.Options) { o.Epochs = 0 }},
		{"lid", 3, "test", func(o *model.Options) { o.Mode = "reference" }},
	} {
		t.Run(c.task, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			tk, _ := Lookup(c.task)
			po := train.DefaultPipelineOptions()
			d := &Data{}
			if c.task == "lid" {
				po.Train, d = speechFixture(t, out)
			} else {
				po.Train = textFixture(t, out)
			}
			tr, err := tk.Prepare(po.Train, d)
			if err != nil {
				t.Fatal(err)
			}
			other := po
			other.Train.Out = filepath.Join(t.TempDir(), "other")
			if _, err := RunPrepared(ctx, tr, other, nil); err == nil || !strings.Contains(err.Error(), "prepared run") {
				t.Errorf("a prepared run of another out: %v, want it refused", err)
			}
			if _, err := os.Stat(other.Train.Out); !os.IsNotExist(err) {
				t.Errorf("the refused run wrote %s (%v)", other.Train.Out, err)
			}
			c.refused(&po.Train)
			if _, err := tk.Prepare(po.Train, d); err == nil {
				t.Fatalf("Prepare accepted the options the test gives the pipeline")
			}
			rep, err := RunPrepared(ctx, tr, po, nil)
			if err != nil {
				t.Fatalf("the pipeline checked the training options again: %v", err)
			}
			if rep.Task != c.task || rep.UtilitySplit != c.utility || rep.Training == nil || rep.Training.Steps != c.steps || rep.Training.Epochs != 1 {
				t.Errorf("report: task %s, utility split %s, training %+v; want %s, %s, %d steps in 1 epoch", rep.Task, rep.UtilitySplit, rep.Training, c.task, c.utility, c.steps)
			}
		})
	}
}
