package report

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// The distinguishing reports under a directory are found by name, placed by
// the cell of their model (task, variant, seed, target epsilon) and drawn:
// the ROC figure and the frontier next to the lower bounds, PNG and SVG.
func TestDistinguishPlots(t *testing.T) {
	root := t.TempDir()
	cellDir := filepath.Join(root, "sst2", "gaussian", "epsilon=8", "seed=2")
	var reps []*attack.DistinguishReport
	for i, c := range []float64{0.2, 0.5} {
		pair, g, err := attack.WitnessPair(nvib.GaussianClipSet(c, 1, 4, 2), privacy.DefaultDelta, true)
		if err != nil {
			t.Fatal(err)
		}
		o := attack.DefaultDistinguishOptions()
		o.Releases = 1000
		res, err := attack.Distinguish(context.Background(), pair, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := res.SetCertified(g); err != nil {
			t.Fatal(err)
		}
		rep := &attack.DistinguishReport{Attack: attack.AttackDistinguish, Task: "sst2", Variant: nvib.ModelGaussian, Certified: g,
			Pairs: []attack.PairResult{{Kind: attack.PairWitness, Result: res}}}
		if i == 0 {
			rep.Model = cellDir
		}
		reps = append(reps, rep)
		sub := filepath.Join(root, "attacks", []string{"a", "b"}[i])
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.WriteJSON(filepath.Join(sub, attack.DistinguishFile), rep); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "attacks", "other.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, paths, err := loadDistinguish(root)
	if err != nil || len(loaded) != 2 {
		t.Fatalf("loaded %d reports (%v): %v", len(loaded), paths, err)
	}
	cells := []*runCell{{Dir: cellDir, Task: "sst2", Variant: nvib.ModelGaussian, Seed: 2, TargetEpsilon: 8}}
	pts := distinguishPoints(cells, loaded, paths)
	if len(pts) != 2 || pts[0].Seed != 2 || pts[0].TargetEpsilon != 8 || pts[1].Seed != 0 {
		t.Fatalf("points %+v", pts)
	}
	for i, p := range pts {
		r := reps[i].Pairs[0].Result
		if p.LowerBound != r.EpsilonLowerBound || p.Certified != reps[i].Certified.Epsilon ||
			p.Gaussian != *r.GaussianEpsilon || math.IsNaN(float64(p.Pair)) || p.Kind != attack.PairWitness {
			t.Errorf("point %d: %+v", i, p)
		}
	}
	dir := t.TempDir()
	files, err := PlotDistinguishROC(reps[0], filepath.Join(dir, "roc"))
	if err != nil || len(files) != 2 {
		t.Fatalf("ROC plots %v: %v", files, err)
	}
	files, err = plotDistinguishFrontier(&taskTable{Task: "sst2"}, pts, filepath.Join(dir, "frontier"))
	if err != nil || len(files) != 2 {
		t.Fatalf("frontier plots %v: %v", files, err)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if files, err := plotDistinguishFrontier(&taskTable{Task: "mrpc"}, pts, filepath.Join(dir, "none")); err != nil || len(files) != 0 {
		t.Errorf("a task without points: %v, %v", files, err)
	}
}
