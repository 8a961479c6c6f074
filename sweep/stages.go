package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
)

// A sweep in stages (docs/results.md, "A sweep in stages"; the manifests of
// deploy/k8s/sweep): what Run does in one process, cut where it must wait
// for all of a set of cells, so that each cell can run as an index of a
// Kubernetes Indexed Job on a shared volume, with no process writing a file
// another writes:
//
//  1. PlanStages validates the options as Run does and writes
//     Out/stages.json: the options and the cells of the two stages, grid
//     (the C_mu grid; empty without one) and main, each cell at a fixed
//     index, so that a stage's Job has one completion per cell;
//  2. RunStageCell runs cell i of a stage as Run runs a cell (skip when
//     done, resume from a checkpoint, reuse the grid run that is the same,
//     extra audits), recording it in Out/stages/<stage>/<i>.json only;
//  3. SelectStage selects C_mu from the finished grid stage as Run does
//     (Out/<task>/c_mu_selection.json) and gives the main cells their C_mu,
//     or skips them, rewriting Out/stages.json (the main stage waits for it);
//  4. FinishStages gathers the records into Out/sweep.json, the manifest Run
//     writes; `nvdp report` then reads the directory as after Run.

// Names of a sweep in stages, under Options.Out.
const (
	// StagesFile is Out/stages.json, the [StagePlan].
	StagesFile = "stages.json"
	// stagesDir holds the cells' records: Out/stages/<stage>/<index>.json.
	stagesDir = "stages"
	// stagesFormat is StagePlan.Format.
	stagesFormat = "nvdp-sweep-stages/1"
	// StageGrid and StageMain are the stages.
	StageGrid = "grid"
	StageMain = "main"
)

// StagePlan is Out/stages.json: the options of the sweep and the cells of
// its stages; index i of a stage runs its cell i.
type StagePlan struct {
	Format  string       `json:"format"`
	Options StageOptions `json:"options"`
	Grid    []*Cell      `json:"grid"`
	Main    []*Cell      `json:"main"`
	// Selected is true once the main cells have their C_mu (SelectStage;
	// from the start without a grid). Selections are the choices per task.
	Selected   bool                     `json:"selected"`
	Selections map[string]*CMuSelection `json:"c_mu_selections,omitempty"`
}

// StageOptions are the Options a stage needs, as JSON: all but Jobs,
// Runner and Progress, which belong to the process that runs a cell.
type StageOptions struct {
	Base            train.PipelineOptions `json:"base"`
	Tasks           []string              `json:"tasks"`
	Variants        []string              `json:"variants"`
	Lambdas         []float64             `json:"lambdas"`
	Seeds           []uint64              `json:"seeds"`
	Out             string                `json:"out"`
	ExtraAuditModes []privacy.Mode        `json:"extra_audit_modes,omitempty"`
	CMuGrid         []float64             `json:"c_mu_grid,omitempty"`
	CMuTolerance    *float64              `json:"c_mu_tolerance,omitempty"`
	CMuLambda       *float64              `json:"c_mu_lambda,omitempty"`
	CMuSeeds        []uint64              `json:"c_mu_seeds,omitempty"`
	TargetEpsilons  []float64             `json:"target_epsilons,omitempty"`
	Data            *task.Data            `json:"speech,omitempty"`
}

func stageOptions(o *Options) StageOptions {
	return StageOptions{Base: o.Base, Tasks: o.Tasks, Variants: o.Variants, Lambdas: o.Lambdas, Seeds: o.Seeds, Out: o.Out,
		ExtraAuditModes: o.ExtraAuditModes, CMuGrid: o.CMuGrid, CMuTolerance: o.CMuTolerance, CMuLambda: o.CMuLambda,
		CMuSeeds: o.CMuSeeds, TargetEpsilons: o.TargetEpsilons, Data: o.Data}
}

func (s StageOptions) options() Options {
	return Options{Base: s.Base, Tasks: s.Tasks, Variants: s.Variants, Lambdas: s.Lambdas, Seeds: s.Seeds, Out: s.Out,
		ExtraAuditModes: s.ExtraAuditModes, CMuGrid: s.CMuGrid, CMuTolerance: s.CMuTolerance, CMuLambda: s.CMuLambda,
		CMuSeeds: s.CMuSeeds, TargetEpsilons: s.TargetEpsilons, Data: s.Data}
}

// Stage returns the cells of stage, [StageGrid] or [StageMain]; another name
// is an error.
func (p *StagePlan) Stage(stage string) ([]*Cell, error) {
	switch stage {
	case StageGrid:
		return p.Grid, nil
	case StageMain:
		return p.Main, nil
	}
	return nil, option.Errorf("stage", stage, "want %s or %s", StageGrid, StageMain)
}

// PlanStages validates o as [Run] does, with errors of type [*option.Error],
// and writes Out/stages.json, the plan of the sweep in stages. Planning again
// with the same options returns the plan there, with its selection kept;
// with other options it is an error, and the caller removes the directory or
// plans into another.
func PlanStages(o Options) (*StagePlan, error) {
	o.Runner = func(context.Context, Cell, CellSpec) error { return nil } // Jobs > 1 is the stages' business, not validate's
	if err := o.validate(); err != nil {
		return nil, err
	}
	grid, main := plan(&o)
	if _, err := checkCells(&o, main); err != nil { // the cells run later, each checked by its run
		return nil, err
	}
	p := &StagePlan{Format: stagesFormat, Options: stageOptions(&o), Grid: grid, Main: main, Selected: len(grid) == 0}
	if old, err := readStages(o.Out); err == nil {
		a, _ := json.Marshal(old.Options)
		b, _ := json.Marshal(p.Options)
		if string(a) != string(b) {
			return nil, fmt.Errorf("sweep %s: planned already with other options (%s); plan into another directory", o.Out, StagesFile)
		}
		return old, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	if err := atomicfile.WriteJSON(filepath.Join(o.Out, StagesFile), p); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	return p, nil
}

// readStages reads Out/stages.json. It returns an error for a missing file,
// wrapping fs.ErrNotExist, since the sweep must be planned first; for a file
// that is not a plan of this format; and for a plan that would write outside
// out, with its options.out another directory or a cell's id or dir outside
// it.
func readStages(out string) (*StagePlan, error) {
	path := filepath.Join(out, StagesFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sweep %s: %w (plan the sweep's stages first)", out, err)
	}
	var p StagePlan
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if p.Format != stagesFormat {
		return nil, fmt.Errorf("%s: format %q, want %q", path, p.Format, stagesFormat)
	}
	if err := p.checkDirs(out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &p, nil
}

// checkDirs reports whether the plan writes only inside the sweep directory
// out: options.out must be out (the same directory, however written), and
// every cell's id a local path whose dir is options.out/id, as PlanStages
// writes them. A hand-edited stages.json with a cell dir of /etc or ../x is
// refused before any cell runs.
func (p *StagePlan) checkDirs(out string) error {
	if !sameDir(p.Options.Out, out) {
		return fmt.Errorf("options.out %q: not the sweep directory %s (plan the sweep into it again)", p.Options.Out, out)
	}
	for _, st := range []struct {
		name  string
		cells []*Cell
	}{{StageGrid, p.Grid}, {StageMain, p.Main}} {
		for i, c := range st.cells {
			if c == nil {
				return fmt.Errorf("%s[%d]: null cell", st.name, i)
			}
			if !filepath.IsLocal(c.ID) {
				return fmt.Errorf("%s[%d].id %q: outside the sweep directory %s", st.name, i, c.ID, out)
			}
			if want := filepath.Join(p.Options.Out, c.ID); c.Dir != want {
				return fmt.Errorf("%s[%d].dir %q: outside the sweep directory or not its id's (want %q)", st.name, i, c.Dir, want)
			}
		}
	}
	return nil
}

// sameDir reports whether a and b name the same directory: equal once
// absolute and clean, or the same file.
func sameDir(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == bb {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// recordPath is the record of cell index of stage: Out/stages/<stage>/<index>.json.
func recordPath(out, stage string, index int) string {
	return filepath.Join(out, stagesDir, stage, strconv.Itoa(index)+".json")
}

// readRecord reads the cell with id from the record at path (a Manifest);
// nil when there is no record.
func readRecord(path, id string) (*Cell, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, c := range m.Cells {
		if c.ID == id {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%s: no cell %s", path, id)
}

// recorded returns copies of cells with the status of their records in
// stage (a cell without one keeps its planned status).
func recorded(out, stage string, cells []*Cell) ([]*Cell, error) {
	out2 := make([]*Cell, len(cells))
	for i, c := range cells {
		r, err := readRecord(recordPath(out, stage, i), c.ID)
		if err != nil {
			return nil, err
		}
		if r == nil {
			cc := *c
			r = &cc
		}
		out2[i] = r
	}
	return out2, nil
}

// RunStageCell runs cell index of stage of the sweep planned in out, as [Run]
// runs a cell, and returns the cell as recorded. The cell is skipped when its
// report.json is the run asked for, with extra audits completed; it is
// resumed from a checkpoint; and a main nvdp-clipped cell is linked to the
// finished grid cell that is the same run. It runs with runner, or, when
// runner is nil, in this process with [RunCell] and progress to report. The
// cell's status goes to Out/stages/<stage>/<index>.json only.
//
// It returns an [*option.Error] for an unknown stage or an index out of
// range; an error for the main stage before [SelectStage]; and the cell's
// failure, recorded as failed. When ctx is cancelled it returns ctx's error,
// and the cell is interrupted and resumable.
func RunStageCell(ctx context.Context, out, stage string, index int, runner Runner, report progress.Func) (*Cell, error) {
	p, err := readStages(out)
	if err != nil {
		return nil, err
	}
	cells, err := p.Stage(stage)
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= len(cells) {
		return nil, option.Errorf("index", index, "stage %s has %d cells (indices 0 to %d)", stage, len(cells), len(cells)-1)
	}
	if stage == StageMain && !p.Selected {
		return nil, fmt.Errorf("sweep %s: the main stage waits for the C_mu selection of the grid stage (select it first)", out)
	}
	o := p.Options.options()
	o.Runner = runner
	if o.Runner == nil {
		o.Runner = inProcess(report)
	}
	c := *cells[index]
	all := []*Cell{&c}
	if stage == StageMain { // the grid cells as they finished, for the reuse of a grid run
		grid, err := recorded(out, StageGrid, p.Grid)
		if err != nil {
			return nil, err
		}
		all = append(grid, &c)
	}
	path := recordPath(out, stage, index)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	s := &sweeper{o: &o, man: &manifest{path: path, m: &Manifest{Out: o.Out, Tasks: o.Tasks, Variants: o.Variants, Lambdas: o.Lambdas,
		Seeds: o.Seeds, CMuGrid: o.CMuGrid, TargetEpsilons: o.TargetEpsilons, Selections: p.Selections, Cells: all}}}
	if c.Status == CellSkipped { // no C_mu selection for it: recorded as Run records it
		return &c, s.man.update(func(*Manifest) {})
	}
	_, err = s.runCell(ctx, &c)
	return &c, err
}

// SelectStage selects C_mu per task from the grid stage's cells, as [Run]
// does with [SelectCMu], writing Out/<task>/c_mu_selection.json. It gives the
// main nvdp-clipped cells their C_mu, or marks them skipped when their task
// has no selection because a grid cell failed, and rewrites Out/stages.json.
// Selecting again changes nothing.
//
// It returns an error for a grid cell that has not run to its end: one with
// no record, or pending, running or interrupted, whose index must run first.
func SelectStage(out string) (*StagePlan, error) {
	p, err := readStages(out)
	if err != nil || p.Selected {
		return p, err
	}
	grid, err := recorded(out, StageGrid, p.Grid)
	if err != nil {
		return nil, err
	}
	var waiting []string
	for i, c := range grid {
		if c.Status != CellDone && c.Status != CellFailed {
			waiting = append(waiting, fmt.Sprintf("%d (%s: %s)", i, c.ID, c.Status))
		}
	}
	if len(waiting) > 0 {
		return nil, fmt.Errorf("sweep %s: the grid stage has not finished: run its indices %s", out, strings.Join(waiting, ", "))
	}
	o := p.Options.options()
	main := make([]*Cell, len(p.Main))
	for i, c := range p.Main {
		cc := *c
		main[i] = &cc
	}
	s := &sweeper{o: &o, man: &manifest{path: filepath.Join(out, stagesDir, "select.json"), m: &Manifest{Out: o.Out,
		Selections: map[string]*CMuSelection{}, Cells: slices.Concat(grid, main)}}}
	if err := os.MkdirAll(filepath.Join(out, stagesDir), 0o755); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	for _, task := range o.Tasks {
		s.selectCMu(task, grid, main)
	}
	p.Main, p.Selections, p.Selected = main, s.man.m.Selections, true
	if err := atomicfile.WriteJSON(filepath.Join(out, StagesFile), p); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	return p, nil
}

// FinishStages writes Out/sweep.json, the manifest [Run] writes, from the plan
// and the cells' records, and returns it. A cell without a record is pending.
// After writing it, it returns an error naming the cells that failed or have
// not run, as Run's error names its failures.
func FinishStages(out string) (*Manifest, error) {
	p, err := readStages(out)
	if err != nil {
		return nil, err
	}
	grid, err := recorded(out, StageGrid, p.Grid)
	if err != nil {
		return nil, err
	}
	main, err := recorded(out, StageMain, p.Main)
	if err != nil {
		return nil, err
	}
	o := p.Options.options()
	man := newManifest(&o, slices.Concat(grid, main))
	if p.Selections != nil {
		man.m.Selections = p.Selections
	}
	if err := man.update(func(*Manifest) {}); err != nil {
		return nil, err
	}
	var bad []string
	for _, c := range man.m.Cells {
		if c.Status != CellDone {
			bad = append(bad, c.ID+": "+c.Status)
		}
	}
	if !p.Selected && len(p.Grid) > 0 {
		bad = append(bad, "the C_mu selection has not been made")
	}
	if len(bad) > 0 {
		return man.m, fmt.Errorf("sweep: %d cells not done: %s (see %s)", len(bad), strings.Join(bad, "; "), man.path)
	}
	return man.m, nil
}

// StagesSummary is what `nvdp sweep --plan` and `nvdp sweep select` print as
// JSON: the sweep directory, each stage's cell count (its Indexed Job's
// completions) and whether the main cells have their C_mu.
type StagesSummary struct {
	Out      string         `json:"out"`
	Stages   []StageSummary `json:"stages"`
	Selected bool           `json:"selected"`
}

// StageSummary is one stage of a [StagesSummary]: its name and cell count.
type StageSummary struct {
	Name  string `json:"name"`
	Cells int    `json:"cells"`
}

// Summary returns the counts of p's stages, grid then main, for the sweep
// directory out.
func (p *StagePlan) Summary(out string) StagesSummary {
	return StagesSummary{Out: out, Selected: p.Selected,
		Stages: []StageSummary{{StageGrid, len(p.Grid)}, {StageMain, len(p.Main)}}}
}
