package report

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

// referenceCurve is what one release at a certified epsilon allows on a binary
// task, drawn beside the frontier's points (docs/results.md, "The
// reference on the frontier"; issue 31). A release certified at (epsilon,
// delta) is at most as informative as a Gaussian mechanism of mu =
// privacy.GaussianMechanismMu(epsilon, delta) (exactly one, for the
// fixed-noise design), so:
//
//   - Achievable: the release that writes the non-private model's decision
//     at opposite ends of the mean ball in every row is a Gaussian mechanism
//     of that mu; a receiver decides which end with error Phi(-mu/2), for an
//     accuracy of a Phi(mu/2) + (1 - a) (1 - Phi(mu/2)), a the non-private
//     baseline's accuracy. It needs every released row to carry the
//     decision: an NVDP-Clipped release (all N components are the input's)
//     can; a gaussian release (pad positions are zero plus noise, whatever
//     the text) cannot for texts shorter than the release, so this reference
//     is NVDP-Clipped's, not the gaussian baseline's (whose reference would
//     use each dev text's own length).
//   - Bound: no release of a mechanism of that mu decides better than the
//     total variation between two inputs' releases allows, 2 Phi(mu/2) - 1:
//     accuracy at most m + (2 Phi(mu/2) - 1)(1 - m), m the majority class's
//     share (Phi(mu/2) on balanced classes). It holds for every variant.
//
// Only accuracy on a classification task with two labels has these forms;
// regression (STS-B) and F1 have no such closed form, and certFrontier.Reference
// is nil for them (referenceNote says so).
type referenceCurve struct {
	Delta    float64         `json:"delta"`
	Baseline jsonfloat.Float `json:"baseline_accuracy"` // a; NaN ("NaN" in JSON) when the frontier has no baseline (no achievable curve)
	Majority float64         `json:"majority"`          // m, the chance level
	// Points are the reference at the shown rows' certified epsilons and on
	// a grid over the plot's range.
	Points []referencePoint `json:"points"`
}

// referencePoint is the reference at one certified epsilon.
type referencePoint struct {
	Epsilon    float64         `json:"epsilon"`
	Mu         float64         `json:"mu"`
	Achievable jsonfloat.Float `json:"achievable"` // NaN ("NaN" in JSON) without a baseline
	Bound      float64         `json:"bound"`
}

// At returns the reference at epsilon.
func (r *referenceCurve) At(epsilon float64) (referencePoint, error) {
	mu, err := privacy.GaussianMechanismMu(epsilon, r.Delta)
	if err != nil {
		return referencePoint{}, err
	}
	p := distuv.UnitNormal.CDF(mu / 2)
	return referencePoint{Epsilon: epsilon, Mu: mu, Achievable: jsonfloat.Float(float64(r.Baseline)*p + (1-float64(r.Baseline))*(1-p)), Bound: r.Majority + (2*p-1)*(1-r.Majority)}, nil
}

// referenceNote says why a task's frontier has no reference ("" when it
// has one).
func referenceNote(task, metric string) string {
	t, err := glue.LookupTask(task)
	switch {
	case err != nil:
		return "task " + task + " unknown"
	case t.IsRegression || t.NumLabels != 2:
		return "no closed-form reference for a regression task: the bound of a release on a correlation has no form as simple as accuracy's"
	case metric != glue.MetricAccuracy:
		return fmt.Sprintf("the reference is in accuracy; the selection metric is %s", glueMetricTitle(metric))
	}
	return ""
}

// buildReference returns the reference of f (nil, with referenceNote, for
// tasks without one): at delta, the shared delta of the rows' guarantees.
func buildReference(f *certFrontier, delta float64) *referenceCurve {
	if referenceNote(f.Task, f.Metric) != "" || math.IsNaN(delta) || math.IsNaN(float64(f.Chance)) {
		return nil
	}
	r := &referenceCurve{Delta: delta, Baseline: jsonfloat.Float(math.NaN()), Majority: float64(f.Chance)}
	if b := f.Baseline; b != nil {
		r.Baseline = jsonfloat.Float(b.Utility.Mean)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, fr := range f.Rows {
		if fr.Shown {
			lo, hi = min(lo, fr.Certified.Epsilon.Mean), max(hi, fr.Certified.Epsilon.Mean)
		}
	}
	if math.IsInf(lo, 1) {
		return nil
	}
	const perDecade = 12
	for e := lo / 2; e <= 2*hi; e *= math.Pow(10, 1.0/perDecade) {
		if p, err := r.At(e); err == nil {
			r.Points = append(r.Points, p)
		}
	}
	return r
}
