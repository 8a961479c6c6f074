package nvib

import (
	"fmt"
	"strconv"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/privacy"
)

// Posterior returns the clipped posterior of the batch, with the shapes of
// [Posterior]. It runs the backbone and the NVIB layer in evaluation mode,
// without sampling. For a gaussian model it returns the release's
// posterior from [GaussianRelease.Forward], with N = ReleaseLen + 1.
//
// Posterior returns an error for a baseline model, invalid input, or a
// non-finite posterior.
func (m *Model) Posterior(in encoder.Input) (*Posterior, error) {
	post, _, err := m.EncodePosterior(in)
	return post, err
}

// EncodePosterior is like [Model.Posterior] and also returns the encoder
// output x [B,S,H] the posterior was computed from. x is the model's
// non-private representation of the batch, before the NVIB layer or the
// gaussian release: the empirical attacks' upper reference, as
// docs/attacks.md explains.
func (m *Model) EncodePosterior(in encoder.Input) (*Posterior, *nn.Tensor, error) {
	return m.encodePosterior(in, nil, nil)
}

// PosteriorInfer is [Model.Posterior] with the activations of the forward
// pass taken from ws, when the backbone can take them (an
// [EncoderBackbone]), and the posterior from out ([nn.Workspace.New]; nil:
// newly allocated): the same operations in the same order, so the same
// bits. The caller resets the workspaces before the call and serialises the
// calls that share one; the posterior is valid until out's next Reset, so
// that the activations' workspace can serve the next call while the
// posterior is still in use.
func (m *Model) PosteriorInfer(in encoder.Input, ws, out *nn.Workspace) (*Posterior, error) {
	post, _, err := m.encodePosterior(in, ws, out)
	return post, err
}

// inferBackbone is a backbone whose inference forward takes a workspace.
type inferBackbone interface {
	Infer(in encoder.Input, ws *nn.Workspace) *nn.Tensor
}

// encodePosterior is EncodePosterior with the activations taken from ws and
// the posterior from out.
func (m *Model) encodePosterior(in encoder.Input, ws, out *nn.Workspace) (*Posterior, *nn.Tensor, error) {
	if m.NVIB == nil && m.Gauss == nil {
		return nil, nil, fmt.Errorf("model %q has no NVIB layer: no posterior to export", m.Cfg.Model)
	}
	if m.Backbone == nil {
		return nil, nil, errNoBackbone
	}
	if ci, ok := m.Backbone.(interface{ CheckInput(encoder.Input) error }); ok {
		if err := ci.CheckInput(in); err != nil {
			return nil, nil, err
		}
	}
	var x *nn.Tensor
	if ib, ok := m.Backbone.(inferBackbone); ok {
		x = ib.Infer(in, ws)
	} else {
		x, _ = m.Backbone.Forward(in, false, nil)
	}
	var post *Posterior
	var err error
	if m.Gauss != nil {
		post, err = m.Gauss.Infer(x, in.Mask, ws, out)
	} else {
		post, err = m.NVIB.Infer(x, in.Mask, ws, out)
	}
	if err != nil {
		return nil, nil, err
	}
	return post, x, nil
}

// ExportMetadata returns the posterior file metadata of the model for a
// dataset split.
//
// The keys are task, split, model ([MetaModel]), mode ([MetaMode]), init,
// the clipping constants clip_enabled, clip_mu, clip_alpha_min,
// clip_alpha_max, clip_order, clip_logvar_margin, clip_cap_sigma and
// clip_prior, the prior log alpha, kl_mask_pads and pads_released.
// pads_released is true when the release has all N components, so the
// default unmasked audit describes it, and false in reference mode, where
// pads get pi = 0; see docs/privacy.md. The privacy package writes prior_mu
// and prior_var from the Posteriors fields.
//
// A gaussian model writes its clip set's constants instead, from
// [privacy.ClipSet.Metadata]: clip_mu = C, clip_logvar_floor =
// clip_logvar_cap = ln sigma^2 and clip_alpha_min = clip_alpha_max =
// prior_alpha = [GaussianAlpha], plus gaussian_release_len, so that
// `nvdp audit` certifies the file as it certifies an nvdp-clipped one.
func (m *Model) ExportMetadata(task, split string) map[string]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	if m.Gauss != nil {
		md := m.Gauss.ClipSet(m.Cfg.Latent()).Metadata()
		for k, v := range map[string]string{"task": task, "split": split, MetaModel: m.Cfg.Model, MetaMode: string(m.Cfg.Mode.OrDefault()),
			"gaussian_release_len": strconv.Itoa(m.Gauss.L), "kl_mask_pads": "false", "pads_released": "true"} {
			md[k] = v
		}
		return md
	}
	c := m.NVIB.Cfg.Clip
	return map[string]string{
		"task": task, "split": split, MetaModel: m.Cfg.Model, MetaMode: string(m.Cfg.Mode.OrDefault()), "init": m.Cfg.Init,
		"clip_enabled": strconv.FormatBool(c.Enabled), "clip_mu": f(c.CMu),
		"clip_alpha_min": f(c.CAlphaMin), "clip_alpha_max": f(c.CAlphaMax), "clip_order": f(c.Order),
		"clip_logvar_margin": f(c.LogvarMargin), "clip_cap_sigma": strconv.FormatBool(c.CapSigma),
		"clip_prior": strconv.FormatBool(c.ClipPrior), "prior_log_alpha": f(m.Cfg.Prior.LogAlpha),
		"prior_alpha":  f(c.PriorAlpha(m.Cfg.Prior)),
		"kl_mask_pads": strconv.FormatBool(m.KLConfig().MaskPads), "pads_released": strconv.FormatBool(m.PadsReleased()),
	}
}

// Posterior-file metadata keys of the model that wrote the file.
const (
	MetaModel = "model" // the model kind (Config.Model): baseline, nvdp, nvdp-clipped, gaussian
	MetaMode  = "mode"  // the model's privacy.Mode (Config.Mode)
	// metaModeLegacy is where files written before MetaMode kept the mode,
	// under a name that elsewhere means the model kind.
	metaModeLegacy = "variant"
)

// MetadataMode returns the mode of the model that wrote a posterior file,
// from its metadata md. It reads the [MetaMode] entry or, in a file written
// before that key existed, the "variant" entry, which held the mode and not
// the model kind. Without either it returns [privacy.ModePrincipled].
//
// MetadataMode returns an error for an unknown mode, or when both keys are
// present with different modes.
func MetadataMode(md map[string]string) (privacy.Mode, error) {
	m, ok := md[MetaMode]
	legacy, hasLegacy := md[metaModeLegacy]
	switch {
	case ok && hasLegacy && legacy != m:
		return "", fmt.Errorf("posterior metadata: %s = %q and %s = %q disagree", MetaMode, m, metaModeLegacy, legacy)
	case !ok && hasLegacy:
		m, ok = legacy, true
	}
	if !ok {
		return privacy.ModePrincipled, nil
	}
	if mode := privacy.Mode(m); m != "" && mode.Valid() {
		return mode, nil
	}
	return "", fmt.Errorf("posterior metadata: mode %q: want principled or reference", m)
}

// CollectPosteriors concatenates batch posteriors, all with the same N and
// P, into the audit's [privacy.Posteriors], with the model's prior and
// meta. The mask is kept as it is: 1 marks a real component in both
// packages.
func CollectPosteriors(posts []*Posterior, prior Prior, meta map[string]string) (*privacy.Posteriors, error) {
	if len(posts) == 0 {
		return nil, fmt.Errorf("collect posteriors: no batches")
	}
	N, P := posts[0].N, posts[0].P
	M := 0
	for i, p := range posts {
		if p.N != N || p.P != P {
			return nil, fmt.Errorf("collect posteriors: batch %d has [N=%d P=%d], batch 0 [N=%d P=%d] (pad every batch to the same length)", i, p.N, p.P, N, P)
		}
		M += p.B
	}
	out := privacy.NewPosteriors(M, N, P)
	out.AttentionMask = make([]uint8, M*N)
	for j := range out.PriorMu {
		out.PriorMu[j], out.PriorVar[j] = prior.Mu, prior.Var
	}
	off := 0
	for _, p := range posts {
		copy(out.Mu[off*N*P:], p.Mu.Data)
		copy(out.Logvar[off*N*P:], p.Logvar.Data)
		copy(out.Alpha[off*N:], p.Alpha.Data)
		for k, v := range p.Mask {
			if v != 0 {
				out.AttentionMask[off*N+k] = 1
			}
		}
		off += p.B
	}
	for k, v := range meta {
		out.Metadata[k] = v
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("collect posteriors: %w", err)
	}
	return out, nil
}

// ExportPosteriors writes the audit's posterior file of a dataset split to
// path and returns the posteriors as the file holds them, for an audit in
// memory.
//
// It computes the posterior of every batch, all padded to the same length.
// The file, written by [privacy.WritePosteriors], holds mu and logvar
// [M,N,P], alpha and attention_mask [M,N], and the metadata of
// [Model.ExportMetadata]. [privacy.ReadPosteriors] of path gives the same
// values and metadata as the returned posteriors.
func ExportPosteriors(path string, m *Model, batches []encoder.Input, task, split string) (*privacy.Posteriors, error) {
	return ExportPosteriorsWith(path, m, batches, task, split, m.Posterior)
}

// ExportPosteriorsWith is [ExportPosteriors] with each batch's posterior
// computed by posterior, the twin of [Model.Posterior] on another device
// such as the GPU's in package dnn. m gives the file's prior and metadata.
func ExportPosteriorsWith(path string, m *Model, batches []encoder.Input, task, split string, posterior func(encoder.Input) (*Posterior, error)) (*privacy.Posteriors, error) {
	posts := make([]*Posterior, 0, len(batches))
	for i, in := range batches {
		p, err := posterior(in)
		if err != nil {
			return nil, fmt.Errorf("export posteriors: batch %d: %w", i, err)
		}
		posts = append(posts, p)
	}
	all, err := m.FilePosteriors(posts, task, split)
	if err != nil {
		return nil, fmt.Errorf("export posteriors %s: %w", path, err)
	}
	if err := privacy.WritePosteriors(path, all); err != nil {
		return nil, fmt.Errorf("export posteriors: %w", err)
	}
	return all, nil
}

// FilePosteriors returns the posterior file of the model's batch posteriors
// posts of a dataset split, as [ExportPosteriors] writes it and
// [privacy.ReadPosteriors] reads it back, without writing it. It is
// [CollectPosteriors] with the model's prior and the metadata of
// [Model.ExportMetadata], plus prior_mu and prior_var.
func (m *Model) FilePosteriors(posts []*Posterior, task, split string) (*privacy.Posteriors, error) {
	prior := m.Cfg.Prior
	if m.Gauss != nil { // the ball's centre and the input-independent component's mean are 0
		prior.Mu = 0
	}
	all, err := CollectPosteriors(posts, prior, m.ExportMetadata(task, split))
	if err != nil {
		return nil, err
	}
	all.Metadata = all.FileMetadata()
	return all, nil
}
