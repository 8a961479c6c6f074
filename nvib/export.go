package nvib

import (
	"fmt"
	"strconv"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/privacy"
)

// Posterior runs the backbone and the NVIB layer (evaluation mode, no
// sampling) and returns the clipped posterior of the batch (shapes as
// Posterior); for a gaussian model the release's posterior
// (GaussianRelease.Forward: N = ReleaseLen + 1). Errors: baseline model,
// invalid input, non-finite posterior.
func (m *Model) Posterior(in encoder.Input) (*Posterior, error) {
	post, _, err := m.EncodePosterior(in)
	return post, err
}

// EncodePosterior is Posterior that also returns the encoder output x
// [B,S,H] the posterior was computed from: the model's non-private
// representation of the batch, before the NVIB layer or the gaussian
// release (the empirical attacks' upper reference, docs/attacks.md).
func (m *Model) EncodePosterior(in encoder.Input) (*Posterior, *nn.Tensor, error) {
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
	x, _ := m.Backbone.Forward(in, false, nil)
	var post *Posterior
	var err error
	if m.Gauss != nil {
		post, _, err = m.Gauss.Forward(x, in.Mask)
	} else {
		post, _, err = m.NVIB.Forward(x, in.Mask)
	}
	if err != nil {
		return nil, nil, err
	}
	return post, x, nil
}

// ExportMetadata returns the posterior file metadata of the model for a
// dataset split: task, split, model (MetaModel), mode (MetaMode), init, the clipping
// constants (clip_enabled, clip_mu, clip_alpha_min, clip_alpha_max,
// clip_order, clip_logvar_margin, clip_cap_sigma, clip_prior), the prior
// log alpha, kl_mask_pads and pads_released (true: the release has all N
// components, so the default unmasked audit describes it; false, reference
// mode: pads get pi = 0; docs/privacy.md). prior_mu and prior_var are
// written by the privacy package from the Posteriors fields. A gaussian
// model writes its clip set's constants instead (privacy.ClipSet.Metadata:
// clip_mu = C, clip_logvar_floor = clip_logvar_cap = ln sigma^2,
// clip_alpha_min = clip_alpha_max = prior_alpha = GaussianAlpha), plus
// gaussian_release_len, so that `nvdp audit` certifies the file as it
// certifies an nvdp-clipped one.
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
	// metaModeLegacy is where files written before MetaMode kept the mode
	// (under a name that elsewhere means the model kind).
	metaModeLegacy = "variant"
)

// MetadataMode returns the mode of the model that wrote a posterior file,
// from its metadata md: the MetaMode entry or, in a file written before that
// key existed, the "variant" entry (which held the mode, not the model
// kind); ModePrincipled when neither is there. Errors: an unknown mode, or
// both keys present with different modes.
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

// CollectPosteriors concatenates batch posteriors (all with the same N and
// P) into the audit's privacy.Posteriors (the mask as it is: 1 = real
// component, the convention of both packages), with the model's prior and
// meta.
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

// ExportPosteriors computes the posterior of every batch of a dataset split
// (all padded to the same length), writes the audit's posterior file
// (privacy.WritePosteriors: mu, logvar [M,N,P], alpha, attention_mask
// [M,N], metadata from ExportMetadata) to path and returns the posteriors
// as the file holds them (privacy.ReadPosteriors of path gives the same
// values and metadata), for an audit in memory.
func ExportPosteriors(path string, m *Model, batches []encoder.Input, task, split string) (*privacy.Posteriors, error) {
	return ExportPosteriorsWith(path, m, batches, task, split, m.Posterior)
}

// ExportPosteriorsWith is ExportPosteriors with each batch's posterior
// computed by posterior (m.Posterior's twin on another device: the GPU's,
// package dnn); m gives the file's prior and metadata.
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

// FilePosteriors is the posterior file of the model's batch posteriors posts
// of a dataset split, as ExportPosteriors writes it and ReadPosteriors reads
// it back (CollectPosteriors with the model's prior, metadata ExportMetadata
// plus prior_mu and prior_var), without writing it.
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
