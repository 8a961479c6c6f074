package sweep

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
)

// The checks of a cell directory that holds a run already: a finished one
// must be the run the sweep asks for (checkReport), a resumed one continues
// with its saved options (changedOptions).

// resolved is o with its defaults filled in, as train_options.json holds it.
func resolved(o model.Options) model.Options {
	o.Resolve()
	return o
}

// checkReport checks that the finished run in c.Dir is the run the sweep
// asks for (want: the cell's train options): the report's task, variant,
// seed, lambda (variants with KL terms) and C_mu (nvdp-clipped, when set),
// and for the calibrated variants the target (checkTarget).
func checkReport(c *Cell, want model.Options, r *train.Report) error {
	path := filepath.Join(c.Dir, train.ReportFile)
	switch {
	case r.Task != c.Task:
		return mismatch(path, "task", r.Task, c.Task)
	case r.Variant != c.Variant:
		return mismatch(path, "variant", r.Variant, c.Variant)
	case r.Seed != c.Seed:
		return mismatch(path, "seed", r.Seed, c.Seed)
	case nvib.HasKL(c.Variant) && r.Lambda != c.Lambda:
		return mismatch(path, "lambda", r.Lambda, c.Lambda)
	case c.Variant == nvib.ModelNVDPClipped && want.CMu > 0 && r.CMu != want.CMu:
		return mismatch(path, "C_mu", r.CMu, want.CMu)
	case nvib.Calibratable(c.Variant):
		return checkTarget(c, want)
	}
	return nil
}

func mismatch(path, what string, have, want any) error {
	return fmt.Errorf("%s holds a run with %s %v, the sweep wants %v: remove the cell or use another sweep directory", path, what, have, want)
}

// target is what a run's clipping is calibrated to: a certified epsilon or
// RD and, with either, the number of releases (model.Options). A value not
// given is 0 here (model.NoTarget, NaN, would never compare equal), which
// no given target is (model.Options.Validate).
type target struct {
	Epsilon, RD float64
	Releases    int
}

func targetOf(o *model.Options) target {
	var t target
	if !model.IsNoTarget(o.TargetEpsilon) {
		t.Epsilon = o.TargetEpsilon
	}
	if !model.IsNoTarget(o.TargetRD) {
		t.RD = o.TargetRD
	}
	if o.HasTarget() {
		t.Releases = o.Releases
	}
	return t
}

func (t target) String() string {
	v := func(x float64) string {
		if x == 0 {
			return "none"
		}
		return fmt.Sprint(x)
	}
	return fmt.Sprintf("epsilon %s / RD %s (%d releases)", v(t.Epsilon), v(t.RD), t.Releases)
}

// checkTarget checks that the finished cell was calibrated to the target the
// sweep asks for (train_options.json of the cell). A cell without saved
// options is accepted when no target is asked for.
func checkTarget(c *Cell, want model.Options) error {
	want = resolved(want)
	saved, err := savedOptions(c.Dir)
	switch {
	case err != nil && want.HasTarget():
		return err
	case err != nil:
		return nil
	}
	if have, want := targetOf(saved), targetOf(&want); have != want {
		return mismatch(filepath.Join(c.Dir, model.OptionsFile), "target", have, want)
	}
	return nil
}

// savedOptions are the training options a cell directory saved (its
// task's options file, task.Open).
func savedOptions(dir string) (*model.Options, error) {
	m, err := task.Open(dir)
	if err != nil {
		return nil, err
	}
	return m.Options, nil
}

// warnChangedOptions logs the options of a resumed cell that differ from the
// sweep's (a resumed run continues with its saved options).
func warnChangedOptions(c *Cell, want model.Options) {
	saved, err := savedOptions(c.Dir)
	if err != nil {
		return
	}
	if diff := changedOptions(*saved, resolved(want)); len(diff) > 0 {
		slog.Warn("resuming a cell whose saved options differ from the sweep's; the saved ones are used",
			"cell", c.ID, "fields", strings.Join(diff, ","))
	}
}

// changedOptions lists, sorted, the train_options.json keys whose values
// differ between saved and want (model.Differences), leaving out where the
// run is and how it was started (model.Differences leaves out out and
// resume; glue_dir, vocab, calibrated here; the fields train_options.json
// does not hold have no key) and, when saved holds calibrated clipping
// constants, those constants (c_mu, logvar_margin, c_alpha_min: checkTarget
// compares the target instead).
func changedOptions(saved, want model.Options) []string {
	ignore := []string{"glue_dir", "vocab", "calibrated"}
	if saved.Calibrated {
		ignore = append(ignore, "c_mu", "logvar_margin", "c_alpha_min")
	}
	var diff []string
	for _, d := range model.Differences(&saved, &want) {
		if !slices.Contains(ignore, d.Option) {
			diff = append(diff, d.Option)
		}
	}
	slices.Sort(diff)
	return diff
}
