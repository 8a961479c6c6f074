package task

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/speech"
	"github.com/nvdp-project/nvdp/train"
)

func TestLookup(t *testing.T) {
	for _, c := range []struct {
		name, want string
		modality   Modality
		examples   string
		utility    string
		usesData   bool
		onDevice   bool
	}{
		{"sst2", "sst2", Text, "texts", "dev", false, true},
		{"SST-2", "sst2", Text, "texts", "dev", false, true},
		{"sts-b", "stsb", Text, "texts", "dev", false, true},
		{"mrpc", "mrpc", Text, "texts", "dev", false, true},
		{"lid", "lid", Speech, "utterances", "test", true, false},
	} {
		tk, err := Lookup(c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		in := tk.Info()
		if in.Name != c.want || in.Modality != c.modality || in.Examples != c.examples ||
			in.UtilitySplit != c.utility || in.UsesData != c.usesData || (in.DeviceErr == nil) != c.onDevice {
			t.Errorf("%s: got %+v", c.name, in)
		}
		for _, v := range []string{nvib.ModelBaseline, nvib.ModelNVDP, nvib.ModelNVDPClipped, nvib.ModelGaussian} {
			want := model.DefaultOptions().Lambda
			if c.modality == Speech {
				want = speech.PaperLambda(v)
			}
			if got, ok := in.Lambda[v]; !ok || got != want {
				t.Errorf("%s: lambda of %s %v (%v), want %v", c.name, v, got, ok, want)
			}
		}
		if ExamplesOf(c.name) != c.examples {
			t.Errorf("ExamplesOf(%s) = %s", c.name, ExamplesOf(c.name))
		}
	}
	_, err := Lookup("cola")
	var oe *option.Error
	if !errors.As(err, &oe) || oe.Option != "task" || !strings.Contains(oe.Reason, "lid") || !strings.Contains(oe.Reason, "sst2") {
		t.Errorf("Lookup(cola): %v, want an option error of task listing the tasks", err)
	}
	if ExamplesOf("") != "texts" {
		t.Errorf("ExamplesOf of no task: %s", ExamplesOf(""))
	}
	names := Names()
	if want := append(glue.TaskNames(), speech.TaskName); !slices.Equal(names, want) {
		t.Errorf("Names %v, want %v", names, want)
	}
}

// TestApply: the speech task's defaults replace the options left out, keep
// the given ones, and refuse max_seq_len; the text tasks change nothing.
func TestApply(t *testing.T) {
	given := option.GivenNames
	base := model.DefaultOptions()
	base.Encoder, base.Lambda, base.WarmupRatio, base.GlueDir, base.Vocab = "scratch:bert-tiny", 0.5, 0.25, "/glue", "/vocab"
	sp, _ := Lookup("lid")
	def := speech.DefaultOptions().Train
	for _, c := range []struct {
		given        Given
		enc          string
		lambda, warm float64
	}{
		{nil, def.Encoder, def.Lambda, def.WarmupRatio},
		{given("encoder", "lambda", "warmup_ratio"), base.Encoder, base.Lambda, base.WarmupRatio},
		{given("lambda"), def.Encoder, base.Lambda, def.WarmupRatio},
	} {
		o := base
		if err := sp.Apply(&o, c.given); err != nil {
			t.Fatal(err)
		}
		if o.Encoder != c.enc || !sameFloat(o.Lambda, c.lambda) || o.WarmupRatio != c.warm || o.GlueDir != "" || o.Vocab != "" {
			t.Errorf("speech Apply: encoder %s lambda %v warm-up %v glue %q vocab %q", o.Encoder, o.Lambda, o.WarmupRatio, o.GlueDir, o.Vocab)
		}
	}
	o := base
	err := sp.Apply(&o, given("max_seq_len"))
	var oe *option.Error
	if !errors.As(err, &oe) || oe.Option != "max_seq_len" || !slices.Contains(oe.Mentions, "max_seconds") {
		t.Errorf("speech Apply with max_seq_len: %v", err)
	}
	tx, _ := Lookup("sst2")
	o = base
	if err := tx.Apply(&o, nil); err != nil || model.Differences(&base, &o) != nil {
		t.Errorf("text Apply changed the options: %v %v", err, model.Differences(&base, &o))
	}
}

func sameFloat(a, b float64) bool { return a == b || (a != a && b != b) }

// TestOpen: a model directory is read by the modality whose options file it
// holds; a directory with none is an error naming both files.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir)
	if err == nil || !strings.Contains(err.Error(), speech.OptionsFile) || !strings.Contains(err.Error(), model.OptionsFile) {
		t.Errorf("Open of an empty directory: %v", err)
	}
	o := model.DefaultOptions()
	o.Task, o.GlueDir, o.Vocab, o.Encoder, o.Variant, o.Out = "rte", "/glue", "/vocab.txt", "scratch:bert-tiny", "baseline", dir
	o.Resolve()
	if err := model.SaveOptions(dir, &o); err != nil {
		t.Fatal(err)
	}
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Task.Info().Name != "rte" || m.File != model.OptionsFile || m.Options.Variant != "baseline" || m.Data != (Data{}) {
		t.Errorf("Open: task %s file %s variant %s data %+v", m.Task.Info().Name, m.File, m.Options.Variant, m.Data)
	}
	if err := os.WriteFile(filepath.Join(dir, speech.OptionsFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), speech.OptionsFile) {
		t.Errorf("Open of a damaged speech options file: %v, want its error", err)
	}
}

// TestChance: each task's chance level (its evaluation's EvalResult.Chance:
// train.ChanceLevel, speech.Chance) is its own selection metric of
// the best constant predictor, against numbers computed by hand: the
// majority class's accuracy (SST-2, RTE) or F1 of the positive class
// (MRPC; the first class among ties), 0 for a regression (STS-B), and for
// the speech task the macro-F1 over the languages present of always
// predicting the most frequent one (the smallest index among ties); no
// labels are an error.
func TestChance(t *testing.T) {
	for _, c := range []struct {
		task   string
		labels []float64
		want   float64
	}{
		{"sst2", []float64{0, 1, 1}, 2.0 / 3},
		{"sst2", []float64{1, 0}, 0.5}, // a tie: class 0, accuracy 1/2
		{"rte", []float64{1, 1, 1, 0}, 0.75},
		// always 1: TP 2, FP 1, FN 0: F1 = 4/5
		{"mrpc", []float64{0, 1, 1}, 0.8},
		// a tie predicts class 0: F1 of class 1 is 0
		{"mrpc", []float64{0, 1}, 0},
		{"stsb", []float64{0.5, 4, 2}, 0},
		// always 3: language 3 F1 = 2*2/(2*2+1+0) = 0.8, language 5 F1 = 0; mean 0.4
		{"lid", []float64{3, 3, 5}, 0.4},
		// a tie predicts 3: language 3 F1 = 2/3, language 5 F1 = 0; mean 1/3
		{"lid", []float64{5, 3}, 1.0 / 3},
		{"lid", []float64{7, 7, 7}, 1},
	} {
		if c.task == speech.TaskName {
			ls := make([]int, len(c.labels))
			for i, l := range c.labels {
				ls[i] = int(l)
			}
			if got := speech.Chance(ls); math.Abs(got-c.want) > 1e-12 {
				t.Errorf("%s %v: chance %v, want %v", c.task, c.labels, got, c.want)
			}
			continue
		}
		g, err := glue.LookupTask(c.task)
		if err != nil {
			t.Fatal(err)
		}
		got, err := train.ChanceLevel(g, c.labels)
		if err != nil || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s %v: chance %v (%v), want %v", c.task, c.labels, got, err, c.want)
		}
		if _, err := train.ChanceLevel(g, nil); err == nil {
			t.Errorf("%s: chance of no labels accepted", c.task)
		}
	}
}

// TestResumeDifferences: the options a resume is asked for that differ
// from those saved in its directory, by JSON key, with the options file;
// none for a directory without a run.
func TestResumeDifferences(t *testing.T) {
	_, saved := savedRun(t)
	given := saved
	given.Epochs, given.Resume, given.Task = saved.Epochs+1, true, "SST-2"
	diffs, file := ResumeDifferences(&given, &Data{DataDir: "x"})
	if len(diffs) != 1 || diffs[0].Option != "epochs" || diffs[0].Saved != saved.Epochs || diffs[0].Given != given.Epochs || file != model.OptionsFile {
		t.Errorf("differences %+v in %q, want epochs %d -> %d in %s", diffs, file, saved.Epochs, given.Epochs, model.OptionsFile)
	}
	given.Out = t.TempDir()
	if diffs, file := ResumeDifferences(&given, nil); diffs != nil || file != "" {
		t.Errorf("no run: %+v %q", diffs, file)
	}
}
