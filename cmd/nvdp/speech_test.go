package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/internal/lidtest"
	"github.com/nvdp-project/nvdp/speech"
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
	checkOutput(t, stdout, []string{"lid / nvdp-clipped / principled", "scratch:small", "utility test macro_f1",
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
	checkOutput(t, stdout, []string{"lid test (nvdp-clipped): 9 examples", "macro_f1", "posteriors:  " + evalOut + "/posteriors_test.safetensors (25 components)"}, nil)
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
