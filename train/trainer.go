package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/loop"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/progress"
)

// trainer is one run of Run: the model, its encoded splits, the loop's
// configuration with the step and the end of an epoch, and the result.
type trainer struct {
	o                *model.Options // the model's (model.Build may calibrate it)
	b                *model.TextModel
	m                *nvib.Model
	task             *glue.Task
	trainEnc, devEnc *model.Encoded
	evalLen          int // the evaluation's padding length (model.EvalPadLen)
	params           []*nn.Param
	sampleRng        *rand.Rand
	sel              *Selection
	lc               loop.Config
	fwd              evalForward
	dev              *deviceTrainer // nil: the CPU
	res              *Result
	run              *loop.Run
	// finalRadius is the clip radius of the model as configured (C_mu, or
	// the gaussian C): what a radius schedule ends at and every evaluation
	// uses.
	finalRadius float64
	stepsFile   *os.File // StepsFile, opened at the first step (model.Options.LogSteps)
}

// newTrainer builds the model of c (model.Build: the calibration step
// included), reads and encodes the train and dev splits, and configures the
// loop (on o.Device when set), with every input checked before the output
// directory is written. The caller closes it.
func newTrainer(c model.Checked, dev *glue.Dataset, report progress.Func) (*trainer, error) {
	o := c.Options()
	// Fail on a missing directory or split before building (and maybe downloading) the encoder.
	if err := o.CheckFiles(); err != nil {
		return nil, err
	}
	b, err := model.Build(c, report)
	if err != nil {
		return nil, err
	}
	t := &trainer{o: b.Options, b: b, m: b.Model, task: b.Task}
	if err := t.loadSplits(dev); err != nil {
		return nil, err
	}
	nTrain := t.trainEnc.Len()
	t.evalLen = model.EvalPadLen(t.m, o.MaxSeqLen)
	t.params = t.m.Params()
	sampleSrc := rngstream.TrainSample.PCG(o.Seed, 0)
	t.sampleRng = rand.New(sampleSrc)
	t.sel = NewSelection()
	t.lc = LoopConfig(t.o, t.params, nTrain, sampleSrc, t.sel, report)
	t.fwd = cpuForward(t.m)
	if err := t.setupNoise(); err != nil {
		return nil, err
	}
	t.res = &Result{Dir: o.Out, Task: t.task.Name, Variant: o.Variant, Backend: backendName(o.Device), TrainExamples: nTrain, MetricName: t.task.Metric,
		Calibration: b.Calibration}
	t.finalRadius = t.m.ClipRadius()
	t.lc.StopAfter, t.lc.Step, t.lc.EndEpoch = o.StopAfterSteps, t.step, t.endEpoch
	return t, nil
}

// loadSplits reads and encodes the train and dev splits (devDS: dev
// already read, by the pipeline's plan; nil: read here). A train split
// smaller than one batch is an error: batches drop the last partial one, as
// the reference.
func (t *trainer) loadSplits(devDS *glue.Dataset) error {
	o := t.o
	trainDS, err := glue.Load(o.GlueDir, t.task, "train", glue.LoadOptions{SkipBadRows: o.SkipBadRows, Limit: o.TrainLimit})
	if err != nil {
		if errors.Is(err, glue.ErrMissingSplit) {
			return model.NoTrainSplit(t.task, err)
		}
		return err
	}
	read := []*glue.Dataset{trainDS}
	if devDS == nil {
		if devDS, err = glue.Load(o.GlueDir, t.task, "dev", glue.LoadOptions{SkipBadRows: o.SkipBadRows, Limit: o.DevLimit}); err != nil {
			return err
		}
		read = append(read, devDS)
	}
	for _, d := range read { // a dev split given was logged by its reader (model.LoadSplit)
		if d.Skipped > 0 {
			slog.Warn("skipped malformed rows", "file", d.Path, "rows", d.Skipped, "first", d.SkipErrors)
		}
	}
	if t.trainEnc, err = model.Encode(t.b.Tokenizer, trainDS, o.MaxSeqLen); err != nil {
		return err
	}
	if t.devEnc, err = model.Encode(t.b.Tokenizer, devDS, o.MaxSeqLen); err != nil {
		return err
	}
	if n := t.trainEnc.Len(); n < o.BatchSize {
		return fmt.Errorf("train split has %d examples, fewer than the batch size %d", n, o.BatchSize)
	}
	return nil
}

// setupNoise puts the run on o.Device (its optimizer, its forward pass and
// its noise stream in the checkpoint), or, with HostNoise on the CPU, draws
// the device's stream on the host as the device draws it.
func (t *trainer) setupNoise() error {
	o := t.o
	switch {
	case o.Device != nil:
		dev, err := newDeviceTrainer(o.Device, t.m, t.params, o.Seed, o.HostNoise)
		if err != nil {
			return err
		}
		t.dev, t.fwd = dev, dev.forwardEval
		t.lc.Device = dev.opt
		t.lc.Sources = append(t.lc.Sources, loop.Source{Key: sampleDeviceKey, RNG: dev.g})
	case o.HostNoise:
		g := dnn.NewPhiloxStream(rngstream.TrainSampleDevice, o.Seed, 0)
		t.sampleRng = rand.New(g)
		t.lc.Sources = append(t.lc.Sources, loop.Source{Key: sampleDeviceKey, RNG: g})
	}
	return nil
}

// close releases the device and the step log.
func (t *trainer) close() {
	if t.dev != nil {
		t.dev.close()
	}
	if t.stepsFile != nil {
		t.stepsFile.Close()
	}
}

// step is one training batch: forward with dropout and NVDP sampling at KL
// scale s(t), backward; the epoch's loss sums.
func (t *trainer) step(st *loop.State, idx []int, lr float64) (float64, string, error) {
	// dynamic padding even where the release has every component (evalLen
	// fixed): training at the release length changed nothing measurable on
	// SST-2 and cost 2.4-3x the time (docs/training.md)
	in, lab := t.trainEnc.Batch(idx, 0)
	total := t.lc.Steps
	s := t.m.Cfg.KLScale(st.Step, total)
	if t.o.RadiusSchedule != nil {
		t.m.SetClipRadius(t.o.RadiusSchedule.Radius(st.Step, total, t.finalRadius))
	}
	var loss float64
	var detail string
	var err error
	if t.dev != nil {
		loss, detail, err = TrainStep(t.sel, s, lr, nil, func(fo nvib.ForwardOptions) (*nvib.Output, struct{}, error) { return t.dev.step(in, lab, fo.KLScale) },
			func(struct{}) error { return nil })
	} else {
		loss, detail, err = TrainStep(t.sel, s, lr, t.sampleRng, func(fo nvib.ForwardOptions) (*nvib.Output, *nvib.Cache, error) { return t.m.Forward(in, lab, fo) }, t.m.Backward)
	}
	if err != nil { // e.g. a non-finite loss: weights a too large learning rate made diverge
		return 0, "", fmt.Errorf("learning rate %.4g: %w", lr, err)
	}
	return loss, detail, t.logStep(StepLoss{Step: st.Step + 1, Loss: loss, KLScale: s})
}

// logStep appends a line to StepsFile (model.Options.LogSteps), opened at
// the first step (the output directory exists by then); a resumed run
// appends, so the steps re-run after its checkpoint appear twice.
func (t *trainer) logStep(l StepLoss) error {
	if !t.o.LogSteps {
		return nil
	}
	if t.stepsFile == nil {
		f, err := os.OpenFile(filepath.Join(t.o.Out, StepsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("step log: %w", err)
		}
		t.stepsFile = f
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	_, err = t.stepsFile.Write(append(b, '\n'))
	return err
}

// endEpoch: dev evaluation, model selection, metrics line, early stopping.
func (t *trainer) endEpoch(st *loop.State) (bool, error) {
	if t.o.RadiusSchedule != nil {
		t.m.SetClipRadius(t.finalRadius) // evaluate the model that is saved and certified
	}
	preds, devLoss, err := predict(t.fwd, t.m.Cfg.NumLabels, t.devEnc, t.o.EvalBatchSize, t.evalLen, rngstream.TrainDev.Rand(t.o.Seed, st.Epoch))
	if err != nil {
		return false, fmt.Errorf("dev evaluation: %w", err)
	}
	if err := t.run.Pull(); err != nil { // the best model is saved from the host parameters
		return false, err
	}
	dev, err := glue.Compute(t.task, preds, t.devEnc.Targets)
	if err != nil {
		return false, fmt.Errorf("dev metrics: %w", err)
	}
	dev["dev_loss"] = devLoss
	return CloseEpoch(t.o, t.run, st, t.sel, dev, t.task.Metric, t.params, t.res)
}

// prepareDir reads the metrics history of a resumed run, or writes the
// model directory's static files (and the calibration's certificate) of a
// new one.
func (t *trainer) prepareDir(st *loop.State) error {
	o := t.o
	if o.Resume {
		slog.Info("resuming", "dir", o.Out, "epoch", st.Epoch+1, "batch", st.Batch, "step", st.Step)
		var err error
		t.res.History, err = ReadMetrics(filepath.Join(o.Out, MetricsFile))
		return err
	}
	if err := model.SaveFiles(o.Out, t.b); err != nil {
		return fmt.Errorf("output directory %s: %w", o.Out, err)
	}
	if c := t.b.Calibration; c != nil {
		if err := model.SaveCalibration(o.Out, c); err != nil {
			return fmt.Errorf("output directory %s: %w", o.Out, err)
		}
	}
	return nil
}

// logStart logs what is trained.
func (t *trainer) logStart() {
	nParams := 0
	for _, p := range t.params {
		nParams += p.Value.Len()
	}
	o := t.o
	slog.Info("training", "task", t.task.Name, "variant", o.Variant, "mode", o.Mode, "encoder", o.Encoder,
		"backend", backendName(o.Device), "params", nParams, "train", t.trainEnc.Len(), "dev", t.devEnc.Len(), "truncated", t.trainEnc.Truncated,
		"epochs", o.Epochs, "steps", t.lc.Steps, "lr", o.LR, "lambda", t.m.Cfg.LambdaG, "out", o.Out)
}
