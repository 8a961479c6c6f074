package mlm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/fma"
	"github.com/nvdp-project/nvdp/nn"
)

// TestPinnedShortRun pins a 12-step pretraining run (two evaluations, an
// epoch boundary at step 10) to the numbers the code produced before the
// training loop moved into internal/loop: every metrics line's loss,
// masked-token accuracy, masked-token count and learning rate, and a digest
// of the exported model.safetensors. Exact for the pure-Go backend on amd64;
// OpenBLAS picks its kernels by CPU, so with it only the run is checked.
func TestPinnedShortRun(t *testing.T) {
	corpus := glueCorpus(t)
	out := filepath.Join(t.TempDir(), "pin")
	res, err := Run(context.Background(), smallOptions(corpus, out, 12), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 12 || res.Epochs != 1+32.0/162 {
		t.Errorf("steps %d epochs %v, want 12 and %v", res.Steps, res.Epochs, 1+32.0/162)
	}
	if nn.Backend() != "gonum (pure Go)" || fma.Fuses {
		t.Skipf("pinned numbers are for the pure-Go backend on amd64 without fused multiply-adds (GOAMD64 < v3), not %s on %s", nn.Backend(), runtime.GOARCH)
	}
	want := []Metric{
		{Step: 0, Split: "heldout", Loss: 10.319378278880817, MaskedAcc: 0, MaskedTokens: 106},
		{Step: 10, Split: "train", Loss: 9.40933009153238, MaskedAcc: 0.03625632377740304, MaskedTokens: 1186, LR: 0.005454545454545454},
		{Step: 10, Split: "heldout", Loss: 7.939249062711115, MaskedAcc: 0.03773584905660377, MaskedTokens: 106},
		{Step: 12, Split: "train", Loss: 7.914893784758288, MaskedAcc: 0.08571428571428572, MaskedTokens: 245, LR: 0.0018181818181818182},
		{Step: 12, Split: "heldout", Loss: 7.8479325387692915, MaskedAcc: 0.03773584905660377, MaskedTokens: 106},
	}
	got := readMetrics(t, filepath.Join(out, metricsFile))
	if len(got) != len(want) {
		t.Fatalf("%d metrics lines, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Step != w.Step || g.Split != w.Split || g.Loss != w.Loss || g.MaskedAcc != w.MaskedAcc || g.MaskedTokens != w.MaskedTokens || g.LR != w.LR {
			t.Errorf("line %d: %+v, want %+v", i+1, g, w)
		}
	}
	w, err := os.ReadFile(filepath.Join(out, encoder.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if s := sha256.Sum256(w); hex.EncodeToString(s[:8]) != "3d61d56733478863" {
		t.Errorf("model.safetensors digest %s, want 3d61d56733478863", hex.EncodeToString(s[:8]))
	}
}
