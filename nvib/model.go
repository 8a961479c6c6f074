package nvib

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/privacy"
)

// Model kinds.
const (
	ModelBaseline    = "baseline"     // encoder + head, no NVIB
	ModelNVDP        = "nvdp"         // NVIB + NVDP block, no clipping
	ModelNVDPClipped = "nvdp-clipped" // NVIB with clipping + NVDP block
	// ModelGaussian is the Gaussian-mechanism baseline in the style of
	// DP-Forward. Each encoder output row is clipped to the L2 ball of
	// radius C = Clip.CMu around 0 and gets N(0, prior_var I) noise, at all
	// ReleaseLen positions; the same NVDP block and head read the release.
	// See [GaussianRelease] and docs/model.md.
	ModelGaussian = "gaussian"
)

// KL weight schedules s(t), as in ref §4.
const (
	ScheduleConstant    = "constant"     // s = 1
	ScheduleLinearDecay = "linear-decay" // s = max(0, (T-t)/T) (reference, --NVIB_use_scaling_factor)
	ScheduleWarmup      = "warmup"       // s = min(1, t/(wT))
	ScheduleWarmupDecay = "warmup-decay" // t/(wT) for t < wT, then (T-t)/(T-wT) (reference with warm-up w > 0)
)

// ConfigFile is the model configuration's file name inside a model directory.
const ConfigFile = "nvdp_config.json"

// Config is the full NVDP model configuration, saved as JSON in a model
// directory.
type Config struct {
	Model        string       `json:"model"`        // baseline | nvdp | nvdp-clipped | gaussian
	Mode         privacy.Mode `json:"mode"`         // principled | reference
	Hidden       int          `json:"hidden"`       // H, the encoder's hidden size
	Heads        int          `json:"heads"`        // attention heads of the NVDP block (the encoder's count)
	Intermediate int          `json:"intermediate"` // the encoder's FFN width (the block's: BlockIntermediate)
	// LatentDim is P, the width of the release: of the NVIB posterior's mu
	// and logvar, the sample Z, the gaussian release, the NVDP block and the
	// head; see "Latent width P" in docs/model.md. [Config.Latent] returns P.
	//
	// 0 means P = Hidden, as in the released code and in every model written
	// before the option, whose nvdp_config.json lacks the key. P != Hidden
	// is for principled mode only, for the models with a release, and needs
	// P divisible by Heads.
	LatentDim    int     `json:"latent_dim,omitempty"`
	LayerNormEps float64 `json:"layer_norm_eps"`
	Dropout      float64 `json:"dropout"`
	NumLabels    int     `json:"num_labels"` // 1 = regression (MSE)
	Head         string  `json:"head"`       // mean | first-token
	// HeadReads is what the head pools. [HeadReadsBlock], also written "" as
	// in every model written before the option, pools the NVDP block's
	// output. [HeadReadsRelease] pools the released atoms Z of the token
	// components themselves, with no NVDP block; see "The head over the
	// release" in docs/model.md.
	HeadReads string `json:"head_reads,omitempty"`

	Prior    Prior   `json:"prior"`
	Delta    float64 `json:"delta"`
	Init     string  `json:"init"` // nvib | hf
	MuTau    float64 `json:"mu_tau"`
	StdevTau float64 `json:"stdev_tau"`
	AlphaTau float64 `json:"alpha_tau"`
	// Clip is used by nvdp-clipped, where Enabled is forced on; it is forced
	// off for nvdp and gaussian. A gaussian model reads only Clip.CMu, the
	// radius C of the token-embedding ball of [GaussianRelease].
	Clip ClipConfig `json:"clip"`
	// ReleaseLen is the number L of token positions a gaussian release
	// always has, the max-seq-len. Positions past the batch's padded length
	// are pads: 0 plus noise. It must be at least 1 for gaussian and 0 for
	// the other models.
	ReleaseLen int `json:"release_len,omitempty"`

	LambdaG    float64 `json:"lambda_g"`
	LambdaD    float64 `json:"lambda_d"`
	KLSchedule string  `json:"kl_schedule"`
	KLWarmup   float64 `json:"kl_warmup"` // warm-up fraction w of the total steps
}

// DefaultConfig returns the configuration of model kind for an encoder of
// the given hidden size, heads and intermediate size.
//
// It has the reference CLI defaults: C_mu 8, C_amax 1.5, lambda 1.1,
// alpha_tau -10, stdev_tau 0.1, mu_tau 1, delta 0, lambda_G = lambda_D =
// 1e-2 and the linear-decay KL schedule. The head is "mean". Clipping
// follows [DefaultClip](mode, 8, 1.5).
//
// The initialisation is "hf" in reference mode, which is what the release
// runs, and "clip" in principled mode, the intended NVIB initialisation
// moved inside the clipping region. Under clipping, the "nvib" init freezes
// logvar and alpha at the clip bounds with zero gradient, and "hf" starts
// sigma at the prior sigma with mu near 0, so that a model trained from
// scratch learns nothing through the bottleneck; see docs/model.md.
func DefaultConfig(model string, mode privacy.Mode, hidden, heads, intermediate, numLabels int) Config {
	c := Config{Model: model, Mode: mode, Hidden: hidden, Heads: heads, Intermediate: intermediate,
		LayerNormEps: 1e-12, NumLabels: numLabels, Head: HeadMean, Prior: DefaultPrior(),
		Init: DefaultInit(mode), MuTau: 1, StdevTau: 0.1, AlphaTau: -10, Clip: DefaultClip(mode, 8, 1.5),
		LambdaG: 1e-2, LambdaD: 1e-2, KLSchedule: ScheduleLinearDecay}
	c.Clip.Enabled = model == ModelNVDPClipped
	return c
}

// Latent returns P, the width of the release: LatentDim, or Hidden when it
// is 0.
func (c Config) Latent() int {
	if c.LatentDim == 0 {
		return c.Hidden
	}
	return c.LatentDim
}

// ClipSet returns the clip set of the release of a model with configuration
// c, for N components in the release's P = c.Latent() dimensions. N is
// max-seq-len + 1, and P is the encoder's hidden size unless a latent width
// is set.
//
// For nvdp and nvdp-clipped the set is the layer's clipping as [NewModel]
// configures it, enabled for nvdp-clipped only. For a gaussian model it is
// [GaussianClipSet] of its radius and noise, with L = N-1 positions. ok is
// false for the baseline, which has no release.
func (c Config) ClipSet(N int) (set privacy.ClipSet, ok bool) {
	P := c.Latent()
	switch c.Model {
	case ModelBaseline:
		return privacy.ClipSet{}, false
	case ModelGaussian:
		return GaussianClipSet(c.Clip.CMu, c.Prior.Var, N-1, P), true
	}
	clip := c.Clip
	clip.Enabled = c.Model == ModelNVDPClipped
	return clip.ClipSet(c.Prior, N, P), true
}

// BlockIntermediate returns the FFN width of the NVDP block: the encoder's
// Intermediate scaled by P/H, that is floor(Intermediate * P / Hidden), and
// at least 1. This keeps the encoder's ratio I/H, 4 for BERT, at the
// block's width P, and gives Intermediate itself at P = H.
func (c Config) BlockIntermediate() int {
	P := c.Latent()
	if P == c.Hidden || c.Hidden < 1 {
		return c.Intermediate
	}
	return max(1, c.Intermediate*P/c.Hidden)
}

// DefaultInit returns the NVIB initialisation of a mode: [InitHF] in
// reference mode, which the released code runs, and [InitClip] in
// principled mode; [DefaultConfig] says why.
func DefaultInit(mode privacy.Mode) string {
	if mode.IsReference() {
		return InitHF
	}
	return InitClip
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch c.Model {
	case ModelBaseline, ModelNVDP, ModelNVDPClipped, ModelGaussian:
	default:
		return fmt.Errorf("model config: unknown model %q (want baseline, nvdp, nvdp-clipped or gaussian)", c.Model)
	}
	if !c.Mode.Valid() {
		return fmt.Errorf("model config: unknown mode %q", c.Mode)
	}
	if c.NumLabels < 1 {
		return fmt.Errorf("model config: num_labels %d", c.NumLabels)
	}
	if c.LambdaG < 0 || c.LambdaD < 0 || math.IsNaN(c.LambdaG) || math.IsNaN(c.LambdaD) {
		return fmt.Errorf("model config: lambda_G %v, lambda_D %v must be >= 0", c.LambdaG, c.LambdaD)
	}
	switch c.KLSchedule {
	case ScheduleConstant, ScheduleLinearDecay, ScheduleWarmup, ScheduleWarmupDecay, "":
	default:
		return fmt.Errorf("model config: unknown kl_schedule %q", c.KLSchedule)
	}
	if c.KLWarmup < 0 || c.KLWarmup >= 1 {
		return fmt.Errorf("model config: kl_warmup %v outside [0,1)", c.KLWarmup)
	}
	if err := c.validateLatent(); err != nil {
		return err
	}
	if err := c.validateHeadReads(); err != nil {
		return err
	}
	if c.Model == ModelNVDPClipped {
		cl := c.Clip
		cl.Enabled = true
		if err := cl.Validate(); err != nil {
			return fmt.Errorf("model config: %w", err)
		}
	}
	if c.Model == ModelGaussian {
		switch {
		case c.Mode.IsReference():
			return errors.New("model config: the gaussian model has no reference mode (use principled)")
		case !(c.Clip.CMu > 0) || math.IsInf(c.Clip.CMu, 0):
			return fmt.Errorf("model config: gaussian radius C = clip.c_mu = %v, want a finite value > 0", c.Clip.CMu)
		case c.ReleaseLen < 1:
			return fmt.Errorf("model config: gaussian release_len %d, want >= 1 (max-seq-len)", c.ReleaseLen)
		case !(c.Prior.Var > 0) || math.IsInf(c.Prior.Var, 0):
			return fmt.Errorf("model config: gaussian noise variance prior.var = %v, want a finite value > 0", c.Prior.Var)
		}
	}
	return nil
}

// Head inputs, the values of [Config.HeadReads].
const (
	// HeadReadsBlock makes the head pool the NVDP block's output y, as in
	// ref §3.2: the released code's architecture.
	HeadReadsBlock = "block"
	// HeadReadsRelease makes the head's mean pool read the released atoms
	// z_1..z_S of the token components directly, a mean over the released
	// rows with no NVDP block. It is for principled models with a release
	// and a mean head. Like the block's output, the result is a function of
	// the release alone, a post-processing.
	//
	// The motivation: the mechanism's best use of one release for a binary
	// decision writes the decision into every row and averages the rows;
	// see "Closing the gap" in docs/results.md. The mean does that without
	// having to be learnt through attention.
	HeadReadsRelease = "release"
)

// readsRelease reports whether the head pools the released atoms
// (HeadReadsRelease) rather than the block's output.
func (c Config) readsRelease() bool { return c.HeadReads == HeadReadsRelease }

// validateHeadReads checks HeadReads: "" or HeadReadsBlock for every
// model; HeadReadsRelease only for a principled model with a release
// (nvdp, nvdp-clipped, gaussian) and a mean head.
func (c Config) validateHeadReads() error {
	switch c.HeadReads {
	case "", HeadReadsBlock:
		return nil
	case HeadReadsRelease:
	default:
		return fmt.Errorf("model config: unknown head_reads %q (want %q or %q)", c.HeadReads, HeadReadsBlock, HeadReadsRelease)
	}
	switch {
	case c.Model == ModelBaseline:
		return errors.New("model config: head_reads release needs a model with a release (the baseline has none)")
	case c.Mode.IsReference():
		return errors.New("model config: head_reads release is principled mode only (the released code has the NVDP block)")
	case c.Head != "" && c.Head != HeadMean:
		return fmt.Errorf("model config: head_reads release needs the %q head, not %q", HeadMean, c.Head)
	}
	return nil
}

// validateLatent checks LatentDim: 0 (P = Hidden) or a width CheckLatent
// accepts.
func (c Config) validateLatent() error {
	if c.LatentDim == 0 {
		return nil
	}
	if err := CheckLatent(c.Model, c.Mode, c.LatentDim, c.Hidden, c.Heads); err != nil {
		return fmt.Errorf("model config: latent_dim %d: %w", c.LatentDim, err)
	}
	return nil
}

// CheckLatent checks a latent width P for a model of kind model in mode, on
// an encoder of the given hidden size H and with the NVDP block's number of
// attention heads.
//
// P must be at least 1 and divisible by heads. P != H needs a model with a
// release, not the baseline, in principled mode: the released code's
// projections are square, and reference-mode queries read x [B,S,H].
//
// The error says what is wrong without the value; callers name it.
func CheckLatent(model string, mode privacy.Mode, P, hidden, heads int) error {
	switch {
	case P < 1:
		return errors.New("the release's width must be >= 1")
	case P == hidden:
		return nil
	case model == ModelBaseline:
		return fmt.Errorf("the baseline has no release (its head reads the hidden size %d)", hidden)
	case mode.IsReference():
		return fmt.Errorf("reference mode reproduces the released code, whose release has the hidden size %d", hidden)
	case heads < 1 || P%heads != 0:
		return fmt.Errorf("not divisible by the NVDP block's %d attention heads", heads)
	}
	return nil
}

// KLScale returns the KL weight s(t) for optimizer step t of total T, as in
// ref §4.
func (c Config) KLScale(step, total int) float64 {
	t, T := float64(step), float64(max(total, 1))
	w := c.KLWarmup * T
	switch c.KLSchedule {
	case ScheduleLinearDecay:
		return math.Max(0, (T-t)/T)
	case ScheduleWarmup:
		if w <= 0 {
			return 1
		}
		return math.Min(1, t/w)
	case ScheduleWarmupDecay:
		if t < w {
			return t / w
		}
		return math.Max(0, (T-t)/(T-w))
	}
	return 1
}

// SaveConfig writes c as JSON to dir/nvdp_config.json.
func SaveConfig(dir string, c Config) error {
	if err := atomicfile.WriteJSON(filepath.Join(dir, ConfigFile), c); err != nil {
		return fmt.Errorf("save model config: %w", err)
	}
	return nil
}

// LoadConfig reads and validates dir/nvdp_config.json. Unknown fields are
// an error.
func LoadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, ConfigFile)
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("load model config: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("model config %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("model config %s: %w", path, err)
	}
	return c, nil
}

// Backbone is the pretrained encoder under the NVIB: an [encoder.Encoder]
// through [EncoderBackbone], or a test double.
type Backbone interface {
	Forward(in encoder.Input, train bool, rng *rand.Rand) (*nn.Tensor, any) // [B,S,Hidden]
	Backward(cache any, dx *nn.Tensor)
	Params() []*nn.Param
	Hidden() int
}

// EncoderBackbone adapts [*encoder.Encoder] to [Backbone].
type EncoderBackbone struct{ *encoder.Encoder }

// Forward runs the encoder.
func (e EncoderBackbone) Forward(in encoder.Input, train bool, rng *rand.Rand) (*nn.Tensor, any) {
	return e.Encoder.Forward(in, train, rng)
}

// Backward back-propagates into the encoder.
func (e EncoderBackbone) Backward(c any, dx *nn.Tensor) { e.Encoder.Backward(c.(*encoder.Cache), dx) }

// Model is one of the model kinds: the baseline, a backbone and a head;
// NVDP, a backbone, the NVIB layer, the NVDP block and a head; or gaussian,
// a backbone, a [GaussianRelease], the NVDP block and a head.
type Model struct {
	Cfg      Config
	Backbone Backbone
	NVIB     *Layer           // nil for baseline and gaussian
	Gauss    *GaussianRelease // gaussian only
	Block    *Block           // nil for baseline
	Head     *Head

	testLogGamma func(k int, a float64) float64 // tests: fixed-quantile Gamma draws
}

// NewModel builds the model on a backbone; rng initialises the new layers.
//
// A nil backbone makes a model whose features [B, S, cfg.Hidden] come from
// the caller through [Model.ForwardFeatures] and [Model.BackwardFeatures];
// Params then has no backbone parameters. The speech task runs its Wav2Vec2
// encoder so.
//
// The parameters are named "nvib.*", "nvdp.*" with Hugging Face BertLayer
// names, and "classifier.*"; the backbone's own names are unchanged.
func NewModel(cfg Config, bb Backbone, rng *rand.Rand) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if bb != nil && cfg.Hidden != bb.Hidden() {
		return nil, fmt.Errorf("model config: hidden %d, backbone hidden %d", cfg.Hidden, bb.Hidden())
	}
	m := &Model{Cfg: cfg, Backbone: bb}
	P := cfg.Latent()
	if cfg.Model != ModelBaseline {
		if cfg.Model == ModelGaussian {
			m.Gauss = NewGaussianRelease(cfg)
		} else {
			clip := cfg.Clip
			clip.Enabled = cfg.Model == ModelNVDPClipped
			var err error
			m.NVIB, err = NewLayer("nvib", LayerConfig{Hidden: cfg.Hidden, Latent: P, Heads: cfg.Heads, Mode: cfg.Mode, Prior: cfg.Prior,
				Clip: clip, Init: cfg.Init, MuTau: cfg.MuTau, StdevTau: cfg.StdevTau, AlphaTau: cfg.AlphaTau}, rng)
			if err != nil {
				return nil, err
			}
		}
		var err error
		if !cfg.readsRelease() {
			if m.Block, err = NewBlock("nvdp", BlockConfig{Hidden: P, Heads: cfg.Heads, Intermediate: cfg.BlockIntermediate(),
				LayerNormEps: cfg.LayerNormEps, Dropout: cfg.Dropout, Mode: cfg.Mode}, rng); err != nil {
				return nil, err
			}
		}
	}
	head := cfg.Head
	if head == "" {
		head = HeadMean
	}
	var err error
	if m.Head, err = NewHead(head, P, cfg.NumLabels, cfg.Dropout, rng); err != nil {
		return nil, err
	}
	return m, nil
}

// Params returns the parameters of the backbone, the NVIB layer or the
// gaussian release's projection when it has one (P != H), the block and the
// head. Their names are unique.
func (m *Model) Params() []*nn.Param {
	var ps []*nn.Param
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

// ClipRadius returns the radius the clip of the forward passes projects
// onto: the NVIB layer's C_mu for nvdp-clipped, or the gaussian release's C.
// It is 0 for models without a clip.
func (m *Model) ClipRadius() float64 {
	switch {
	case m.Gauss != nil:
		return m.Gauss.C
	case m.NVIB != nil && m.NVIB.Cfg.Clip.Enabled:
		return m.NVIB.Cfg.Clip.CMu
	}
	return 0
}

// SetClipRadius sets the radius r the clip projects onto in the forward
// passes that follow: the NVIB layer's C_mu for nvdp-clipped, or the
// gaussian release's C. It has no effect on a model without a clip.
//
// Cfg, the configuration the model is saved, certified and released with,
// is left as it is. A training schedule of the radius,
// model.RadiusSchedule, sets it per step and puts Cfg.Clip.CMu back
// before any evaluation.
//
// SetClipRadius panics on a radius that is not finite and positive, which
// is a programmer error.
func (m *Model) SetClipRadius(r float64) {
	if !(r > 0) || math.IsInf(r, 0) {
		panic(fmt.Sprintf("nvib: clip radius %v", r))
	}
	switch {
	case m.Gauss != nil:
		m.Gauss.C = r
	case m.NVIB != nil && m.NVIB.Cfg.Clip.Enabled:
		m.NVIB.Cfg.Clip.CMu = r
	}
}

// HasKL reports whether the model has the KL regularisers weighted by
// lambda: nvdp and nvdp-clipped do, the baseline and gaussian do not.
func HasKL(model string) bool { return model == ModelNVDP || model == ModelNVDPClipped }

// Calibratable reports whether a clipping of the model can be calibrated to
// a certified target: true for nvdp-clipped and gaussian, false for nvdp
// and the baseline, which have no clipping.
func Calibratable(model string) bool { return model == ModelNVDPClipped || model == ModelGaussian }

// Releases reports whether the model makes a release, an NVIB posterior
// sample or a gaussian release: every model but the baseline does.
func (m *Model) Releases() bool { return m.NVIB != nil || m.Gauss != nil }

// KLConfig returns the regulariser settings of the model.
//
// Padding components count in both modes: MaskPads is false and N = S+1. In
// principled mode they are released as ordinary components, see
// [Posterior.PadsReleased], so the KL terms regularise what is released;
// the reference ignores the mask, as in ref §4 and §10 item 1. Hence N in
// L_D depends on how the batch is padded, and training pads dynamically;
// see "Padding components" in docs/model.md.
func (m *Model) KLConfig() KLConfig {
	return KLConfig{Prior: m.Cfg.Prior, Delta: m.Cfg.Delta}
}

// PadsReleased reports whether the model's release, the sample Z and pi,
// has every one of the N = S+1 components with Dirichlet mass, padding
// included.
//
// It is true for principled NVDP models, whose outputs then depend on the
// padded length S but not on the mask. Their predictions should be computed
// on inputs padded to the release length, max-seq-len, as
// model.EvalPadLen does; training at that length was measured to make no
// difference, see "Padding components" in docs/model.md. It is true for
// gaussian, whose release always has Cfg.ReleaseLen positions whatever the
// batch's padding. It is false for the baseline and in reference mode,
// where pads get pi = 0 and the outputs do not depend on the padding.
func (m *Model) PadsReleased() bool {
	return m.Gauss != nil || (m.NVIB != nil && !m.Cfg.Mode.IsReference())
}

// headMask is the mask the head pools with: nil (every row) for a model
// whose pads are released (its output must be a function of (Z, pi) alone),
// else the input's token mask.
func (m *Model) headMask(mask []float32) []float32 {
	if m.PadsReleased() {
		return nil
	}
	return mask
}

// Labels are the targets of a batch: Class [B] for classification, when
// num_labels > 1, or Value [B] for regression, when num_labels = 1.
type Labels struct {
	Class []int
	Value []float32
}

// ForwardOptions control one forward pass.
type ForwardOptions struct {
	Train bool
	Rng   *rand.Rand // dropout and NVDP sampling (NVDP samples at evaluation too)
	// KLScale is s(t) from [Config.KLScale]. Evaluation uses 1, as the
	// reference does.
	KLScale float64
}

// Output is the result of a forward pass.
type Output struct {
	Logits *nn.Tensor // [B, num_labels]
	// Loss = Task + lambda_G s LG + lambda_D s LD, as batch means in nats;
	// all are 0 without labels.
	Loss, Task, LG, LD float64
	KL                 KLResult   // per-example L_G, L_D (NVDP only)
	Posterior          *Posterior // clipped posterior (NVDP and gaussian)
	Sample             *Sample    // the draw used (NVDP and gaussian)
}

// Cache holds what [Model.Backward] needs.
type Cache struct {
	bbCache any
	x       *nn.Tensor
	layer   *LayerCache
	gauss   *GaussianCache
	block   *BlockCache
	head    *HeadCache
	dlogits *nn.Tensor
	klScale float64
	out     *Output
}

// Forward runs the model on a batch: the backbone, then ForwardFeatures on
// its output. With labels it also computes the loss, cross-entropy or MSE
// when num_labels = 1, and its gradient seed for Backward.
//
// Forward returns an error for a model without a backbone, built by
// [NewModel] with nil, which must use [Model.ForwardFeatures]; for input
// the backbone's CheckInput rejects; for a label count mismatch; and for a
// non-finite posterior or loss.
func (m *Model) Forward(in encoder.Input, labels *Labels, opt ForwardOptions) (*Output, *Cache, error) {
	if m.Backbone == nil {
		return nil, nil, errNoBackbone
	}
	if ci, ok := m.Backbone.(interface{ CheckInput(encoder.Input) error }); ok {
		if err := ci.CheckInput(in); err != nil {
			return nil, nil, err
		}
	}
	if len(in.IDs) != in.B*in.S || (in.Mask != nil && len(in.Mask) != in.B*in.S) {
		return nil, nil, fmt.Errorf("model input: ids %d, mask %d, want B*S = %d", len(in.IDs), len(in.Mask), in.B*in.S)
	}
	x, bbCache := m.Backbone.Forward(in, opt.Train, opt.Rng)
	out, c, err := m.ForwardFeatures(x, in.Mask, labels, opt)
	if err != nil {
		return nil, nil, err
	}
	c.bbCache = bbCache
	return out, c, nil
}

// errNoBackbone is the error of Forward and Backward on a model built
// without a backbone.
var errNoBackbone = errors.New("nvib: the model has no backbone: its features come from the caller (ForwardFeatures, BackwardFeatures)")

// ForwardFeatures runs everything after the backbone on its output x
// [B, S, Hidden]: the NVIB layer or the gaussian release, the NVDP block
// and the head, with the loss when labels are given. The token mask [B*S]
// holds 1 for a real position and 0 for padding; nil means every position
// is real.
//
// It is the entry point of a model whose backbone the caller runs itself,
// built by [NewModel] with a nil backbone, such as a speech encoder whose
// input is no [encoder.Input]. [Model.BackwardFeatures] returns dL/dx for
// it.
//
// ForwardFeatures returns an error for a shape mismatch, a label count
// mismatch, or a non-finite posterior or loss.
func (m *Model) ForwardFeatures(x *nn.Tensor, mask []float32, labels *Labels, opt ForwardOptions) (*Output, *Cache, error) {
	if len(x.Shape) != 3 || x.Shape[2] != m.Cfg.Hidden {
		return nil, nil, fmt.Errorf("model features: shape %v, want [B, S, %d]", x.Shape, m.Cfg.Hidden)
	}
	B, S := x.Shape[0], x.Shape[1]
	if mask != nil && len(mask) != B*S {
		return nil, nil, fmt.Errorf("model features: mask of %d, want B*S = %d", len(mask), B*S)
	}
	c := &Cache{klScale: opt.KLScale}
	out := &Output{}
	c.out = out
	c.x = x
	y := c.x
	if m.Gauss != nil {
		post, gc, err := m.Gauss.Forward(c.x, mask)
		if err != nil {
			return nil, nil, err
		}
		c.gauss = gc
		out.Posterior = post
		out.Sample = DrawGaussian(post, opt.Rng)
		y = m.headInput(c, post, out.Sample, opt)
	}
	if m.NVIB != nil {
		post, lc, err := m.NVIB.Forward(c.x, mask)
		if err != nil {
			return nil, nil, err
		}
		c.layer = lc
		out.Posterior = post
		out.Sample = drawWith(post, opt.Rng, m.testLogGamma)
		y = m.headInput(c, post, out.Sample, opt)
		out.KL = KL(m.KLConfig(), post.Mu.Data, post.Logvar.Data, post.Alpha.Data, post.Mask, post.B, post.N, post.P)
		out.LG, out.LD = out.KL.MeanLG, out.KL.MeanLD
	}
	out.Logits, c.head = m.Head.Forward(y, m.headMask(mask), opt.Train, opt.Rng)
	if labels == nil {
		return out, c, nil
	}
	switch {
	case m.Cfg.NumLabels == 1:
		if len(labels.Value) != B {
			return nil, nil, fmt.Errorf("labels: %d regression targets for a batch of %d", len(labels.Value), B)
		}
		out.Task, c.dlogits = nn.MSE(out.Logits, labels.Value)
	default:
		if len(labels.Class) != B {
			return nil, nil, fmt.Errorf("labels: %d class labels for a batch of %d", len(labels.Class), B)
		}
		for i, l := range labels.Class {
			if l < 0 || l >= m.Cfg.NumLabels {
				return nil, nil, fmt.Errorf("labels: example %d has label %d, want 0..%d", i, l, m.Cfg.NumLabels-1)
			}
		}
		out.Task, c.dlogits = nn.SoftmaxCrossEntropy(out.Logits, labels.Class)
	}
	out.Loss = out.Task + opt.KLScale*(m.Cfg.LambdaG*out.LG+m.Cfg.LambdaD*out.LD)
	if math.IsNaN(out.Loss) || math.IsInf(out.Loss, 0) {
		return nil, nil, fmt.Errorf("loss is %v (task %v, L_G %v, L_D %v)", out.Loss, out.Task, out.LG, out.LD)
	}
	return out, c, nil
}

// headInput returns the rows the head reads from the sample s of post: the
// NVDP block's output [B,S,P] (its cache kept in c), or with
// HeadReadsRelease the atoms of the token components, rows 1..N-1 of
// s.Z [B,N,P] (the prior component 0 is the same for every input).
func (m *Model) headInput(c *Cache, post *Posterior, s *Sample, opt ForwardOptions) *nn.Tensor {
	if !m.Cfg.readsRelease() {
		var y *nn.Tensor
		y, c.block = m.Block.Forward(c.x, post, s, opt.Train, opt.Rng)
		return y
	}
	B, N, P := post.B, post.N, post.P
	y := nn.New(B, N-1, P)
	for b := 0; b < B; b++ {
		copy(y.Data[b*(N-1)*P:(b+1)*(N-1)*P], s.Z.Data[(b*N+1)*P:(b+1)*N*P])
	}
	return y
}

// headInputBackward is the gradient of headInput: dZ [B,N,P] (zero on the
// prior component), dln(pi) [B,N] and the query path's dx (nil but for
// reference-mode blocks) from dy, the gradient of the rows the head read.
func (m *Model) headInputBackward(c *Cache, s *Sample, dy *nn.Tensor) (dZ *nn.Tensor, dLogPi []float64, dxq *nn.Tensor) {
	if !m.Cfg.readsRelease() {
		return m.Block.Backward(c.block, s, dy)
	}
	B, N, P := s.Z.Shape[0], s.Z.Shape[1], s.Z.Shape[2]
	dZ = nn.New(B, N, P)
	for b := 0; b < B; b++ {
		copy(dZ.Data[(b*N+1)*P:(b+1)*N*P], dy.Data[b*(N-1)*P:(b+1)*(N-1)*P])
	}
	return dZ, nil, nil
}

// ErrNoLabels is returned by Backward for a forward pass without labels.
var ErrNoLabels = errors.New("nvib: backward needs a forward pass with labels")

// Backward accumulates d Loss / d param into every parameter's Grad, the
// backbone's included. It returns [ErrNoLabels] after a forward pass
// without labels, and an error for a model without a backbone, which must
// use [Model.BackwardFeatures].
func (m *Model) Backward(c *Cache) error {
	if m.Backbone == nil {
		return errNoBackbone
	}
	dx, err := m.BackwardFeatures(c)
	if err != nil {
		return err
	}
	m.Backbone.Backward(c.bbCache, dx)
	return nil
}

// BackwardFeatures accumulates d Loss / d param into the Grad of every
// parameter after the backbone: the NVIB layer or gaussian release, the
// block and the head. It returns dL/dx [B, S, Hidden] for the features x
// that ForwardFeatures was given, or [ErrNoLabels].
func (m *Model) BackwardFeatures(c *Cache) (*nn.Tensor, error) {
	if c.dlogits == nil {
		return nil, ErrNoLabels
	}
	dy := m.Head.Backward(c.head, c.dlogits)
	if m.Gauss != nil {
		// dz/dmu = 1; the logvar and the uniform weights are constants
		dZ, _, _ := m.headInputBackward(c, c.out.Sample, dy)
		return m.Gauss.Backward(c.gauss, dZ), nil
	}
	if m.NVIB == nil {
		return dy, nil
	}
	post, s := c.out.Posterior, c.out.Sample
	dZ, dLogPi, dxq := m.headInputBackward(c, s, dy)
	dmu, dlv, dal := nn.New(post.Mu.Shape...), nn.New(post.Logvar.Shape...), nn.New(post.Alpha.Shape...)
	s.Backward(post, dZ, dLogPi, dmu, dlv, dal)
	KLBackward(m.KLConfig(), post.Mu.Data, post.Logvar.Data, post.Alpha.Data, post.Mask, post.B, post.N, post.P,
		c.klScale*m.Cfg.LambdaG, c.klScale*m.Cfg.LambdaD, dmu.Data, dlv.Data, dal.Data)
	dx := m.NVIB.Backward(c.layer, dmu, dlv, dal)
	if dxq != nil {
		nn.AddInPlace(dx, dxq)
	}
	return dx, nil
}
