// Package train runs the GLUE experiments end to end, as docs/training.md
// describes: fine-tuning a baseline, NVDP, NVDP-Clipped or gaussian-mechanism
// model of package nvib on a task of package glue; dev evaluation every epoch
// with early stopping; resumable checkpoints; evaluation with GLUE submission
// files and posterior export; and the train, evaluate and audit pipeline
// behind `nvdp run`.
//
// The loop follows the released code, ref §8: AdamW with weight decay 0;
// linear warm-up, then linear decay of the learning rate over all optimizer
// steps; the KL schedule s(t) of nvib.Config.KLScale; gradient clipping by
// global norm 1.0; shuffled training batches with drop_last; dev evaluation
// every epoch on the task's selection metric; early stopping with patience 3;
// and the best checkpoint kept. Unlike the reference, which always pads to
// max_length, batches are padded dynamically to their longest sequence. The
// posterior file for the audit is padded to the fixed length max-seq-len, so
// that every posterior has N = max-seq-len + 1 aligned components.
//
// The model trained, the options it is trained and saved with, and the files
// of its directory are package model's: [model.Options], [model.Build],
// [model.Load] and [model.SaveFiles]. This package is the training run
// itself, its evaluation, pipeline and report.
package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/jsonl"
	"github.com/nvdp-project/nvdp/internal/loop"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/progress"
)

// File names a training run writes in its output directory, beside the model
// directory's files: [model.OptionsFile], [model.WeightsFile],
// [model.CertificateFile] and those of [model.SaveFiles].
const (
	MetricsFile    = "metrics.jsonl"
	StepsFile      = "steps.jsonl" // model.Options.LogSteps: StepLoss lines
	CheckpointFile = "checkpoint-last.safetensors"
	StateFile      = "train_state.json"
)

// StepLoss is one line of StepsFile: the optimizer step, counted from 1; its
// loss in nats, the batch mean of the task term plus s(t) lambda times the KL
// terms; and s(t).
type StepLoss struct {
	Step    int     `json:"step"`
	Loss    float64 `json:"loss"`
	KLScale float64 `json:"kl_scale"`
}

// EpochMetrics is one line of DIR/metrics.jsonl. Non-finite values, such as
// a diverged loss or the correlation of constant predictions, are written as
// jsonfloat's "NaN", "Infinity" or "-Infinity".
type EpochMetrics struct {
	Epoch int `json:"epoch"` // 1-based
	Step  int `json:"step"`  // optimizer steps taken so far
	// Train are the epoch means of the training loss parts (nats): loss, task, kl_g, kl_d,
	// and the mean KL scale s(t) and learning rate.
	Train map[string]jsonfloat.Float `json:"train"`
	// Dev are the GLUE metrics on the dev split, and dev_loss (s = 1).
	Dev map[string]jsonfloat.Float `json:"dev"`
	// Selection is the task's selection metric (name in SelectionName) on dev.
	Selection     jsonfloat.Float `json:"selection"`
	SelectionName string          `json:"selection_name"`
	Best          bool            `json:"best"`
	Seconds       float64         `json:"seconds"` // wall time of the epoch (train + dev)
}

// UnmarshalJSON reads a metrics line. Lines written before non-finite values
// were spelled out have null in their place, which reads as NaN.
func (em *EpochMetrics) UnmarshalJSON(b []byte) error {
	type plain EpochMetrics
	aux := struct {
		*plain
		Train map[string]*jsonfloat.Float `json:"train"`
		Dev   map[string]*jsonfloat.Float `json:"dev"`
	}{plain: (*plain)(em)}
	em.Selection = jsonfloat.Float(math.NaN()) // null leaves it
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	em.Train, em.Dev = nullAsNaN(aux.Train), nullAsNaN(aux.Dev)
	return nil
}

func nullAsNaN(m map[string]*jsonfloat.Float) map[string]jsonfloat.Float {
	out := make(map[string]jsonfloat.Float, len(m))
	for k, v := range m {
		out[k] = jsonfloat.Float(math.NaN())
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

// Result summarises a training run.
type Result struct {
	Dir           string          `json:"dir"`
	Task          string          `json:"task"`
	Variant       string          `json:"variant"`
	Backend       string          `json:"backend"`
	Epochs        int             `json:"epochs"` // epochs completed
	Steps         int             `json:"steps"`
	BestEpoch     int             `json:"best_epoch"`
	BestMetric    jsonfloat.Float `json:"best_metric"` // -Infinity before the first epoch ends
	MetricName    string          `json:"metric_name"`
	StoppedEarly  bool            `json:"stopped_early"`
	Interrupted   bool            `json:"interrupted"` // stopped by StopAfterSteps (resumable)
	Seconds       float64         `json:"seconds"`
	TrainExamples int             `json:"train_examples"`
	History       []EpochMetrics  `json:"-"` // as in metrics.jsonl
	// Calibration is the calibration this run made for its privacy target
	// (model.TextModel.Calibration, written to certificate.json); nil when it
	// made none (no target, or a resumed run, calibrated when it started).
	Calibration *model.Calibration `json:"-"`
}

// The run's own part of the checkpoint state (internal/loop holds the
// position, the times and the sampling stream under the same key).
const (
	stateKey  = "train_state"
	sampleKey = "rng" // TrainSample's state
)

// Selection is a trainer's resumable state beyond the loop's: model
// selection, early stopping and the current epoch's loss sums. The text task
// and package speech use it, and it is saved in the checkpoint's state
// object. Start from [NewSelection].
type Selection struct {
	BestMetric float64            `json:"-"`       // -Inf before any epoch; JSON "best", a string (below)
	BestEpoch  int                `json:"best_ep"` // 1-based; 0 = none
	BadEpochs  int                `json:"bad"`     // epochs without improvement
	Sums       [6]jsonfloat.Float `json:"sums"`    // loss, task, lg, ld, s, lr sums of the current epoch
	Count      int                `json:"count"`   // batches in Sums
}

// trainParts names Sums in metrics.jsonl's "train" object.
var trainParts = [6]string{"loss", "task", "kl_g", "kl_d", "kl_scale", "lr"}

// NewSelection returns the state of a run before its first epoch.
func NewSelection() *Selection { return &Selection{BestMetric: math.Inf(-1)} }

// Add counts one training batch: its loss parts in nats, KL scale s and
// learning rate lr. It returns the batch's loss and the detail of its
// progress event, "task ... L_G ... L_D ...".
func (s *Selection) Add(out *nvib.Output, scale, lr float64) (float64, string) {
	for k, v := range [6]float64{out.Loss, out.Task, out.LG, out.LD, scale, lr} {
		s.Sums[k] += jsonfloat.Float(v)
	}
	s.Count++
	return out.Loss, fmt.Sprintf("task %.4f L_G %.4f L_D %.4f", out.Task, out.LG, out.LD)
}

// TrainStep takes one training step on a batch and returns the loss and the
// progress detail for the loop. It runs fwd forward in training mode, with
// NVDP sampling from rng at KL scale s, then bwd backward, and counts the
// batch in sel.
func TrainStep[C any](sel *Selection, s, lr float64, rng *rand.Rand, fwd func(nvib.ForwardOptions) (*nvib.Output, C, error), bwd func(C) error) (float64, string, error) {
	out, cache, err := fwd(nvib.ForwardOptions{Train: true, Rng: rng, KLScale: s})
	if err != nil {
		return 0, "", err
	}
	if err := bwd(cache); err != nil {
		return 0, "", fmt.Errorf("backward: %w", err)
	}
	loss, detail := sel.Add(out, s, lr)
	return loss, detail, nil
}

// CloseEpoch ends epoch st.Epoch of a run of o once the dev metrics are
// computed; metric is the selection metric among them. It appends the
// metrics line, [Selection.EndEpoch] with the epoch's wall time, to the run's
// log and to res.History; saves the parameters to o.Out/model.safetensors
// when the metric improved; logs a line; and returns whether early stopping,
// [Selection.Stop], ends the run.
//
// It returns an error when writing the model or the log fails.
func CloseEpoch(o *model.Options, run *loop.Run, st *loop.State, sel *Selection, dev map[string]float64, metric string, params []*nn.Param, res *Result) (bool, error) {
	em := sel.EndEpoch(st.Epoch+1, st.Step, dev, metric)
	best := dev[metric]
	if em.Best {
		meta := map[string]string{"epoch": strconv.Itoa(st.Epoch + 1), "step": strconv.Itoa(st.Step),
			metric: strconv.FormatFloat(best, 'g', -1, 64)}
		if err := nn.SaveCheckpoint(filepath.Join(o.Out, model.WeightsFile), params, nil, meta); err != nil {
			return false, fmt.Errorf("save best model: %w", err)
		}
	}
	em.Seconds = run.EpochSeconds()
	if err := run.Log(em); err != nil {
		return false, err
	}
	res.History = append(res.History, em)
	slog.Info("epoch", "epoch", em.Epoch, "step", st.Step, "train_loss", float64(em.Train["loss"]), "kl_g", float64(em.Train["kl_g"]),
		"kl_d", float64(em.Train["kl_d"]), "dev", dev, "best_epoch", sel.BestEpoch, "seconds", math.Round(em.Seconds))
	if sel.Stop(o.Patience, st.Epoch+1, o.Epochs) {
		slog.Info("early stopping", "epochs_without_improvement", sel.BadEpochs, "best_epoch", sel.BestEpoch)
		return true, nil
	}
	return false, nil
}

// LoopConfig returns the internal/loop configuration of a training run of o
// on examples training examples with parameters params. Package speech trains
// with it too.
//
// An epoch has Examples / BatchSize batches, dropping the last partial one.
// The configuration holds AdamW at o.LR with o.WeightDecay and [nn.AdamEps];
// the linear warm-up over o.WarmupRatio of all steps; o.GradClip; the data
// order of rngstream.TrainOrder; the sampling stream src; the selection state
// sel; checkpoints every o.CheckpointEach steps and at epoch ends in o.Out;
// and resume as o.Resume. The caller sets Step, EndEpoch and StopAfter.
func LoopConfig(o *model.Options, params []*nn.Param, examples int, src *rand.PCG, sel *Selection, report progress.Func) loop.Config {
	total := examples / o.BatchSize * o.Epochs
	return loop.Config{Stage: "train", Checkpoint: filepath.Join(o.Out, CheckpointFile), StateKey: stateKey,
		Metrics: filepath.Join(o.Out, MetricsFile), LineUnit: "epoch",
		Params: params, LR: o.LR, WeightDecay: o.WeightDecay, Eps: nn.AdamEps, Warmup: int(math.Ceil(o.WarmupRatio * float64(total))),
		Steps: total, GradClip: o.GradClip, Examples: examples, BatchSize: o.BatchSize,
		Order:   func(e int) *rand.Rand { return rngstream.TrainOrder.Rand(o.Seed, e) },
		Sources: []loop.Source{{Key: sampleKey, RNG: src}}, CheckpointEvery: o.CheckpointEach, CheckpointEpochs: true,
		Resume: o.Resume, Progress: report, State: sel}
}

// EndEpoch closes epoch, counted from 1, at step with the dev metrics and the
// selection metric's name. It returns the metrics line, with the epoch's
// training means and Best set when the metric improved or for the first
// epoch, and updates the state: the best metric and the epochs without
// improvement, with the sums reset. The caller saves the best model when
// em.Best and sets em.Seconds.
func (s *Selection) EndEpoch(epoch, step int, dev map[string]float64, metric string) EpochMetrics {
	best := dev[metric]
	em := EpochMetrics{Epoch: epoch, Step: step, Dev: map[string]jsonfloat.Float{}, Selection: jsonfloat.Float(best),
		SelectionName: metric, Train: map[string]jsonfloat.Float{}}
	for k, v := range dev {
		em.Dev[k] = jsonfloat.Float(v)
	}
	for k, name := range trainParts {
		em.Train[name] = s.Sums[k] / jsonfloat.Float(max(s.Count, 1))
	}
	if best > s.BestMetric || s.BestEpoch == 0 {
		s.BestMetric, s.BestEpoch, s.BadEpochs = best, epoch, 0
		em.Best = true
	} else {
		s.BadEpochs++
	}
	s.Sums, s.Count = [6]jsonfloat.Float{}, 0
	return em
}

// Stop reports whether early stopping ends the run after epoch, counted from
// 1, of epochs: after patience > 0 epochs without improvement, with epochs
// left.
func (s *Selection) Stop(patience, epoch, epochs int) bool {
	return patience > 0 && s.BadEpochs >= patience && epoch < epochs
}

// MarshalJSON writes BestMetric as the string strconv.FormatFloat gives,
// exact and with ±Inf and NaN too, as train checkpoints always have.
func (s *Selection) MarshalJSON() ([]byte, error) {
	type plain Selection
	return json.Marshal(struct {
		*plain
		Best string `json:"best"`
	}{(*plain)(s), strconv.FormatFloat(s.BestMetric, 'g', -1, 64)})
}

func (s *Selection) UnmarshalJSON(b []byte) error {
	type plain Selection
	aux := struct {
		*plain
		Best string `json:"best"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	v, err := strconv.ParseFloat(aux.Best, 64)
	if err != nil {
		return fmt.Errorf("best: %w", err)
	}
	s.BestMetric = v
	return nil
}

// Errors of [Run] for an output directory that holds a run when
// model.Options.Resume is not set, or holds none to resume.
var (
	ErrRunExists    = loop.ErrRunExists
	ErrNoCheckpoint = loop.ErrNoCheckpoint
)

// Run trains a model as o says, after o.Defaults and o.Validate, and returns
// the summary.
//
// o.Out receives the model directory of the best epoch, with config.json,
// nvdp_config.json, model.safetensors, the tokenizer files and
// train_options.json; metrics.jsonl; and checkpoint-last.safetensors, which
// holds the weights, the AdamW state and the loop state, written every
// CheckpointEach steps and at every epoch end.
//
// With o.Resume the run continues from that checkpoint with the options
// saved in o.Out, validated again. The other fields of o are ignored, except
// StopAfterSteps and the run-time Device, HostNoise and LogSteps;
// [model.Differences] lists what a caller's options would change. The result
// is identical to an uninterrupted run.
//
// A directory that holds a checkpoint without o.Resume is [ErrRunExists];
// o.Resume without one is [ErrNoCheckpoint]. A step that fails, with a
// non-finite loss or posterior as when a learning rate too large diverges,
// ends the run with an error naming its epoch, step and learning rate; the
// checkpoint written before stays as it was, and the error says which step it
// holds.
//
// The training loop is internal/loop's. report, when not nil, receives a
// progress event per step, with stage "train", unit "steps", the step's loss
// and detail "epoch e/E task ... L_G ... L_D ...". StopAfterSteps stops after
// that many steps in total, with a checkpoint and Result.Interrupted set.
// Cancelling ctx stops before the next step with a checkpoint and returns a
// [*loop.Interrupted] error that unwraps to ctx.Err() and says how to
// continue.
func Run(ctx context.Context, o model.Options, report progress.Func) (*Result, error) {
	c, err := runOptions(o)
	if err != nil {
		return nil, err
	}
	return RunChecked(ctx, c, report)
}

// RunChecked is Run of options checked once (model.Check for a new run in
// a directory without a checkpoint, model.Resume for o.Resume), which it
// does not check again.
func RunChecked(ctx context.Context, c model.Checked, report progress.Func) (*Result, error) {
	return runChecked(ctx, c, nil, report)
}

// runChecked is RunChecked with the dev split already read as the
// training reads it (glue_dir, skip_bad_rows, dev_limit; nil: read here).
func runChecked(ctx context.Context, c model.Checked, dev *glue.Dataset, report progress.Func) (*Result, error) {
	o := c.Options()
	if !o.Resume {
		if err := loop.Check(filepath.Join(o.Out, CheckpointFile), false); err != nil {
			return nil, err
		}
	}
	t, err := newTrainer(c, dev, report)
	if err != nil {
		return nil, err
	}
	defer t.close()
	if t.run, err = loop.Open(t.lc); err != nil {
		if o.Resume {
			return nil, fmt.Errorf("resume: %w", err)
		}
		return nil, err
	}
	st := t.run.State()
	if err := t.prepareDir(st); err != nil {
		return nil, err
	}
	if !st.Done {
		t.logStart()
		err := t.run.Train(ctx)
		if o.RadiusSchedule != nil {
			t.m.SetClipRadius(t.finalRadius)
		}
		if err != nil {
			return nil, keptCheckpoint(err, t.run.CheckpointStep(), t.lc.Checkpoint)
		}
	}
	res := t.res
	res.Epochs, res.Steps, res.Seconds, res.StoppedEarly, res.Interrupted = st.Epoch, st.Step, st.Seconds, st.Stopped, !st.Done
	res.BestEpoch, res.BestMetric = t.sel.BestEpoch, jsonfloat.Float(t.sel.BestMetric)
	return res, nil
}

// Prepare checks the options of a training run once, before any work, and
// returns them for [RunChecked]: a new run's options resolved and validated
// ([model.Check]), their files checked ([model.Options.CheckFiles]) and
// o.Out free of a run ([ErrRunExists]); a resumed run's the options saved
// in o.Out ([model.Resume]), which holds a checkpoint ([ErrNoCheckpoint]).
// The caller adds the device with [model.Checked.OnDevice].
func Prepare(o model.Options) (model.Checked, error) {
	c, err := runOptions(o)
	if err != nil || o.Resume {
		return c, err
	}
	o = c.Options()
	if err := o.CheckFiles(); err != nil {
		return model.Checked{}, err
	}
	if err := loop.Check(filepath.Join(o.Out, CheckpointFile), false); err != nil {
		return model.Checked{}, err
	}
	return c, nil
}

// runOptions are the options Run trains with, checked once: o resolved
// and validated (model.Check), or, resuming, the options saved in o.Out
// (validated again by model.Resume: the file may have been edited or
// written by a build with other checks) with o's directory, StopAfterSteps
// and run-time choices (Device, HostNoise, LogSteps: not in the saved
// options).
func runOptions(o model.Options) (model.Checked, error) {
	if !o.Resume {
		return model.Check(o)
	}
	if o.Out == "" {
		return model.Checked{}, errors.New("resume: no output directory (Options.Out) to resume")
	}
	if err := o.RunTime.Validate(); err != nil {
		return model.Checked{}, err
	}
	if err := loop.Check(filepath.Join(o.Out, CheckpointFile), true); err != nil {
		return model.Checked{}, err
	}
	c, err := model.Resume(o)
	if err != nil {
		return model.Checked{}, fmt.Errorf("resume: %w", err)
	}
	return c, nil
}

// Predict runs the model on every example of e in order and returns the
// predictions and, for labelled splits, the mean loss with KL scale 1.
//
// It runs batches of bs examples, padded to fixedLen or dynamically;
// [model.EvalPadLen] gives a model's length. A prediction is the argmax
// class as a float64, or the raw score for regression. NVDP models sample
// from rng, as the reference does at evaluation.
func Predict(m *nvib.Model, e *model.Encoded, bs, fixedLen int, rng *rand.Rand) ([]float64, float64, error) {
	return predict(cpuForward(m), m.Cfg.NumLabels, e, bs, fixedLen, rng)
}

// evalForward runs one evaluation batch (no dropout, the posterior's draws
// from rng): the logits [B * labels] and, with labels, the batch's mean loss.
type evalForward func(in encoder.Input, lab *nvib.Labels, rng *rand.Rand) (logits []float32, loss float64, err error)

// cpuForward is evalForward on the CPU engine.
func cpuForward(m *nvib.Model) evalForward {
	return func(in encoder.Input, lab *nvib.Labels, rng *rand.Rand) ([]float32, float64, error) {
		out, _, err := m.Forward(in, lab, nvib.ForwardOptions{Train: false, Rng: rng, KLScale: 1})
		if err != nil {
			return nil, 0, err
		}
		return out.Logits.Data, out.Loss, nil
	}
}

// predict is Predict with the forward pass fwd (the CPU's or the device's)
// of a model with numLabels outputs.
func predict(fwd evalForward, numLabels int, e *model.Encoded, bs, fixedLen int, rng *rand.Rand) ([]float64, float64, error) {
	ins, labs := e.Batches(bs, fixedLen)
	preds := make([]float64, 0, e.Len())
	loss, n := 0.0, 0
	for i, in := range ins {
		logits, l, err := fwd(in, labs[i], rng)
		if err != nil {
			return nil, 0, fmt.Errorf("batch %d: %w", i, err)
		}
		if numLabels == 1 {
			for _, v := range logits {
				preds = append(preds, float64(v))
			}
		} else {
			preds = append(preds, glue.Argmax(logits, numLabels)...)
		}
		if labs[i] != nil {
			loss += l * float64(in.B)
			n += in.B
		}
	}
	if n > 0 {
		loss /= float64(n)
	}
	return preds, loss, nil
}

// ReadMetrics reads DIR/metrics.jsonl; a missing file is an empty history.
// A torn last line, from a run killed while appending it, is left out with a
// warning; any other malformed line is an error naming the file and line.
func ReadMetrics(path string) ([]EpochMetrics, error) {
	var out []EpochMetrics
	torn, err := jsonl.Read(path, func(_ int, b []byte) error {
		var em EpochMetrics
		err := json.Unmarshal(b, &em)
		out = append(out, em)
		return err
	})
	if err != nil {
		return nil, err
	}
	if torn {
		slog.Warn("metrics file ends in a torn line (a run killed while writing it); it is left out", "file", path)
	}
	return out, nil
}

// keptCheckpoint is the error of a training loop that stopped on err (a
// step's error, e.g. a non-finite loss, or an evaluation's) with what the run
// directory keeps: the checkpoint of step (-1: none yet) at path, which a
// resume continues from. A cancellation (*loop.Interrupted) says so itself
// and passes unchanged.
func keptCheckpoint(err error, step int, path string) error {
	var stopped *loop.Interrupted
	switch {
	case errors.As(err, &stopped):
		return err
	case step < 0:
		return fmt.Errorf("training: %w (no checkpoint written yet)", err)
	}
	return fmt.Errorf("training: %w; the checkpoint of step %d stays in %s", err, step, path)
}
