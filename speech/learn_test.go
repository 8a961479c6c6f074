package speech

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/nvdp-project/nvdp/internal/lidtest"
	"github.com/nvdp-project/nvdp/nvib"
)

// TestLearnsTones: trained through the release (nvdp-clipped at the
// paper's constants), the model learns to tell the tone "languages" apart:
// the dev loss falls below the uniform ln 45 and the dev accuracy reaches
// 1 (chance 1/3), so the gradients of the head, the block, the NVIB layer
// and the encoder are wired end to end.
func TestLearnsTones(t *testing.T) {
	root := t.TempDir()
	lidtest.WriteToneCorpus(t, root, map[string]int{"train": 8, "dev": 4})
	o := DefaultOptions()
	o.DataDir, o.MaxSeconds = root, 0.5
	o.Train.Variant, o.Train.Epochs, o.Train.BatchSize, o.Train.EvalBatchSize, o.Train.Out = nvib.ModelNVDPClipped, 4, 4, 12, filepath.Join(t.TempDir(), "run")
	o.Train.LR, o.Train.HandSetClipping = 1e-3, true // the paper's constants, no target
	r, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := r.History[len(r.History)-1]
	if _, ok := last.Dev["dev_loss"]; !ok {
		t.Fatalf("no dev_loss in the metrics line: %v", last.Dev)
	}
	if loss, acc := float64(last.Dev["dev_loss"]), float64(last.Dev[MetricAccuracy]); !(loss < math.Log(45)/2) || acc != 1 {
		for _, h := range r.History {
			t.Logf("epoch %d train loss %.4f dev %v", h.Epoch, float64(h.Train["loss"]), h.Dev)
		}
		t.Errorf("after %d epochs: dev loss %.4f (want < ln(45)/2 = %.4f), accuracy %v (want 1)", last.Epoch, loss, math.Log(45)/2, acc)
	}
}
