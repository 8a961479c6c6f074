package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// File and directory names of a sweep directory (`nvdp sweep --out DIR`).
const (
	// SweepManifestFile is DIR/sweep.json: every cell with its status, rewritten
	// atomically at every change.
	SweepManifestFile = "sweep.json"
	// CMuSelectionFile is DIR/<task>/c_mu_selection.json: the C_mu grid choice and why.
	CMuSelectionFile = "c_mu_selection.json"
	// CMuGridDir holds the C_mu grid cells: DIR/<task>/cmu-grid/c_mu=<c>/lambda=<l>/seed=<s>.
	CMuGridDir = "cmu-grid"
	// SweepLogDir holds the logs of cells run as subprocesses.
	SweepLogDir = "logs"
)

// AuditFile is the name of an extra audit of a cell's posteriors in another
// mode (SweepOptions.ExtraAuditModes): the full privacy.Report as JSON.
func AuditFile(mode privacy.Mode) string { return "audit_" + string(mode) + ".json" }

// Cell statuses in the sweep manifest.
const (
	CellPending     = "pending"
	CellRunning     = "running"
	CellDone        = "done"
	CellFailed      = "failed"
	CellInterrupted = "interrupted" // resumable: rerun the sweep
	CellSkipped     = "skipped"     // not run because of an earlier failure it depends on (C_mu grid)
)

// Cell is one run of a sweep: a task, variant, lambda and seed (and C_mu for
// the grid cells), trained, evaluated and audited by RunPipeline in Dir.
type Cell struct {
	ID      string  `json:"id"` // Dir relative to the sweep directory
	Task    string  `json:"task"`
	Variant string  `json:"variant"`
	Lambda  float64 `json:"lambda"` // 0 for the baseline (not used)
	Seed    uint64  `json:"seed"`
	// CMu is the clipping radius of nvdp-clipped cells (0: the --c-mu flag or the task's
	// default); set from the C_mu selection when a grid is given.
	CMu float64 `json:"c_mu,omitempty"`
	// TargetEpsilon is the privacy target the clipping of an nvdp-clipped cell is
	// calibrated to (SweepOptions.TargetEpsilons; 0: none or the base options').
	TargetEpsilon float64 `json:"target_epsilon,omitempty"`
	Grid          bool    `json:"grid,omitempty"` // a C_mu grid cell
	Dir           string  `json:"dir"`
	Status        string  `json:"status"`
	Resumed       bool    `json:"resumed,omitempty"`
	// ReusedFrom is the grid cell (ID) this cell is a symbolic link to: the same run.
	ReusedFrom string  `json:"reused_from,omitempty"`
	Error      string  `json:"error,omitempty"`
	Seconds    float64 `json:"seconds,omitempty"`
}

// CellRunner runs one cell: RunPipeline with po (po.Train.Out = cell.Dir,
// po.Train.Resume set when the cell has a checkpoint). It must leave the cell
// either complete with report.json or resumable, and return ctx.Err() (wrapped)
// when cancelled. InProcessRunner is the default; `nvdp sweep --jobs N` runs
// cells as subprocesses of the same binary.
type CellRunner func(ctx context.Context, cell Cell, po PipelineOptions) error

// InProcessRunner runs the cell with RunPipeline in this process; progress
// receives the progress bars (nil: none).
func InProcessRunner(progress io.Writer) CellRunner {
	return func(ctx context.Context, cell Cell, po PipelineOptions) error {
		_, err := RunPipeline(ctx, po, progress)
		return err
	}
}

// SweepOptions configure Sweep.
type SweepOptions struct {
	// Base is the template of every cell: all train and audit options. Task, Variant,
	// Lambda, Seed, Out and Resume are set per cell; CMu too when CMuGrid is given.
	Base     PipelineOptions
	Tasks    []string
	Variants []string // baseline, nvdp, nvdp-clipped, gaussian
	Lambdas  []float64
	Seeds    []uint64
	Out      string
	// Jobs is the number of cells run at once (default 1: sequential).
	Jobs int
	// Runner runs a cell (default InProcessRunner(nil)).
	Runner CellRunner
	// ExtraAuditModes audits each NVDP cell's posteriors again in these modes
	// (e.g. reference next to a principled run), written as AuditFile(mode).
	ExtraAuditModes []privacy.Mode
	// CMuGrid, when non-empty, runs nvdp-clipped over these C_mu values first (at
	// CMuLambda and the seeds CMuSeeds) and selects C_mu per task with SelectCMu.
	CMuGrid      []float64
	CMuTolerance float64  // absolute tolerance on the dev selection metric; default 0.01
	CMuLambda    *float64 // default Lambdas[0]
	CMuSeeds     []uint64 // default Seeds[:1]
	// TargetEpsilons, when non-empty, is a dimension of the nvdp-clipped and
	// gaussian cells: each is calibrated to one certified epsilon (at
	// Base.Train.TargetDelta, default privacy.DefaultDelta;
	// Options.TargetEpsilon) in
	// Out/<task>/nvdp-clipped/epsilon=<e>/lambda=<l>/seed=<s> and
	// Out/<task>/gaussian/epsilon=<e>/seed=<s> (lambda is not a dimension of
	// the gaussian cells: it has no KL terms). The baseline and nvdp have no
	// clipping and run once per lambda and seed as usual.
	TargetEpsilons []float64
}

// SweepManifest is DIR/sweep.json.
type SweepManifest struct {
	Out      string    `json:"out"`
	Tasks    []string  `json:"tasks"`
	Variants []string  `json:"variants"`
	Lambdas  []float64 `json:"lambdas"`
	Seeds    []uint64  `json:"seeds"`
	CMuGrid  []float64 `json:"c_mu_grid,omitempty"`
	// TargetEpsilons are the certified epsilons the nvdp-clipped and gaussian cells are calibrated to.
	TargetEpsilons []float64                `json:"target_epsilons,omitempty"`
	Selections     map[string]*CMuSelection `json:"c_mu_selections,omitempty"`
	Started        time.Time                `json:"started"`
	Updated        time.Time                `json:"updated"`
	Counts         map[string]int           `json:"counts"`
	Cells          []*Cell                  `json:"cells"`
}

// SweepResult summarises Sweep.
type SweepResult struct {
	Manifest *SweepManifest
	// Ran counts the cells that ran (trained or resumed); the others were already done.
	Ran int
}

// FormatLambda writes a lambda as the paper does (1e-3, 1e-2, 1e-1, 1):
// values in (0, 1) in shortest exponent form without exponent padding, others
// in shortest 'g' form. Used in cell directory names (lambda=1e-3) and tables.
func FormatLambda(l float64) string {
	if l > 0 && l < 1 {
		s := strconv.FormatFloat(l, 'e', -1, 64)
		s = strings.Replace(s, "e-0", "e-", 1)
		return s
	}
	return strconv.FormatFloat(l, 'g', -1, 64)
}

func (o *SweepOptions) validate() error {
	if o.Out == "" {
		return fmt.Errorf("sweep: --out DIR is required")
	}
	if len(o.Tasks) == 0 || len(o.Variants) == 0 || len(o.Seeds) == 0 {
		return fmt.Errorf("sweep: --tasks, --variants and --seeds must be non-empty")
	}
	for _, t := range o.Tasks {
		if _, err := glue.LookupTask(t); err != nil {
			return fmt.Errorf("sweep: --tasks: %w", err)
		}
	}
	nvdp := false
	for _, v := range o.Variants {
		switch v {
		case nvib.ModelBaseline, nvib.ModelGaussian:
		case nvib.ModelNVDP, nvib.ModelNVDPClipped:
			nvdp = true
		default:
			return fmt.Errorf("sweep: --variants: unknown variant %q (want baseline, nvdp, nvdp-clipped, gaussian)", v)
		}
	}
	if nvdp && len(o.Lambdas) == 0 {
		return fmt.Errorf("sweep: --lambdas must be non-empty for nvdp variants")
	}
	for _, l := range o.Lambdas {
		if !(l >= 0) || math.IsInf(l, 0) {
			return fmt.Errorf("sweep: --lambdas: %v must be finite and >= 0", l)
		}
	}
	if hasDup(o.Tasks) || hasDup(o.Variants) || hasDup(o.Lambdas) || hasDup(o.Seeds) || hasDup(o.CMuGrid) || hasDup(o.TargetEpsilons) {
		return fmt.Errorf("sweep: duplicate value in --tasks, --variants, --lambdas, --seeds, --c-mu-grid or --target-epsilons")
	}
	if err := o.validateTargets(); err != nil {
		return err
	}
	if o.Jobs == 0 {
		o.Jobs = 1
	}
	if o.Jobs < 0 {
		return fmt.Errorf("sweep: --jobs %d must be >= 1", o.Jobs)
	}
	if len(o.CMuGrid) > 0 {
		if !slices.Contains(o.Variants, nvib.ModelNVDPClipped) {
			return fmt.Errorf("sweep: --c-mu-grid selects C_mu for nvdp-clipped, which is not in --variants")
		}
		for _, c := range o.CMuGrid {
			if !(c > 0) || math.IsInf(c, 0) {
				return fmt.Errorf("sweep: --c-mu-grid: %v must be finite and > 0", c)
			}
		}
		if o.CMuTolerance == 0 {
			o.CMuTolerance = 0.01
		}
		if !(o.CMuTolerance >= 0) {
			return fmt.Errorf("sweep: --c-mu-tolerance %v must be >= 0", o.CMuTolerance)
		}
		if o.CMuLambda == nil {
			if len(o.Lambdas) == 0 {
				return fmt.Errorf("sweep: --c-mu-grid needs a lambda (--lambdas or --c-mu-lambda)")
			}
			l := o.Lambdas[0]
			o.CMuLambda = &l
		}
		if len(o.CMuSeeds) == 0 {
			o.CMuSeeds = o.Seeds[:1]
		}
	}
	if o.Runner == nil {
		o.Runner = InProcessRunner(nil)
	}
	return nil
}

// validateTargets checks the privacy targets of the sweep: --target-epsilons
// and a single target of the base options apply to nvdp-clipped and gaussian
// cells only, and exclude the C_mu grid (the target calibrates C_mu).
func (o *SweepOptions) validateTargets() error {
	base := o.Base.Train
	single := base.HasTarget()
	if len(o.TargetEpsilons) == 0 && !single {
		if base.Releases > 1 || base.VarianceShare != 0 || base.DirichletShare != 0 {
			return fmt.Errorf("sweep: --releases, --variance-share and --dirichlet-share need a target (--target-epsilons, --target-epsilon or --target-rd)")
		}
		return nil
	}
	flag := "--target-epsilons"
	if len(o.TargetEpsilons) == 0 {
		flag = "--target-epsilon / --target-rd"
	}
	switch {
	case len(o.TargetEpsilons) > 0 && single:
		return fmt.Errorf("sweep: --target-epsilons and --target-epsilon / --target-rd: give one")
	case !slices.ContainsFunc(o.Variants, nvib.Calibratable):
		return fmt.Errorf("sweep: %s calibrates nvdp-clipped and gaussian cells, which are not in --variants", flag)
	case len(o.CMuGrid) > 0:
		return fmt.Errorf("sweep: %s and --c-mu-grid: the target calibrates C_mu (fix it with --c-mu instead of a grid)", flag)
	}
	for _, e := range o.TargetEpsilons {
		if !(e > 0) || math.IsInf(e, 0) {
			return fmt.Errorf("sweep: --target-epsilons: %v must be finite and > 0", e)
		}
	}
	return nil
}

func hasDup[T comparable](v []T) bool {
	seen := map[T]bool{}
	for _, x := range v {
		if seen[x] {
			return true
		}
		seen[x] = true
	}
	return false
}

// sweepState is the manifest shared by the workers.
type sweepState struct {
	mu  sync.Mutex
	man *SweepManifest
	out string
}

func (s *sweepState) set(c *Cell, f func(c *Cell)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(c)
	return s.writeLocked()
}

func (s *sweepState) writeLocked() error {
	s.man.Updated = time.Now().UTC()
	s.man.Counts = map[string]int{}
	for _, c := range s.man.Cells {
		s.man.Counts[c.Status]++
	}
	if err := atomicfile.WriteJSON(filepath.Join(s.out, SweepManifestFile), s.man); err != nil {
		return fmt.Errorf("sweep manifest: %w", err)
	}
	return nil
}

func newCell(out, task, variant string, lambda float64, seed uint64, cmu float64, grid bool, eps float64) *Cell {
	var parts []string
	switch {
	case grid:
		parts = []string{task, CMuGridDir, "c_mu=" + FormatLambda(cmu), "lambda=" + FormatLambda(lambda)}
	case variant == nvib.ModelBaseline:
		parts = []string{task, variant}
		lambda = 0
	case variant == nvib.ModelGaussian: // no KL terms: lambda is not a dimension
		parts = []string{task, variant}
		if eps > 0 {
			parts = append(parts, "epsilon="+strconv.FormatFloat(eps, 'g', -1, 64))
		}
		lambda = 0
	case eps > 0:
		parts = []string{task, variant, "epsilon=" + strconv.FormatFloat(eps, 'g', -1, 64), "lambda=" + FormatLambda(lambda)}
	default:
		parts = []string{task, variant, "lambda=" + FormatLambda(lambda)}
	}
	parts = append(parts, "seed="+strconv.FormatUint(seed, 10))
	id := filepath.Join(parts...)
	return &Cell{ID: id, Task: task, Variant: variant, Lambda: lambda, Seed: seed, CMu: cmu, Grid: grid, TargetEpsilon: eps,
		Dir: filepath.Join(out, id), Status: CellPending}
}

// Sweep runs every cell of tasks x variants x lambdas x seeds (the baseline
// and gaussian once per task and seed, gaussian once per target epsilon too)
// with RunPipeline, each in Out/<task>/<variant>/lambda=<l>/seed=<s>/
// (baseline: Out/<task>/baseline/seed=<s>/; gaussian:
// Out/<task>/gaussian[/epsilon=<e>]/seed=<s>/).
// Cells whose report.json exists are skipped; cells with a checkpoint are
// resumed. With CMuGrid, the nvdp-clipped grid cells run first, C_mu is chosen
// per task (SelectCMu, written to Out/<task>/c_mu_selection.json) and the
// nvdp-clipped cells use it. Out/sweep.json lists every cell and its status,
// rewritten atomically at every change.
//
// Cancelling ctx stops starting cells; running cells stop at their next step
// with a checkpoint (status interrupted) and Sweep returns ctx.Err(). A failed
// cell does not stop the others; Sweep returns an error naming the failed
// cells after the rest have run.
func Sweep(ctx context.Context, so SweepOptions) (*SweepResult, error) {
	if err := so.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(so.Out, 0o755); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	man := &SweepManifest{Out: so.Out, Tasks: so.Tasks, Variants: so.Variants, Lambdas: so.Lambdas, Seeds: so.Seeds,
		CMuGrid: so.CMuGrid, TargetEpsilons: so.TargetEpsilons, Started: time.Now().UTC(), Selections: map[string]*CMuSelection{}}
	st := &sweepState{man: man, out: so.Out}

	// Plan: grid cells, then the main cells (clipped C_mu filled after selection).
	var grid, main []*Cell
	for _, task := range so.Tasks {
		if len(so.CMuGrid) > 0 {
			for _, c := range so.CMuGrid {
				for _, seed := range so.CMuSeeds {
					grid = append(grid, newCell(so.Out, task, nvib.ModelNVDPClipped, *so.CMuLambda, seed, c, true, 0))
				}
			}
		}
		for _, v := range so.Variants {
			if v == nvib.ModelBaseline {
				for _, seed := range so.Seeds {
					main = append(main, newCell(so.Out, task, v, 0, seed, 0, false, 0))
				}
				continue
			}
			epsilons := []float64{0}
			if nvib.Calibratable(v) && len(so.TargetEpsilons) > 0 {
				epsilons = so.TargetEpsilons
			}
			if v == nvib.ModelGaussian {
				for _, e := range epsilons {
					for _, seed := range so.Seeds {
						main = append(main, newCell(so.Out, task, v, 0, seed, 0, false, e))
					}
				}
				continue
			}
			for _, e := range epsilons {
				for _, l := range so.Lambdas {
					for _, seed := range so.Seeds {
						main = append(main, newCell(so.Out, task, v, l, seed, 0, false, e))
					}
				}
			}
		}
	}
	man.Cells = append(append(man.Cells, grid...), main...)
	st.mu.Lock()
	err := st.writeLocked()
	st.mu.Unlock()
	if err != nil {
		return nil, err
	}

	res := &SweepResult{Manifest: man}
	var failed []string
	run := func(cells []*Cell) error {
		ran, f, err := runCells(ctx, st, &so, cells)
		res.Ran += ran
		failed = append(failed, f...)
		return err
	}
	if len(grid) > 0 {
		if err := run(grid); err != nil {
			return res, err
		}
		for _, task := range so.Tasks {
			sel, err := selectTask(st, &so, task, grid)
			if err != nil {
				// The clipped cells of this task cannot run without a C_mu.
				for _, c := range main {
					if c.Task == task && c.Variant == nvib.ModelNVDPClipped {
						_ = st.set(c, func(c *Cell) { c.Status, c.Error = CellSkipped, "no C_mu selection: "+err.Error() })
					}
				}
				failed = append(failed, task+" C_mu selection: "+err.Error())
				continue
			}
			slog.Info("C_mu selection", "task", task, "c_mu", sel.CMu, "reason", sel.Reason)
			for _, c := range main {
				if c.Task == task && c.Variant == nvib.ModelNVDPClipped {
					_ = st.set(c, func(c *Cell) { c.CMu = sel.CMu })
				}
			}
		}
	}
	var todo []*Cell
	for _, c := range main {
		if c.Status != CellSkipped {
			todo = append(todo, c)
		}
	}
	if err := run(todo); err != nil {
		return res, err
	}
	if len(failed) > 0 {
		return res, fmt.Errorf("sweep: %d failed: %s (see %s)", len(failed), strings.Join(failed, "; "),
			filepath.Join(so.Out, SweepManifestFile))
	}
	return res, nil
}

// runCells runs the cells with so.Jobs workers; returns how many ran, the
// failures (id: error) and ctx.Err() when cancelled.
func runCells(ctx context.Context, st *sweepState, so *SweepOptions, cells []*Cell) (int, []string, error) {
	var (
		mu     sync.Mutex
		ran    int
		failed []string
		wg     sync.WaitGroup
	)
	ch := make(chan *Cell)
	for range so.Jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range ch {
				did, err := runCell(ctx, st, so, c)
				mu.Lock()
				if did {
					ran++
				}
				if err != nil && ctx.Err() == nil {
					failed = append(failed, c.ID+": "+err.Error())
				}
				mu.Unlock()
			}
		}()
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
	return ran, failed, ctx.Err()
}

// cellOptions are the pipeline options of a cell.
func cellOptions(so *SweepOptions, c *Cell) PipelineOptions {
	po := so.Base
	po.Train.Task, po.Train.Variant, po.Train.Seed, po.Train.Out = c.Task, c.Variant, c.Seed, c.Dir
	po.Train.Resume = false
	if nvib.HasKL(c.Variant) {
		po.Train.Lambda = c.Lambda
	}
	if c.CMu > 0 {
		po.Train.CMu = c.CMu
	}
	switch {
	case !nvib.Calibratable(c.Variant):
		// Only a clipping can be calibrated: the other variants run without the target.
		t := &po.Train
		t.TargetEpsilon, t.TargetDelta, t.TargetRD, t.TargetOrder, t.Releases = 0, 0, 0, 0, 0
		t.VarianceShare, t.DirichletShare = 0, 0
		t.FixCMu, t.FixLogvarMargin, t.FixCAlphaMin = false, false, false
	case c.TargetEpsilon > 0:
		po.Train.TargetEpsilon, po.Train.TargetRD = c.TargetEpsilon, 0
	}
	if c.Variant == nvib.ModelGaussian {
		// Fixed noise, no Dirichlet weights: the constants and shares of the
		// nvdp-clipped cells do not apply, and a target calibrates C (--c-mu
		// fixes C_mu for nvdp-clipped cells only).
		t := &po.Train
		t.LogvarMargin, t.CAlphaMin, t.VarianceShare, t.DirichletShare = 0, 0, 0, 0
		t.FixCMu, t.FixLogvarMargin, t.FixCAlphaMin = false, false, false
	}
	return po
}

// checkTarget checks that a finished cell was calibrated to the target the
// sweep asks for (train_options.json of the cell).
func checkTarget(c *Cell, want Options) error {
	want.Resolve()
	saved, err := LoadOptions(c.Dir)
	if err != nil {
		if want.HasTarget() {
			return err
		}
		return nil // nothing to compare against; a run without a target is what is wanted
	}
	if saved.TargetEpsilon != want.TargetEpsilon || saved.TargetRD != want.TargetRD || (want.HasTarget() && saved.Releases != want.Releases) {
		return fmt.Errorf("%s holds a run with target epsilon %v / RD %v (%d releases), the sweep wants %v / %v (%d): remove the cell or use another --out",
			filepath.Join(c.Dir, OptionsFile), saved.TargetEpsilon, saved.TargetRD, saved.Releases, want.TargetEpsilon, want.TargetRD, want.Releases)
	}
	return nil
}

// runCell runs one cell unless it is done; returns whether it ran.
func runCell(ctx context.Context, st *sweepState, so *SweepOptions, c *Cell) (bool, error) {
	po := cellOptions(so, c)
	if err := reuseGridCell(st, c); err != nil {
		_ = st.set(c, func(c *Cell) { c.Status, c.Error = CellFailed, err.Error() })
		return false, err
	}
	if rep, err := readReport(c.Dir); err == nil {
		if err := checkDone(c, po.Train.CMu, rep); err != nil {
			_ = st.set(c, func(c *Cell) { c.Status, c.Error = CellFailed, err.Error() })
			return false, err
		}
		if nvib.Calibratable(c.Variant) {
			if err := checkTarget(c, po.Train); err != nil {
				_ = st.set(c, func(c *Cell) { c.Status, c.Error = CellFailed, err.Error() })
				return false, err
			}
		}
		if err := extraAudits(ctx, so, c, rep); err != nil {
			_ = st.set(c, func(c *Cell) { c.Status, c.Error = CellFailed, err.Error() })
			return false, err
		}
		return false, st.set(c, func(c *Cell) { c.Status, c.Error = CellDone, "" })
	} else if !errors.Is(err, os.ErrNotExist) {
		_ = st.set(c, func(c *Cell) { c.Status, c.Error = CellFailed, err.Error() })
		return false, err
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if _, err := os.Stat(filepath.Join(c.Dir, CheckpointFile)); err == nil {
		po.Train.Resume = true
		warnChangedOptions(c, po.Train)
	}
	if err := os.MkdirAll(filepath.Dir(c.Dir), 0o755); err != nil {
		return false, err
	}
	start := time.Now()
	slog.Info("sweep cell", "cell", c.ID, "resume", po.Train.Resume)
	if err := st.set(c, func(c *Cell) { c.Status, c.Error, c.Resumed = CellRunning, "", po.Train.Resume }); err != nil {
		return false, err
	}
	err := so.Runner(ctx, *c, po)
	if err == nil {
		var rep *Report
		if rep, err = readReport(c.Dir); err == nil {
			err = extraAudits(ctx, so, c, rep)
		} else {
			err = fmt.Errorf("cell finished without a readable %s: %w", ReportFile, err)
		}
	}
	secs := time.Since(start).Seconds()
	switch {
	case err == nil:
		slog.Info("sweep cell done", "cell", c.ID, "seconds", math.Round(secs))
		return true, st.set(c, func(c *Cell) { c.Status, c.Seconds = CellDone, secs })
	case ctx.Err() != nil:
		_ = st.set(c, func(c *Cell) { c.Status, c.Error, c.Seconds = CellInterrupted, err.Error(), secs })
		return true, err
	default:
		slog.Error("sweep cell failed", "cell", c.ID, "err", err)
		_ = st.set(c, func(c *Cell) { c.Status, c.Error, c.Seconds = CellFailed, err.Error(), secs })
		return true, err
	}
}

// reuseGridCell links a clipped cell to the finished grid cell that is the
// same run (same task, lambda, seed and C_mu: the selected C_mu at the grid's
// lambda) instead of training it again. A cell directory that exists already
// is left alone.
func reuseGridCell(st *sweepState, c *Cell) error {
	if c.Grid || c.Variant != nvib.ModelNVDPClipped || c.CMu == 0 {
		return nil
	}
	if _, err := os.Lstat(c.Dir); err == nil {
		return nil
	}
	st.mu.Lock()
	var g *Cell
	for _, x := range st.man.Cells {
		if x.Grid && x.Status == CellDone && x.Task == c.Task && x.Lambda == c.Lambda && x.Seed == c.Seed && x.CMu == c.CMu {
			g = x
		}
	}
	st.mu.Unlock()
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
	return st.set(c, func(c *Cell) { c.ReusedFrom = g.ID })
}

func readReport(dir string) (*Report, error) {
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ReportFile), err)
	}
	return &r, nil
}

// checkDone checks that a finished cell's report is the run the sweep asks for.
func checkDone(c *Cell, cmu float64, r *Report) error {
	bad := func(what string, have, want any) error {
		return fmt.Errorf("%s holds a run with %s %v, the sweep wants %v: remove the cell or use another --out",
			filepath.Join(c.Dir, ReportFile), what, have, want)
	}
	switch {
	case r.Task != c.Task:
		return bad("task", r.Task, c.Task)
	case r.Variant != c.Variant:
		return bad("variant", r.Variant, c.Variant)
	case r.Seed != c.Seed:
		return bad("seed", r.Seed, c.Seed)
	case nvib.HasKL(c.Variant) && r.Lambda != c.Lambda:
		return bad("lambda", r.Lambda, c.Lambda)
	case c.Variant == nvib.ModelNVDPClipped && cmu > 0 && r.CMu != cmu:
		return bad("C_mu", r.CMu, cmu)
	}
	return nil
}

// warnChangedOptions logs the options of a resumed cell that differ from the
// sweep's (a resumed run continues with its saved options).
func warnChangedOptions(c *Cell, want Options) {
	saved, err := LoadOptions(c.Dir)
	if err != nil {
		return
	}
	want.Resolve()
	sv, wv := reflect.ValueOf(*saved), reflect.ValueOf(want)
	var diff []string
	for i := range sv.NumField() {
		f := sv.Type().Field(i)
		switch f.Name {
		case "Out", "Resume", "GlueDir", "StopAfterSteps", "Quiet", "Vocab", "Calibrated":
			continue
		case "CMu", "LogvarMargin", "CAlphaMin":
			if saved.Calibrated { // calibrated constants: the target is compared instead
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if !reflect.DeepEqual(sv.Field(i).Interface(), wv.Field(i).Interface()) {
			diff = append(diff, f.Name)
		}
	}
	if len(diff) > 0 {
		slog.Warn("resuming a cell whose saved options differ from the sweep's; the saved ones are used",
			"cell", c.ID, "fields", strings.Join(diff, ","))
	}
}

// extraAudits audits the cell's posterior file in every extra mode whose
// audit file is missing.
func extraAudits(ctx context.Context, so *SweepOptions, c *Cell, r *Report) error {
	if r.Privacy == nil {
		return nil
	}
	for _, m := range so.ExtraAuditModes {
		if m == r.Privacy.Mode {
			continue
		}
		path := filepath.Join(c.Dir, AuditFile(m))
		if _, err := os.Stat(path); err == nil {
			continue
		}
		post := filepath.Join(c.Dir, PosteriorsFile(r.Privacy.Split))
		p, err := privacy.ReadPosteriors(post)
		if err != nil {
			return fmt.Errorf("extra %s audit: %w", m, err)
		}
		ao := so.Base.Audit
		ao.Mode, ao.Progress = m, nil
		if m == privacy.ModeReference {
			ao.UseMask, ao.Pairs, ao.Direction = false, 0, ""
		}
		ar, err := privacy.Audit(ctx, p, ao)
		if err != nil {
			return fmt.Errorf("extra %s audit of %s: %w", m, post, err)
		}
		if err := atomicfile.WriteJSON(path, ar); err != nil {
			return fmt.Errorf("extra %s audit: %w", m, err)
		}
	}
	return nil
}

// CMuCandidate is one C_mu of the grid with its dev utility and privacy
// (means over the grid seeds).
type CMuCandidate struct {
	CMu float64 `json:"c_mu"`
	// Utility is the task's selection metric on dev (MRPC F1, STS-B Spearman, else accuracy).
	Utility float64 `json:"utility"`
	// RDMax and BDPEpsilon are the worst-case bounds (+Inf when undefined: invalid pairs).
	RDMax      float64 `json:"-"`
	BDPEpsilon float64 `json:"-"`
	Seeds      int     `json:"seeds"`
	Eligible   bool    `json:"eligible"` // utility within the tolerance of the best
}

// MarshalJSON writes the bounds with +Inf as null.
func (c CMuCandidate) MarshalJSON() ([]byte, error) {
	type plain CMuCandidate
	return json.Marshal(struct {
		plain
		RDMax      privacy.JSONFloat `json:"rd_max"`
		BDPEpsilon privacy.JSONFloat `json:"bdp_epsilon"`
	}{plain(c), privacy.JSONFloat(c.RDMax), privacy.JSONFloat(c.BDPEpsilon)})
}

// CMuSelection is DIR/<task>/c_mu_selection.json.
type CMuSelection struct {
	Task       string         `json:"task"`
	Metric     string         `json:"metric"`
	Lambda     float64        `json:"lambda"`
	Tolerance  float64        `json:"tolerance"`
	Best       float64        `json:"best_utility"`
	CMu        float64        `json:"c_mu"`
	Tightest   float64        `json:"tightest_eligible_c_mu"` // eligible C_mu with the smallest rd_max (then BDP)
	Candidates []CMuCandidate `json:"candidates"`
	Reason     string         `json:"reason"`
}

// SelectCMu applies the paper's rule for the mean clipping radius (§3.2 "Mean
// clipping": "the smallest value that preserves near-peak validation utility
// while yielding the tightest worst-case RD/BDP bound"): the candidates whose
// dev utility is within tol (absolute, metric units) of the best are eligible,
// and the smallest eligible C_mu is chosen. The eligible candidate with the
// tightest worst-case bound (rd_max, then BDP eps_mu, then the smaller C_mu)
// is recorded too; when it differs from the choice the reason says so (a
// smaller radius bounds the worst case tighter in theory, Eq. rdp, but the
// audited maximum is an empirical quantity). Errors: no candidates, a NaN
// utility, duplicate C_mu.
func SelectCMu(cands []CMuCandidate, tol float64) (CMuSelection, error) {
	if len(cands) == 0 {
		return CMuSelection{}, fmt.Errorf("C_mu selection: no candidates")
	}
	if !(tol >= 0) {
		return CMuSelection{}, fmt.Errorf("C_mu selection: tolerance %v must be >= 0", tol)
	}
	cs := slices.Clone(cands)
	sort.Slice(cs, func(i, j int) bool { return cs[i].CMu < cs[j].CMu })
	best := math.Inf(-1)
	for i, c := range cs {
		if math.IsNaN(c.Utility) {
			return CMuSelection{}, fmt.Errorf("C_mu selection: C_mu %v has no utility (NaN)", c.CMu)
		}
		if i > 0 && c.CMu == cs[i-1].CMu {
			return CMuSelection{}, fmt.Errorf("C_mu selection: duplicate C_mu %v", c.CMu)
		}
		best = max(best, c.Utility)
	}
	sel := CMuSelection{Tolerance: tol, Best: best, CMu: math.NaN(), Tightest: math.NaN()}
	tight := -1
	for i := range cs {
		// A tiny slack so that a tolerance equal to a difference of decimal values counts.
		cs[i].Eligible = cs[i].Utility >= best-tol-1e-12
		if !cs[i].Eligible {
			continue
		}
		if math.IsNaN(sel.CMu) {
			sel.CMu = cs[i].CMu
		}
		if tight < 0 || tighter(cs[i], cs[tight]) {
			tight = i
		}
	}
	sel.Tightest = cs[tight].CMu
	sel.Candidates = cs
	var elig []string
	for _, c := range cs {
		if c.Eligible {
			elig = append(elig, fmt.Sprintf("%g (%.4f, rd_max %s)", c.CMu, c.Utility, fmtBound(c.RDMax)))
		}
	}
	sel.Reason = fmt.Sprintf("best dev utility %.4f; within %g of it: C_mu %s; chose the smallest, C_mu = %g",
		best, tol, strings.Join(elig, ", "), sel.CMu)
	if sel.Tightest == sel.CMu {
		sel.Reason += ", which also has the tightest worst-case bound among them"
	} else {
		sel.Reason += fmt.Sprintf("; note: C_mu = %g has a tighter audited worst case (rd_max %s vs %s)", sel.Tightest,
			fmtBound(cs[tight].RDMax), fmtBound(candidate(cs, sel.CMu).RDMax))
	}
	return sel, nil
}

func candidate(cs []CMuCandidate, c float64) CMuCandidate {
	for _, x := range cs {
		if x.CMu == c {
			return x
		}
	}
	return CMuCandidate{}
}

func tighter(a, b CMuCandidate) bool {
	ra, rb := nanInf(a.RDMax), nanInf(b.RDMax)
	if ra != rb {
		return ra < rb
	}
	ea, eb := nanInf(a.BDPEpsilon), nanInf(b.BDPEpsilon)
	if ea != eb {
		return ea < eb
	}
	return a.CMu < b.CMu
}

func nanInf(v float64) float64 {
	if math.IsNaN(v) {
		return math.Inf(1)
	}
	return v
}

func fmtBound(v float64) string {
	if math.IsInf(v, 1) || math.IsNaN(v) {
		return "undefined"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// selectTask reads the grid cells of a task, selects C_mu and writes the selection.
func selectTask(st *sweepState, so *SweepOptions, task string, grid []*Cell) (*CMuSelection, error) {
	t, err := glue.LookupTask(task)
	if err != nil {
		return nil, err
	}
	byC := map[float64]*CMuCandidate{}
	for _, c := range grid {
		if c.Task != task {
			continue
		}
		r, err := readReport(c.Dir)
		if err != nil {
			return nil, fmt.Errorf("grid cell %s: %w", c.ID, err)
		}
		u, ok := r.Utility[t.Metric]
		if !ok {
			return nil, fmt.Errorf("grid cell %s: report has no %s", c.ID, t.Metric)
		}
		rd, eps := math.Inf(1), math.Inf(1)
		if p := r.Privacy; p != nil && p.InvalidPairs == 0 && p.Pairs > 0 {
			rd, eps = float64(p.RDMax), float64(p.BDPEpsilon)
			// JSON null (an undefined bound) decodes as 0; only trust values the audit defined.
			if p.Full != nil && p.Full.FinitePairs == 0 {
				rd, eps = math.Inf(1), math.Inf(1)
			}
		}
		cd := byC[c.CMu]
		if cd == nil {
			cd = &CMuCandidate{CMu: c.CMu}
			byC[c.CMu] = cd
		}
		// Running means over seeds; the worst case over seeds is their mean too (as the tables).
		n := float64(cd.Seeds)
		cd.Utility = (cd.Utility*n + u) / (n + 1)
		cd.RDMax = (cd.RDMax*n + rd) / (n + 1)
		cd.BDPEpsilon = (cd.BDPEpsilon*n + eps) / (n + 1)
		cd.Seeds++
	}
	var cands []CMuCandidate
	for _, c := range byC {
		cands = append(cands, *c)
	}
	sel, err := SelectCMu(cands, so.CMuTolerance)
	if err != nil {
		return nil, err
	}
	sel.Task, sel.Metric, sel.Lambda = task, t.Metric, *so.CMuLambda
	if err := atomicfile.WriteJSON(filepath.Join(so.Out, task, CMuSelectionFile), sel); err != nil {
		return nil, fmt.Errorf("C_mu selection: %w", err)
	}
	st.mu.Lock()
	st.man.Selections[task] = &sel
	err = st.writeLocked()
	st.mu.Unlock()
	return &sel, err
}
