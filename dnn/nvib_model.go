package dnn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
)

// NVDPModel is the twin of [nvib.Model]: the encoder twin, then the NVIB layer for nvdp and
// nvdp-clipped or the Gaussian-mechanism release for gaussian, the NVDP block and the head. The
// baseline has the head alone. The encoder is nil when the features come from the caller, through
// ForwardFeatures. The parameters, names and order are those of the nvib.Model it is built from.
type NVDPModel struct {
	Cfg      nvib.Config
	Backbone *Encoder
	NVIB     *NVIBLayer       // nil for baseline and gaussian
	Gauss    *GaussianRelease // gaussian only
	Block    *NVDPBlock       // nil for baseline
	Head     *NVDPHead
}

// NewNVDPModel uploads m's parameters. It returns an error for a backbone other than an encoder,
// [nvib.EncoderBackbone], or none; and for a head that reads the release,
// [nvib.HeadReadsRelease], which has no twin yet.
func (e *Engine) NewNVDPModel(m *nvib.Model) (*NVDPModel, error) {
	if m.Cfg.HeadReads == nvib.HeadReadsRelease {
		return nil, fmt.Errorf("dnn: no device twin of a head that reads the release (head_reads %q): train it on the CPU", nvib.HeadReadsRelease)
	}
	d := &NVDPModel{Cfg: m.Cfg}
	switch bb := m.Backbone.(type) {
	case nil:
	case nvib.EncoderBackbone:
		d.Backbone = e.NewEncoder(bb.Encoder)
	default:
		return nil, fmt.Errorf("dnn: no device twin of the backbone %T (the device runs the BERT/RoBERTa encoder, or features given to ForwardFeatures)", bb)
	}
	if m.NVIB != nil {
		d.NVIB = e.NewNVIBLayer(m.NVIB)
	}
	if m.Gauss != nil {
		d.Gauss = e.NewGaussianRelease(m.Gauss)
	}
	if m.Block != nil {
		d.Block = e.NewNVDPBlock(m.Block)
	}
	d.Head = e.NewNVDPHead(m.Head, m.Cfg.Dropout)
	return d, nil
}

// Params returns the parameters of the backbone, the NVIB layer or the gaussian release's
// projection, the block and the head, in the order of [nvib.Model.Params].
func (m *NVDPModel) Params() []*Param {
	var ps []*Param
	if m.Backbone != nil {
		ps = append(ps, m.Backbone.Params()...)
	}
	if m.NVIB != nil {
		ps = append(ps, m.NVIB.Params()...)
	}
	if m.Gauss != nil {
		ps = append(ps, m.Gauss.Params()...)
	}
	if m.Block != nil {
		ps = append(ps, m.Block.Params()...)
	}
	return append(ps, m.Head.Params()...)
}

// PadsReleased returns [nvib.Model.PadsReleased].
func (m *NVDPModel) PadsReleased() bool {
	return m.Gauss != nil || (m.NVIB != nil && !m.Cfg.Mode.IsReference())
}

// KLConfig returns [nvib.Model.KLConfig].
func (m *NVDPModel) KLConfig() nvib.KLConfig {
	return nvib.KLConfig{Prior: m.Cfg.Prior, Delta: m.Cfg.Delta}
}

// NVDPOptions control one forward pass of the device model.
type NVDPOptions struct {
	Train bool
	// G is the device's generator: for dropout when Train is set, and for the posterior's draws
	// when Rng is nil, through NVIBDrawDevice. It may be nil when no dropout is active and Rng is
	// set.
	G *Philox
	// Rng, when set, makes the posterior's draws on the host in nvib's order, through NVIBDrawHost
	// or GaussianDrawHost: the draws nvib.Model makes from an rng of the same state. With dropout
	// on, rand.New(G) gives exactly what nvib.Model draws from rand.New of a copy of G.
	Rng *rand.Rand
	// KLScale is s(t), from [nvib.Config.KLScale].
	KLScale float64
}

// NVDPOutput is the result of a forward pass, the twin of [nvib.Output].
type NVDPOutput struct {
	Logits *Tensor // [B, num_labels]
	// Loss = Task + lambda_G s LG + lambda_D s LD, as batch means; all are 0 without labels.
	Loss, Task, LG, LD float64
	KL                 *NVIBKL // per-example L_G, L_D (nvdp, nvdp-clipped)
	Posterior          *NVIBPosterior
	Sample             *NVIBSample
}

// NVDPCache holds what [NVDPModel.Backward] needs.
type NVDPCache struct {
	bbCache *EncoderCache
	x       *Tensor
	layer   *NVIBLayerCache
	gauss   *GaussianCache
	block   *NVDPBlockCache
	head    *NVDPHeadCache
	dlogits *Tensor
	klScale float64
	out     *NVDPOutput
}

// errNoDeviceBackbone is Forward and Backward on a model without a backbone.
var errNoDeviceBackbone = errors.New("dnn: the model has no backbone: its features come from the caller (ForwardFeatures, BackwardFeatures)")

// Forward runs the encoder and ForwardFeatures on a batch, as [nvib.Model.Forward] does. The
// encoder's cache is kept when opt.Train is set. It returns an error for a model without a
// backbone, for invalid input, and ForwardFeatures' errors.
func (m *NVDPModel) Forward(e *Engine, in encoder.Input, labels *nvib.Labels, opt NVDPOptions) (*NVDPOutput, *NVDPCache, error) {
	if m.Backbone == nil {
		return nil, nil, errNoDeviceBackbone
	}
	host := &encoder.Encoder{Config: m.Backbone.Config}
	if err := host.CheckInput(in); err != nil {
		return nil, nil, err
	}
	if len(in.IDs) != in.B*in.S || (in.Mask != nil && len(in.Mask) != in.B*in.S) {
		return nil, nil, fmt.Errorf("model input: ids %d, mask %d, want B*S = %d", len(in.IDs), len(in.Mask), in.B*in.S)
	}
	x, bbCache := m.Backbone.Forward(e, in, opt.Train, opt.G)
	out, c, err := m.ForwardFeatures(e, x, in.Mask, labels, opt)
	if err != nil {
		return nil, nil, err
	}
	c.bbCache = bbCache
	return out, c, nil
}

// ForwardFeatures runs everything after the backbone on its output x [B,S,Hidden] with the token
// mask [B*S], with the loss when labels are given, as [nvib.Model.ForwardFeatures] does. A nil mask
// means all real. The posterior's check runs after the loss, so the pass has one synchronisation,
// at its end: the loss's download. It returns nvib's errors: shapes, labels, an invalid posterior,
// or a non-finite loss.
func (m *NVDPModel) ForwardFeatures(e *Engine, x *Tensor, mask []float32, labels *nvib.Labels, opt NVDPOptions) (*NVDPOutput, *NVDPCache, error) {
	if len(x.Shape) != 3 || x.Shape[2] != m.Cfg.Hidden {
		return nil, nil, fmt.Errorf("model features: shape %v, want [B, S, %d]", x.Shape, m.Cfg.Hidden)
	}
	B, S := x.Shape[0], x.Shape[1]
	if mask != nil && len(mask) != B*S {
		return nil, nil, fmt.Errorf("model features: mask of %d, want B*S = %d", len(mask), B*S)
	}
	if opt.Rng == nil && opt.G == nil && (m.NVIB != nil || m.Gauss != nil) {
		return nil, nil, errors.New("dnn: the release's draws need NVDPOptions.Rng (on the host) or G (on the device)")
	}
	out := &NVDPOutput{}
	c := &NVDPCache{x: x, klScale: opt.KLScale, out: out}
	y := x
	if m.Gauss != nil {
		post, gc, err := m.Gauss.forwardNoCheck(e, x, mask)
		if err != nil {
			return nil, nil, err
		}
		c.gauss, out.Posterior = gc, post
		if opt.Rng != nil {
			out.Sample = e.GaussianDrawHost(post, opt.Rng)
		} else {
			out.Sample = e.GaussianDrawDevice(post, opt.G)
		}
		y, c.block = m.Block.Forward(e, x, post, out.Sample, opt.Train, opt.G)
	}
	if m.NVIB != nil {
		post, lc := m.NVIB.forwardNoCheck(e, x, mask)
		c.layer, out.Posterior = lc, post
		if opt.Rng != nil {
			if err := post.Check(e); err != nil { // the host's Gamma draws need valid shapes
				return nil, nil, err
			}
			out.Sample = e.NVIBDrawHost(post, opt.Rng)
		} else {
			out.Sample = e.NVIBDrawDevice(post, opt.G)
		}
		y, c.block = m.Block.Forward(e, x, post, out.Sample, opt.Train, opt.G)
		out.KL = e.NVIBKL(m.KLConfig(), post)
	}
	var headMask []float32
	if !m.PadsReleased() {
		headMask = mask
	}
	out.Logits, c.head = m.Head.Forward(e, y, headMask, opt.Train, opt.G)
	if labels != nil {
		if err := m.loss(e, c, labels, B); err != nil {
			return nil, nil, err
		}
	}
	if out.Posterior != nil {
		if err := out.Posterior.Check(e); err != nil {
			return nil, nil, err
		}
	}
	if out.KL != nil {
		mean := e.downloadF64(out.KL.Mean)
		out.LG, out.LD = mean[0], mean[1]
	}
	if labels == nil {
		return out, c, nil
	}
	out.Loss = out.Task + opt.KLScale*(m.Cfg.LambdaG*out.LG+m.Cfg.LambdaD*out.LD)
	if math.IsNaN(out.Loss) || math.IsInf(out.Loss, 0) {
		return nil, nil, fmt.Errorf("loss is %v (task %v, L_G %v, L_D %v)", out.Loss, out.Task, out.LG, out.LD)
	}
	return out, c, nil
}

// loss computes the task loss of the logits and its gradient seed (MSE
// when num_labels = 1, else cross-entropy), as nvib.Model.
func (m *NVDPModel) loss(e *Engine, c *NVDPCache, labels *nvib.Labels, B int) error {
	out := c.out
	if m.Cfg.NumLabels == 1 {
		if len(labels.Value) != B {
			return fmt.Errorf("labels: %d regression targets for a batch of %d", len(labels.Value), B)
		}
		out.Task, c.dlogits = e.MSE(out.Logits, e.Upload(nn.FromData(labels.Value, B)))
		return nil
	}
	if len(labels.Class) != B {
		return fmt.Errorf("labels: %d class labels for a batch of %d", len(labels.Class), B)
	}
	ls := make([]int32, B)
	for i, l := range labels.Class {
		if l < 0 || l >= m.Cfg.NumLabels {
			return fmt.Errorf("labels: example %d has label %d, want 0..%d", i, l, m.Cfg.NumLabels-1)
		}
		ls[i] = int32(l)
	}
	out.Task, c.dlogits = e.SoftmaxCrossEntropy(out.Logits, e.UploadInts(ls))
	return nil
}

// ErrNoLabels is the error of Backward after a forward pass without labels.
var ErrNoLabels = nvib.ErrNoLabels

// Backward accumulates dLoss/dparam into every parameter's gradient, the backbone's included, as
// [nvib.Model.Backward] does. It returns an error for a model without a backbone, and for a
// forward pass without labels or without the training cache.
func (m *NVDPModel) Backward(e *Engine, c *NVDPCache) error {
	if m.Backbone == nil {
		return errNoDeviceBackbone
	}
	if c.bbCache == nil {
		return errors.New("dnn: backward after a forward pass without Train (the encoder kept no cache)")
	}
	dx, err := m.BackwardFeatures(e, c)
	if err != nil {
		return err
	}
	m.Backbone.Backward(e, c.bbCache, dx)
	return nil
}

// BackwardFeatures accumulates dLoss/dparam into the gradients of every parameter after the
// backbone and returns dL/dx [B,S,Hidden] for the features ForwardFeatures was given, as
// [nvib.Model.BackwardFeatures] does. It returns [ErrNoLabels] after a forward pass without
// labels.
func (m *NVDPModel) BackwardFeatures(e *Engine, c *NVDPCache) (*Tensor, error) {
	if c.dlogits == nil {
		return nil, ErrNoLabels
	}
	dy := m.Head.Backward(e, c.head, c.dlogits)
	if m.Gauss != nil {
		dZ, _, _ := m.Block.Backward(e, c.block, c.out.Sample, dy)
		return m.Gauss.Backward(e, c.gauss, dZ), nil
	}
	if m.NVIB == nil {
		return dy, nil
	}
	post, s := c.out.Posterior, c.out.Sample
	dZ, dLogPi, dxq := m.Block.Backward(e, c.block, s, dy)
	dmu, dlv, dal := e.Zeros(post.Mu.Shape...), e.Zeros(post.Logvar.Shape...), e.Zeros(post.Alpha.Shape...)
	s.Backward(e, post, dZ, dLogPi, dmu, dlv, dal)
	e.NVIBKLBackward(m.KLConfig(), post, c.klScale*m.Cfg.LambdaG, c.klScale*m.Cfg.LambdaD, dmu, dlv, dal)
	dx := m.NVIB.Backward(e, c.layer, dmu, dlv, dal)
	if dxq != nil {
		e.AddInPlace(dx, dxq)
	}
	return dx, nil
}

// EncodePosterior runs the encoder and the NVIB layer or the gaussian release on a batch, without
// dropout or sampling, and returns the posterior on the device and the encoder output x [B,S,H],
// as [nvib.Model.EncodePosterior] does. nvdp eval and the audit dump the posterior with it:
// [NVIBPosterior.Download] gives the nvib.Posterior, and e.Download(x) the representation.
//
// It returns an error for a model without a release, a model without a backbone, invalid input,
// or an invalid posterior.
func (m *NVDPModel) EncodePosterior(e *Engine, in encoder.Input) (*NVIBPosterior, *Tensor, error) {
	if m.NVIB == nil && m.Gauss == nil {
		return nil, nil, fmt.Errorf("model %q has no NVIB layer: no posterior to export", m.Cfg.Model)
	}
	if m.Backbone == nil {
		return nil, nil, errNoDeviceBackbone
	}
	host := &encoder.Encoder{Config: m.Backbone.Config}
	if err := host.CheckInput(in); err != nil {
		return nil, nil, err
	}
	x, _ := m.Backbone.Forward(e, in, false, nil)
	var post *NVIBPosterior
	var err error
	if m.Gauss != nil {
		post, _, err = m.Gauss.Forward(e, x, in.Mask)
	} else {
		post, _, err = m.NVIB.Forward(e, x, in.Mask)
	}
	if err != nil {
		return nil, nil, err
	}
	return post, x, nil
}

// Posterior returns the host copy of the posterior of [NVDPModel.EncodePosterior], the twin of
// [nvib.Model.Posterior].
func (m *NVDPModel) Posterior(e *Engine, in encoder.Input) (*nvib.Posterior, error) {
	post, _, err := m.EncodePosterior(e, in)
	if err != nil {
		return nil, err
	}
	return post.Download(e), nil
}
