package train

import (
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/nvib"
	"gonum.org/v1/gonum/stat"
)

// StoredBaseline is a file holding the non-private baseline's utility for one
// task and training budget, over seeds, with the command that measured it. A
// private run is compared with it when re-running the baseline costs too
// much; scripts/main-job.sh takes one as BASELINE=FILE.
type StoredBaseline struct {
	Task    string    `json:"task"`
	Variant string    `json:"variant"` // "baseline"
	Split   string    `json:"split"`   // the utility split, "dev"
	Metric  string    `json:"metric"`  // the task's selection metric
	Values  []float64 `json:"values"`  // one per seed
	Seeds   []uint64  `json:"seeds"`
	Command string    `json:"command"` // with S for the seed
	Machine string    `json:"machine"`
	Date    string    `json:"date"`
}

// BaselineComparison is report.json's "baseline": the non-private baseline's
// selection metric for the same task and budget, from a stored file, with
// Source "stored", or from a baseline run's report.json, with Source "run".
type BaselineComparison struct {
	Source string    `json:"source"` // stored | run
	Path   string    `json:"path"`
	Metric string    `json:"metric"`
	Values []float64 `json:"values"`
	Mean   float64   `json:"mean"`
	SD     float64   `json:"sd"` // sample standard deviation; 0 for one value
	// Command measured Values (stored files only).
	Command string `json:"command,omitempty"`
}

// LoadBaseline reads the non-private baseline to compare a run of task with:
// either a [StoredBaseline] file or the report.json of an `nvdp run --variant
// baseline`, told apart by their fields.
//
// Its errors name the file and the field: unreadable or malformed JSON, a
// variant other than baseline, another task, no value of the task's
// selection metric, a non-finite value, and seeds and values of different
// lengths.
func LoadBaseline(path, task string) (*BaselineComparison, error) {
	t, err := glue.LookupTask(task)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	var probe struct {
		Values  json.RawMessage `json:"values"`
		Utility json.RawMessage `json:"utility"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", path, err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("baseline %s: %s", path, fmt.Sprintf(format, a...))
	}
	var c *BaselineComparison
	var gotTask, variant, metric string
	switch {
	case probe.Values != nil:
		var s StoredBaseline
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, bad("%v", err)
		}
		if len(s.Seeds) != len(s.Values) {
			return nil, bad("%d seeds for %d values", len(s.Seeds), len(s.Values))
		}
		gotTask, variant, metric = s.Task, s.Variant, s.Metric
		c = &BaselineComparison{Source: "stored", Path: path, Metric: s.Metric, Values: s.Values, Command: s.Command}
	case probe.Utility != nil:
		var r struct {
			Task    string  `json:"task"`
			Variant string  `json:"variant"`
			Utility Metrics `json:"utility"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, bad("%v", err)
		}
		gotTask, variant, metric = r.Task, r.Variant, t.Metric
		c = &BaselineComparison{Source: "run", Path: path, Metric: t.Metric}
		if v, ok := r.Utility[t.Metric]; ok {
			c.Values = []float64{v}
		} else if r.Task == task {
			return nil, bad("utility has no %q", t.Metric)
		}
	default:
		return nil, bad("neither a stored baseline (\"values\") nor a run report (\"utility\")")
	}
	switch {
	case variant != nvib.ModelBaseline:
		return nil, bad("variant %q, want %q", variant, nvib.ModelBaseline)
	case gotTask != task:
		return nil, bad("task %q, want %q", gotTask, task)
	case metric != t.Metric:
		return nil, bad("metric %q, want the task's selection metric %q", metric, t.Metric)
	case len(c.Values) == 0:
		return nil, bad("no values")
	}
	for i, v := range c.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, bad("value %d is %v", i, v)
		}
	}
	c.Mean, c.SD = meanSD(c.Values)
	return c, nil
}

// meanSD is the mean and the sample standard deviation (0 for one value).
func meanSD(v []float64) (mean, sd float64) {
	if len(v) == 1 {
		return v[0], 0
	}
	return stat.MeanStdDev(v, nil)
}
