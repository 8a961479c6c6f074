package bench

import (
	"fmt"
	"math"
	"time"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/progress"
)

// DeviceClassifier is the twin of Classifier on a GPU (package dnn): the
// encoder's twin, masked mean pooling, the Linear head and softmax
// cross-entropy, with the Classifier's parameters (names, order).
type DeviceClassifier struct {
	Enc  *dnn.Encoder
	Head *dnn.Linear
}

// NewDeviceClassifier uploads the parameters of c (on the device
// goroutine). Free them with e.FreeParams(Params()).
func NewDeviceClassifier(e *dnn.Engine, c *Classifier) *DeviceClassifier {
	return &DeviceClassifier{Enc: e.NewEncoder(c.Enc), Head: e.NewLinear(c.Head)}
}

// Params returns the encoder's and the head's parameters, in Classifier.Params' order.
func (c *DeviceClassifier) Params() []*dnn.Param { return append(c.Enc.Params(), c.Head.Params()...) }

// Logits runs inference: logits [B, labels] on the device, no activations
// kept (valid until the Engine's next Reset).
func (c *DeviceClassifier) Logits(e *dnn.Engine, in encoder.Input) *dnn.Tensor {
	x, _ := c.Enc.Forward(e, in, false, nil)
	pooled := e.MaskedMeanPool(x, e.Upload(nn.FromData(maskOrOnes(in), in.B, in.S)))
	y, _ := c.Head.Forward(e, pooled)
	return y
}

// LossAndGrad runs a training forward and backward pass, as
// Classifier.LossAndGrad, and returns the mean cross-entropy; gradients are
// accumulated into Params(). Dropout draws come from g (nil when every
// dropout probability is 0). On the device goroutine; its tensors come
// from the Engine's arena (Reset it before each step).
func (c *DeviceClassifier) LossAndGrad(e *dnn.Engine, in encoder.Input, labels []int, g *dnn.Philox) float64 {
	x, cache := c.Enc.Forward(e, in, true, g)
	mask := e.Upload(nn.FromData(maskOrOnes(in), in.B, in.S))
	pooled := e.MaskedMeanPool(x, mask)
	logits, hc := c.Head.Forward(e, pooled)
	ids := make([]int32, len(labels))
	for i, l := range labels {
		ids[i] = int32(l)
	}
	loss, dlogits := e.SoftmaxCrossEntropy(logits, e.UploadInts(ids))
	dpooled := c.Head.Backward(e, hc, dlogits)
	dx := e.MaskedMeanPoolBackward(mask, dpooled, in.S)
	c.Enc.Backward(e, cache, dx)
	return loss
}

// runDevice is Run's timing on the device d: the same model, data and
// steps as on the CPU (the classifier clf, the optimizer's settings of
// opt, the batch in and labels), each training step the forward, the
// backward, AdamW and clearing the gradients on the device (the loss, 8
// bytes, downloaded each step); dropout from a Philox stream keyed by seed.
// Inference steps end with a synchronisation before the clock stops. The
// device's counts of the first timed training step are reported
// (Result.TrainStepCounts: every step queues the same work).
func runDevice(d *cuda.Device, name string, clf *Classifier, opt *nn.AdamW, in encoder.Input, labels []int, o Options) (Result, error) {
	var (
		e      *dnn.Engine
		dc     *DeviceClassifier
		params []*dnn.Param
		dopt   *dnn.AdamW
	)
	if err := d.Do(func() (err error) {
		if e, err = dnn.NewEngine(d); err != nil {
			return err
		}
		dc = NewDeviceClassifier(e, clf)
		params = dc.Params()
		dopt = dnn.NewAdamW(opt.LR, opt.Beta1, opt.Beta2, opt.Eps, opt.WeightDecay)
		return nil
	}); err != nil {
		return Result{}, err
	}
	defer d.Do(func() error {
		dopt.Free(e)
		e.FreeParams(params)
		e.Close()
		return nil
	})
	g := dnn.NewPhilox(o.Seed)
	step := func() (loss float64, err error) {
		err = d.Do(func() error {
			e.Reset()
			loss = dc.LossAndGrad(e, in, labels, g)
			dopt.Update(e, params, dopt.LR)
			e.ZeroGrads(params)
			return nil
		})
		return loss, err
	}
	infer := func() error {
		return d.Do(func() error {
			e.Reset()
			dc.Logits(e, in)
			return nil
		})
	}
	sync := func() error { return d.Do(d.Sync) }
	total := int64(o.Steps)
	if _, err := step(); err != nil { // warm-up: the arena grows to a step
		return Result{}, err
	}
	var counts cuda.Counts
	t0 := time.Now()
	for i := range o.Steps {
		before := d.Counts()
		loss, err := step()
		if err != nil {
			return Result{}, err
		}
		if i == 0 {
			counts = d.Counts().Sub(before)
		}
		o.Progress.Report(progress.Event{Stage: "train", Unit: "steps", Done: int64(i + 1), Total: total, Loss: loss})
	}
	if err := sync(); err != nil {
		return Result{}, err
	}
	trainSecs := time.Since(t0).Seconds() / float64(o.Steps)
	if err := infer(); err != nil {
		return Result{}, err
	}
	if err := sync(); err != nil {
		return Result{}, err
	}
	t0 = time.Now()
	for i := range o.Steps {
		if err := infer(); err != nil {
			return Result{}, err
		}
		o.Progress.Report(progress.Event{Stage: "infer", Unit: "steps", Done: int64(i + 1), Total: total, Loss: math.NaN()})
	}
	if err := sync(); err != nil {
		return Result{}, err
	}
	inferSecs := time.Since(t0).Seconds() / float64(o.Steps)
	rss, err := PeakRSSMB()
	if err != nil {
		return Result{}, err
	}
	return Result{Config: name, Backend: "cuda", Device: DeviceName(d.Info()), TrainStepSeconds: trainSecs, InferStepSeconds: inferSecs,
		TokensPerSecond: float64(o.Batch*o.Seq) / trainSecs, PeakRSSMB: rss, TrainStepCounts: &counts, TrainStepHostWaits: counts.HostWaits()}, nil
}

// DeviceName describes a device for Result.Device: the card, its compute
// capability, the driver's CUDA version, cuBLAS's and the GEMM precision.
func DeviceName(i cuda.Info) string {
	prec := i.Precision
	if prec == "" { // an Info from before Precision: TF32 alone said it
		prec = cuda.PrecisionFP32
		if i.TF32 {
			prec = cuda.PrecisionTF32
		}
	}
	return fmt.Sprintf("%s (sm %s, CUDA driver %s, cuBLAS %s, %s)", i.Name, i.ComputeCapability, i.DriverVersion, i.CUBLASVersion, prec)
}
