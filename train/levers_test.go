package train

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
)

// TestLeversTrain: a short run with the release head and a schedule of the
// radius saves the model at C_mu with the head reading the release (no
// NVDP block), and the schedule changes the trained weights (the radius of
// the early steps is not C_mu).
func TestLeversTrain(t *testing.T) {
	glueDir, vocab := synthGlue(t, 64, 16)
	weights := map[string]map[string][]float32{}
	for _, tc := range []struct {
		name  string
		sched *model.RadiusSchedule
	}{{"fixed", nil}, {"schedule", &model.RadiusSchedule{Start: 4, Fraction: 1}}} {
		o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), tc.name))
		o.Epochs, o.CMu, o.HeadReads, o.RadiusSchedule = 1, 0.5, nvib.HeadReadsRelease, tc.sched
		if _, err := Run(context.Background(), o, nil); err != nil {
			t.Fatal(err)
		}
		b := readTextModel(t, o.Out)
		if b.Model.Cfg.HeadReads != nvib.HeadReadsRelease || b.Model.Block != nil {
			t.Fatalf("%s: head_reads %q, block %v", tc.name, b.Model.Cfg.HeadReads, b.Model.Block != nil)
		}
		if b.Model.Cfg.Clip.CMu != 0.5 || b.Model.ClipRadius() != 0.5 {
			t.Fatalf("%s: saved C_mu %v, radius %v, want 0.5", tc.name, b.Model.Cfg.Clip.CMu, b.Model.ClipRadius())
		}
		lo, err := model.LoadOptions(o.Out)
		if err != nil {
			t.Fatal(err)
		}
		if (lo.RadiusSchedule == nil) != (tc.sched == nil) || lo.HeadReads != nvib.HeadReadsRelease {
			t.Fatalf("%s: saved options %+v, %q", tc.name, lo.RadiusSchedule, lo.HeadReads)
		}
		weights[tc.name] = readWeights(t, o.Out)
	}
	w := weights["fixed"]["nvib.mu_proj.weight"]
	if len(w) == 0 || slices.Equal(w, weights["schedule"]["nvib.mu_proj.weight"]) {
		t.Errorf("the schedule of the radius left mu_proj as it was without it (%d weights)", len(w))
	}
}
