package sweep

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/train"
)

// testdata/v1 is a sweep directory written by the code before this package
// (train.Sweep at 7b92b44) with a runner like fakeRunner: SST-2, baseline and
// nvdp-clipped, lambdas 1e-2 and 1, seeds 1 and 2, a C_mu grid 1, 2, 4
// (utility 0.8, 0.9, 0.9; rd_max 0.5 each; the BDP estimate of C_mu 2 NaN,
// written as null, which that code read back as 0), the clipped cell at
// lambda 1e-2 seed 1 a link to its grid run; then the baseline cell of seed 2
// removed (pending) and the clipped cell at lambda 1 seed 2 left with a
// checkpoint and no report (interrupted).
const v1Sweep = "testdata/v1"

// TestResumeSweepOfOlderCode: a sweep directory of the older code resumes:
// only the pending and the interrupted cell run (the latter resumed), the
// finished cells and the link to the grid run are kept, the C_mu choice is
// the same, and its manifest and selection file read.
func TestResumeSweepOfOlderCode(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sweep")
	copyTree(t, v1Sweep, out)
	var old Manifest
	var oldSel CMuSelection
	readJSON(t, filepath.Join(out, ManifestFile), &old)
	readJSON(t, filepath.Join(out, "sst2", CMuSelectionFile), &oldSel)
	if old.Counts[CellDone] != 7 || len(old.Cells) != 9 || old.Selections["sst2"].CMu != 2 || oldSel.CMu != 2 || oldSel.Tightest != 2 ||
		len(oldSel.Candidates) != 3 || fmtValue(oldSel.Candidates[1].BDPEpsilon) != "0" {
		t.Fatalf("older manifest %+v, selection %+v", old.Counts, oldSel)
	}

	f := &fakeRunner{utility: map[float64]float64{1: 0.8, 2: 0.9, 4: 0.9}}
	o := Options{Base: bare(t, model.Options{}), Tasks: []string{"sst2"}, Variants: []string{"baseline", "nvdp-clipped"}, Lambdas: []float64{1e-2, 1},
		Seeds: []uint64{1, 2}, Out: out, Runner: f.run, CMuGrid: []float64{1, 2, 4}}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(f.calls)
	if want := []string{"sst2/baseline/seed=2", "sst2/nvdp-clipped/lambda=1/seed=2"}; res.Ran != 2 || !slices.Equal(f.calls, want) ||
		f.resume[want[0]] || !f.resume[want[1]] {
		t.Errorf("ran %d: %v (resume %v), want %v", res.Ran, f.calls, f.resume, want)
	}
	if target, err := os.Readlink(filepath.Join(out, "sst2/nvdp-clipped/lambda=1e-2/seed=1")); err != nil ||
		target != filepath.Join("..", "..", CMuGridDir, "c_mu=2", "lambda=1e-2", "seed=1") {
		t.Errorf("link to the grid run: %q, %v", target, err)
	}
	// The same choice; the null BDP estimate of C_mu 2 now reads as not computed, so C_mu 4 has the tighter worst case.
	sel := res.Manifest.Selections["sst2"]
	if sel.CMu != 2 || sel.Tightest != 4 || fmtValue(sel.Candidates[1].BDPEpsilon) != "nil" || sel.Best != oldSel.Best {
		t.Errorf("selection %+v", sel)
	}
	m := readManifest(t, out)
	if m.Counts[CellDone] != 9 || len(m.Cells) != 9 {
		t.Errorf("manifest counts %v", m.Counts)
	}
	for _, c := range m.Cells {
		if r, err := train.ReadReport(c.Dir); err != nil || r.Task != "sst2" || r.Seed != c.Seed {
			t.Errorf("cell %s: %+v, %v", c.ID, r, err)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// copyTree copies the directory src to dst, symbolic links as links.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, to)
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
