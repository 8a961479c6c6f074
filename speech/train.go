package speech

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/loop"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/train"
)

// prepare resolves and validates o (or, for a resume, reads the options
// saved in o.Train.Out) and checks the files, before any work. A new run's
// directory is checked last: train.ErrRunExists says that the rest is
// valid.
func prepare(o Options) (Options, error) {
	t := &o.Train
	if t.Resume {
		if t.Out == "" {
			return o, errors.New("resume: no output directory to resume")
		}
		if err := t.RunTime.Validate(); err != nil {
			return o, err
		}
		if err := loop.Check(filepath.Join(t.Out, train.CheckpointFile), true); err != nil {
			return o, err
		}
		saved, err := LoadOptions(t.Out)
		if err != nil {
			return o, fmt.Errorf("resume: %w", err)
		}
		out, stop := t.Out, t.StopAfterSteps
		o = *saved
		o.Train.Resume, o.Train.Out, o.Train.StopAfterSteps = true, out, stop
	} else {
		o.Resolve()
		if err := o.Validate(); err != nil {
			return o, err
		}
		if err := o.CheckFiles(); err != nil {
			return o, err
		}
		return o, loop.Check(filepath.Join(t.Out, train.CheckpointFile), false)
	}
	return o, o.CheckFiles()
}

// Run trains a language identifier as o says and returns the summary, the
// text task's [train.Result], whose metric is [MetricF1] on dev.
//
// o.Train.Out receives the model directory of the best epoch, with
// config.json, nvdp_config.json, speech_options.json and model.safetensors;
// metrics.jsonl; certificate.json with a privacy target; and the resumable
// checkpoint of internal/loop, as for the text task, which o.Train.Resume
// continues bit for bit.
//
// The data are the train split of o.DataDir, TrainLimit utterances taking
// every language in turn, and its dev split, DevLimit utterances, each
// utterance cropped or zero-padded to o.MaxSeconds. Every step runs the
// encoder with dropout, the NVIB layer, a posterior sample and the head, with
// the KL scale s(t). Dev is evaluated at every epoch end, with macro-F1 the
// selection metric. report receives the loop's progress events.
func Run(ctx context.Context, o Options, report progress.Func) (*train.Result, error) {
	p, err := Prepare(o)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx, report)
}

// Prepared is a training run whose options [Prepare] checked once.
type Prepared struct{ o Options }

// Prepare checks the options of a training run once, before any work, as
// [Run] does: a new run's resolved and validated, its output directory free
// of a run and its corpus a directory; a resumed run's read from o.Train.Out,
// which holds a checkpoint. Its errors are Run's.
func Prepare(o Options) (Prepared, error) {
	o, err := prepare(o)
	return Prepared{o}, err
}

// Run trains as [Run] does, with the options [Prepare] checked.
func (p Prepared) Run(ctx context.Context, report progress.Func) (*train.Result, error) {
	return run(ctx, p.o, report)
}

// run is Run of options prepare returned.
func run(ctx context.Context, o Options, report progress.Func) (*train.Result, error) {
	t := &o.Train
	trainDS, err := LoadSplit(ctx, o.DataDir, "train", t.TrainLimit, o.Samples())
	if err != nil {
		return nil, err
	}
	devDS, err := LoadSplit(ctx, o.DataDir, "dev", t.DevLimit, o.Samples())
	if err != nil {
		return nil, err
	}
	m, err := Build(&o)
	if err != nil {
		return nil, err
	}
	nTrain := trainDS.Len()
	if nTrain < t.BatchSize {
		return nil, fmt.Errorf("train split has %d utterances, fewer than the batch size %d", nTrain, t.BatchSize)
	}
	params := m.Params()
	sampleSrc := rngstream.TrainSample.PCG(t.Seed, 0)
	sampleRng := rand.New(sampleSrc)
	sel := train.NewSelection()
	lc := train.LoopConfig(t, params, nTrain, sampleSrc, sel, report)
	total := lc.Steps
	res := &train.Result{Dir: t.Out, Task: TaskName, Variant: t.Variant, Backend: nn.Backend(), TrainExamples: nTrain, MetricName: MetricF1,
		Calibration: m.Calibration}
	var lp *loop.Run
	step := func(st *loop.State, idx []int, lr float64) (float64, string, error) {
		in, labels := trainDS.Batch(idx)
		s := m.NVDP.Cfg.KLScale(st.Step, total)
		return train.TrainStep(sel, s, lr, sampleRng, func(fo nvib.ForwardOptions) (*nvib.Output, *Cache, error) { return m.Forward(in, labels, fo) }, m.Backward)
	}
	endEpoch := func(st *loop.State) (bool, error) {
		pr, err := Predict(m, devDS, t.EvalBatchSize, rngstream.TrainDev.Rand(t.Seed, st.Epoch), false)
		if err != nil {
			return false, fmt.Errorf("dev evaluation: %w", err)
		}
		dev := maps.Clone(pr.Metrics)
		dev["dev_loss"] = pr.Loss // as the text task's metrics line
		return train.CloseEpoch(t, lp, st, sel, dev, MetricF1, params, res)
	}
	lc.StopAfter, lc.Step, lc.EndEpoch = t.StopAfterSteps, step, endEpoch
	lp, err = loop.Open(lc)
	if err != nil {
		return nil, err
	}
	st := lp.State()
	if t.Resume {
		if res.History, err = train.ReadMetrics(filepath.Join(t.Out, train.MetricsFile)); err != nil {
			return nil, err
		}
	} else {
		if err := os.MkdirAll(t.Out, 0o755); err != nil {
			return nil, err
		}
		if err := saveModelFiles(t.Out, &o, m); err != nil {
			return nil, fmt.Errorf("output directory %s: %w", t.Out, err)
		}
		if c := m.Calibration; c != nil {
			if err := model.SaveCalibration(t.Out, c); err != nil {
				return nil, fmt.Errorf("output directory %s: %w", t.Out, err)
			}
		}
	}
	if !st.Done {
		slog.Info("training", "task", TaskName, "variant", t.Variant, "mode", t.Mode, "encoder", t.Encoder, "backend", nn.Backend(),
			"train", nTrain, "dev", devDS.Len(), "cropped", trainDS.Cropped, "samples", trainDS.T,
			"frames", t.MaxSeqLen, "epochs", t.Epochs, "steps", total, "lr", t.LR, "lambda", m.NVDP.Cfg.LambdaG, "out", t.Out)
		if err := lp.Train(ctx); err != nil {
			return nil, err
		}
	}
	res.Epochs, res.Steps, res.Seconds, res.StoppedEarly, res.Interrupted = st.Epoch, st.Step, st.Seconds, st.Stopped, !st.Done
	res.BestEpoch, res.BestMetric = sel.BestEpoch, jsonfloat.Float(sel.BestMetric)
	return res, nil
}

// Prediction is the model's output on a split: the predicted languages, the
// metrics [MetricAccuracy] and [MetricF1], the mean loss at KL scale 1 in
// nats, and, when asked, the batch posteriors of the release.
type Prediction struct {
	Preds      []int
	Metrics    map[string]float64
	Loss       float64
	Posteriors []*nvib.Posterior
}

// Predict runs the model on every utterance of d in order, in batches of bs
// and in evaluation mode, sampling the release from rng as the text task
// does, and scores the predictions. keepPosteriors keeps every batch's
// clipped posterior, the release the audit describes, with N = F + 1 for
// every utterance.
func Predict(m *Model, d *Dataset, bs int, rng *rand.Rand, keepPosteriors bool) (*Prediction, error) {
	if bs < 1 {
		return nil, fmt.Errorf("evaluation batch size %d, want >= 1", bs)
	}
	pr := &Prediction{Preds: make([]int, 0, d.Len())}
	loss := 0.0
	for lo := 0; lo < d.Len(); lo += bs {
		idx := make([]int, 0, bs)
		for i := lo; i < min(lo+bs, d.Len()); i++ {
			idx = append(idx, i)
		}
		in, labels := d.Batch(idx)
		out, _, err := m.Forward(in, labels, nvib.ForwardOptions{Rng: rng, KLScale: 1})
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", lo/bs, err)
		}
		for _, p := range glue.Argmax(out.Logits.Data, m.NVDP.Cfg.NumLabels) {
			pr.Preds = append(pr.Preds, int(p))
		}
		loss += out.Loss * float64(len(idx))
		if keepPosteriors && out.Posterior != nil {
			pr.Posteriors = append(pr.Posteriors, out.Posterior)
		}
	}
	acc, f1, err := Scores(pr.Preds, d.Labels)
	if err != nil {
		return nil, err
	}
	pr.Metrics, pr.Loss = map[string]float64{MetricAccuracy: acc, MetricF1: f1}, loss/float64(d.Len())
	return pr, nil
}
