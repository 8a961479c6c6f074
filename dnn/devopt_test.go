package dnn_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/internal/loop"
	"github.com/nvdp-project/nvdp/nn"
)

// tolLoop is the tolerance of a device training run against the host's
// (relErr of the parameters, relative error of each step's loss): the
// device's gradients differ from nn's by the rounding of the GEMMs' sums
// (about 1e-7 relative); AdamW's step m/(sqrt(v)+eps) passes such a
// difference on to the parameters at the scale of lr times it, and the
// few steps of the run compound it a little; the optimizer itself adds
// nothing (TestAdamWTwin: bit for bit).
// Derivation: gradients ~1e-7 apart (GEMM order) move AdamW's step by ~1e-7 of lr per step; a few steps compound it below 1e-6; FMA contraction in the GEMM-free kernels merges roundings only.
const tolLoop = 1e-5

// loopData is a classification task for the loop tests: 12 examples of 6
// features, 3 classes.
type loopData struct {
	x      *nn.Tensor // [12, 6]
	labels []int
}

func newLoopData() *loopData {
	rng := rand.New(rand.NewPCG(21, 21))
	d := &loopData{x: randn(rng, 1, 12, 6), labels: make([]int, 12)}
	for i := range d.labels {
		d.labels[i] = rng.IntN(3)
	}
	return d
}

// batch returns the examples idx as a [len(idx), 6] tensor and their labels.
func (d *loopData) batch(idx []int) (*nn.Tensor, []int) {
	x := nn.New(len(idx), 6)
	ls := make([]int, len(idx))
	for k, i := range idx {
		copy(x.Data[k*6:(k+1)*6], d.x.Data[i*6:(i+1)*6])
		ls[k] = d.labels[i]
	}
	return x, ls
}

// newLoopModel is the model's initial state (the same for every run).
func newLoopModel() *nn.Linear {
	l := nn.NewLinear("head", 6, 3, true)
	rng := rand.New(rand.NewPCG(22, 22))
	l.InitHF(rng, 0.5)
	l.B.InitNormal(rng, 0.5)
	return l
}

// loopConfig is the run's configuration in dir: 7 steps of 4 examples,
// warm-up, weight decay (the bias NoDecay), clipping at a bound that some
// steps exceed, a checkpoint every 3 steps.
func loopConfig(dir string, params []*nn.Param, step func(idx []int) (float64, error)) loop.Config {
	return loop.Config{Stage: "t", Checkpoint: filepath.Join(dir, "ckpt.safetensors"), StateKey: "t_state",
		Metrics: filepath.Join(dir, "metrics.jsonl"), Params: params,
		LR: 0.05, WeightDecay: 0.1, Eps: nn.AdamEps, Warmup: 2, Steps: 7, GradClip: 0.5,
		Examples: 12, BatchSize: 4, CheckpointEvery: 3,
		Order: func(e int) *rand.Rand { return rand.New(rand.NewPCG(23, uint64(e))) },
		Step: func(_ *loop.State, idx []int, _ float64) (float64, string, error) {
			loss, err := step(idx)
			return loss, "", err
		},
	}
}

// hostRun trains on the host and returns the losses and the final model.
func hostRun(t *testing.T, d *loopData) ([]float64, *nn.Linear) {
	l := newLoopModel()
	var losses []float64
	cfg := loopConfig(t.TempDir(), l.Params(), func(idx []int) (float64, error) {
		x, ls := d.batch(idx)
		y, c := l.Forward(x)
		loss, dy := nn.SoftmaxCrossEntropy(y, ls)
		l.Backward(c, dy)
		losses = append(losses, loss)
		return loss, nil
	})
	r, err := loop.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	return losses, l
}

// deviceRun trains the same model through a dnn.DeviceOptimizer in dir,
// its Step inside Do (as a trainer on the device), with cfg changed by
// mod; host is the host model (its values are the run's after each
// checkpoint). It returns the losses of the steps run.
func deviceRun(t *testing.T, dev *cuda.Device, d *loopData, dir string, host *nn.Linear, mod func(*loop.Config)) []float64 {
	t.Helper()
	var e *dnn.Engine
	var dl *dnn.Linear
	if err := dev.Do(func() (err error) {
		e, err = dnn.NewEngine(dev)
		if err == nil {
			dl = e.NewLinear(host)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.Do(func() error { e.FreeParams(dl.Params()); e.Close(); return nil })
	opt, err := dnn.NewDeviceOptimizer(e, dl.Params(), host.Params())
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Free()
	var losses []float64
	cfg := loopConfig(dir, host.Params(), func(idx []int) (float64, error) {
		var loss float64
		err := dev.Do(func() error {
			e.Reset()
			x, ls := d.batch(idx)
			ids := make([]int32, len(ls))
			for i, l := range ls {
				ids[i] = int32(l)
			}
			y, c := dl.Forward(e, e.Upload(x))
			var dy *dnn.Tensor
			loss, dy = e.SoftmaxCrossEntropy(y, e.UploadInts(ids))
			dl.Backward(e, c, dy)
			return nil
		})
		losses = append(losses, loss)
		return loss, err
	})
	cfg.Device = opt
	if mod != nil {
		mod(&cfg)
	}
	r, err := loop.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	return losses
}

// testDeviceOptimizerLoop: a loop run whose step and optimizer run on the
// device (dnn.DeviceOptimizer as loop.Config.Device) follows the host run
// (each step's loss, the final parameters, pulled into the host model by
// the final checkpoint); stopped after 4 steps and resumed from the
// checkpoint by a fresh model and device optimizer (pushed the restored
// parameters and moments), it ends where the uninterrupted device run ends,
// bit for bit.
func testDeviceOptimizerLoop(t *testing.T, dev *cuda.Device) {
	d := newLoopData()
	wantLosses, want := hostRun(t, d)

	full := newLoopModel()
	losses := deviceRun(t, dev, d, t.TempDir(), full, nil)
	if len(losses) != len(wantLosses) {
		t.Fatalf("%d device steps, %d host steps", len(losses), len(wantLosses))
	}
	for i, l := range losses {
		if r := relErr64(l, wantLosses[i]); !(r <= tolLoop) {
			t.Errorf("step %d: loss %v, host %v (relative %.3g)", i+1, l, wantLosses[i], r)
		}
	}
	for i, p := range full.Params() {
		if r := relErr(p.Value.Data, want.Params()[i].Value.Data); !(r <= tolLoop) {
			t.Errorf("%s after the run: relative error %.3g against the host run", p.Name, r)
		}
	}
	if slices.Equal(full.W.Value.Data, newLoopModel().W.Value.Data) {
		t.Fatal("the host model was not updated from the device")
	}

	dir := t.TempDir()
	first := deviceRun(t, dev, d, dir, newLoopModel(), func(c *loop.Config) { c.StopAfter = 4 })
	fresh := newLoopModel()
	fresh.W.Fill(7) // the resume must push the checkpoint's values, not these
	rest := deviceRun(t, dev, d, dir, fresh, func(c *loop.Config) { c.Resume = true })
	if got := append(first, rest...); !slices.Equal(got, losses) {
		t.Errorf("losses stopped and resumed %v, uninterrupted %v", got, losses)
	}
	for i, p := range fresh.Params() {
		if !slices.Equal(p.Value.Data, full.Params()[i].Value.Data) {
			t.Errorf("%s: resumed run ends at %v, uninterrupted at %v", p.Name, p.Value.Data, full.Params()[i].Value.Data)
		}
	}
}
