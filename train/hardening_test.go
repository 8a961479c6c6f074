package train

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/model"
)

// TestDivergedTrainingIsAnError (issue 32): a learning rate of 1e10 makes the
// scores of the encoder's attention overflow a step after its first full
// update. The run ends with an error naming the epoch, the step and the
// checkpoint kept (it panicked in nn.Attention; now the softmax lets a
// non-finite row through as NaN, and the model's finiteness checks of the
// posterior and the loss turn it into an error), and the checkpoint
// written before stays on disk, unchanged and resumable.
func TestDivergedTrainingIsAnError(t *testing.T) {
	glueDir, vocab := synthGlue(t, 64, 24)
	for _, variant := range []string{"baseline", "nvdp-clipped"} {
		t.Run(variant, func(t *testing.T) {
			o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "run"))
			o.Variant, o.HandSetClipping = variant, variant != "baseline"
			o.LR, o.StopAfterSteps = 1e10, 2 // step 1 at lr 0 (warm-up), step 2 at 1e10: sane forwards, huge weights
			if _, err := Run(context.Background(), o, nil); err != nil {
				t.Fatal(err)
			}
			ckptPath := filepath.Join(o.Out, CheckpointFile)
			ckpt, err := os.ReadFile(ckptPath)
			if err != nil {
				t.Fatal(err)
			}
			_, err2 := Run(context.Background(), model.Options{RunTime: model.RunTime{Out: o.Out, Resume: true}}, nil) // it panicked
			if err2 == nil || !strings.Contains(err2.Error(), "epoch 1 step 3: ") || !strings.Contains(err2.Error(), "the checkpoint of step 2 stays in "+ckptPath) {
				t.Fatalf("training with lr 1e10: err %v, want an error naming the epoch, the step and the checkpoint kept", err2)
			}
			if now, err := os.ReadFile(ckptPath); err != nil || !bytes.Equal(now, ckpt) {
				t.Fatalf("the checkpoint changed or went (%v)", err)
			}
			// The directory stays resumable: the checkpoint loads, and the
			// same step fails the same way.
			if _, err := Run(context.Background(), model.Options{RunTime: model.RunTime{Out: o.Out, Resume: true}}, nil); err == nil || err.Error() != err2.Error() {
				t.Fatalf("resumed again: %v, want %v", err, err2)
			}
		})
	}
}

// TestResumeKeepsLogSteps: LogSteps, a run-time choice like Device, is kept
// on a resume (the saved options replaced it with false: a resumed run
// logged no step).
func TestResumeKeepsLogSteps(t *testing.T) {
	glueDir, vocab := synthGlue(t, 32, 8)
	o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "run"))
	o.Epochs, o.StopAfterSteps, o.LogSteps = 1, 2, true
	if _, err := Run(context.Background(), o, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), model.Options{RunTime: model.RunTime{Out: o.Out, Resume: true, LogSteps: true}}, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(o.Out, StepsFile))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines != 4 {
		t.Errorf("%s has %d lines, want the 4 steps:\n%s", StepsFile, lines, b)
	}
}
