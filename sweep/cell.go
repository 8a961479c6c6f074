package sweep

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/task"
)

// Names in a sweep directory (Options.Out) besides the cell directories.
const (
	// CMuSelectionFile is Out/<task>/c_mu_selection.json: the C_mu grid choice and why.
	CMuSelectionFile = "c_mu_selection.json"
	// CMuGridDir holds the C_mu grid cells: Out/<task>/cmu-grid/c_mu=<c>/lambda=<l>/seed=<s>.
	CMuGridDir = "cmu-grid"
	// logDir holds the logs of the cells run by [Subprocess], as
	// Out/logs/<cell>.log.
	logDir = "logs"
)

// AuditFile returns the name of an extra audit of a cell's posteriors in
// another mode, as Options.ExtraAuditModes asks: the file holds the full
// audit.Report as JSON.
func AuditFile(mode privacy.Mode) string { return "audit_" + string(mode) + ".json" }

// Cell statuses in the manifest.
const (
	CellPending     = "pending"
	CellRunning     = "running"
	CellDone        = "done"
	CellFailed      = "failed"
	CellInterrupted = "interrupted" // resumable: run the sweep again
	CellSkipped     = "skipped"     // not run because of an earlier failure it depends on (C_mu grid)
)

// Cell is one run of a sweep: a task, variant, lambda and seed, trained,
// evaluated and audited by [train.RunPipeline] in Dir. Grid cells also have a
// C_mu, and calibrated cells a target epsilon.
type Cell struct {
	ID      string  `json:"id"` // Dir relative to the sweep directory
	Task    string  `json:"task"`
	Variant string  `json:"variant"`
	Lambda  float64 `json:"lambda"` // 0 for the baseline and gaussian (not used)
	Seed    uint64  `json:"seed"`
	// CMu is the clipping radius of nvdp-clipped cells (0: the base options');
	// set from the C_mu selection when a grid is given.
	CMu float64 `json:"c_mu,omitempty"`
	// TargetEpsilon is the privacy target the clipping of an nvdp-clipped or
	// gaussian cell is calibrated to (Options.TargetEpsilons; 0: none or the
	// base options').
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

// FormatLambda writes a lambda as the paper does: 1e-3, 1e-2, 1e-1, 1. Values
// in (0, 1) are in shortest exponent form without exponent padding, and others
// in shortest 'g' form. It is used in cell directory names, as in
// lambda=1e-3, and in tables.
func FormatLambda(l float64) string {
	if l > 0 && l < 1 {
		s := strconv.FormatFloat(l, 'e', -1, 64)
		return strings.Replace(s, "e-0", "e-", 1)
	}
	return strconv.FormatFloat(l, 'g', -1, 64)
}

// place sets the cell's ID and Dir under out:
//
//	<task>/cmu-grid/c_mu=<c>/lambda=<l>/seed=<s>          a C_mu grid cell
//	<task>/baseline/seed=<s>
//	<task>/gaussian[/epsilon=<e>]/seed=<s>                no KL terms: lambda is not a dimension
//	<task>/<variant>[/epsilon=<e>]/lambda=<l>/seed=<s>    nvdp, nvdp-clipped
//
// The lambda of the baseline and gaussian cells is set to 0.
func (c *Cell) place(out string) *Cell {
	parts := []string{c.Task}
	if c.Grid {
		parts = append(parts, CMuGridDir, "c_mu="+FormatLambda(c.CMu))
	} else {
		parts = append(parts, c.Variant)
		if c.TargetEpsilon > 0 {
			parts = append(parts, "epsilon="+strconv.FormatFloat(c.TargetEpsilon, 'g', -1, 64))
		}
	}
	if nvib.HasKL(c.Variant) {
		parts = append(parts, "lambda="+FormatLambda(c.Lambda))
	} else {
		c.Lambda = 0
	}
	c.ID = filepath.Join(append(parts, "seed="+strconv.FormatUint(c.Seed, 10))...)
	c.Dir = filepath.Join(out, c.ID)
	c.Status = CellPending
	return c
}

// plan lists the cells of o: the C_mu grid cells, then the main cells (the
// baseline and gaussian once per task and seed, gaussian once per target
// epsilon too; nvdp and nvdp-clipped per target epsilon, lambda and seed).
func plan(o *Options) (grid, main []*Cell) {
	for _, task := range o.Tasks {
		for _, c := range o.CMuGrid {
			for _, seed := range o.CMuSeeds {
				grid = append(grid, (&Cell{Task: task, Variant: nvib.ModelNVDPClipped, Lambda: *o.CMuLambda, Seed: seed, CMu: c, Grid: true}).place(o.Out))
			}
		}
		for _, v := range o.Variants {
			epsilons, lambdas := []float64{0}, []float64{0}
			if nvib.Calibratable(v) && len(o.TargetEpsilons) > 0 {
				epsilons = o.TargetEpsilons
			}
			if nvib.HasKL(v) {
				lambdas = o.Lambdas
			}
			for _, e := range epsilons {
				for _, l := range lambdas {
					for _, seed := range o.Seeds {
						main = append(main, (&Cell{Task: task, Variant: v, Lambda: l, Seed: seed, TargetEpsilon: e}).place(o.Out))
					}
				}
			}
		}
	}
	return grid, main
}

// cellOptions are the pipeline options of a cell: the base options with the
// cell's task, variant, seed, directory, lambda (variants with KL terms),
// C_mu (when set) and target. Only a clipping can be calibrated: the variants
// without one run without the target (and without hand_set_clipping); the
// gaussian cells drop the constants and shares of the nvdp-clipped cells
// (fixed noise, no Dirichlet weights; a target calibrates their radius C).
// The C_mu grid cells try given C_mu values and have no target (a target
// excludes the grid): they are hand-set by design, HandSetClipping whatever
// the base options say.
func cellOptions(o *Options, c *Cell) CellSpec {
	po := CellSpec{PipelineOptions: o.Base}
	// An unknown task (a hand-edited stages.json: the stages read their
	// plan without validating it again) keeps the base options; RunCell
	// reports it.
	tk, lookupErr := task.Lookup(c.Task)
	if lookupErr == nil && tk.Info().UsesData {
		po.Data = o.Data
	}
	t := &po.Train
	t.Task, t.Variant, t.Seed, t.Out = c.Task, c.Variant, c.Seed, c.Dir
	t.Resume = false
	if nvib.HasKL(c.Variant) {
		t.Lambda = c.Lambda
	}
	if c.CMu > 0 {
		t.CMu = c.CMu
	}
	switch {
	case !nvib.Calibratable(c.Variant):
		d := model.DefaultOptions() // no target: its settings as if never given
		t.TargetEpsilon, t.TargetDelta, t.TargetRD, t.TargetOrder, t.Releases = d.TargetEpsilon, d.TargetDelta, d.TargetRD, d.TargetOrder, d.Releases
		t.VarianceShare, t.DirichletShare = d.VarianceShare, d.DirichletShare
		t.FixCMu, t.FixLogvarMargin, t.FixCAlphaMin = false, false, false
		t.HandSetClipping = false
	case c.Grid: // no target (validateTargets): the grid's C_mu as given
		t.HandSetClipping = true
	case c.TargetEpsilon > 0: // a validated Options.TargetEpsilons value
		t.TargetEpsilon, t.TargetRD, t.HandSetClipping = c.TargetEpsilon, model.NoTarget(), false
	}
	if c.Variant == nvib.ModelGaussian {
		// the clip constants a gaussian release does not use keep their defaults
		t.LogvarMargin, t.CAlphaMin, t.VarianceShare, t.DirichletShare = model.Auto(), model.Auto(), 0, 0
		t.FixCMu, t.FixLogvarMargin, t.FixCAlphaMin = false, false, false
	}
	if lookupErr == nil && model.IsAuto(t.Lambda) {
		// The task's lambda of a variant without KL terms, as its pipeline
		// would resolve it (Auto cannot travel to a child as JSON).
		t.Lambda = tk.Info().Lambda[c.Variant]
	}
	return po
}
