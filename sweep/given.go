package sweep

import (
	"strconv"

	"github.com/nvdp-project/nvdp/option"
)

// PerCell are the options of a run, by JSON key, that a sweep sets for
// each cell: it takes Tasks, Variants, Lambdas and Seeds instead, and
// resumes its cells itself. A program that binds a run's options for a
// sweep hides these.
var PerCell = []string{"task", "variant", "lambda", "seed", "resume", "stop_after_steps"}

// CheckGiven checks the options given explicitly (given; nil: none) that
// the sweep o decides itself, before any work: none of [PerCell]; no c_mu
// with a CMuGrid (the grid selects C_mu); and no in_process, cells run in
// this process, with Jobs > 1 (cells in one process run one at a time:
// they would share nn's cores and OpenBLAS's process-wide thread count).
//
// Errors: a [*option.CombinationError] naming the options.
func (o *Options) CheckGiven(given option.Given) error {
	if k, ok := given.Any(PerCell...); ok {
		return option.Combination("%s is per cell in a sweep: use %s, %s, %s, %s (resumption is automatic)", k, "tasks", "variants", "lambdas", "seeds")
	}
	switch {
	case len(o.CMuGrid) > 0 && given.Has("c_mu"):
		return option.Combination("%s and %s: give one (the grid selects C_mu)", "c_mu", "c_mu_grid")
	case o.Jobs > 1 && given.Has("in_process"):
		return option.Combination("%s "+strconv.Itoa(o.Jobs)+" with %s: cells in one process run one at a time "+
			"(they would share nn's cores and OpenBLAS's process-wide thread count); drop %s to run them as subprocesses", "jobs", "in_process", "in_process")
	}
	return nil
}

// ResolveTargets gives the base options the privacy targets' settings a
// sweep decides, as `nvdp run` does ([train.PipelineOptions.ResolveTargets]:
// a target's order and delta are the audit's), and, with TargetEpsilons,
// the clipping constants given explicitly (given; nil: none) fixed in each
// cell's calibration and the cells' delta the audit's (Base.Audit.Delta).
// Call it after the audit options are resolved.
func (o *Options) ResolveTargets(given option.Given) {
	po := &o.Base
	if len(o.TargetEpsilons) > 0 {
		po.Train.FixGiven(given)
		po.Train.TargetDelta = po.Audit.Delta
	}
	po.ResolveTargets(given)
}
