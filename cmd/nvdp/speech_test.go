package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/internal/lidtest"
	"github.com/nvdp-project/nvdp/internal/texttest"
	"github.com/nvdp-project/nvdp/speech"
	"github.com/nvdp-project/nvdp/sweep"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
)

// TestRunTaskLID: `nvdp run --task lid` trains, evaluates and audits on a
// tone corpus (the summary names the utterances and the test split),
// `nvdp eval` and `nvdp certify --model` read the speech model directory,
// and the flags that do not apply are refused before any file is written.
func TestRunTaskLID(t *testing.T) {
	root := t.TempDir()
	lidtest.WriteToneCorpus(t, root, map[string]int{"train": 4, "dev": 3, "test": 3})
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"--task", "lid", "--lid-dir", root, "--max-seconds", "0.5", "--variant", "nvdp-clipped", "--epochs", "1",
		"--batch-size", "4", "--eval-batch-size", "9", "--target-epsilon", "32", "--no-progress", "--out", out}
	stdout, err := runCmd(newRunCmd(), args...)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout)
	}
	texttest.Contains(t, stdout, []string{"lid / nvdp-clipped / principled", "scratch:small", "utility test macro_f1",
		"RD max over dev pairs (empirical, not a guarantee)", "9 examples x 25 components", "privacy target", "epsilon 32 at delta 1e-05, 1 release(s)"}, nil)
	rep, err := train.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Privacy.Pairs != 72 || !strings.Contains(rep.Privacy.Empirical.Scope, "9 dev utterances") || rep.Lambda != speech.PaperLambdaClip || rep.CMu == speech.PaperCMu {
		t.Errorf("report: pairs %d, scope %q, lambda %v, C_mu %v (calibrated, not the default)", rep.Privacy.Pairs, rep.Privacy.Empirical.Scope, rep.Lambda, rep.CMu)
	}
	evalOut := filepath.Join(t.TempDir(), "eval")
	if stdout, err = runCmd(newEvalCmd(), "--model", out, "--split", "test", "--out", evalOut); err != nil {
		t.Fatalf("eval: %v\n%s", err, stdout)
	}
	texttest.Contains(t, stdout, []string{"lid test (nvdp-clipped): 9 examples", "macro_f1", "posteriors:  " + evalOut + "/posteriors_test.safetensors (25 components)"}, nil)
	raw, err := os.ReadFile(filepath.Join(evalOut, "eval_test.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Metrics map[string]float64 `json:"metrics"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Metrics[speech.MetricF1] != rep.Utility[speech.MetricF1] {
		t.Errorf("eval macro-F1 %v, run's %v", ev.Metrics[speech.MetricF1], rep.Utility[speech.MetricF1])
	}
	if _, err := runCmd(newEvalCmd(), "--model", out, "--split", "test", "--batch-size", "0", "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "--batch-size 0: must be >= 1") {
		t.Errorf("eval --batch-size 0: %v, want the flag named", err)
	}
	if stdout, err = runCertifyCmd("--model", out); err != nil || !strings.Contains(stdout, "certified") {
		t.Errorf("certify --model: %v\n%s", err, stdout)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"max-seq-len", []string{"--max-seq-len", "64"}, "--max-seconds fixes the frames"},
		{"reference", []string{"--mode", "reference"}, "--mode \"reference\": the speech task is principled only"},
		{"no frame", []string{"--max-seconds", "0.01"}, "--max-seconds 0.01: 160 samples make no frame"},
		{"no corpus", []string{"--lid-dir", filepath.Join(root, "missing")}, "--lid-dir"},
		{"bad pairs", []string{"--pairs", "-5"}, "pairs"},
	} {
		bad := filepath.Join(t.TempDir(), "bad")
		a := append(append([]string(nil), args[:len(args)-1]...), bad)
		_, err := runCmd(newRunCmd(), append(a, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if _, serr := os.Stat(bad); serr == nil {
			t.Errorf("%s: the output directory was created", tc.name)
		}
	}
}

// TestSweepTaskLID: `nvdp sweep --tasks lid` runs the speech pipeline per
// cell with the speech task's defaults as `nvdp run --task lid`; a second
// run finds the cells done (their saved speech options read back); `nvdp
// report` tables them on test; `nvdp sweep-cell` (a --jobs N > 1 cell) runs
// a speech cell from its JSON; lid with another task, without a corpus or
// with a C_mu grid is refused before any file is written.
func TestSweepTaskLID(t *testing.T) {
	root := t.TempDir()
	lidtest.WriteToneCorpus(t, root, map[string]int{"train": 4, "dev": 3, "test": 3})
	common := []string{"--lid-dir", root, "--max-seconds", "0.5", "--epochs", "1", "--batch-size", "4", "--eval-batch-size", "9", "--no-progress"}
	out := filepath.Join(t.TempDir(), "sweep")
	args := append([]string{"--tasks", "lid", "--variants", "baseline,nvdp-clipped", "--lambdas", "1e-6", "--seeds", "1",
		"--target-epsilons", "32", "--out", out}, common...)
	stdout, err := runCmd(newSweepCmd(), args...)
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, stdout)
	}
	texttest.Contains(t, stdout, []string{"2 cells (2 done), 2 ran this time"}, nil)
	clipped := filepath.Join(out, "lid", "nvdp-clipped", "epsilon=32", "lambda=1e-6", "seed=1")
	rep, err := train.ReadReport(clipped)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Task != speech.TaskName || rep.UtilitySplit != "test" || rep.Encoder != "scratch:small" || rep.Privacy == nil ||
		math.Abs(float64(rep.Privacy.Certified.Epsilon)-32) > 1e-6*32 {
		t.Errorf("clipped cell report: task %s split %s encoder %s privacy %+v", rep.Task, rep.UtilitySplit, rep.Encoder, rep.Privacy)
	}
	if stdout, err = runCmd(newSweepCmd(), args...); err != nil || !strings.Contains(stdout, "2 cells (2 done), 0 ran this time") {
		t.Errorf("rerun: %v\n%s", err, stdout)
	}
	md, err := runCmd(newReportCmd(), out)
	if err != nil || !strings.Contains(md, "### lid") || !strings.Contains(md, "frontier (test macro_f1") {
		t.Errorf("report: %v\n%s", err, md)
	}
	// The child of a --jobs N > 1 sweep, given a speech cell.
	spec := sweep.CellSpec{PipelineOptions: train.DefaultPipelineOptions(), Data: &task.Data{DataDir: root, MaxSeconds: 0.5}}
	so, err := speech.LoadOptions(clipped)
	if err != nil {
		t.Fatal(err)
	}
	spec.Train = so.Train
	spec.Train.Out, spec.Train.Seed = filepath.Join(t.TempDir(), "cell"), 2
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cell := newSweepCellCmd()
	cell.SetIn(bytes.NewReader(js))
	if stdout, err := runCmd(cell); err != nil {
		t.Fatalf("sweep-cell: %v\n%s", err, stdout)
	}
	if r, err := train.ReadReport(spec.Train.Out); err != nil || r.Task != speech.TaskName || r.Seed != 2 || r.UtilitySplit != "test" {
		t.Errorf("sweep-cell report %+v, %v", r, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tasks", "lid,sst2"}, "--tasks"},
		{[]string{"--tasks", "lid", "--lid-dir", ""}, "--lid-dir"},
		{[]string{"--tasks", "lid", "--c-mu-grid", "1,2"}, "--c-mu-grid"},
	} {
		out := filepath.Join(t.TempDir(), "sweep")
		args := append(append([]string{"--variants", "nvdp-clipped", "--lambdas", "1e-6", "--hand-set-clipping", "--out", out}, common...), tc.args...)
		if _, err := runCmd(newSweepCmd(), args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to name %s", tc.args, err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: %s written", tc.args, out)
		}
	}
}

// TestTrainResumeTaskOfDir (issue 32): `nvdp train --resume --out DIR`
// and `nvdp run --skip-train --out DIR` without --task take the task of
// the model in DIR (task.Open): a speech run, without --task lid or
// --lid-dir again.
func TestTrainResumeTaskOfDir(t *testing.T) {
	root := t.TempDir()
	lidtest.WriteToneCorpus(t, root, map[string]int{"train": 4, "dev": 3, "test": 3})
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"--task", "lid", "--lid-dir", root, "--max-seconds", "0.5", "--variant", "baseline", "--epochs", "2",
		"--batch-size", "4", "--no-progress", "--out", out}
	if _, err := runCmd(newTrainCmd(), append(args, "--stop-after-steps", "2")...); err != nil {
		t.Fatal(err)
	}
	stdout, err := runCmd(newTrainCmd(), "--resume", "--out", out, "--no-progress", "--json")
	if err != nil {
		t.Fatalf("resume without --task: %v\n%s", err, stdout)
	}
	var r train.Result
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if r.Task != speech.TaskName || r.Interrupted || r.Epochs != 2 {
		t.Errorf("resumed: task %q, epochs %d, interrupted %v", r.Task, r.Epochs, r.Interrupted)
	}
	// nvdp run --skip-train evaluates the model in --out as its task's (the
	// QNLI workflow of docs/results.md, here a speech model): no --task.
	if stdout, err = runCmd(newRunCmd(), "--skip-train", "--out", out, "--no-progress", "--json"); err != nil {
		t.Fatalf("run --skip-train without --task: %v\n%s", err, stdout)
	}
	var rep train.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if _, ok := rep.Utility[speech.MetricF1]; rep.Task != speech.TaskName || rep.UtilitySplit != "test" || !ok {
		t.Errorf("skip-train report: task %q, utility %v on %s", rep.Task, rep.Utility, rep.UtilitySplit)
	}
	if _, err := runCmd(newTrainCmd(), "--resume", "--out", t.TempDir(), "--no-progress"); err == nil || !strings.Contains(err.Error(), "--out: model") {
		t.Errorf("resume of an empty directory without --task: %v", err)
	}
}
