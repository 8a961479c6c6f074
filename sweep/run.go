package sweep

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
)

// Result summarises Run.
type Result struct {
	Manifest *Manifest
	// Ran counts the cells that ran (trained or resumed); the others were already done.
	Ran int
}

// Run runs every cell of tasks x variants x lambdas x seeds with
// [train.RunPipeline], each in its directory under o.Out; see Cell.place and
// docs/results.md. The baseline and gaussian run once per task and seed, and
// gaussian also once per target epsilon. The options are checked before any
// work and before any file is written: the sweep's, with errors of type
// [*option.Error], and the first cell of each task and variant as a new run
// (its task's Prepare: the GLUE files and vocabulary, or the speech corpus;
// errors naming the option or the file).
//
// Cells whose report.json exists are checked to be the run asked for, and
// skipped; cells with a checkpoint are resumed. With CMuGrid the nvdp-clipped
// grid cells run first, C_mu is chosen per task by [SelectCMu] and written to
// Out/<task>/c_mu_selection.json, and the nvdp-clipped cells use it; the one
// that is the same run as a grid cell links to it. Out/sweep.json lists every
// cell and its status, rewritten atomically at every change.
//
// Cancelling ctx stops starting cells; running cells stop at their next step
// with a checkpoint, with status interrupted, and Run returns ctx.Err(). A
// failed cell does not stop the others; Run returns an error naming the
// failed cells after the rest have run.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Runner == nil {
		o.Runner = inProcess(o.Progress)
	}
	grid, main := plan(&o)
	prepared, err := checkCells(&o, main)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	s := &sweeper{o: &o, man: newManifest(&o, slices.Concat(grid, main)), prepared: prepared}
	if err := s.man.update(func(*Manifest) {}); err != nil {
		return nil, err
	}
	s.res.Manifest = s.man.m
	if err := s.runCells(ctx, grid); err != nil {
		return &s.res, err
	}
	if len(grid) > 0 {
		for _, task := range o.Tasks {
			s.selectCMu(task, grid, main)
		}
	}
	var todo []*Cell
	for _, c := range main {
		if c.Status != CellSkipped {
			todo = append(todo, c)
		}
	}
	if err := s.runCells(ctx, todo); err != nil {
		return &s.res, err
	}
	if len(s.failed) > 0 {
		return &s.res, fmt.Errorf("sweep: %d failed: %s (see %s)", len(s.failed), strings.Join(s.failed, "; "), s.man.path)
	}
	return &s.res, nil
}

// sweeper is the state of one Run.
type sweeper struct {
	o   *Options
	man *manifest
	// prepared are the new runs checkCells prepared, by cell ID; a cell
	// whose options change after (a C_mu selection) leaves it.
	prepared map[string]task.Trainer

	mu     sync.Mutex // guards res.Ran and failed
	res    Result
	failed []string // "<cell or task>: <error>"
}

// selectCMu selects C_mu for task from its grid cells and gives it to the
// task's nvdp-clipped cells, or skips them when there is no selection.
func (s *sweeper) selectCMu(task string, grid, main []*Cell) {
	sel, err := selectTask(s.o, task, grid)
	if err == nil {
		err = s.man.update(func(m *Manifest) { m.Selections[task] = sel })
	}
	if err != nil {
		s.failed = append(s.failed, task+" C_mu selection: "+err.Error())
	} else {
		slog.Info("C_mu selection", "task", task, "c_mu", sel.CMu, "reason", sel.Reason)
	}
	for _, c := range main {
		switch {
		case c.Task != task || c.Variant != nvib.ModelNVDPClipped:
		case err != nil:
			_ = s.man.set(c, func(c *Cell) { c.Status, c.Error = CellSkipped, "no C_mu selection: "+err.Error() })
		default:
			delete(s.prepared, c.ID) // checked by its run at the C_mu selected
			_ = s.man.set(c, func(c *Cell) { c.CMu = sel.CMu })
		}
	}
}

// runCells runs the cells with o.Jobs workers, counting those that ran and
// recording the failures; returns ctx.Err() when cancelled.
func (s *sweeper) runCells(ctx context.Context, cells []*Cell) error {
	var wg sync.WaitGroup
	ch := make(chan *Cell)
	for range max(s.o.Jobs, 1) {
		wg.Go(func() {
			for c := range ch {
				ran, err := s.runCell(ctx, c)
				s.mu.Lock()
				if ran {
					s.res.Ran++
				}
				if err != nil && ctx.Err() == nil {
					s.failed = append(s.failed, c.ID+": "+err.Error())
				}
				s.mu.Unlock()
			}
		})
	}
feed:
	for _, c := range cells {
		select {
		case <-ctx.Done():
			break feed
		case ch <- c:
		}
	}
	close(ch)
	wg.Wait()
	return ctx.Err()
}

// runCell runs one cell unless it is done; returns whether it ran.
func (s *sweeper) runCell(ctx context.Context, c *Cell) (bool, error) {
	po := cellOptions(s.o, c)
	if err := s.reuseGridCell(c); err != nil {
		return false, s.man.fail(c, err)
	}
	if rep, err := train.ReadReport(c.Dir); err == nil {
		if err := s.finish(ctx, c, po, rep); err != nil {
			return false, s.man.fail(c, err)
		}
		return false, s.man.set(c, func(c *Cell) { c.Status, c.Error = CellDone, "" })
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, s.man.fail(c, err)
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if _, err := os.Stat(filepath.Join(c.Dir, train.CheckpointFile)); err == nil {
		po.Train.Resume = true
		warnChangedOptions(c, po.Train)
	} else {
		po.prepared = s.prepared[c.ID] // nil when checkCells prepared none
	}
	if err := os.MkdirAll(filepath.Dir(c.Dir), 0o755); err != nil {
		return false, err
	}
	start := time.Now()
	slog.Info("sweep cell", "cell", c.ID, "resume", po.Train.Resume)
	if err := s.man.set(c, func(c *Cell) { c.Status, c.Error, c.Resumed = CellRunning, "", po.Train.Resume }); err != nil {
		return false, err
	}
	err := s.o.Runner(ctx, *c, po)
	if err == nil {
		var rep *train.Report
		if rep, err = train.ReadReport(c.Dir); err == nil {
			err = s.extraAudits(ctx, c, rep)
		} else {
			err = fmt.Errorf("cell finished without a readable %s: %w", train.ReportFile, err)
		}
	}
	secs := time.Since(start).Seconds()
	switch {
	case err == nil:
		slog.Info("sweep cell done", "cell", c.ID, "seconds", math.Round(secs))
		return true, s.man.set(c, func(c *Cell) { c.Status, c.Seconds = CellDone, secs })
	case ctx.Err() != nil:
		_ = s.man.set(c, func(c *Cell) { c.Status, c.Error, c.Seconds = CellInterrupted, err.Error(), secs })
		return true, err
	default:
		slog.Error("sweep cell failed", "cell", c.ID, "err", err)
		_ = s.man.set(c, func(c *Cell) { c.Status, c.Error, c.Seconds = CellFailed, err.Error(), secs })
		return true, err
	}
}

// finish checks that the finished run in c.Dir (report rep) is the run the
// sweep asks for (po) and completes its extra audits.
func (s *sweeper) finish(ctx context.Context, c *Cell, po CellSpec, rep *train.Report) error {
	if err := checkReport(c, po.Train, rep); err != nil {
		return err
	}
	return s.extraAudits(ctx, c, rep)
}

// reuseGridCell links an nvdp-clipped cell to the finished grid cell that is
// the same run (same task, lambda, seed and C_mu: the selected C_mu at the
// grid's lambda) instead of training it again. A cell directory that exists
// already is left alone.
func (s *sweeper) reuseGridCell(c *Cell) error {
	if c.Grid || c.Variant != nvib.ModelNVDPClipped || c.CMu == 0 {
		return nil
	}
	if _, err := os.Lstat(c.Dir); err == nil {
		return nil
	}
	g := s.man.doneGridCell(c)
	if g == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(c.Dir), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(c.Dir), g.Dir)
	if err != nil {
		return err
	}
	if err := os.Symlink(rel, c.Dir); err != nil {
		return fmt.Errorf("reuse grid cell %s: %w", g.ID, err)
	}
	slog.Info("sweep cell reuses the C_mu grid run", "cell", c.ID, "grid_cell", g.ID)
	return s.man.set(c, func(c *Cell) { c.ReusedFrom = g.ID })
}

// extraAudits audits the cell's posterior file in every extra mode whose
// audit file is missing.
func (s *sweeper) extraAudits(ctx context.Context, c *Cell, r *train.Report) error {
	if r.Privacy == nil {
		return nil
	}
	for _, m := range s.o.ExtraAuditModes {
		if m == r.Privacy.Mode {
			continue
		}
		path := filepath.Join(c.Dir, AuditFile(m))
		if _, err := os.Stat(path); err == nil {
			continue
		}
		post := filepath.Join(c.Dir, train.PosteriorsFile(r.Privacy.Split))
		p, err := privacy.ReadPosteriors(post)
		if err != nil {
			return fmt.Errorf("extra %s audit: %w", m, err)
		}
		ao := s.o.Base.Audit
		ao.Mode, ao.Progress = m, nil
		if m == privacy.ModeReference {
			ao.UseMask, ao.Pairs, ao.Direction = false, 0, ""
		}
		ar, err := audit.Audit(ctx, p, ao)
		if err != nil {
			return fmt.Errorf("extra %s audit of %s: %w", m, post, err)
		}
		if err := atomicfile.WriteJSON(path, ar); err != nil {
			return fmt.Errorf("extra %s audit: %w", m, err)
		}
	}
	return nil
}
