package sweep

import (
	"math"
	"slices"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
)

// DefaultCMuTolerance is the default absolute tolerance of the C_mu
// selection on the dev selection metric, in metric units, where 0.01 is 1
// point.
const DefaultCMuTolerance = 0.01

// Options configure Run.
type Options struct {
	// Base is the template of every cell: all train and audit options. Task,
	// Variant, Lambda, Seed, Out and Resume are set per cell; CMu too when
	// CMuGrid is given, and the target for the TargetEpsilons cells.
	Base train.PipelineOptions
	// Tasks are the names of tasks of one modality (task.Lookup): GLUE
	// tasks, or the speech task ("lid") with Data set; each cell runs its
	// task's pipeline (RunCell) with Base's options.
	Tasks    []string
	Variants []string  // baseline, nvdp, nvdp-clipped, gaussian
	Lambdas  []float64 // lambda_G = lambda_D of the variants with KL terms (nvdp, nvdp-clipped)
	Seeds    []uint64
	// Out is the sweep directory (layout: docs/results.md).
	Out string
	// Jobs is the number of cells run at once; 0 and 1 run them one at a
	// time. Jobs > 1 needs a Runner that runs each cell in its own process
	// (Subprocess): see the package documentation, "Concurrency".
	Jobs int
	// Runner runs a cell; nil runs it in this process with train.RunPipeline.
	Runner Runner
	// Progress receives the progress of the cells run in this process
	// (Runner nil; nil: none).
	Progress progress.Func
	// ExtraAuditModes audits each NVDP cell's posteriors again in these modes
	// (e.g. reference next to a principled run), written as AuditFile(mode).
	ExtraAuditModes []privacy.Mode
	// CMuGrid, when non-empty, runs nvdp-clipped over these C_mu values first
	// (at CMuLambda and the seeds CMuSeeds) and selects C_mu per task with
	// SelectCMu.
	CMuGrid []float64
	// CMuTolerance is the absolute tolerance of the selection on the dev
	// selection metric; nil: DefaultCMuTolerance (0 keeps the best only).
	CMuTolerance *float64
	CMuLambda    *float64 // nil: Lambdas[0]
	CMuSeeds     []uint64 // empty: Seeds[:1]
	// TargetEpsilons, when non-empty, is a dimension of the nvdp-clipped and
	// gaussian cells: each is calibrated to one certified epsilon (at
	// Base.Train.TargetDelta, default privacy.DefaultDelta;
	// model.Options.TargetEpsilon) in
	// Out/<task>/nvdp-clipped/epsilon=<e>/lambda=<l>/seed=<s> and
	// Out/<task>/gaussian/epsilon=<e>/seed=<s> (lambda is not a dimension of
	// the gaussian cells: they have no KL terms). The baseline and nvdp have
	// no clipping and run once per lambda and seed as usual.
	TargetEpsilons []float64
	// Data is the data of the cells of a task that reads task.Data (the
	// speech task's corpus and utterance length; needed then).
	Data *task.Data
}

// invalid is the *option.Error of an invalid field of Options, named as the
// options files of the other libraries name theirs (snake case: "tasks",
// "c_mu_grid"; "target" for the privacy target of the base options), so
// that a program names its own flag for it.
func invalid(name, format string, a ...any) error {
	return option.Errorf(name, nil, format, a...)
}

// mention is invalid for a reason that names other options (mentions: as
// the reason writes them, option.Error.Mentions).
func mention(mentions []string, name, format string, a ...any) error {
	return option.MentionErrorf(mentions, name, nil, format, a...)
}

// validateTasks checks that the tasks exist (task.Lookup), share one
// modality (a modality's cells have their own encoder and data), have their
// data, and, with a C_mu grid, report their utility on dev (the selection
// reads it).
func (o *Options) validateTasks() error {
	var first *task.Info
	for _, name := range o.Tasks {
		t, err := task.Lookup(name)
		if err != nil {
			return invalid("tasks", "%v", err)
		}
		in := t.Info()
		switch {
		case first != nil && in.Modality != first.Modality:
			return invalid("tasks", "%s (%s) and %s (%s) cannot share a sweep: their cells have their own encoder and data",
				first.Name, first.Modality, in.Name, in.Modality)
		case in.UsesData && o.Data == nil:
			return invalid("data_dir", "the %s task needs its corpus", name)
		case len(o.CMuGrid) > 0 && in.UtilitySplit != "dev":
			return invalid("c_mu_grid", "not for %s: the selection reads the dev metric of the report, which is %s's for %s", name, in.UtilitySplit, name)
		}
		if first == nil {
			first = &in
		}
	}
	return nil
}

// validate checks o before any work and fills the defaults of the C_mu grid.
func (o *Options) validate() error {
	if o.Out == "" {
		return invalid("out", "no sweep directory")
	}
	switch {
	case len(o.Tasks) == 0:
		return invalid("tasks", "empty")
	case len(o.Variants) == 0:
		return invalid("variants", "empty")
	case len(o.Seeds) == 0:
		return invalid("seeds", "empty")
	}
	if err := o.validateTasks(); err != nil {
		return err
	}
	kl := false
	for _, v := range o.Variants {
		switch v {
		case nvib.ModelBaseline, nvib.ModelGaussian:
		case nvib.ModelNVDP, nvib.ModelNVDPClipped:
			kl = true
		default:
			return invalid("variants", "unknown variant %q (want baseline, nvdp, nvdp-clipped, gaussian)", v)
		}
	}
	if kl && len(o.Lambdas) == 0 {
		return invalid("lambdas", "empty: nvdp and nvdp-clipped need a lambda")
	}
	for _, l := range o.Lambdas {
		if !(l >= 0) || math.IsInf(l, 0) {
			return invalid("lambdas", "%v must be finite and >= 0", l)
		}
	}
	if err := firstError(dup("tasks", o.Tasks), dup("variants", o.Variants), dup("lambdas", o.Lambdas), dup("seeds", o.Seeds),
		dup("c_mu_grid", o.CMuGrid), dup("c_mu_seeds", o.CMuSeeds), dup("target_epsilons", o.TargetEpsilons)); err != nil {
		return err
	}
	if err := o.validateTargets(); err != nil {
		return err
	}
	switch {
	case o.Jobs < 0:
		return invalid("jobs", "%d must be >= 1", o.Jobs)
	case o.Jobs > 1 && o.Runner == nil:
		return invalid("jobs", "%d cells at once need a Runner that runs each in its own process (Subprocess): "+
			"trainings in one process share nn's cores and OpenBLAS's process-wide thread count, so they run one at a time", o.Jobs)
	}
	for _, m := range o.ExtraAuditModes {
		if m == "" || !m.Valid() {
			return invalid("extra_audit_modes", "%q: want %s or %s", m, privacy.ModePrincipled, privacy.ModeReference)
		}
	}
	if len(o.CMuGrid) > 0 {
		return o.validateGrid()
	}
	return nil
}

// validateGrid checks the C_mu grid and fills its defaults (tolerance,
// lambda, seeds).
func (o *Options) validateGrid() error {
	if !slices.Contains(o.Variants, nvib.ModelNVDPClipped) {
		return invalid("c_mu_grid", "selects C_mu for nvdp-clipped, which is not among the variants")
	}
	for _, c := range o.CMuGrid {
		if !(c > 0) || math.IsInf(c, 0) {
			return invalid("c_mu_grid", "%v must be finite and > 0", c)
		}
	}
	if o.CMuTolerance == nil {
		tol := DefaultCMuTolerance
		o.CMuTolerance = &tol
	}
	if !(*o.CMuTolerance >= 0) {
		return invalid("c_mu_tolerance", "%v must be >= 0", *o.CMuTolerance)
	}
	if o.CMuLambda == nil {
		if len(o.Lambdas) == 0 {
			return invalid("c_mu_lambda", "not set, and there are no lambdas to take the first of")
		}
		l := o.Lambdas[0]
		o.CMuLambda = &l
	}
	if l := *o.CMuLambda; !(l >= 0) || math.IsInf(l, 0) {
		return invalid("c_mu_lambda", "%v must be finite and >= 0", l)
	}
	if len(o.CMuSeeds) == 0 {
		o.CMuSeeds = o.Seeds[:1]
	}
	return nil
}

// validateTargets checks the privacy targets of the sweep: TargetEpsilons
// and a single target of the base options apply to nvdp-clipped and gaussian
// cells only, and exclude the C_mu grid (the target calibrates C_mu). The
// main cells of a clipped variant in principled mode need a target or
// Base.Train.HandSetClipping, not both (model.Options.Validate's rule, here
// before any cell; the C_mu grid cells are hand-set by design: cellOptions).
func (o *Options) validateTargets() error {
	base := o.Base.Train
	if err := base.CheckTargetValues(); err != nil { // an explicit 0 included, before any cell
		return err
	}
	single := base.HasTarget()
	clipped := slices.ContainsFunc(o.Variants, nvib.Calibratable) && !base.Mode.IsReference()
	if len(o.TargetEpsilons) == 0 && !single {
		switch {
		case clipped && !base.HandSetClipping && len(o.CMuGrid) > 0:
			return mention([]string{"c_mu_grid"}, "hand_set_clipping",
				"required with a c_mu_grid: the nvdp-clipped cells run at the C_mu the grid selects, with no target (a target excludes the grid), "+
					"so their certified epsilon is whatever it gives (docs/privacy.md, \"A guarantee by default\")")
		case clipped && !base.HandSetClipping:
			return mention([]string{"target_epsilons", "target_epsilon", "target_rd", "hand_set_clipping"}, "target",
				"required for the nvdp-clipped and gaussian cells: target_epsilons (a certified epsilon per release for each cell to be "+
					"calibrated to, e.g. %g; docs/privacy.md, \"A guarantee by default\"), one target_epsilon or target_rd for every "+
					"such cell, or hand_set_clipping for the given constants and whatever epsilon they certify", privacy.DefaultTargetEpsilon)
		case base.Releases > 1 || base.VarianceShare != 0 || base.DirichletShare != 0:
			return invalid("target", "releases, the variance share and the Dirichlet share need a privacy target "+
				"(target epsilons, or one target epsilon or RD for every calibrated cell)")
		}
		return nil
	}
	field := "target_epsilons"
	if len(o.TargetEpsilons) == 0 {
		field = "target"
	}
	for _, e := range o.TargetEpsilons {
		if !(e > 0) || math.IsInf(e, 0) {
			return invalid("target_epsilons", "%v must be finite and > 0", e)
		}
	}
	switch {
	case len(o.TargetEpsilons) > 0 && single:
		return invalid(field, "target epsilons and one target epsilon or RD for every calibrated cell: give one")
	case !slices.ContainsFunc(o.Variants, nvib.Calibratable):
		return invalid(field, "a privacy target calibrates the nvdp-clipped and gaussian cells, which are not among the variants")
	case len(o.CMuGrid) > 0:
		return invalid(field, "a privacy target excludes a C_mu grid: the target calibrates C_mu (fix C_mu instead of a grid)")
	case base.HandSetClipping:
		return mention([]string{"target_epsilons", "target_epsilon", "target_rd"}, "hand_set_clipping",
			"and a privacy target (target_epsilons, target_epsilon or target_rd) are both given: give one")
	}
	return nil
}

// dup is the option error naming the first repeated value of the option name.
func dup[T comparable](field string, v []T) error {
	seen := map[T]bool{}
	for _, x := range v {
		if seen[x] {
			return invalid(field, "duplicate value %v", x)
		}
		seen[x] = true
	}
	return nil
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ApplyTasks gives the base options each task's defaults for the options
// not given (given reports those given; [task.Task.Apply]), as `nvdp run
// --task` makes them, and sets Data to data where a task reads it. An
// unknown task is left for the sweep's validation to name; an option a task
// refuses is its [*option.Error].
func (o *Options) ApplyTasks(given task.Given, data *task.Data) error {
	for _, name := range o.Tasks {
		t, err := task.Lookup(name)
		if err != nil {
			continue
		}
		if err := t.Apply(&o.Base.Train, given); err != nil {
			return err
		}
		if t.Info().UsesData {
			o.Data = data
		}
	}
	return nil
}
