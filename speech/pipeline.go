package speech

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/lid"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/train"
)

// Examples is what the speech task's posteriors are of, in audit labels.
const Examples = "utterances"

// Splits are the splits Evaluate reads.
var evalSplits = []string{"dev", "test"}

// EvalOptions configure Evaluate.
type EvalOptions struct {
	Split     string // dev or test (labelled in CommonLanguage's layout)
	Limit     int    // first K utterances, every language in turn (0: all)
	BatchSize int    // >= 1
	Seed      uint64 // of the release's sampling (rngstream.TrainEval)
	Out       string // directory of eval_<split>.json, predictions and posteriors ("": the model's)
	NoPost    bool   // do not export the posteriors
}

// Evaluate runs the model of dir (loaded as m with options o) on a split:
// accuracy and macro-F1 (train.EvalResult's Metrics; Selection is
// MetricF1, Chance the macro-F1 of always predicting the split's most
// frequent language), the predictions (predictions_<split>.tsv: index,
// audio path, language), the certified guarantee of one release
// (train.ModelCertificate, N = F + 1) and, for a model with a release,
// the posterior file posteriors_<split>.safetensors (frames as components,
// every utterance N = F + 1: nothing pads) returned in Release;
// eval_<split>.json. Errors: bad options, unreadable data, the model's,
// ctx's once it is done while the split loads (LoadSplit).
func Evaluate(ctx context.Context, dir string, m *Model, o *Options, eo EvalOptions) (*train.EvalResult, error) {
	start := time.Now()
	if !slices.Contains(evalSplits, eo.Split) {
		return nil, option.Errorf("split", eo.Split, "want %s", strings.Join(evalSplits, " or "))
	}
	if eo.BatchSize < 1 {
		return nil, option.Errorf("batch_size", eo.BatchSize, "must be >= 1")
	}
	if eo.Limit < 0 {
		return nil, option.Errorf("limit", eo.Limit, "must be >= 0 (0: all)")
	}
	if eo.Out == "" {
		eo.Out = dir
	}
	d, err := LoadSplit(ctx, o.DataDir, eo.Split, eo.Limit, o.Samples())
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(eo.Out, 0o755); err != nil {
		return nil, err
	}
	pr, err := Predict(m, d, eo.BatchSize, rngstream.TrainEval.Rand(eo.Seed, 0), !eo.NoPost)
	if err != nil {
		return nil, fmt.Errorf("evaluate %s %s: %w", TaskName, eo.Split, err)
	}
	r := &train.EvalResult{Task: TaskName, Split: eo.Split, Model: dir, Variant: m.NVDP.Cfg.Model, Examples: d.Len(), Labelled: true,
		Metrics: pr.Metrics, Selection: jsonfloat.New(pr.Metrics[MetricF1]), SelectionName: MetricF1, Truncated: d.Cropped, Seed: eo.Seed,
		Chance: Chance(d.Labels)}
	r.Predictions = filepath.Join(eo.Out, "predictions_"+eo.Split+".tsv")
	if err := writePredictions(r.Predictions, d, pr.Preds); err != nil {
		return nil, err
	}
	if r.Certified, err = train.ModelCertificate(m.NVDP.Cfg, o.Train.MaxSeqLen+1, dir); err != nil {
		return nil, fmt.Errorf("evaluate %s %s: %w", TaskName, eo.Split, err)
	}
	if m.NVDP.Releases() && !eo.NoPost {
		if r.Release, err = m.NVDP.FilePosteriors(pr.Posteriors, TaskName, eo.Split); err != nil {
			return nil, fmt.Errorf("evaluate %s %s: %w", TaskName, eo.Split, err)
		}
		r.Posteriors = filepath.Join(eo.Out, train.PosteriorsFile(eo.Split))
		if err := privacy.WritePosteriors(r.Posteriors, r.Release); err != nil {
			return nil, err
		}
		r.Components = r.Release.N
	}
	r.Seconds = time.Since(start).Seconds()
	if err := atomicfile.WriteJSON(filepath.Join(eo.Out, "eval_"+eo.Split+".json"), r); err != nil {
		return nil, err
	}
	slog.Info("evaluated", "task", TaskName, "split", eo.Split, "utterances", d.Len(), "metrics", r.Metrics, "posteriors", r.Posteriors)
	return r, nil
}

// Chance is the macro-F1 of always predicting the most frequent label
// (the smallest index among ties).
func Chance(labels []int) float64 {
	count := map[int]int{}
	top := labels[0]
	for _, l := range labels {
		count[l]++
		if count[l] > count[top] || (count[l] == count[top] && l < top) {
			top = l
		}
	}
	preds := make([]int, len(labels))
	for i := range preds {
		preds[i] = top
	}
	_, f1, _ := Scores(preds, labels) // labels is non-empty
	return f1
}

// writePredictions writes index, audio path and predicted language, one
// utterance per line, tab-separated with a header.
func writePredictions(path string, d *Dataset, preds []int) error {
	var b strings.Builder
	b.WriteString("index\tpath\tprediction\n")
	names := lid.Languages()
	for i, p := range preds {
		fmt.Fprintf(&b, "%d\t%s\t%s\n", i, d.Utterances[i].Path, names[p])
	}
	return atomicfile.WriteBytes(path, []byte(b.String()))
}

// PipelineOptions configure RunPipeline (`nvdp run --task lid`).
type PipelineOptions struct {
	Options
	SkipTrain bool // evaluate and audit the model already in Train.Out
	// UtilitySplit is the split the utility is reported on: test (the
	// paper's Table 2; CommonLanguage's test split is labelled) or dev.
	UtilitySplit string
	// AuditSplit is the split whose posteriors are audited (dev or test);
	// AuditLimit its first K utterances, every language in turn (0: all).
	AuditSplit string
	AuditLimit int
	EvalSeed   uint64
	// Audit are audit.Audit's options (start from
	// audit.DefaultOptions; Pairs samples the ordered pairs).
	Audit audit.Options
}

// NewPipelineOptions is the speech pipeline of options o with the pipeline
// settings of a text pipeline's po (train.PipelineOptions: skip the
// training, audit split, when set, and limit, evaluation seed, audit
// options); the utility on test. Its training options are o's.
func NewPipelineOptions(o Options, po train.PipelineOptions) PipelineOptions {
	sp := DefaultPipelineOptions()
	sp.Options, sp.SkipTrain, sp.AuditLimit, sp.EvalSeed, sp.Audit = o, po.SkipTrain, po.AuditLimit, po.EvalSeed, po.Audit
	if po.AuditSplit != "" {
		sp.AuditSplit = po.AuditSplit
	}
	return sp
}

// DefaultPipelineOptions: DefaultOptions, utility on test, the dev split
// audited whole, train.DefaultEvalSeed, audit.DefaultOptions.
func DefaultPipelineOptions() PipelineOptions {
	return PipelineOptions{Options: DefaultOptions(), UtilitySplit: "test", AuditSplit: "dev", EvalSeed: train.DefaultEvalSeed,
		Audit: audit.DefaultOptions()}
}

// RunPipeline trains (unless SkipTrain), loads the best model, evaluates
// it on UtilitySplit, exports the AuditSplit's posteriors, audits them in
// memory (train.AuditRelease: the empirical numbers, over ordered pairs of
// utterances or a sample of them with Audit.Pairs) and certifies the
// model's clip set at the audit's order (the guarantee), and writes
// DIR/report.json (train.Report). Every option is checked before any work.
func RunPipeline(ctx context.Context, po PipelineOptions, report progress.Func) (*train.Report, error) {
	start := time.Now()
	if err := po.checkPipeline(); err != nil {
		return nil, err
	}
	var tr *train.Result
	if po.SkipTrain {
		if po.Train.Out == "" {
			return nil, option.Errorf("out", nil, "required: the model directory")
		}
	} else {
		var err error
		if tr, err = po.trainForPipeline(ctx, report); err != nil {
			return nil, err
		}
	}
	dir := po.Train.Out
	m, o, err := LoadModel(dir)
	if err != nil {
		return nil, err
	}
	eo := EvalOptions{Split: po.UtilitySplit, BatchSize: o.Train.EvalBatchSize, Seed: po.EvalSeed,
		NoPost: po.UtilitySplit != po.AuditSplit || po.AuditLimit > 0}
	util, err := Evaluate(ctx, dir, m, o, eo)
	if err != nil {
		return nil, err
	}
	rep := newPipelineReport(po, m, o, util, tr, dir)
	if m.NVDP.Releases() {
		if rep.Privacy, err = po.auditPipeline(ctx, dir, m, o, eo, util); err != nil {
			return nil, err
		}
	}
	rdMax := math.NaN()
	if rep.Privacy != nil {
		rdMax = float64(rep.Privacy.RDMax)
	}
	cc := train.CheckCollapse(MetricF1, util.Metrics[MetricF1], util.Chance, rdMax)
	rep.Collapse = &cc
	rep.Seconds = time.Since(start).Seconds()
	if err := atomicfile.WriteJSON(filepath.Join(dir, train.ReportFile), rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// checkPipeline checks the pipeline's own options: the two splits, then
// the audit limit.
func (po PipelineOptions) checkPipeline() error {
	for _, s := range []struct{ name, v string }{{"utility_split", po.UtilitySplit}, {"audit_split", po.AuditSplit}} {
		if !slices.Contains(evalSplits, s.v) {
			return option.Errorf(s.name, s.v, "want %s", strings.Join(evalSplits, " or "))
		}
	}
	if po.AuditLimit < 0 {
		return option.Errorf("audit_limit", po.AuditLimit, "must be >= 0 (0: all)")
	}
	return nil
}

// trainForPipeline prepares po's training options (storing the prepared
// ones in po), checks the audit's options for the utterances it will have
// (unless the model is the baseline) and trains; an interrupted training
// is an error.
func (po *PipelineOptions) trainForPipeline(ctx context.Context, report progress.Func) (*train.Result, error) {
	o, err := prepare(po.Options)
	if err != nil {
		return nil, err
	}
	po.Options = o
	if o.Train.Variant != nvib.ModelBaseline { // the audit's options, for the utterances it will have
		utts, err := lid.Load(o.DataDir, po.AuditSplit)
		if err != nil {
			return nil, err
		}
		m := len(utts)
		if po.AuditLimit > 0 {
			m = min(m, po.AuditLimit)
		}
		if err := po.Audit.ValidateFor(m); err != nil {
			return nil, fmt.Errorf("audit of %d %s posteriors: %w", m, po.AuditSplit, err)
		}
	}
	tr, err := run(ctx, po.Options, report)
	if err != nil {
		return nil, err
	}
	if tr.Interrupted {
		return nil, fmt.Errorf("training stopped after %d steps: resume the run in %s to finish it", tr.Steps, po.Train.Out)
	}
	return tr, nil
}

// newPipelineReport is the report of model m (options o) evaluated on the
// utility split, with its clip set or prior per variant; no privacy yet.
func newPipelineReport(po PipelineOptions, m *Model, o *Options, util *train.EvalResult, tr *train.Result, dir string) *train.Report {
	t := o.Train
	mcfg := m.NVDP.Cfg
	rep := &train.Report{Task: TaskName, Variant: t.Variant, Mode: t.Mode, Encoder: t.Encoder, Lambda: mcfg.LambdaG, Seed: t.Seed,
		Backend: nn.Backend(), Utility: util.Metrics, UtilitySplit: po.UtilitySplit, Training: tr, Dir: dir}
	switch t.Variant {
	case nvib.ModelNVDPClipped:
		rep.CMu, rep.CAlphaMin, rep.CAlphaMax, rep.LogvarMargin = mcfg.Clip.CMu, mcfg.Clip.CAlphaMin, mcfg.Clip.CAlphaMax, mcfg.Clip.LogvarMargin
	case nvib.ModelGaussian:
		rep.CMu, rep.Sigma = mcfg.Clip.CMu, math.Sqrt(mcfg.Prior.Var)
	case nvib.ModelBaseline:
		rep.Note = "baseline: no NVIB posterior, nothing to audit"
	}
	return rep
}

// auditPipeline audits the audit split's posteriors in memory: util's own
// when the utility evaluation kept them (eo.NoPost false), else those of a
// second evaluation on the audit split, exported to DIR/audit.
func (po PipelineOptions) auditPipeline(ctx context.Context, dir string, m *Model, o *Options, eo EvalOptions, util *train.EvalResult) (*train.PrivacySummary, error) {
	audited := util
	if eo.NoPost {
		var err error
		if audited, err = Evaluate(ctx, dir, m, o, EvalOptions{Split: po.AuditSplit, Limit: po.AuditLimit, BatchSize: o.Train.EvalBatchSize,
			Seed: po.EvalSeed, Out: filepath.Join(dir, "audit")}); err != nil {
			return nil, err
		}
	}
	return train.AuditRelease(ctx, audited.Release, audited.Posteriors, po.AuditSplit, Examples, m.NVDP.Cfg, dir, po.Audit, o.Train.Device)
}
