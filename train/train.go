package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/internal/jsonl"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/schollz/progressbar/v3"
)

// EpochMetrics is one line of DIR/metrics.jsonl.
type EpochMetrics struct {
	Epoch int `json:"epoch"` // 1-based
	Step  int `json:"step"`  // optimizer steps taken so far
	// Train are the epoch means of the training loss parts (nats): loss, task, kl_g, kl_d,
	// and the mean KL scale s(t) and learning rate.
	Train map[string]float64 `json:"train"`
	// Dev are the GLUE metrics on the dev split, and dev_loss (s = 1).
	Dev map[string]float64 `json:"dev"`
	// Selection is the task's selection metric (name in SelectionName) on dev.
	Selection     float64 `json:"selection"`
	SelectionName string  `json:"selection_name"`
	Best          bool    `json:"best"`
	Seconds       float64 `json:"seconds"` // wall time of the epoch (train + dev)
}

// Result summarises a training run.
type Result struct {
	Dir           string            `json:"dir"`
	Task          string            `json:"task"`
	Variant       string            `json:"variant"`
	Backend       string            `json:"backend"`
	Epochs        int               `json:"epochs"` // epochs completed
	Steps         int               `json:"steps"`
	BestEpoch     int               `json:"best_epoch"`
	BestMetric    privacy.JSONFloat `json:"best_metric"`
	MetricName    string            `json:"metric_name"`
	StoppedEarly  bool              `json:"stopped_early"`
	Interrupted   bool              `json:"interrupted"` // stopped by StopAfterSteps (resumable)
	Seconds       float64           `json:"seconds"`
	TrainExamples int               `json:"train_examples"`
	History       []EpochMetrics    `json:"-"` // as in metrics.jsonl
}

// state is the resumable training state saved in the checkpoint metadata.
type state struct {
	Epoch      int        `json:"epoch"`   // 0-based epoch in progress
	Batch      int        `json:"batch"`   // next batch index within the epoch
	Step       int        `json:"step"`    // optimizer steps taken
	BestMetric float64    `json:"best"`    // -Inf before any epoch
	BestEpoch  int        `json:"best_ep"` // 1-based; 0 = none
	BadEpochs  int        `json:"bad"`     // epochs without improvement
	Sums       [6]float64 `json:"sums"`    // loss, task, lg, ld, s, lr sums of the current epoch
	Count      int        `json:"count"`   // batches in Sums
	EpochSecs  float64    `json:"ep_secs"` // wall time spent in the current epoch
	TotalSecs  float64    `json:"secs"`    // wall time of previous sessions
	Done       bool       `json:"done"`
	Stopped    bool       `json:"stopped"`
	RNG        string     `json:"rng"`
}

func (s *state) meta() (map[string]string, error) {
	b, err := json.Marshal(struct {
		*state
		BestMetric string `json:"best"`
	}{s, strconv.FormatFloat(s.BestMetric, 'g', -1, 64)})
	if err != nil {
		return nil, err
	}
	return map[string]string{"train_state": string(b)}, nil
}

func parseState(meta map[string]string) (*state, error) {
	raw, ok := meta["train_state"]
	if !ok {
		return nil, fmt.Errorf("no train_state in checkpoint metadata")
	}
	s := &state{}
	aux := struct {
		*state
		BestMetric string `json:"best"`
	}{state: s}
	if err := json.Unmarshal([]byte(raw), &aux); err != nil {
		return nil, fmt.Errorf("train_state: %w", err)
	}
	v, err := strconv.ParseFloat(aux.BestMetric, 64)
	if err != nil {
		return nil, fmt.Errorf("train_state best: %w", err)
	}
	s.BestMetric = v
	return s, nil
}

// Run trains a model as o says (after o.Defaults and o.Validate) and returns
// the summary. o.Out receives the model directory of the best epoch
// (config.json, nvdp_config.json, model.safetensors, tokenizer files,
// train_options.json), metrics.jsonl, and checkpoint-last.safetensors (weights,
// AdamW state and the loop state) written every CheckpointEach steps and at
// every epoch end. With o.Resume the run continues from that checkpoint with
// the options saved in o.Out (the other fields of o are ignored, except
// StopAfterSteps); the result is identical to an uninterrupted run.
//
// ProgressLogEvery is how often training logs a progress line (step, loss,
// rate, ETA) when it draws no progress bar, e.g. when stderr is redirected.
var ProgressLogEvery = 30 * time.Second

// progress receives the progress bar (nil: none; then a log line every
// ProgressLogEvery). Cancelling ctx stops after
// the current step with a checkpoint and returns ctx.Err().
func Run(ctx context.Context, o Options, progress io.Writer) (*Result, error) {
	stopAfter := o.StopAfterSteps
	ckptPath := filepath.Join(o.Out, CheckpointFile)
	if o.Resume {
		if o.Out == "" {
			return nil, fmt.Errorf("--resume needs --out DIR")
		}
		saved, err := LoadOptions(o.Out)
		if err != nil {
			return nil, fmt.Errorf("--resume: %w", err)
		}
		if !fsutil.IsFile(ckptPath) {
			return nil, fmt.Errorf("--resume: no checkpoint %s", ckptPath)
		}
		out := o.Out
		o = *saved
		o.Resume, o.Out = true, out // the directory may have moved since

	} else {
		o.Resolve()
		if err := o.Validate(); err != nil {
			return nil, err
		}
		if fsutil.IsFile(ckptPath) {
			return nil, fmt.Errorf("--out %s already holds a training run (%s): pass --resume to continue it or choose another directory", o.Out, CheckpointFile)
		}
	}
	// Fail on a missing directory or split before building (and maybe downloading) the encoder.
	if err := o.CheckFiles(); err != nil {
		return nil, err
	}
	b, err := Build(&o)
	if err != nil {
		return nil, err
	}
	task := b.Task
	trainDS, err := glue.Load(o.GlueDir, task, "train", glue.LoadOptions{SkipBadRows: o.SkipBadRows, Limit: o.TrainLimit})
	if err != nil {
		if errors.Is(err, glue.ErrMissingSplit) {
			return nil, fmt.Errorf("task %s has no training split here (%w); train elsewhere and use `nvdp eval`", task.Name, err)
		}
		return nil, err
	}
	devDS, err := glue.Load(o.GlueDir, task, "dev", glue.LoadOptions{SkipBadRows: o.SkipBadRows, Limit: o.DevLimit})
	if err != nil {
		return nil, err
	}
	for _, d := range []*glue.Dataset{trainDS, devDS} {
		if d.Skipped > 0 {
			slog.Warn("skipped malformed rows", "file", d.Path, "rows", d.Skipped, "first", d.SkipErrors)
		}
	}
	trainEnc, err := Encode(b.Tokenizer, trainDS, o.MaxSeqLen)
	if err != nil {
		return nil, err
	}
	devEnc, err := Encode(b.Tokenizer, devDS, o.MaxSeqLen)
	if err != nil {
		return nil, err
	}
	nTrain := trainEnc.Len()
	perEpoch := nTrain / o.BatchSize // drop_last, as the reference
	if perEpoch == 0 {
		return nil, fmt.Errorf("train split has %d examples, fewer than --batch-size %d", nTrain, o.BatchSize)
	}
	total := perEpoch * o.Epochs
	warmup := int(math.Ceil(o.WarmupRatio * float64(total)))

	m := b.Model
	evalLen := EvalPadLen(m, o.MaxSeqLen)
	params := m.Params()
	opt := nn.NewAdamW(o.LR, 0.9, 0.999, 1e-8, o.WeightDecay)
	trainRng, trainSrc := rngFor(o.Seed, streamTrain)
	st := &state{BestMetric: math.Inf(-1)}
	if o.Resume {
		meta, err := nn.LoadCheckpoint(ckptPath, params, opt)
		if err != nil {
			return nil, fmt.Errorf("--resume: %w", err)
		}
		if st, err = parseState(meta); err != nil {
			return nil, fmt.Errorf("--resume %s: %w", ckptPath, err)
		}
		if err := nn.RestoreRNG(st.RNG, trainSrc); err != nil {
			return nil, fmt.Errorf("--resume %s: %w", ckptPath, err)
		}
		if err := truncateMetrics(filepath.Join(o.Out, MetricsFile), st.Epoch); err != nil {
			return nil, err
		}
		if stale, err := atomicfile.RemoveStale(o.Out); err != nil {
			return nil, err
		} else if len(stale) > 0 {
			slog.Warn("removed temporary files of an interrupted write", "files", stale)
		}
		slog.Info("resuming", "dir", o.Out, "epoch", st.Epoch+1, "batch", st.Batch, "step", st.Step)
	} else {
		if err := saveModelFiles(o.Out, b); err != nil {
			return nil, fmt.Errorf("--out %s: %w", o.Out, err)
		}
		if c := o.Calibration(); c != nil {
			if err := SaveCertificate(o.Out, c); err != nil {
				return nil, fmt.Errorf("--out %s: %w", o.Out, err)
			}
		}
		_ = os.Remove(filepath.Join(o.Out, MetricsFile))
	}
	res := &Result{Dir: o.Out, Task: task.Name, Variant: o.Variant, Backend: nn.Backend(), TrainExamples: nTrain, MetricName: task.Metric}
	res.History, _ = ReadMetrics(filepath.Join(o.Out, MetricsFile))
	if st.Done {
		fillResult(res, st)
		return res, nil
	}
	nParams := 0
	for _, p := range params {
		nParams += p.Value.Len()
	}
	slog.Info("training", "task", task.Name, "variant", o.Variant, "mode", o.Mode, "encoder", o.Encoder,
		"backend", nn.Backend(), "params", nParams, "train", nTrain, "dev", devEnc.Len(), "truncated", trainEnc.Truncated,
		"epochs", o.Epochs, "steps", total, "lr", o.LR, "lambda", m.Cfg.LambdaG, "out", o.Out)

	save := func() error {
		rs, err := nn.RNGState(trainSrc)
		if err != nil {
			return err
		}
		st.RNG = rs
		meta, err := st.meta()
		if err != nil {
			return err
		}
		return nn.SaveCheckpoint(ckptPath, params, opt, meta)
	}

	var bar *progressbar.ProgressBar
	if progress != nil {
		bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(progress), progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("steps"), progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(250*time.Millisecond), progressbar.OptionFullWidth(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(progress) }))
		_ = bar.Set(st.Step)
	}
	sessionStart := time.Now()
	epochStart := time.Now().Add(-time.Duration(st.EpochSecs * float64(time.Second)))
	// Without a bar (stderr not a terminal), a progress log line every
	// ProgressLogEvery: step, mean loss since the last line, rate and ETA.
	lastLog, lastStep, lossSince, nSince := time.Now(), st.Step, 0.0, 0
	for st.Epoch < o.Epochs {
		orderRng, _ := rngFor(o.Seed, streamOrder+uint64(st.Epoch))
		perm := orderRng.Perm(nTrain)
		for st.Batch < perEpoch {
			if err := ctx.Err(); err != nil {
				st.EpochSecs = time.Since(epochStart).Seconds()
				st.TotalSecs += time.Since(sessionStart).Seconds()
				if serr := save(); serr != nil {
					return nil, errors.Join(err, serr)
				}
				return nil, fmt.Errorf("training interrupted at step %d (resume with --resume): %w", st.Step, err)
			}
			// dynamic padding even where the release has every component (evalLen
			// fixed): training at the release length changed nothing measurable on
			// SST-2 and cost 2.4-3x the time (docs/training.md)
			in, lab := trainEnc.Batch(perm[st.Batch*o.BatchSize:(st.Batch+1)*o.BatchSize], 0)
			s := m.Cfg.KLScale(st.Step, total)
			out, cache, err := m.Forward(in, lab, nvib.ForwardOptions{Train: true, Rng: trainRng, KLScale: s})
			if err != nil {
				return nil, fmt.Errorf("epoch %d step %d: %w", st.Epoch+1, st.Step+1, err)
			}
			nn.ZeroGrads(params)
			if err := m.Backward(cache); err != nil {
				return nil, fmt.Errorf("epoch %d step %d: backward: %w", st.Epoch+1, st.Step+1, err)
			}
			nn.ClipGradNorm(params, o.GradClip)
			lr := o.LR * nn.LinearWarmupDecay(st.Step, warmup, total)
			opt.Update(params, lr)
			st.Step++
			st.Batch++
			for k, v := range [6]float64{out.Loss, out.Task, out.LG, out.LD, s, lr} {
				st.Sums[k] += v
			}
			st.Count++
			if bar != nil {
				bar.Describe(fmt.Sprintf("epoch %d/%d loss %.4f task %.4f L_G %.4f L_D %.4f", st.Epoch+1, o.Epochs, out.Loss, out.Task, out.LG, out.LD))
				_ = bar.Set(st.Step)
			} else if lossSince, nSince = lossSince+out.Loss, nSince+1; time.Since(lastLog) >= ProgressLogEvery {
				rate := float64(st.Step-lastStep) / time.Since(lastLog).Seconds()
				eta := time.Duration(float64(total-st.Step) / rate * float64(time.Second)).Round(time.Second)
				slog.Info("progress", "epoch", st.Epoch+1, "step", st.Step, "of", total, "loss", lossSince/float64(nSince),
					"steps_per_s", math.Round(rate*100)/100, "eta", eta.String())
				lastLog, lastStep, lossSince, nSince = time.Now(), st.Step, 0, 0
			}
			last := st.Batch == perEpoch
			if !last && o.CheckpointEach > 0 && st.Step%o.CheckpointEach == 0 {
				st.EpochSecs = time.Since(epochStart).Seconds()
				if err := save(); err != nil {
					return nil, err
				}
			}
			if stopAfter > 0 && st.Step >= stopAfter && !last {
				st.EpochSecs = time.Since(epochStart).Seconds()
				st.TotalSecs += time.Since(sessionStart).Seconds()
				if err := save(); err != nil {
					return nil, err
				}
				fillResult(res, st)
				res.Interrupted = true
				return res, nil
			}
		}
		// Epoch end: dev evaluation, model selection, metrics line, checkpoint.
		devRng, _ := rngFor(o.Seed, streamDev+uint64(st.Epoch))
		preds, devLoss, err := Predict(m, devEnc, o.EvalBatchSize, evalLen, devRng)
		if err != nil {
			return nil, fmt.Errorf("epoch %d: dev evaluation: %w", st.Epoch+1, err)
		}
		dev, err := glue.Compute(task, preds, devEnc.Targets)
		if err != nil {
			return nil, fmt.Errorf("epoch %d: dev metrics: %w", st.Epoch+1, err)
		}
		dev["dev_loss"] = devLoss
		sel := dev[task.Metric]
		em := EpochMetrics{Epoch: st.Epoch + 1, Step: st.Step, Dev: dev, Selection: sel, SelectionName: task.Metric,
			Train: map[string]float64{}}
		for k, name := range []string{"loss", "task", "kl_g", "kl_d", "kl_scale", "lr"} {
			em.Train[name] = st.Sums[k] / float64(max(st.Count, 1))
		}
		if sel > st.BestMetric || st.BestEpoch == 0 {
			st.BestMetric, st.BestEpoch, st.BadEpochs = sel, st.Epoch+1, 0
			em.Best = true
			meta := map[string]string{"epoch": strconv.Itoa(st.Epoch + 1), "step": strconv.Itoa(st.Step),
				task.Metric: strconv.FormatFloat(sel, 'g', -1, 64)}
			if err := nn.SaveCheckpoint(filepath.Join(o.Out, WeightsFile), params, nil, meta); err != nil {
				return nil, fmt.Errorf("save best model: %w", err)
			}
		} else {
			st.BadEpochs++
		}
		em.Seconds = time.Since(epochStart).Seconds()
		if err := appendMetrics(filepath.Join(o.Out, MetricsFile), em); err != nil {
			return nil, err
		}
		res.History = append(res.History, em)
		slog.Info("epoch", "epoch", em.Epoch, "step", st.Step, "train_loss", em.Train["loss"], "kl_g", em.Train["kl_g"],
			"kl_d", em.Train["kl_d"], "dev_"+task.Metric, sel, "best_epoch", st.BestEpoch, "seconds", math.Round(em.Seconds))
		st.Epoch++
		st.Batch, st.Count, st.Sums, st.EpochSecs = 0, 0, [6]float64{}, 0
		epochStart = time.Now()
		if o.Patience > 0 && st.BadEpochs >= o.Patience && st.Epoch < o.Epochs {
			slog.Info("early stopping", "epochs_without_improvement", st.BadEpochs, "best_epoch", st.BestEpoch)
			st.Stopped = true
			break
		}
		if st.Epoch < o.Epochs {
			if err := save(); err != nil {
				return nil, err
			}
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	st.Done = true
	st.TotalSecs += time.Since(sessionStart).Seconds()
	if err := save(); err != nil {
		return nil, err
	}
	fillResult(res, st)
	return res, nil
}

// EvalPadLen is the length a model's evaluation batches are padded to:
// maxSeqLen (fixed) for a model whose release has all N = S+1 components
// (nvib.Model.PadsReleased, principled NVDP), so that its predictions are
// computed from the release that the posterior file and the audit describe
// (N = max-seq-len + 1; its outputs depend on the number of padding
// components, and a dynamically padded release would be another release,
// whose N reveals the batch's longest length); 0 (dynamic padding to the
// longest sequence of each batch) otherwise: the baseline's and reference
// mode's predictions do not depend on the padding. Training batches stay
// dynamic (docs/model.md "Padding components", docs/training.md).
func EvalPadLen(m *nvib.Model, maxSeqLen int) int {
	if m.PadsReleased() {
		return maxSeqLen
	}
	return 0
}

func fillResult(res *Result, st *state) {
	res.Epochs = st.Epoch
	res.Steps = st.Step
	res.BestEpoch = st.BestEpoch
	res.BestMetric = privacy.JSONFloat(st.BestMetric)
	res.StoppedEarly = st.Stopped
	res.Seconds = st.TotalSecs
}

// Predict runs the model on every example of e in order (batches of bs,
// padded to fixedLen or dynamically; EvalPadLen gives a model's length) and
// returns the predictions (argmax class as float64, or the raw score for
// regression) and, for labelled splits, the
// mean loss with KL scale 1. NVDP models sample from rng (as the reference at
// evaluation).
func Predict(m *nvib.Model, e *Encoded, bs, fixedLen int, rng *rand.Rand) ([]float64, float64, error) {
	ins, labs := e.Batches(bs, fixedLen)
	preds := make([]float64, 0, e.Len())
	loss, n := 0.0, 0
	for i, in := range ins {
		out, _, err := m.Forward(in, labs[i], nvib.ForwardOptions{Train: false, Rng: rng, KLScale: 1})
		if err != nil {
			return nil, 0, fmt.Errorf("batch %d: %w", i, err)
		}
		if m.Cfg.NumLabels == 1 {
			for _, v := range out.Logits.Data {
				preds = append(preds, float64(v))
			}
		} else {
			preds = append(preds, glue.Argmax(out.Logits.Data, m.Cfg.NumLabels)...)
		}
		if labs[i] != nil {
			loss += out.Loss * float64(in.B)
			n += in.B
		}
	}
	if n > 0 {
		loss /= float64(n)
	}
	return preds, loss, nil
}

func appendMetrics(path string, em EpochMetrics) error {
	return jsonl.Append(path, jsonSafe(em))
}

// jsonSafe replaces NaN/Inf metric values by nil so that the line encodes.
func jsonSafe(em EpochMetrics) map[string]any {
	fix := func(m map[string]float64) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				out[k] = nil
			} else {
				out[k] = v
			}
		}
		return out
	}
	var sel any = em.Selection
	if math.IsNaN(em.Selection) || math.IsInf(em.Selection, 0) {
		sel = nil
	}
	return map[string]any{"epoch": em.Epoch, "step": em.Step, "train": fix(em.Train), "dev": fix(em.Dev),
		"selection": sel, "selection_name": em.SelectionName, "best": em.Best, "seconds": em.Seconds}
}

// ReadMetrics reads DIR/metrics.jsonl (a missing file is an empty history).
// A torn last line (a run killed while appending it) is left out with a
// warning; any other malformed line is an error naming the file and line.
func ReadMetrics(path string) ([]EpochMetrics, error) {
	var out []EpochMetrics
	torn, err := jsonl.Read(path, func(_ int, b []byte) error {
		em, err := parseMetricsLine(b)
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

func parseMetricsLine(b []byte) (EpochMetrics, error) {
	var raw struct {
		EpochMetrics
		Selection *float64            `json:"selection"`
		Train     map[string]*float64 `json:"train"`
		Dev       map[string]*float64 `json:"dev"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return EpochMetrics{}, err
	}
	em := raw.EpochMetrics
	em.Selection = deref(raw.Selection)
	em.Train, em.Dev = derefMap(raw.Train), derefMap(raw.Dev)
	return em, nil
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func derefMap(m map[string]*float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = deref(v)
	}
	return out
}

// truncateMetrics keeps the lines of the first `epochs` epochs (a resumed run
// rewrites the lines of the epoch it repeats; a torn last line goes too) and
// checks that each of them is there: a file with fewer lines than the
// checkpoint's completed epochs (emptied or cut by hand) has lost history that
// a resume cannot recompute, an error naming the file.
func truncateMetrics(path string, epochs int) error {
	seen := make([]bool, epochs+1)
	_, err := jsonl.Truncate(path, func(_ int, b []byte) (bool, error) {
		em, err := parseMetricsLine(b)
		if em.Epoch >= 1 && em.Epoch <= epochs {
			if seen[em.Epoch] {
				return false, fmt.Errorf("epoch %d appears twice", em.Epoch)
			}
			seen[em.Epoch] = true
		}
		return em.Epoch <= epochs, err
	})
	if err != nil {
		return err
	}
	var missing []string
	for e := 1; e <= epochs; e++ {
		if !seen[e] {
			missing = append(missing, strconv.Itoa(e))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: the checkpoint has completed %d epoch(s) but the file has no line for epoch(s) %s: "+
			"the training history is lost and cannot be recomputed; start a new run in another directory", path, epochs, strings.Join(missing, ", "))
	}
	return nil
}
