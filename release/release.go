// Package release makes the released embeddings of texts under a trained model, as docs/serving.md
// describes. For each text it releases the sample of its clipped posterior: Z [N, P] and the
// Dirichlet weights pi [N], over all N components, the prior's included. It never releases the text,
// its tokens or the posterior's parameters.
//
// A release is exactly what the model's own evaluation samples, as in train.Evaluate and
// [nvib.Model.Forward]. The text is tokenised, truncated to the model's max-seq-len tokens, padded to
// that fixed length, the release length of [model.EvalPadLen], mapped to its clipped posterior by
// [nvib.Model.Posterior], and sampled once per release. Every one of the N components is released,
// padding included, so the release has the same shape for every text. Its certified guarantee is
// [privacy.CertifyCurve] of the model's clip set, [nvib.Config.ClipSet]: the guarantee of
// `nvdp certify --model`.
//
// The sample is drawn exactly; see "Floating-point safety" in docs/privacy.md. A fixed-noise model,
// whose noise scale and pseudo-counts are the same for every input, is the calibrated default and the
// gaussian variant. Every value it releases is G (m + n) on the lattice G = 2^k, where m is the
// clipped mean rounded toward the clip ball's centre and n is an exact normal rounded to the
// lattice, from package noise. The released bits are thus a sample of the mechanism the certificate
// is proved for. A model whose noise depends on the input is refused unless [Options].AllowUnproved
// is set; it is then drawn by the floating-point sampler [nvib.Draw], whose bits no certificate
// covers, and its guarantee's Release says so.
//
// With [Options].Device the posteriors are computed on a GPU by the model's device twin, which runs
// the encoder and the NVIB layer as [dnn.NVDPModel.Posterior]. The posterior comes down and the noise
// comes from the host's exact sampler, as on the CPU. The device's means are the CPU's up to
// rounding; its fixed logvar and pseudo-counts are the CPU's bit for bit.
package release

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/tokenize"
)

// Releaser holds a loaded model, its tokenizer and the certified guarantee of one release. It is
// safe for concurrent use by several goroutines; each call gets its own noise source.
//
// The posteriors of concurrent calls are computed one batch at a time, as the engine's kernels
// already use every core through [nn.Parallel] and OpenBLAS threads, except where OpenBLAS runs
// each call on its caller's thread ([nn.BLASThreads] 1, as a service sets it): then the forward
// passes of concurrent calls run at once, each in a workspace of its own, a core each, where one at
// a time left a core idle while the other's GEMMs ran. The values are the same either way. On a
// device, set by [Options].Device, one forward pass runs at a time, on the device's goroutine.
// Tokenisation, sampling and copying run concurrently. Close frees the device twin.
type Releaser struct {
	bundle *model.TextModel
	info   ModelInfo
	set    privacy.ClipSet
	padLen int // texts are truncated and padded to this many tokens (max-seq-len)

	forward sync.Mutex // one posterior computation at a time, but on the CPU with one BLAS thread
	// works holds the activations of the CPU's forward passes, reused by the next.
	works nn.Workspaces
	// posts holds the memory of the posteriors of a release call, reused by the next call.
	posts nn.Workspaces

	mu        sync.RWMutex // guards what SetDelta and SetBatchSize change
	batchSize int
	guarantee *privacy.Guarantee

	exact *exactRelease // nil: an unproved release (Options.AllowUnproved)

	// dev is the model's twin on a GPU that computes the releases' posteriors
	// (Options.Device; nil: the CPU): the encoder and the NVIB layer (or the
	// gaussian release's projection) run on the device, the posterior comes
	// down, and the exact release is drawn on the host as on the CPU.
	dev       *dnn.ModelTwin
	devClosed bool // guarded by forward
}

// Options configure a Releaser.
type Options struct {
	// AllowUnproved releases a model whose noise scale or pseudo-counts depend on the input with the
	// floating-point sampler. Its bits are not covered by the certificate, see "Floating-point
	// safety" in docs/privacy.md, and its guarantee's Release states it. When false, such a model is
	// refused.
	AllowUnproved bool `json:"allow_unproved"`
	// Device computes the posteriors on a GPU with the model's device twin from package dnn; see
	// "What a release is, exactly" in docs/serving.md. nil computes them on the CPU. The noise comes
	// from the host's exact sampler either way. The caller owns the device and closes it after the
	// Releaser; see [Releaser.Close].
	Device *cuda.Device `json:"-"`
}

// ModelInfo describes the model of a release for metadata and /v1/info.
type ModelInfo struct {
	Dir     string       `json:"dir"`     // the model directory (Load's argument)
	Task    string       `json:"task"`    // the GLUE task it was trained on
	Variant string       `json:"variant"` // nvib.ModelNVDPClipped or nvib.ModelGaussian
	Mode    privacy.Mode `json:"mode"`    // always principled (reference mode is refused)
	Encoder string       `json:"encoder"` // the encoder the model was trained from (model.Options.Encoder)
	// MaxSeqLen is the length, in tokens with the specials included, that texts are truncated and
	// padded to.
	MaxSeqLen int `json:"max_seq_len"`
	N         int `json:"components"` // N, the prior component included: max-seq-len + 1 (gaussian: its release length + 1)
	P         int `json:"dims"`       // P, the latent width
	// Constants are the clip set's constants, from [privacy.ClipSet.Metadata]: those the guarantee
	// certifies.
	Constants map[string]string `json:"constants"`
	// Device is where the posteriors are computed: "cpu", or the GPU's backend as
	// [cuda.Device.Backend] names it, "cuda (card, precision)". The noise is drawn on the host
	// either way.
	Device string `json:"device"`
}

// Embedding is one release: Z [N*P], row-major, and Pi [N], in float32.
type Embedding struct {
	Z  []float32
	Pi []float32
}

// Load reads a model directory written by `nvdp run` or `nvdp train`, through [model.Load], for
// release. The model must be NVDP-Clipped or gaussian, its clip set must certify a finite bound, and
// its noise must be fixed unless opt.AllowUnproved is set.
//
// Load returns an error naming why for a baseline, which has nothing private to release; an
// unclipped nvdp model, which has no finite certificate; a reference-mode model; or a noise that
// depends on the input.
func Load(dir string, opt Options) (*Releaser, error) {
	b, err := model.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	return New(b, opt)
}

// New is [Load] of a model already in memory. b.Dir names it, or is "" for a model built by
// [model.Build]. The releaser uses b.Model and b.Tokenizer and must be the only user of them from
// then on.
func New(b *model.TextModel, opt Options) (*Releaser, error) {
	cfg := b.Model.Cfg
	name := b.Dir
	if name == "" {
		name = "(in memory)"
	}
	switch {
	case cfg.Model == nvib.ModelBaseline:
		return nil, fmt.Errorf("release: model %s is a %s: it has no NVIB posterior and adds no noise, so it has nothing private to release; train nvdp-clipped or gaussian", name, cfg.Model)
	case cfg.Mode.IsReference():
		return nil, fmt.Errorf("release: model %s is in reference mode: it reproduces the released code, whose release gives padding zero weight (revealing the length) and whose clipping (no sigma cap, C_amin 0) certifies no finite bound; train in principled mode", name)
	case cfg.Model == nvib.ModelNVDP:
		return nil, fmt.Errorf("release: model %s is unclipped %s: its means and pseudo-counts are unbounded, so its release has no finite certificate; train nvdp-clipped", name, cfg.Model)
	case !b.Model.PadsReleased():
		return nil, fmt.Errorf("release: model %s (%s) does not release all its components", name, cfg.Model) // no such model today
	}
	padLen, N := b.Options.MaxSeqLen, b.Options.MaxSeqLen+1
	if g := b.Model.Gauss; g != nil {
		if padLen > g.L {
			return nil, fmt.Errorf("release: model %s: max_seq_len %d exceeds the gaussian release length %d", name, padLen, g.L)
		}
		N = g.L + 1
	}
	if positions := b.Encoder.Config.MaxSeqLen(); padLen < 1 || padLen > positions {
		return nil, fmt.Errorf("release: model %s: max_seq_len %d outside [1, %d] (the encoder's positions)", name, padLen, positions)
	}
	set, _ := cfg.ClipSet(N) // ok: not the baseline
	r := &Releaser{bundle: b, set: set, padLen: padLen, batchSize: max(1, b.Options.EvalBatchSize),
		info: ModelInfo{Dir: b.Dir, Task: b.Task.Name, Variant: cfg.Model, Mode: cfg.Mode.OrDefault(), Encoder: b.Options.Encoder,
			MaxSeqLen: padLen, N: N, P: cfg.Latent(), Constants: set.Metadata(), Device: cuda.DeviceCPU}}
	if err := r.SetDelta(privacy.DefaultDelta); err != nil {
		return nil, fmt.Errorf("release: model %s: %w", name, err)
	}
	if g := r.Guarantee(); math.IsInf(float64(g.Epsilon), 1) {
		reason := ""
		if c, err := privacy.Certify(set, privacy.DefaultOrder, privacy.DirectionStandard); err == nil && c.Reason != "" {
			reason = " (" + c.Reason + ")"
		}
		return nil, fmt.Errorf("release: model %s: its clipping certifies no finite bound at any order%s; nothing can be released under a guarantee", name, reason)
	}
	exact, err := newExact(set, cfg.Model == nvib.ModelGaussian)
	switch {
	case err == nil:
		r.exact = exact
	case !errors.Is(err, privacy.ErrNotFixedNoise):
		return nil, fmt.Errorf("release: model %s: %w", name, err)
	case !opt.AllowUnproved:
		return nil, fmt.Errorf("release: model %s: %w; the floating-point sampler reveals such noise (docs/privacy.md, \"Floating-point safety\"), so no certificate covers its bits: train it with a privacy target and the default budget split (variance and Dirichlet shares 0: fixed noise), or the gaussian variant, or allow an unproved release explicitly", name, err)
	}
	if opt.Device != nil {
		t, err := dnn.OpenModelTwin(opt.Device, b.Model)
		if err != nil {
			return nil, fmt.Errorf("release: model %s: %w", name, err)
		}
		r.dev, r.info.Device = t, opt.Device.Backend()
	}
	return r, nil
}

// Close frees the model's device twin, if [Options].Device was set, after the posterior computation
// in progress. The releaser computes no posterior after Close: that is an error. Closing twice is a
// no-op. The caller closes the device after it.
func (r *Releaser) Close() error {
	if r.dev == nil {
		return nil
	}
	r.forward.Lock()
	defer r.forward.Unlock()
	if r.devClosed {
		return nil
	}
	r.devClosed = true
	if err := r.dev.Close(); err != nil {
		return fmt.Errorf("release: freeing the device model: %w", err)
	}
	return nil
}

// errClosed is a posterior asked of a releaser whose device model was freed.
var errClosed = errors.New("release: the releaser is closed (its device model freed)")

// Exact reports whether the releases are exact samples of the certified mechanism. It is false for
// an unproved release, with [Options].AllowUnproved.
func (r *Releaser) Exact() bool { return r.exact != nil }

// ClipSet returns the clip set of the release, [nvib.Config.ClipSet] at the release's N: the set of
// posteriors [Releaser.Guarantee] certifies. The caller owns the copy returned.
func (r *Releaser) ClipSet() privacy.ClipSet {
	s := r.set
	for _, v := range []*[]float64{&s.PriorMu, &s.PriorVar, &s.LogvarFloor, &s.LogvarCap} {
		if *v != nil {
			*v = append([]float64(nil), (*v)...)
		}
	}
	return s
}

// Shape returns the release's N, the number of components, max_seq_len + 1, and P, the latent
// width.
func (r *Releaser) Shape() (n, p int) { return r.info.N, r.info.P }

// Guarantee returns the certified guarantee of ONE release of one text against any other text,
// labelled certified, with its scope. The caller owns the copy returned.
//
// It holds the RDP curve over [privacy.DefaultOrders], computed by [privacy.CertifyCurve] of the
// model's clip set [nvib.Config.ClipSet]; its epsilon at delta, [privacy.DefaultDelta] unless
// [Releaser.SetDelta] changed it; and the best order.
func (r *Releaser) Guarantee() *privacy.Guarantee {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g := *r.guarantee
	g.Curve = append([]privacy.OrderRD(nil), g.Curve...)
	return &g
}

// GuaranteeOf returns the certified guarantee of `releases` releases of one text. RDP composes by
// adding over releases, so its curve is `releases` times Guarantee's, converted to epsilon at the
// same delta. It returns an error when releases < 1.
func (r *Releaser) GuaranteeOf(releases int) (*privacy.Guarantee, error) {
	if releases < 1 {
		return nil, fmt.Errorf("release: %d releases: want >= 1", releases)
	}
	r.mu.RLock()
	delta := r.guarantee.Delta
	r.mu.RUnlock()
	return privacy.CertifyCurve(r.set, privacy.CurveOptions{Direction: privacy.DirectionStandard, Releases: releases, Delta: delta})
}

// SetDelta sets the delta of the guarantees' conversion to (epsilon, delta). It returns an error,
// and leaves the guarantee unchanged, when delta is not in (0, 1).
func (r *Releaser) SetDelta(delta float64) error {
	if err := privacy.CheckDelta(delta); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	g, err := privacy.CertifyCurve(r.set, privacy.CurveOptions{Direction: privacy.DirectionStandard, Releases: 1, Delta: delta})
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	r.mu.Lock()
	r.guarantee = g
	r.mu.Unlock()
	return nil
}

// BatchSize returns the number of texts whose posteriors are computed in one forward pass: the
// model's evaluation batch size unless [Releaser.SetBatchSize] changed it. It changes neither the
// releases' distribution nor, for a seeded source, which noise each text gets.
func (r *Releaser) BatchSize() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.batchSize
}

// SetBatchSize sets BatchSize. It returns an error when n < 1.
func (r *Releaser) SetBatchSize(n int) error {
	if n < 1 {
		return fmt.Errorf("release: batch size %d: want >= 1", n)
	}
	r.mu.Lock()
	r.batchSize = n
	r.mu.Unlock()
	return nil
}

// Model describes the model for metadata and /v1/info: its directory, task, variant, mode, N, P
// and clip constants.
func (r *Releaser) Model() ModelInfo {
	info := r.info
	info.Constants = make(map[string]string, len(r.info.Constants))
	for k, v := range r.info.Constants {
		info.Constants[k] = v
	}
	return info
}

// CheckText reports why text cannot be released: empty or only white space, or not valid UTF-8. The
// error never quotes the text.
func CheckText(text string) error {
	switch {
	case text == "":
		return errors.New("empty text")
	case !utf8.ValidString(text):
		return errors.New("text is not valid UTF-8")
	case strings.TrimSpace(text) == "":
		return errors.New("blank text (only white space)")
	}
	return nil
}

// Release returns one released sample per text, in order. The noise comes from src, which is
// [NewSource] for real releases. Cancelling ctx stops between batches.
//
// The texts are validated first: each must be non-empty and valid UTF-8. An error names the index of
// the bad text, and nothing is released for any of them.
func (r *Releaser) Release(ctx context.Context, texts []string, src *Source) ([]Embedding, error) {
	all, err := r.ReleaseRepeated(ctx, texts, 1, src)
	if err != nil {
		return nil, err
	}
	out := make([]Embedding, len(all))
	for i, e := range all {
		out[i] = e[0]
	}
	return out, nil
}

// ReleaseRepeated returns k >= 1 independent releases of each text, out[i][j] being the j-th of text
// i, from one posterior computation per text. Its certified cost per text is
// [Releaser.GuaranteeOf](k). Validation, errors and cancellation are as in [Releaser.Release]: on
// any error nothing is returned.
//
// The noise of text i is taken from src after that of text i-1. It consists of k draws, each as
// [nvib.Draw] makes it: the N*P standard normals of Z in row-major order, then the N Gamma draws of
// pi. With a seeded source the output thus depends on the texts, k and the seed, and not on the batch
// size.
func (r *Releaser) ReleaseRepeated(ctx context.Context, texts []string, k int, src *Source) ([][]Embedding, error) {
	if src == nil {
		return nil, errors.New("release: no noise source")
	}
	if k < 1 {
		return nil, fmt.Errorf("release: %d releases per text: want >= 1", k)
	}
	out := make([][]Embedding, len(texts))
	err := r.posteriors(ctx, texts, true, func(post *nvib.Posterior, lo, hi int) error {
		for i := range hi - lo {
			es, err := r.draw(ctx, example(post, i), k, src)
			if err != nil {
				return fmt.Errorf("release: text %d: %w", lo+i, err)
			}
			out[lo+i] = es
		}
		for i := lo; i < hi; i++ {
			if err := checkFinite(out[i]); err != nil {
				return fmt.Errorf("release: text %d: %w", i, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Posteriors returns the clipped posteriors that the releases of texts are drawn from, computed as
// [Releaser.Release] computes them: what an attacker who knows the model computes for candidate
// texts, as in package attack. Validation, errors and cancellation are as in Release.
//
// They hold M = len(texts) examples of the release's N components in P dimensions, as a posterior
// file holds them: [nvib.Model.FilePosteriors] with the model's prior, metadata with the clip
// constants, and split "texts".
func (r *Releaser) Posteriors(ctx context.Context, texts []string) (*privacy.Posteriors, error) {
	var posts []*nvib.Posterior
	if err := r.posteriors(ctx, texts, false, func(post *nvib.Posterior, _, _ int) error {
		posts = append(posts, post)
		return nil
	}); err != nil {
		return nil, err
	}
	p, err := r.bundle.Model.FilePosteriors(posts, r.info.Task, "texts")
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	return p, nil
}

// posteriors validates and tokenises texts (every text before any work), then
// computes their clipped posteriors, padded to the release length, one batch
// of BatchSize texts at a time, and hands each batch (texts lo..hi-1) to use.
// With reuse, the batches' posteriors share memory (from r.posts), so each is
// valid only during its use; without, use may keep them. Cancelling ctx
// stops between batches.
func (r *Releaser) posteriors(ctx context.Context, texts []string, reuse bool, use func(post *nvib.Posterior, lo, hi int) error) error {
	encs := make([]tokenize.Encoding, len(texts))
	for i, t := range texts {
		if err := CheckText(t); err != nil {
			return fmt.Errorf("release: text %d: %w", i, err)
		}
	}
	tok := r.bundle.Tokenizer
	for i, t := range texts {
		enc, err := tok.Encode(t, "", r.padLen)
		if err != nil {
			return fmt.Errorf("release: text %d: tokenize: %w", i, err)
		}
		if enc.Len() == 0 {
			return fmt.Errorf("release: text %d: empty encoding", i)
		}
		encs[i] = enc
	}
	batch := &model.Encoded{Encs: encs, PadID: tok.PadID()}
	var posts *nn.Workspace // nil: each posterior newly allocated
	if reuse {
		posts = r.posts.Get()
		defer r.posts.Put(posts)
	}
	bs := r.BatchSize()
	for lo := 0; lo < len(texts); lo += bs {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+bs, len(texts))
		posts.Reset()
		post, err := r.posterior(batch, lo, hi, posts)
		if err != nil {
			return fmt.Errorf("release: texts %d..%d: %w", lo, hi-1, err)
		}
		if err := use(post, lo, hi); err != nil {
			return err
		}
	}
	return nil
}

// posterior computes the clipped posteriors of the texts lo..hi-1 of batch, padded to the release
// length, into out (nil: newly allocated) on the CPU: one forward pass at a time, but with one BLAS
// thread (Releaser).
func (r *Releaser) posterior(batch *model.Encoded, lo, hi int, out *nn.Workspace) (*nvib.Posterior, error) {
	idx := make([]int, hi-lo)
	for i := range idx {
		idx[i] = lo + i
	}
	in, _ := batch.Batch(idx, r.padLen)
	if r.dev == nil {
		if nn.BLASThreads() != 1 {
			r.forward.Lock()
			defer r.forward.Unlock()
		}
		work := r.works.Get()
		defer r.works.Put(work)
		work.Reset()
		return r.bundle.Model.PosteriorInfer(in, work, out)
	}
	r.forward.Lock()
	defer r.forward.Unlock()
	if r.devClosed {
		return nil, errClosed
	}
	post, err := r.dev.Posterior(in)
	if err != nil {
		return nil, fmt.Errorf("device: %w", err)
	}
	return post, nil
}

// example is example i of a batch posterior as a posterior of one (sharing its memory).
func example(post *nvib.Posterior, i int) *nvib.Posterior {
	N, P := post.N, post.P
	return &nvib.Posterior{B: 1, N: N, P: P,
		Mu:     nn.FromData(post.Mu.Data[i*N*P:(i+1)*N*P], 1, N, P),
		Logvar: nn.FromData(post.Logvar.Data[i*N*P:(i+1)*N*P], 1, N, P),
		Alpha:  nn.FromData(post.Alpha.Data[i*N:(i+1)*N], 1, N),
		Mask:   post.Mask[i*N : (i+1)*N], PadsReleased: post.PadsReleased}
}

// draw samples k releases of a posterior of one example: exactly (exactRelease, its noise from src's
// pool or seed) or, for an unproved release, as the model's forward pass samples it (nvib.Draw,
// nvib.DrawGaussian).
func (r *Releaser) draw(ctx context.Context, post *nvib.Posterior, k int, src *Source) ([]Embedding, error) {
	out := make([]Embedding, k)
	if r.exact == nil {
		src.use(func(rng *rand.Rand) {
			for j := range out {
				var s *nvib.Sample
				if r.bundle.Model.Gauss != nil {
					s = nvib.DrawGaussian(post, rng)
				} else {
					s = nvib.Draw(post, rng)
				}
				out[j] = Embedding{Z: s.Z.Data, Pi: s.Dir.Pi}
			}
		})
		return out, nil
	}
	for j := range out {
		d, err := src.exactDraw(ctx, r.exact)
		if err != nil {
			return nil, err
		}
		out[j], err = r.exact.apply(post, d)
		src.done(d)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkFinite rejects a release with a non-finite value (impossible for a finite clipped posterior;
// checked so that nothing undefined is ever released).
func checkFinite(es []Embedding) error {
	for j, e := range es {
		for _, v := range [][]float32{e.Z, e.Pi} {
			if i := nn.NonFinite(v); i >= 0 {
				return fmt.Errorf("release %d: non-finite value %v in the sample", j, v[i])
			}
		}
	}
	return nil
}
