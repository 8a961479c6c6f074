package train

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// Metrics are metric values by name. In JSON a non-finite value is a
// jsonfloat string ("NaN": e.g. a correlation of constant predictions);
// the null of files written before jsonfloat reads as NaN.
type Metrics map[string]float64

// MarshalJSON encodes the map with jsonfloat values.
func (m Metrics) MarshalJSON() ([]byte, error) {
	out := make(map[string]jsonfloat.Float, len(m))
	for k, v := range m {
		out[k] = jsonfloat.Float(v)
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads numbers, jsonfloat strings and null (NaN).
func (m *Metrics) UnmarshalJSON(b []byte) error {
	var raw map[string]*jsonfloat.Float
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*m = nil
		return nil
	}
	*m = make(Metrics, len(raw))
	for k, v := range raw {
		(*m)[k] = math.NaN()
		if v != nil {
			(*m)[k] = float64(*v)
		}
	}
	return nil
}

// EvalOptions configure Evaluate.
type EvalOptions struct {
	Model   string // model directory written by Run
	GlueDir string // "" = the one saved in the model's train options
	Split   string // dev (default) or test (also train)
	Out     string // output directory ("" = the model directory)
	// Seed seeds the NVDP sampling at evaluation (predictions are sampled, as the reference).
	Seed      uint64
	BatchSize int  // default: the model's eval batch size (16)
	Limit     int  // first K examples (0: all)
	MaxSeqLen int  // 0 = the model's max-seq-len; the posterior file has MaxSeqLen + 1 components
	NoPost    bool // skip the posterior file
	// SkipBadRows skips malformed rows instead of failing.
	SkipBadRows bool
}

// EvalResult is written as OUT/eval_<split>.json.
type EvalResult struct {
	Task     string  `json:"task"`
	Split    string  `json:"split"`
	Model    string  `json:"model"`
	Variant  string  `json:"variant"`
	Examples int     `json:"examples"`
	Labelled bool    `json:"labelled"`
	Metrics  Metrics `json:"metrics,omitempty"` // GLUE metrics (labelled splits)
	// Selection is the task's selection metric (SelectionName).
	Selection     *jsonfloat.Float `json:"selection,omitempty"`
	SelectionName string           `json:"selection_name"`
	// Chance is ChanceLevel of the split's labels (labelled splits).
	Chance      float64 `json:"chance,omitempty"`
	Predictions string  `json:"predictions"`          // TSV in GLUE submission format
	Posteriors  string  `json:"posteriors,omitempty"` // posterior file for `nvdp audit` ("" for baseline)
	Components  int     `json:"components,omitempty"` // N = max-seq-len + 1
	Truncated   int     `json:"truncated"`
	Seed        uint64  `json:"seed"`
	Seconds     float64 `json:"seconds"`
	// Certified is the certified guarantee of one release of the model
	// (NVDP models: N = max-seq-len + 1 components) at the clip's Renyi
	// order, standard direction, delta privacy.DefaultDelta; nil for the
	// baseline. Evaluation audits nothing: there is no empirical number here.
	Certified *privacy.CertifiedReport `json:"certified,omitempty"`
}

// PosteriorsFile is the posterior file name of a split.
func PosteriorsFile(split string) string { return "posteriors_" + split + ".safetensors" }

// Evaluate runs a trained model on a split: GLUE metrics for labelled splits,
// predictions in GLUE submission format (Task.SubmissionFile for test,
// predictions_<split>.tsv otherwise; principled NVDP models predict with
// every example padded to max-seq-len, the release's length, see
// EvalPadLen) and, for NVDP models, the posterior file
// (privacy.WritePosteriors via nvib.ExportPosteriors) with every example padded
// to the fixed length max-seq-len, so that every posterior has N = max-seq-len
// + 1 aligned components (padding components included, flagged in the mask),
// and the certified guarantee of that release (EvalResult.Certified). A
// gaussian model's release and posterior file always have its release
// length L + 1 components (nvib.GaussianRelease).
// Writes OUT/eval_<split>.json.
func Evaluate(o EvalOptions) (*EvalResult, error) {
	start := time.Now()
	b, err := LoadModel(o.Model)
	if err != nil {
		return nil, err
	}
	if o.Split == "" {
		o.Split = "dev"
	}
	if o.GlueDir == "" {
		o.GlueDir = b.Options.GlueDir
	}
	if o.Out == "" {
		o.Out = o.Model
	}
	if o.BatchSize == 0 {
		o.BatchSize = max(b.Options.EvalBatchSize, 1)
	}
	if o.MaxSeqLen == 0 {
		o.MaxSeqLen = b.Options.MaxSeqLen
	}
	if o.MaxSeqLen > b.Encoder.Config.MaxSeqLen() || o.MaxSeqLen < 3 {
		return nil, fmt.Errorf("--max-seq-len %d: must be in [3, %d]", o.MaxSeqLen, b.Encoder.Config.MaxSeqLen())
	}
	if g := b.Model.Gauss; g != nil && o.MaxSeqLen > g.L {
		return nil, fmt.Errorf("--max-seq-len %d: the gaussian model releases %d positions; truncate to at most that", o.MaxSeqLen, g.L)
	}
	ds, err := glue.Load(o.GlueDir, b.Task, o.Split, glue.LoadOptions{SkipBadRows: o.SkipBadRows, Limit: o.Limit})
	if err != nil {
		return nil, err
	}
	if len(ds.Examples) == 0 {
		return nil, fmt.Errorf("%s: no examples", ds.Path)
	}
	enc, err := Encode(b.Tokenizer, ds, o.MaxSeqLen)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	rng := rngstream.TrainEval.Rand(o.Seed, 0)
	// principled NVDP: predict from the release that the posterior file describes (N = MaxSeqLen + 1)
	preds, _, err := Predict(b.Model, enc, o.BatchSize, EvalPadLen(b.Model, o.MaxSeqLen), rng)
	if err != nil {
		return nil, fmt.Errorf("evaluate %s %s: %w", b.Task.Name, o.Split, err)
	}
	r := &EvalResult{Task: b.Task.Name, Split: o.Split, Model: o.Model, Variant: b.Model.Cfg.Model, Examples: enc.Len(),
		Labelled: ds.Labelled, SelectionName: b.Task.Metric, Truncated: enc.Truncated, Seed: o.Seed}
	if ds.Labelled {
		if r.Metrics, err = glue.Compute(b.Task, preds, enc.Targets); err != nil {
			return nil, fmt.Errorf("evaluate %s %s: %w", b.Task.Name, o.Split, err)
		}
		r.Selection = jsonfloat.New(r.Metrics[b.Task.Metric])
		if r.Chance, err = ChanceLevel(b.Task, enc.Targets); err != nil {
			return nil, err
		}
	}
	name := "predictions_" + o.Split + ".tsv"
	if o.Split == "test" {
		name = b.Task.SubmissionFile
	}
	r.Predictions = filepath.Join(o.Out, name)
	if err := writePredictions(r.Predictions, b.Task, enc.Indices, preds); err != nil {
		return nil, err
	}
	relLen := o.MaxSeqLen // the release's token positions: N = relLen + 1
	if g := b.Model.Gauss; g != nil {
		relLen = g.L // a gaussian release always has its L positions
	}
	if set, ok := ModelClipSet(b.Model.Cfg, relLen+1, b.Model.Cfg.Hidden); ok {
		order := b.Model.Cfg.Clip.Order
		if !(order > 1) || math.IsInf(order, 0) {
			order = privacy.DefaultOrder
		}
		if r.Certified, err = privacy.CertifyReport(set, order, privacy.DirectionStandard, 1, privacy.DefaultDelta, nil, ModelSource(o.Model)); err != nil {
			return nil, fmt.Errorf("evaluate %s %s: %w", b.Task.Name, o.Split, err)
		}
	}
	if b.Model.Releases() && !o.NoPost {
		ins, _ := enc.Batches(o.BatchSize, o.MaxSeqLen)
		r.Posteriors = filepath.Join(o.Out, PosteriorsFile(o.Split))
		r.Components = relLen + 1
		if err := nvib.ExportPosteriors(r.Posteriors, b.Model, ins, b.Task.Name, o.Split); err != nil {
			return nil, err
		}
	}
	r.Seconds = time.Since(start).Seconds()
	if err := atomicfile.WriteJSON(filepath.Join(o.Out, "eval_"+o.Split+".json"), r); err != nil {
		return nil, err
	}
	slog.Info("evaluated", "task", r.Task, "split", r.Split, "examples", r.Examples, "metrics", r.Metrics, "posteriors", r.Posteriors)
	return r, nil
}

func writePredictions(path string, task *glue.Task, idx []int, preds []float64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := glue.WritePredictions(f, task, idx, preds); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
