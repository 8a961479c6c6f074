// Package bench is the model and the measurements of `nvdp bench` (docs/performance.md): it
// times training and inference steps of a BERT sequence classifier built from an encoder on
// the nn engine, as the PyTorch peer /work/shared/bench/train_step_peer.py does, and reads
// the process's peak resident set size. None of this is the encoder's job, so it lives here.
package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/memlimit"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/progress"
)

// Options configures Run.
type Options struct {
	Batch, Seq, Steps int
	// NoDropout sets both dropout probabilities to 0 (as the PyTorch peer
	// /work/shared/bench/train_step_peer.py, which has none).
	NoDropout bool
	Seed      uint64
	// Progress receives one event per timed step: stage "train" (with the step's loss) or
	// "infer", unit "steps", Done of Total = Steps. Nil discards them.
	Progress progress.Func
	// Device, when set, runs the steps on this GPU (package dnn: the same model, data and
	// AdamW, dropout from a Philox stream keyed by Seed); nil runs them on the CPU.
	Device *cuda.Device
}

// Result is the JSON printed by `nvdp bench --json`.
type Result struct {
	Config           string  `json:"config"`
	Backend          string  `json:"backend"`          // nn.Backend() on the CPU, "cuda" on a GPU
	Device           string  `json:"device,omitempty"` // the GPU (DeviceName), on a GPU
	TrainStepSeconds float64 `json:"train_step_seconds"`
	InferStepSeconds float64 `json:"infer_step_seconds"`
	TokensPerSecond  float64 `json:"tokens_per_second"` // training tokens (batch*seq) per second
	PeakRSSMB        float64 `json:"peak_rss_mb"`       // VmHWM of the process, MiB
	// TrainStepCounts are the device's kernel launches, cuBLAS calls,
	// memsets, copies and host-device synchronisations of one timed
	// training step (cuda.Counts; on a GPU only), TrainStepHostWaits their
	// Uploads + Downloads + Syncs.
	TrainStepCounts    *cuda.Counts `json:"train_step_counts,omitempty"`
	TrainStepHostWaits int64        `json:"train_step_host_waits,omitempty"`
}

// Classifier is a sequence classifier for benchmarks and tests: encoder,
// masked mean pooling (ref §3.3), Linear to NumLabels logits, softmax
// cross-entropy.
type Classifier struct {
	Enc  *encoder.Encoder
	Head *nn.Linear

	work nn.Workspace // Logits' activations, reused by each call
}

// NewClassifier adds a "classifier" Linear head [labels, hidden] with HF init.
func NewClassifier(e *encoder.Encoder, labels int, rng *rand.Rand) *Classifier {
	h := nn.NewLinear("classifier", e.Hidden(), labels, true)
	h.InitHF(rng, e.Config.InitializerRange)
	return &Classifier{Enc: e, Head: h}
}

// Params returns the encoder's and the head's parameters.
func (c *Classifier) Params() []*nn.Param { return append(c.Enc.Params(), c.Head.Params()...) }

// Logits runs inference: logits [B, labels], no activations kept. The encoder's activations come
// from a workspace the classifier reuses across calls, as a release's do, so Logits is not safe
// for concurrent use.
func (c *Classifier) Logits(in encoder.Input) *nn.Tensor {
	c.work.Reset()
	x := c.Enc.Infer(in, &c.work)
	pooled := nn.MaskedMeanPool(x, maskOrOnes(in))
	y, _ := c.Head.Forward(pooled)
	return y
}

// LossAndGrad runs a training forward and backward pass and returns the mean
// cross-entropy; gradients are accumulated into Params().
func (c *Classifier) LossAndGrad(in encoder.Input, labels []int, rng *rand.Rand) float64 {
	x, cache := c.Enc.Forward(in, true, rng)
	mask := maskOrOnes(in)
	pooled := nn.MaskedMeanPool(x, mask)
	logits, hc := c.Head.Forward(pooled)
	loss, dlogits := nn.SoftmaxCrossEntropy(logits, labels)
	dpooled := c.Head.Backward(hc, dlogits)
	dx := nn.MaskedMeanPoolBackward(mask, dpooled, in.S)
	c.Enc.Backward(cache, dx)
	return loss
}

func maskOrOnes(in encoder.Input) []float32 {
	if in.Mask != nil {
		return in.Mask
	}
	m := make([]float32, in.B*in.S)
	for i := range m {
		m[i] = 1
	}
	return m
}

// Run times full training steps (forward, backward, AdamW update, zero grads) and inference
// steps of a 2-label Classifier on random tokens, like /work/shared/bench/train_step_peer.py:
// one untimed warm-up step, then the mean over Steps steps, on the CPU or on Options.Device.
// name labels the result. Errors: Batch, Seq or Steps <= 0, Seq beyond the encoder's
// positions, an unreadable peak RSS, and the device's.
func Run(name string, cfg encoder.Config, o Options) (Result, error) {
	if o.Batch <= 0 || o.Seq <= 0 || o.Steps <= 0 {
		return Result{}, fmt.Errorf("bench: batch %d, seq %d, steps %d must be > 0", o.Batch, o.Seq, o.Steps)
	}
	if o.Seq > cfg.MaxSeqLen() {
		return Result{}, fmt.Errorf("bench: seq %d exceeds %s's maximum %d", o.Seq, name, cfg.MaxSeqLen())
	}
	if err := o.checkMemory(name, cfg); err != nil {
		return Result{}, err
	}
	if o.NoDropout {
		cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0, 0
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed+1))
	e, err := encoder.New(cfg, rng)
	if err != nil {
		return Result{}, err
	}
	clf := NewClassifier(e, 2, rng)
	params := clf.Params()
	opt := nn.NewAdamW(1e-4, nn.AdamBeta1, nn.AdamBeta2, nn.AdamEps, 0.01) // the peer's AdamW (torch defaults, weight decay 0.01)
	in := encoder.Input{IDs: make([]int32, o.Batch*o.Seq), Mask: make([]float32, o.Batch*o.Seq), B: o.Batch, S: o.Seq}
	for i := range in.IDs {
		in.IDs[i] = int32(rng.IntN(cfg.VocabSize))
		in.Mask[i] = 1
	}
	labels := make([]int, o.Batch)
	for i := range labels {
		labels[i] = rng.IntN(2)
	}
	if o.Device != nil {
		return runDevice(o.Device, name, clf, opt, in, labels, o)
	}
	step := func() float64 {
		loss := clf.LossAndGrad(in, labels, rng)
		opt.Update(params, opt.LR)
		nn.ZeroGrads(params)
		return loss
	}
	total := int64(o.Steps)
	step() // warm-up
	t0 := time.Now()
	for i := range o.Steps {
		loss := step()
		o.Progress.Report(progress.Event{Stage: "train", Unit: "steps", Done: int64(i + 1), Total: total, Loss: loss})
	}
	train := time.Since(t0).Seconds() / float64(o.Steps)
	clf.Logits(in) // warm-up
	t0 = time.Now()
	for i := range o.Steps {
		clf.Logits(in)
		o.Progress.Report(progress.Event{Stage: "infer", Unit: "steps", Done: int64(i + 1), Total: total, Loss: math.NaN()})
	}
	infer := time.Since(t0).Seconds() / float64(o.Steps)
	rss, err := PeakRSSMB()
	if err != nil {
		return Result{}, err
	}
	return Result{Config: name, Backend: nn.Backend(), TrainStepSeconds: train, InferStepSeconds: infer,
		TokensPerSecond: float64(o.Batch*o.Seq) / train, PeakRSSMB: rss}, nil
}

// checkMemory refuses, before anything is allocated, a batch whose
// training step cannot fit: at least the activations backward keeps,
// per token and layer 4 H + I + heads x Seq float32 (queries, keys, values,
// attention output, the feed-forward's intermediate, the attention
// probabilities), against the GPU's memory on a device, the machine's on
// the CPU; and the batch's tokens, masks and labels in the host's. Errors:
// *option.Error for batch.
func (o Options) checkMemory(name string, cfg encoder.Config) error {
	tokens := float64(o.Batch) * float64(o.Seq)
	perToken := float64(cfg.NumHiddenLayers) * memlimit.Floats(4*cfg.HiddenSize+cfg.IntermediateSize+cfg.NumAttentionHeads*o.Seq)
	limit, of := memlimit.Total(), memlimit.OfMachine
	if o.Device != nil {
		_, total, err := o.Device.MemInfo()
		if err != nil {
			return err
		}
		limit, of = float64(total), "of the GPU's memory"
	}
	what := fmt.Sprintf("a training step of %s on %d x %d tokens (at least %d layers x (4 H + I + heads x length) float32 a token)", name, o.Batch, o.Seq, cfg.NumHiddenLayers)
	if err := (memlimit.Need{What: what, Bytes: tokens * perToken, Limit: limit, Of: of, Option: "batch", Value: o.Batch,
		Lower: []string{"batch", "seq"}}).Check(); err != nil {
		return err
	}
	return memlimit.Need{What: fmt.Sprintf("the inputs of %d x %d tokens", o.Batch, o.Seq), Bytes: tokens * 16, Limit: memlimit.Total(),
		Of: memlimit.OfMachine, Option: "batch", Value: o.Batch, Lower: []string{"batch", "seq"}}.Check()
}

// PeakRSSMB reads the process's peak resident set size (VmHWM in /proc/self/status) in MiB.
// Errors: no /proc (not Linux) or an unexpected VmHWM line.
func PeakRSSMB() (float64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	defer f.Close()
	return parseVmHWM(f)
}

// parseVmHWM finds the "VmHWM:  123456 kB" line of a /proc/PID/status stream and returns it
// in MiB.
func parseVmHWM(r io.Reader) (float64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			fs := strings.Fields(v) // "123456 kB"
			if len(fs) != 2 || fs[1] != "kB" {
				return 0, fmt.Errorf("peak RSS: unexpected VmHWM line %q", sc.Text())
			}
			kb, err := strconv.ParseUint(fs[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("peak RSS: VmHWM %q: %w", fs[0], err)
			}
			return float64(kb) / 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	return 0, fmt.Errorf("peak RSS: no VmHWM line in /proc/self/status")
}

// WriteText writes r as `nvdp bench` prints it: the configuration of o,
// the device on a GPU, the seconds per training and inference step, the
// training tokens per second and the peak RSS.
func (r Result) WriteText(w io.Writer, o Options) error {
	var b strings.Builder
	fmt.Fprintf(&b, "config %s, backend %s, batch %d, seq %d\n", r.Config, r.Backend, o.Batch, o.Seq)
	if r.Device != "" {
		fmt.Fprintf(&b, "device      %s\n", r.Device)
	}
	fmt.Fprintf(&b, "train step  %.4f s  (%.0f tokens/s)\n", r.TrainStepSeconds, r.TokensPerSecond)
	fmt.Fprintf(&b, "infer step  %.4f s\n", r.InferStepSeconds)
	fmt.Fprintf(&b, "peak RSS    %.0f MiB\n", r.PeakRSSMB)
	_, err := io.WriteString(w, b.String())
	return err
}
