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

// Evaluate runs the model of dir, loaded as m with options o, on a split, and
// writes eval_<split>.json. It gives:
//
//   - the accuracy and macro-F1, in [train.EvalResult]'s Metrics. Selection is
//     [MetricF1], and Chance the macro-F1 of always predicting the split's
//     most frequent language;
//   - the predictions, in predictions_<split>.tsv, with index, audio path and
//     language;
//   - the certified guarantee of one release, [train.ModelCertificate] with
//     N = F + 1;
//   - for a model with a release, the posterior file
//     posteriors_<split>.safetensors, returned in Release too. Frames are the
//     components, and every utterance has N = F + 1, since nothing pads.
//
// It returns an error for bad options, unreadable data, and the model's
// errors. Once ctx is done while the split loads, see [LoadSplit], it returns
// ctx's error.
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

// Chance returns the macro-F1 of always predicting the most frequent label,
// the smallest index among ties.
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

// UtilitySplit is the split the speech task's utility is reported on: test,
// as in the paper's Table 2, since CommonLanguage's test split is labelled.
const UtilitySplit = "test"

// Pipeline returns the speech task's part of [train.RunPipeline], run by
// `nvdp run --task lid`, on the corpus dataDir with every utterance cropped
// or padded to maxSeconds. It measures utility on test, [UtilitySplit], and
// audits the posteriors of the audit split, AuditSplit of the pipeline
// options and dev by default, on the CPU, over ordered pairs of utterances
// or a sample of them with Audit.Pairs. A stored non-private baseline is the
// GLUE tasks'.
func Pipeline(dataDir string, maxSeconds float64) train.PipelineTask {
	return &pipeline{data: Options{DataDir: dataDir, MaxSeconds: maxSeconds}}
}

// Pipeline returns the speech task's part of [train.RunPipeline], as
// [Pipeline] does, training p on its corpus, whose options [Prepare] checked: Plan
// checks the rest of the pipeline's options and reads what it needs, but
// not the training options again. Unless PipelineOptions.SkipTrain, they
// must be p's (its Out and Resume).
func (p Prepared) Pipeline() train.PipelineTask {
	return &pipeline{data: Options{DataDir: p.o.DataDir, MaxSeconds: p.o.MaxSeconds}, o: p.o, prepared: true}
}

// pipeline is one run of the speech task's pipeline.
type pipeline struct {
	data     Options // the corpus and the utterance length
	po       train.PipelineOptions
	o        Options // the prepared options of a training run
	prepared bool    // o checked by Prepare before Plan
}

// Plan checks the pipeline's options (the audit split and limit, no
// baseline) and, for a training run, prepares the training options
// (resolved and validated, or a resume's saved ones, the files checked;
// unless Prepare did) and checks the audit's options for the utterances it will have (unless
// the model is the baseline).
func (p *pipeline) Plan(po *train.PipelineOptions) (*train.Plan, error) {
	if po.AuditSplit == "" {
		po.AuditSplit = "dev"
	}
	if !slices.Contains(evalSplits, po.AuditSplit) {
		return nil, option.Errorf("audit_split", po.AuditSplit, "want %s", strings.Join(evalSplits, " or "))
	}
	if po.AuditLimit < 0 {
		return nil, option.Errorf("audit_limit", po.AuditLimit, "must be >= 0 (0: all)")
	}
	if po.Baseline != "" {
		return nil, option.MentionErrorf([]string{"variant", "task"}, "baseline", po.Baseline,
			"for the GLUE tasks; run variant baseline of task %s beside it", TaskName)
	}
	p.po = *po
	if po.SkipTrain {
		if po.Train.Out == "" {
			return nil, option.Errorf("out", nil, "required: the model directory")
		}
		p.o = p.data
		p.o.Train = po.Train
		return &train.Plan{Train: po.Train, Dir: po.Train.Out, Examples: Examples}, nil
	}
	o := p.o
	if !p.prepared {
		given := p.data
		given.Train = po.Train
		var err error
		if o, err = prepare(given); err != nil {
			return nil, err
		}
		p.o = o
	} else if o.Train.Out != po.Train.Out || o.Train.Resume != po.Train.Resume {
		return nil, fmt.Errorf("%s: the prepared run (out %s, resume %v) is not the pipeline's (out %s, resume %v)",
			TaskName, o.Train.Out, o.Train.Resume, po.Train.Out, po.Train.Resume)
	}
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
	return &train.Plan{Train: o.Train, Dir: o.Train.Out, Examples: Examples}, nil
}

// Train trains with the prepared options (Run without preparing them
// again).
func (p *pipeline) Train(ctx context.Context, _ *train.Plan, report progress.Func) (*train.Result, error) {
	return run(ctx, p.o, report)
}

// Load loads the model directory (LoadModel).
func (p *pipeline) Load(pl *train.Plan) (train.PipelineModel, error) {
	m, o, err := LoadModel(pl.Dir)
	if err != nil {
		return nil, err
	}
	eo := EvalOptions{Split: UtilitySplit, BatchSize: o.Train.EvalBatchSize, Seed: p.po.EvalSeed,
		NoPost: UtilitySplit != p.po.AuditSplit || p.po.AuditLimit > 0}
	return &pipelineModel{p: p, dir: pl.Dir, m: m, o: o, eo: eo}, nil
}

// pipelineModel is a speech model loaded for the pipeline.
type pipelineModel struct {
	p   *pipeline
	dir string
	m   *Model
	o   *Options
	eo  EvalOptions // of the utility split
}

func (pm *pipelineModel) Evaluate(ctx context.Context) (*train.EvalResult, error) {
	return Evaluate(ctx, pm.dir, pm.m, pm.o, pm.eo)
}
func (pm *pipelineModel) Config() nvib.Config { return pm.m.NVDP.Cfg }
func (pm *pipelineModel) Releases() bool      { return pm.m.NVDP.Releases() }

// Audited is the utility evaluation's posteriors when it kept them, else
// those of a second evaluation on the audit split (AuditLimit utterances),
// exported to DIR/audit.
func (pm *pipelineModel) Audited(ctx context.Context, util *train.EvalResult) (*privacy.Posteriors, string, error) {
	if !pm.eo.NoPost {
		return util.Release, util.Posteriors, nil
	}
	po := pm.p.po
	r, err := Evaluate(ctx, pm.dir, pm.m, pm.o, EvalOptions{Split: po.AuditSplit, Limit: po.AuditLimit, BatchSize: pm.o.Train.EvalBatchSize,
		Seed: po.EvalSeed, Out: filepath.Join(pm.dir, "audit")})
	if err != nil {
		return nil, "", err
	}
	return r.Release, r.Posteriors, nil
}

// Report is the report of the model evaluated on the utility split, with
// its clip set or prior per variant; no privacy yet.
func (pm *pipelineModel) Report(util *train.EvalResult) *train.Report {
	t := pm.o.Train
	mcfg := pm.m.NVDP.Cfg
	rep := &train.Report{Task: TaskName, Variant: t.Variant, Mode: t.Mode, Encoder: t.Encoder, Lambda: mcfg.LambdaG, Seed: t.Seed,
		Backend: nn.Backend(), Utility: util.Metrics, UtilitySplit: UtilitySplit}
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
