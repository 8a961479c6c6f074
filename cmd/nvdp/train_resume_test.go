package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/train"
)

// TestTrainResumeConflicts (issue 32): `nvdp train --resume` continues the
// run with its saved options, so the flags given that contradict them are
// refused before any work, each named with the given and the saved value
// (the checkpoint untouched); flags equal to the saved values (a task by
// another of its names too) resume the run.
func TestTrainResumeConflicts(t *testing.T) {
	glueDir, vocab := synthSST2(t, 16)
	enc := "hf:" + tinyEncoderDir(t, vocab)
	out := filepath.Join(t.TempDir(), "run")
	run := []string{"--task", "sst2", "--glue-dir", glueDir, "--encoder", enc, "--variant", "nvdp-clipped", "--hand-set-clipping",
		"--lr", "0.001", "--max-seq-len", "8", "--epochs", "1", "--batch-size", "4", "--no-progress", "--out", out}
	if _, err := runCmd(newTrainCmd(), append(run, "--stop-after-steps", "2")...); err != nil {
		t.Fatal(err)
	}
	ckptPath := filepath.Join(out, train.CheckpointFile)
	ckpt, err := os.ReadFile(ckptPath)
	if err != nil {
		t.Fatal(err)
	}
	resume := []string{"--resume", "--out", out, "--no-progress"}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"task, variant, lr", []string{"--task", "rte", "--variant", "baseline", "--lr", "0.01"},
			[]string{"--task rte (saved sst2)", "--variant baseline (saved nvdp-clipped)", "--lr 0.01 (saved 0.001)", model.OptionsFile}},
		{"auto and none", []string{"--lr", "auto", "--c-mu", "auto", "--target-epsilon", "8", "--latent-dim", "16", "--radius-schedule", "4:0.5"},
			[]string{"--lr auto (saved 0.001)", "--c-mu auto (saved 2)", "--target-epsilon 8 (saved none)", "--latent-dim 16 (saved auto)", "--radius-schedule 4:0.5 (saved off)"}},
		{"one of several", []string{"--task", "sst2", "--epochs", "3", "--max-seq-len", "8"}, []string{"--epochs 3 (saved 1)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := runCmd(newTrainCmd(), append(append([]string{}, resume...), c.args...)...)
			if err == nil {
				t.Fatalf("resume with %v: no error", c.args)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("resume with %v: %v\nwant it to name %q", c.args, err, w)
				}
			}
			if strings.Contains(err.Error(), "--max-seq-len") || strings.Contains(err.Error(), "--out ") {
				t.Errorf("resume with %v: %v names a flag equal to the saved value", c.args, err)
			}
			if now, err := os.ReadFile(ckptPath); err != nil || !bytes.Equal(now, ckpt) {
				t.Fatalf("the checkpoint changed (%v)", err)
			}
		})
	}
	// The saved values, given again (the task by its GLUE directory name),
	// resume the run to its end.
	same := []string{"--task", "SST-2", "--variant", "nvdp-clipped", "--lr", "1e-3", "--epochs", "1", "--max-seq-len", "8", "--json"}
	stdout, err := runCmd(newTrainCmd(), append(append([]string{}, resume...), same...)...)
	if err != nil {
		t.Fatalf("resume with the saved values: %v", err)
	}
	if !strings.Contains(stdout, `"steps":4`) || !strings.Contains(stdout, `"task":"sst2"`) {
		t.Errorf("resumed run: %s, want 4 steps of sst2", stdout)
	}
}

// TestTrainDivergedLR (issue 32): `nvdp train --lr 1e10` ends with an error
// naming the epoch and the step that met a non-finite value (it panicked in
// nn.Attention), and the run directory keeps its last checkpoint.
func TestTrainDivergedLR(t *testing.T) {
	glueDir, vocab := synthSST2(t, 32)
	out := filepath.Join(t.TempDir(), "run")
	_, err := runCmd(newTrainCmd(), "--task", "sst2", "--glue-dir", glueDir, "--encoder", "hf:"+tinyEncoderDir(t, vocab),
		"--variant", "baseline", "--lr", "1e10", "--max-seq-len", "8", "--epochs", "1", "--batch-size", "4",
		"--checkpoint-every", "1", "--no-progress", "--out", out)
	if err == nil || !strings.Contains(err.Error(), "epoch 1 step ") || !strings.Contains(err.Error(), "the checkpoint of step ") {
		t.Fatalf("--lr 1e10: %v, want an error naming the step and the checkpoint kept", err)
	}
	if _, err := os.Stat(filepath.Join(out, train.CheckpointFile)); err != nil {
		t.Errorf("no checkpoint kept: %v", err)
	}
}

// TestRunResumeConflicts (issue 32): nvdp run --resume refuses flags that
// conflict with the saved options, as nvdp train --resume does.
func TestRunResumeConflicts(t *testing.T) {
	glueDir, vocab := synthSST2(t, 16)
	enc := "hf:" + tinyEncoderDir(t, vocab)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"--task", "sst2", "--glue-dir", glueDir, "--encoder", enc, "--variant", "nvdp-clipped", "--hand-set-clipping",
		"--lr", "0.001", "--max-seq-len", "8", "--epochs", "1", "--batch-size", "4", "--no-progress", "--out", out}
	if _, err := runCmd(newTrainCmd(), append(args, "--stop-after-steps", "2")...); err != nil {
		t.Fatal(err)
	}
	_, err := runCmd(newRunCmd(), "--resume", "--out", out, "--glue-dir", glueDir, "--no-progress", "--variant", "baseline", "--lr", "0.01")
	if err == nil || !strings.Contains(err.Error(), "--variant baseline (saved nvdp-clipped)") || !strings.Contains(err.Error(), "--lr 0.01 (saved 0.001)") {
		t.Fatalf("run --resume with conflicting flags: %v", err)
	}
}
