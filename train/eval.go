package train

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
)

// Metrics are metric values by name. In JSON a non-finite value is a
// jsonfloat string, such as "NaN" for a correlation of constant predictions;
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

// UnmarshalJSON reads numbers, jsonfloat strings, and null as NaN.
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

// EvalOptions configure Evaluate; DefaultEvalOptions gives a model's.
type EvalOptions struct {
	GlueDir string // directory with <TASK>/<split>.tsv (not read when Data is set)
	Split   string // dev, test or train
	Out     string // output directory (required)
	// Seed seeds the NVDP sampling at evaluation (predictions are sampled, as the reference).
	Seed      uint64
	BatchSize int // >= 1
	Limit     int // first K examples (>= 0; 0: all; not used when Data is set)
	// MaxSeqLen is the truncation and posterior padding length, in [3, the
	// encoder's positions]: the posterior file has MaxSeqLen + 1 components
	// (a gaussian model's always its release length L + 1, L >= MaxSeqLen).
	MaxSeqLen int
	NoPost    bool // skip the posterior file
	// SkipBadRows skips malformed rows instead of failing (not used when Data is set).
	SkipBadRows bool
	// Data, when set, is the split already loaded and checked (RunPipeline
	// reads it before training); GlueDir, Limit and SkipBadRows are then
	// not used.
	Data *glue.Dataset
	// Device, when set, runs the evaluation's forward passes and the
	// posterior dump on this GPU (the same draws as on the CPU, made on the
	// host); nil: the CPU engine.
	Device *cuda.Device
}

// DefaultEvalSeed seeds the sampling at evaluation unless told otherwise.
const DefaultEvalSeed = 1

// DefaultEvalOptions returns the evaluation options of model b: the dev
// split of the GLUE directory it was trained on, written into its
// directory, at its eval batch size and max-seq-len, skipping malformed rows
// as its training did, seed DefaultEvalSeed, every example.
func DefaultEvalOptions(b *model.TextModel) EvalOptions {
	return EvalOptions{GlueDir: b.Options.GlueDir, Split: "dev", Out: b.Dir, Seed: DefaultEvalSeed,
		BatchSize: b.Options.EvalBatchSize, MaxSeqLen: b.Options.MaxSeqLen, SkipBadRows: b.Options.SkipBadRows}
}

// validate checks o for model b before any work; it normalises the split
// name (validation = dev). Errors are *option.Error (JSON-style names).
func (o *EvalOptions) validate(b *model.TextModel) error {
	_, split, err := glue.SplitPath(o.GlueDir, b.Task, o.Split)
	if err != nil {
		return option.Errorf("split", o.Split, "want dev, test or train")
	}
	o.Split = split
	positions := b.Encoder.Config.MaxSeqLen()
	switch {
	case o.Out == "":
		return option.Errorf("out", nil, "required: the output directory")
	case o.BatchSize < 1:
		return option.Errorf("batch_size", o.BatchSize, "must be >= 1")
	case o.Limit < 0:
		return option.Errorf("limit", o.Limit, "must be >= 0 (0: all)")
	case o.MaxSeqLen < 3 || o.MaxSeqLen > positions:
		return option.Errorf("max_seq_len", o.MaxSeqLen, "must be in [3, %d] (the encoder's positions)", positions)
	case b.Model.Gauss != nil && o.MaxSeqLen > b.Model.Gauss.L:
		return option.Errorf("max_seq_len", o.MaxSeqLen, "the gaussian model releases %d positions; truncate to at most that", b.Model.Gauss.L)
	case o.Data == nil && o.GlueDir == "":
		return option.Errorf("glue_dir", nil, "required: the GLUE directory")
	}
	return nil
}

// EvalResult is written as OUT/eval_<split>.json.
type EvalResult struct {
	Task     string  `json:"task"`
	Split    string  `json:"split"`
	Model    string  `json:"model"` // the model directory (model.TextModel.Dir)
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
	// Release holds the posteriors written to Posteriors, as the file holds
	// them (nil when none were exported): RunPipeline audits them in memory.
	Release *privacy.Posteriors `json:"-"`
}

// PosteriorsFile is the posterior file name of a split.
func PosteriorsFile(split string) string { return "posteriors_" + split + ".safetensors" }

// Evaluate runs model b on a split, writes OUT/eval_<split>.json, and
// returns the results. The options are checked before any work.
//
// For labelled splits it computes the GLUE metrics. It writes predictions in
// GLUE submission format: Task.SubmissionFile for test, and
// predictions_<split>.tsv otherwise. Principled NVDP models predict with
// every example padded to max-seq-len, the release's length; see
// [model.EvalPadLen].
//
// For NVDP models it also writes the posterior file, with
// [privacy.WritePosteriors] through [nvib.ExportPosteriors]. Every example is
// padded to the fixed length max-seq-len, so that every posterior has
// N = max-seq-len + 1 aligned components, the padding components included
// with 0 in the attention mask. The release is returned in EvalResult.Release
// too, and its certified guarantee in EvalResult.Certified. A gaussian
// model's release and posterior file always have its release length L + 1
// components; see [nvib.GaussianRelease].
func Evaluate(b *model.TextModel, o EvalOptions) (*EvalResult, error) {
	start := time.Now()
	if err := o.validate(b); err != nil {
		return nil, err
	}
	enc, ds, err := o.encode(b)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	rng := rngstream.TrainEval.Rand(o.Seed, 0)
	fwd, post := cpuForward(b.Model), b.Model.Posterior
	if o.Device != nil {
		dm, err := newDeviceModel(o.Device, b.Model)
		if err != nil {
			return nil, err
		}
		defer dm.Close()
		fwd, post = dm.forwardEval, dm.Posterior
	}
	// principled NVDP: predict from the release that the posterior file describes (N = MaxSeqLen + 1)
	preds, _, err := predict(fwd, b.Model.Cfg.NumLabels, enc, o.BatchSize, model.EvalPadLen(b.Model, o.MaxSeqLen), rng)
	if err != nil {
		return nil, fmt.Errorf("evaluate %s %s: %w", b.Task.Name, o.Split, err)
	}
	r := &EvalResult{Task: b.Task.Name, Split: o.Split, Model: b.Dir, Variant: b.Model.Cfg.Model, Examples: enc.Len(),
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
	if r.Certified, err = ModelCertificate(b.Model.Cfg, releaseLen(b, o.MaxSeqLen)+1, b.Dir); err != nil {
		return nil, fmt.Errorf("evaluate %s %s: %w", b.Task.Name, o.Split, err)
	}
	if b.Model.Releases() && !o.NoPost {
		if r.Release, r.Posteriors, err = exportPosteriors(b, enc, o, post); err != nil {
			return nil, err
		}
		r.Components = r.Release.N
	}
	r.Seconds = time.Since(start).Seconds()
	if err := atomicfile.WriteJSON(filepath.Join(o.Out, "eval_"+o.Split+".json"), r); err != nil {
		return nil, err
	}
	slog.Info("evaluated", "task", r.Task, "split", r.Split, "examples", r.Examples, "metrics", r.Metrics, "posteriors", r.Posteriors)
	return r, nil
}

// ModelCertificate returns the certificate an evaluation reports: the
// certified guarantee of one release of N components of a model with
// configuration cfg in dir, see [nvib.Config.ClipSet]. It is taken in the
// standard direction, at delta [privacy.DefaultDelta] and at the clip's Renyi
// order, or [privacy.DefaultOrder] when that is not a finite order > 1. It
// returns nil for a model without a release.
func ModelCertificate(cfg nvib.Config, n int, dir string) (*privacy.CertifiedReport, error) {
	set, ok := cfg.ClipSet(n)
	if !ok {
		return nil, nil
	}
	order := cfg.Clip.Order
	if !(order > 1) || math.IsInf(order, 0) {
		order = privacy.DefaultOrder
	}
	return privacy.NewCertifiedReport(set, privacy.ReportOptions{Order: order, Releases: 1, Delta: privacy.DefaultDelta, Source: ModelSource(dir)})
}

// ExportPosteriors runs model b on a split and writes only its posterior
// file, OUT/posteriors_<split>.safetensors, as [Evaluate] does, without
// predictions or eval_<split>.json. [RunPipeline] uses it to audit a part of
// the dev split, whose evaluation is the whole split's. It returns the
// posteriors, as the file holds them, and the file's path.
//
// Its errors are those of [Evaluate], and a model without a release, such as
// the baseline.
func ExportPosteriors(b *model.TextModel, o EvalOptions) (*privacy.Posteriors, string, error) {
	if err := o.validate(b); err != nil {
		return nil, "", err
	}
	if !b.Model.Releases() {
		return nil, "", fmt.Errorf("model %s (%s) has no release: no posteriors to export", b.Dir, b.Model.Cfg.Model)
	}
	enc, _, err := o.encode(b)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, "", err
	}
	post := b.Model.Posterior
	if o.Device != nil {
		dm, err := newDeviceModel(o.Device, b.Model)
		if err != nil {
			return nil, "", err
		}
		defer dm.Close()
		post = dm.Posterior
	}
	return exportPosteriors(b, enc, o, post)
}

// encode loads the split of o (unless o.Data holds it) and tokenises it.
func (o *EvalOptions) encode(b *model.TextModel) (*model.Encoded, *glue.Dataset, error) {
	ds := o.Data
	if ds == nil {
		var err error
		if ds, err = model.LoadSplit(o.GlueDir, b.Task, o.Split, glue.LoadOptions{SkipBadRows: o.SkipBadRows, Limit: o.Limit}); err != nil {
			return nil, nil, err
		}
	}
	enc, err := model.Encode(b.Tokenizer, ds, o.MaxSeqLen)
	return enc, ds, err
}

// releaseLen is the number of token positions of model b's release at
// max-seq-len maxSeqLen: N = releaseLen + 1 (a gaussian release always has
// its L positions).
func releaseLen(b *model.TextModel, maxSeqLen int) int {
	if g := b.Model.Gauss; g != nil {
		return g.L
	}
	return maxSeqLen
}

// exportPosteriors computes the posteriors of enc padded to o.MaxSeqLen
// with posterior (the CPU's or the device's) and writes them to
// OUT/posteriors_<split>.safetensors.
func exportPosteriors(b *model.TextModel, enc *model.Encoded, o EvalOptions, posterior func(encoder.Input) (*nvib.Posterior, error)) (*privacy.Posteriors, string, error) {
	ins, _ := enc.Batches(o.BatchSize, o.MaxSeqLen)
	path := filepath.Join(o.Out, PosteriorsFile(o.Split))
	p, err := nvib.ExportPosteriorsWith(path, b.Model, ins, b.Task.Name, o.Split, posterior)
	if err != nil {
		return nil, "", err
	}
	return p, path, nil
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

// SplitPosteriors computes the posteriors of model b on split in memory,
// in the split's order, as [RunPipeline] audits them: [ExportPosteriors]
// into a temporary directory, removed before it returns. glueDir, when not
// empty, replaces the model's GLUE directory.
//
// Its errors are those of [ExportPosteriors].
func SplitPosteriors(b *model.TextModel, split, glueDir string) (*privacy.Posteriors, error) {
	o := DefaultEvalOptions(b)
	o.Split = split
	if glueDir != "" {
		o.GlueDir = glueDir
	}
	var err error
	if o.Out, err = os.MkdirTemp("", "nvdp-posteriors-"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(o.Out)
	p, _, err := ExportPosteriors(b, o)
	return p, err
}
