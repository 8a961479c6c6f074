package train

import (
	"fmt"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
)

// The device path of training and evaluation (model.Options.Device,
// EvalOptions.Device; docs/engine.md, "The CUDA backend"): the model's twin
// on the GPU (package dnn) with the parameters, gradients and AdamW moments
// there (dnn.DeviceOptimizer through loop.Config.Device); only token ids,
// masks and labels go up, the loss and metrics, predictions, posteriors and
// checkpoints come down. The device is a run-time choice, never part of a
// model: the files a run writes are those of a CPU run.

// deviceModel is the twin of an nvib.Model on a GPU (dnn.ModelTwin: its
// Posterior is the posterior dump of the evaluation) with the evaluation's
// forward pass.
type deviceModel struct{ *dnn.ModelTwin }

// newDeviceModel compiles the kernels (cached) and uploads m's parameters.
func newDeviceModel(d *cuda.Device, m *nvib.Model) (*deviceModel, error) {
	t, err := dnn.OpenModelTwin(d, m)
	if err != nil {
		return nil, err
	}
	return &deviceModel{t}, nil
}

// forwardEval is evalForward on the device: the forward pass in evaluation
// mode with the posterior's draws made on the host from rng in nvib's order
// (dnn's host-draw mode: the CPU evaluation's draws), the logits downloaded.
func (dm *deviceModel) forwardEval(in encoder.Input, lab *nvib.Labels, rng *rand.Rand) ([]float32, float64, error) {
	var logits []float32
	var loss float64
	err := dm.Dev.Do(func() error {
		dm.E.Reset()
		out, _, err := dm.M.Forward(dm.E, in, lab, dnn.NVDPOptions{Rng: rng, KLScale: 1})
		if err != nil {
			return err
		}
		logits, loss = dm.E.Download(out.Logits).Data, out.Loss
		return nil
	})
	return logits, loss, err
}

// deviceTrainer is a training run's device part: the model's twin, its
// optimizer (the loop's Device) and the Philox generator of the step's
// dropout and NVDP draws (rngstream.TrainSampleDevice, saved in every
// checkpoint as sampleDeviceKey).
type deviceTrainer struct {
	*deviceModel
	opt       *dnn.DeviceOptimizer
	g         *dnn.Philox
	hostNoise bool // the NVDP noise drawn on the host from g (model.Options.HostNoise)
}

// sampleDeviceKey names the Philox state of the device's draws in a
// checkpoint (beside sampleKey, the CPU's: a run resumes on the device it
// started on).
const sampleDeviceKey = "sample_device"

// newDeviceTrainer uploads m (whose host parameters are host) and its
// optimizer state.
func newDeviceTrainer(d *cuda.Device, m *nvib.Model, host []*nn.Param, seed uint64, hostNoise bool) (*deviceTrainer, error) {
	dm, err := newDeviceModel(d, m)
	if err != nil {
		return nil, err
	}
	opt, err := dnn.NewDeviceOptimizer(dm.E, dm.Params, host)
	if err != nil {
		dm.Close()
		return nil, fmt.Errorf("device: %w", err)
	}
	return &deviceTrainer{deviceModel: dm, opt: opt, g: dnn.NewPhiloxStream(rngstream.TrainSampleDevice, seed, 0), hostNoise: hostNoise}, nil
}

// step is TrainStep's forward on the device: forward with dropout and the
// NVDP draws from the Philox stream at KL scale s, and the backward into the
// twin's gradients in the same hand-off (the loop clears, clips and applies
// them; TrainStep's backward has nothing left to do); the output's numbers
// for the Selection.
func (t *deviceTrainer) step(in encoder.Input, lab *nvib.Labels, s float64) (*nvib.Output, struct{}, error) {
	var out *nvib.Output
	err := t.Dev.Do(func() error {
		t.E.Reset()
		opt := dnn.NVDPOptions{Train: true, G: t.g, KLScale: s}
		if t.hostNoise { // nvib's draws, in nvib's order, from the same stream as dropout (dnn.NVDPOptions)
			opt.Rng = rand.New(t.g)
		}
		o, c, err := t.M.Forward(t.E, in, lab, opt)
		if err != nil {
			return err
		}
		if err := t.M.Backward(t.E, c); err != nil {
			return fmt.Errorf("backward: %w", err)
		}
		out = &nvib.Output{Loss: o.Loss, Task: o.Task, LG: o.LG, LD: o.LD}
		return nil
	})
	return out, struct{}{}, err
}

// close frees the optimizer's moments and the model's twin.
func (t *deviceTrainer) close() {
	t.opt.Free()
	t.deviceModel.Close()
}

// backendName is what computes a run: the GPU (cuda.Device.Backend) or the
// CPU engine's BLAS backend (nn.Backend).
func backendName(d *cuda.Device) string {
	if d == nil {
		return nn.Backend()
	}
	return d.Backend()
}
