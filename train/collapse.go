package train

import (
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/jsonfloat"
)

// Collapse thresholds, from docs/training.md, "Collapse".
//
// A selection metric within ChanceTolerance of the chance level is "at
// chance". An audit whose empirical RD max over every ordered pair of
// evaluation posteriors is below PriorRDMax nats has "the posterior on the
// prior": every text's release has nearly the same distribution, because the
// encoder's output does not reach it.
const (
	ChanceTolerance = 0.01
	PriorRDMax      = 0.01
)

// CollapseCheck is DIR/report.json's "collapse": whether the run learned
// nothing. Issue 13 found a from-scratch run whose posterior collapsed onto
// the prior and trained to chance, with training loss ln 2 and rd_max 3e-4.
type CollapseCheck struct {
	Metric string `json:"metric"` // the task's selection metric
	// Value is its value on the utility split (NaN, "NaN" in JSON, for a
	// correlation of constant predictions).
	Value jsonfloat.Float `json:"value"`
	// Chance is the metric of a constant predictor: the majority class of
	// the split's labels (accuracy, F1, MCC as GLUE computes them), 0 for
	// correlations.
	Chance           jsonfloat.Float `json:"chance"`
	AtChance         bool            `json:"at_chance"`
	PosteriorOnPrior bool            `json:"posterior_on_prior"`
	// Collapsed = AtChance && PosteriorOnPrior.
	Collapsed bool   `json:"collapsed"`
	Reason    string `json:"reason,omitempty"`
}

// ChanceLevel returns the task's selection metric of the best constant
// predictor on labels. For classification that is the majority class, the
// lower class on ties; for regression it is 0, since a constant has no
// correlation. It returns an error when labels is empty.
func ChanceLevel(task *glue.Task, labels []float64) (float64, error) {
	if len(labels) == 0 {
		return 0, fmt.Errorf("%s: no labels for the chance level", task.Name)
	}
	if task.IsRegression {
		return 0, nil
	}
	counts := make([]int, task.NumLabels)
	for _, l := range labels {
		if k := int(l); k >= 0 && k < len(counts) {
			counts[k]++
		}
	}
	best := 0
	for k, c := range counts {
		if c > counts[best] {
			best = k
		}
	}
	preds := make([]float64, len(labels))
	for i := range preds {
		preds[i] = float64(best)
	}
	m, err := glue.Compute(task, preds, labels)
	if err != nil {
		return 0, err
	}
	v := m[task.Metric]
	if math.IsNaN(v) {
		v = 0
	}
	return v, nil
}

// CheckCollapse compares a run's selection metric with the chance level, and
// its empirical RD max with [PriorRDMax]. rdMax is NaN when there is no
// posterior, as for the baseline.
func CheckCollapse(metric string, value, chance, rdMax float64) CollapseCheck {
	c := CollapseCheck{Metric: metric, Value: jsonfloat.Float(value), Chance: jsonfloat.Float(chance)}
	c.AtChance = !(value > chance+ChanceTolerance)
	c.PosteriorOnPrior = rdMax < PriorRDMax
	c.Collapsed = c.AtChance && c.PosteriorOnPrior
	switch {
	case c.Collapsed:
		c.Reason = fmt.Sprintf("collapsed: %s %.4f is at chance (%.4f) and every pair of posteriors is within %.3g nats (rd_max %.3g): the posterior sits on the prior and the model learned nothing",
			metric, value, chance, PriorRDMax, rdMax)
	case c.AtChance:
		c.Reason = fmt.Sprintf("%s %.4f is at chance (%.4f)", metric, value, chance)
	}
	return c
}

// Err returns an error when the run collapsed, and nil otherwise, for
// callers that must fail on it, such as `nvdp run --fail-on-collapse` and
// the main job.
func (c *CollapseCheck) Err() error {
	if c == nil || !c.Collapsed {
		return nil
	}
	return fmt.Errorf("run %s", c.Reason)
}
