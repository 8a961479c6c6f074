package sweep

import (
	"errors"
	"slices"
	"testing"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/train"
)

// TestCheckGiven: a run's per-cell options, C_mu with its grid and cells
// in this process with several jobs are refused, naming the options;
// each alone, or with what it combines with, is not.
func TestCheckGiven(t *testing.T) {
	given := option.GivenNames
	grid := Options{CMuGrid: []float64{1, 2}, Jobs: 1}
	for _, tc := range []struct {
		name  string
		o     Options
		given option.Given
		want  []string // nil: valid
		msg   string
	}{
		{"nothing given", Options{Jobs: 4}, nil, nil, ""},
		{"the lists", grid, given("tasks", "variants", "lambdas", "seeds", "c_mu_grid", "jobs"), nil, ""},
		{"task", Options{Jobs: 1}, given("task"), []string{"task", "tasks", "variants", "lambdas", "seeds"},
			"task is per cell in a sweep: use tasks, variants, lambdas, seeds (resumption is automatic)"},
		{"stop after steps", Options{Jobs: 1}, given("epochs", "stop_after_steps"), []string{"stop_after_steps", "tasks", "variants", "lambdas", "seeds"}, ""},
		{"c_mu without a grid", Options{Jobs: 1}, given("c_mu"), nil, ""},
		{"c_mu and a grid", grid, given("c_mu"), []string{"c_mu", "c_mu_grid"}, "c_mu and c_mu_grid: give one (the grid selects C_mu)"},
		{"in process, one job", Options{Jobs: 1}, given("in_process"), nil, ""},
		{"in process, jobs", Options{Jobs: 3}, given("in_process", "jobs"), []string{"jobs", "in_process", "in_process"},
			"jobs 3 with in_process: cells in one process run one at a time (they would share nn's cores and OpenBLAS's process-wide thread count); drop in_process to run them as subprocesses"},
	} {
		err := tc.o.CheckGiven(tc.given)
		var ce *option.CombinationError
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == nil:
		case !errors.As(err, &ce) || !slices.Equal(ce.Options, tc.want):
			t.Errorf("%s: %v, want a combination of %q", tc.name, err, tc.want)
		case tc.msg != "" && err.Error() != tc.msg:
			t.Errorf("%s: %q, want %q", tc.name, err, tc.msg)
		}
	}
}

// TestResolveTargets: a sweep with target epsilons fixes the clipping
// constants given in each cell's calibration and gives the cells the
// audit's delta; without them nothing is fixed.
func TestResolveTargets(t *testing.T) {
	given := option.Given(func(n string) bool { return n == "logvar_margin" })
	for _, eps := range [][]float64{nil, {1, 8}} {
		o := Options{Base: train.DefaultPipelineOptions(), TargetEpsilons: eps}
		o.Base.Audit.Delta, o.Base.Train.TargetDelta = 1e-7, 1e-3
		o.ResolveTargets(given)
		tr := o.Base.Train
		if targets := eps != nil; tr.FixLogvarMargin != targets || tr.FixCMu || (tr.TargetDelta == 1e-7) != targets {
			t.Errorf("target epsilons %v: fixed logvar_margin %v c_mu %v, delta %v", eps, tr.FixLogvarMargin, tr.FixCMu, tr.TargetDelta)
		}
	}
}
