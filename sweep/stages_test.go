package sweep

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/train"
)

// cellView is what a manifest says of a cell, without times.
func cellView(c *Cell) string {
	return fmt.Sprintf("%s %s cmu=%v grid=%v reused=%q err=%q", c.ID, c.Status, c.CMu, c.Grid, c.ReusedFrom, c.Error)
}

// runStages runs the sweep of o in stages as a cluster would: plan, every
// grid index (in reverse order: the indices are independent), select,
// every main index, finish; each index with a fresh runner. It returns
// FinishStages' manifest and error.
func runStages(t *testing.T, o Options, runner func() Runner) (*Manifest, error) {
	t.Helper()
	p, err := PlanStages(o)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(p.Grid) - 1; i >= 0; i-- {
		RunStageCell(context.Background(), o.Out, StageGrid, i, runner(), nil) // a failure is recorded
	}
	if _, err := SelectStage(o.Out); err != nil {
		t.Fatal(err)
	}
	p, err = readStages(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Main {
		RunStageCell(context.Background(), o.Out, StageMain, i, runner(), nil)
	}
	return FinishStages(o.Out)
}

// TestStagesEqualRun: the sweep in stages ends in the manifest, selections,
// links and reports of the one-process Run of the same options, cell for
// cell (the clipped cell that is a grid run reuses it in both); a failed
// grid cell skips its task's clipped cells in both, and both report it.
func TestStagesEqualRun(t *testing.T) {
	for _, failID := range []string{"", "rte/cmu-grid/c_mu=2/lambda=1e-2/seed=1"} {
		t.Run("fail="+failID, func(t *testing.T) {
			so := Options{Base: bare(t, model.Options{CMu: 99}), Tasks: []string{"sst2", "rte"},
				Variants: []string{"baseline", "nvdp", "nvdp-clipped"}, Lambdas: []float64{1e-2, 1}, Seeds: []uint64{1, 2},
				CMuGrid: []float64{1, 2, 4, 8}, CMuTolerance: ptr(0.05)}
			one := so
			one.Out, one.Runner = filepath.Join(t.TempDir(), "one"), (&fakeRunner{failID: failID}).run
			_, runErr := Run(context.Background(), one)
			staged := so
			staged.Out = filepath.Join(t.TempDir(), "staged")
			var calls int
			m, stagesErr := runStages(t, staged, func() Runner {
				f := &fakeRunner{failID: failID}
				return func(ctx context.Context, c Cell, spec CellSpec) error {
					calls++
					return f.run(ctx, c, spec)
				}
			})
			if (runErr == nil) != (stagesErr == nil) {
				t.Fatalf("Run: %v; stages: %v", runErr, stagesErr)
			}
			want := readManifest(t, one.Out)
			if len(m.Cells) != len(want.Cells) || len(m.Cells) != 28 {
				t.Fatalf("%d cells staged, %d in one process", len(m.Cells), len(want.Cells))
			}
			for i := range want.Cells {
				a := strings.ReplaceAll(cellView(m.Cells[i]), staged.Out, "OUT")
				if b := strings.ReplaceAll(cellView(want.Cells[i]), one.Out, "OUT"); a != b {
					t.Errorf("cell %d: staged %s\n             one process %s", i, a, b)
				}
				if m.Cells[i].Status != CellDone {
					continue
				}
				ra, err1 := train.ReadReport(m.Cells[i].Dir)
				rb, err2 := train.ReadReport(want.Cells[i].Dir)
				if err1 != nil || err2 != nil || ra.Utility["accuracy"] != rb.Utility["accuracy"] || ra.CMu != rb.CMu {
					t.Errorf("cell %s: reports %v %v (%v, %v)", m.Cells[i].ID, ra, rb, err1, err2)
				}
			}
			for task, sel := range want.Selections {
				if got := m.Selections[task]; got == nil || got.CMu != sel.CMu || got.Reason != sel.Reason {
					t.Errorf("%s selection: staged %+v, one process %+v", task, got, sel)
				}
			}
			if len(m.Selections) != len(want.Selections) {
				t.Errorf("selections: staged %d, one process %d", len(m.Selections), len(want.Selections))
			}
			if link, err := os.Readlink(filepath.Join(staged.Out, "sst2/nvdp-clipped/lambda=1e-2/seed=1")); err != nil || !strings.Contains(link, "c_mu=4") {
				t.Errorf("the staged clipped cell does not reuse the grid run: %q %v", link, err)
			}
			b, err := os.ReadFile(filepath.Join(staged.Out, "sst2", CMuSelectionFile))
			a, err2 := os.ReadFile(filepath.Join(one.Out, "sst2", CMuSelectionFile))
			if err != nil || err2 != nil || string(a) != string(b) {
				t.Errorf("sst2 selection files differ (%v, %v)", err, err2)
			}
			t.Logf("%d cells ran in stages", calls)
		})
	}
}

// TestStagesRefuse: the stages refuse what would break the sweep: the main
// stage before the selection, the selection before the grid has run, an
// index out of range, another plan over a planned directory; planning
// again with the same options keeps the plan; a done cell is skipped.
func TestStagesRefuse(t *testing.T) {
	so := Options{Base: bare(t, model.Options{CMu: 99}), Tasks: []string{"sst2"}, Variants: []string{"nvdp-clipped"},
		Lambdas: []float64{1e-2}, Seeds: []uint64{1}, CMuGrid: []float64{1, 2}, Out: t.TempDir()}
	p, err := PlanStages(so)
	if err != nil || len(p.Grid) != 2 || len(p.Main) != 1 || p.Selected {
		t.Fatalf("plan %+v, %v", p, err)
	}
	f := &fakeRunner{}
	check := func(err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	_, err = RunStageCell(context.Background(), so.Out, StageMain, 0, f.run, nil)
	check(err, "the main stage waits for the C_mu selection")
	_, err = RunStageCell(context.Background(), so.Out, StageGrid, 2, f.run, nil)
	check(err, "index 2: stage grid has 2 cells (indices 0 to 1)")
	_, err = RunStageCell(context.Background(), so.Out, "other", 0, f.run, nil)
	check(err, `stage "other": want grid or main`)
	if _, err := RunStageCell(context.Background(), so.Out, StageGrid, 0, f.run, nil); err != nil {
		t.Fatal(err)
	}
	_, err = SelectStage(so.Out)
	check(err, "the grid stage has not finished: run its indices 1 (sst2/cmu-grid/c_mu=2/lambda=1e-2/seed=1: pending)")
	other := so
	other.Seeds = []uint64{2}
	_, err = PlanStages(other)
	check(err, "planned already with other options")
	if again, err := PlanStages(so); err != nil || len(again.Grid) != 2 {
		t.Fatalf("planning again: %+v %v", again, err)
	}
	if _, err := RunStageCell(context.Background(), so.Out, StageGrid, 0, f.run, nil); err != nil || len(f.calls) != 1 {
		t.Fatalf("a done cell ran again: %v %v", f.calls, err)
	}
	_, err = FinishStages(so.Out)
	check(err, "the C_mu selection has not been made")
}

// TestStagesRefuseOutside: a stages.json edited so that a cell would run
// outside the sweep directory (its dir elsewhere, its id climbing out, the
// options' out another directory) is refused by every stage command before
// any cell runs, naming the field; nothing is written outside.
func TestStagesRefuseOutside(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(p *StagePlan, outside string)
	}{
		{"absolute dir", "main[0].dir", func(p *StagePlan, outside string) { p.Main[0].Dir = outside }},
		{"dir climbing out", "grid[1].dir", func(p *StagePlan, outside string) {
			p.Grid[1].Dir = filepath.Join(p.Options.Out, "..", filepath.Base(outside))
		}},
		{"id climbing out", "grid[0].id", func(p *StagePlan, outside string) {
			p.Grid[0].ID = filepath.Join("..", filepath.Base(outside))
			p.Grid[0].Dir = filepath.Join(p.Options.Out, p.Grid[0].ID)
		}},
		{"options.out elsewhere", "options.out", func(p *StagePlan, outside string) {
			p.Options.Out = outside
			for _, c := range append(p.Grid, p.Main...) {
				c.Dir = filepath.Join(outside, c.ID)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			so := Options{Base: bare(t, model.Options{CMu: 99}), Tasks: []string{"sst2"}, Variants: []string{"nvdp-clipped"},
				Lambdas: []float64{1e-2}, Seeds: []uint64{1}, CMuGrid: []float64{1, 2}, Out: filepath.Join(top, "sweep")}
			if _, err := PlanStages(so); err != nil {
				t.Fatal(err)
			}
			// Selected, so that the main stage would run at once.
			p, err := readStages(so.Out)
			if err != nil {
				t.Fatal(err)
			}
			p.Selected = true
			outside := filepath.Join(top, "escaped")
			tc.edit(p, outside)
			if err := atomicfile.WriteJSON(filepath.Join(so.Out, StagesFile), p); err != nil {
				t.Fatal(err)
			}
			f := &fakeRunner{}
			for _, stage := range []string{StageGrid, StageMain} {
				for i := range 2 {
					if _, err := RunStageCell(context.Background(), so.Out, stage, i, f.run, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Errorf("RunStageCell(%s, %d): err = %v, want %q", stage, i, err, tc.want)
					}
				}
			}
			if _, err := SelectStage(so.Out); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("SelectStage: err = %v, want %q", err, tc.want)
			}
			if _, err := FinishStages(so.Out); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("FinishStages: err = %v, want %q", err, tc.want)
			}
			if len(f.calls) != 0 {
				t.Errorf("cells ran: %v", f.calls)
			}
			if _, err := os.Stat(outside); err == nil {
				t.Errorf("%s was written", outside)
			}
		})
	}
}
