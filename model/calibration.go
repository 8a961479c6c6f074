package model

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// CertificateFile is the calibration record in a model directory of a run
// with a privacy target.
const CertificateFile = "certificate.json"

// Calibration is DIR/certificate.json: the privacy target, how the budget was
// split, the clipping constants chosen, and the certified guarantee of the
// model's clipping, as in [privacy.Calibration], with the constants as the
// model stores them.
type Calibration struct {
	Label string `json:"label"` // "certified"
	Scope string `json:"scope"`
	// Variant is the model variant ("gaussian": CMu is the token radius C,
	// the logvar range is [ln sigma^2, ln sigma^2] and the pseudo-counts are
	// nvib.GaussianAlpha; LogvarMargin and ClipOrder do not apply).
	Variant string `json:"variant,omitempty"`
	*privacy.Calibration
	Components   int     `json:"components"` // N = max-seq-len + 1 (prior component included)
	Dims         int     `json:"dims"`       // P = the release's width (latent_dim; the encoder's hidden size when not set)
	CMu          float64 `json:"c_mu"`
	LogvarMargin float64 `json:"logvar_margin"`
	ClipOrder    float64 `json:"clip_order"`
	LogvarFloor  float64 `json:"logvar_floor"` // the sigma range, derived from the margin and clip order
	LogvarCap    float64 `json:"logvar_cap"`
	CAlphaMin    float64 `json:"c_alpha_min"`
	CAlphaMax    float64 `json:"c_alpha_max"`
	PriorMu      float64 `json:"prior_mu"`
	PriorVar     float64 `json:"prior_var"`
	PriorAlpha   float64 `json:"prior_alpha"`
}

// Target returns the privacy target of o; see [Options.HasTarget], and call
// [Options.Validate] first. It is an RD target when TargetRD is given, with
// TargetDelta the delta of the calibration's guarantee, and otherwise an
// epsilon target.
func (o *Options) Target() privacy.Target {
	if !IsNoTarget(o.TargetRD) {
		t := privacy.RDTarget(o.TargetRD, o.TargetOrder, o.Releases)
		t.Delta = o.TargetDelta
		return t
	}
	return privacy.EpsilonTarget(o.TargetEpsilon, o.TargetDelta, o.Releases)
}

// Calibrate is the calibration step of a run with a privacy target, see
// [Options.HasTarget]. It chooses the clipping constants of o that are not
// fixed by FixCMu, FixLogvarMargin or FixCAlphaMin, so that the certified
// guarantee of o.Releases releases of one input meets the target. For a
// gaussian release it chooses only the radius C. The release has N = n
// components of width P = p. The method is [privacy.Calibrate]; see
// docs/privacy.md, "Calibration".
//
// It starts from cfg, the model configuration of the uncalibrated options,
// which gives the prior, the clip order and the fixed constants. It reads o
// and cfg only, and its result is passed on: [Calibration.Apply] writes the
// constants into the options and [SaveCalibration] the certificate into the
// model directory.
//
// It returns an error, naming N and P, for a target that cannot be met.
func Calibrate(o *Options, cfg nvib.Config, n, p int) (*Calibration, error) {
	if cfg.Model == nvib.ModelGaussian {
		return calibrateGaussian(o, cfg, n, p)
	}
	base := cfg.Clip.ClipSet(cfg.Prior, n, p)
	sp := privacy.Split{VarianceShare: o.VarianceShare, DirichletShare: o.DirichletShare,
		FixCMu: o.FixCMu, FixMargin: o.FixLogvarMargin, FixAlphaMin: o.FixCAlphaMin}
	t := o.Target()
	cal, err := privacy.Calibrate(base, t, sp, nil, privacy.DirectionStandard)
	if err != nil {
		return nil, fmt.Errorf("privacy target (N = %d components, P = %d dims): %w", n, p, err)
	}
	s := cal.Set
	cfg.Clip.CMu, cfg.Clip.LogvarMargin, cfg.Clip.CAlphaMin = s.CMu, s.LogvarMargin, s.AlphaMin // for the sigma range below
	floor, cap := cfg.Clip.LogvarBounds(cfg.Prior.Var)
	c := &Calibration{Label: privacy.LabelCertified,
		Scope:       privacy.CertifiedScope(t.Releases, n, p),
		Calibration: cal, Components: n, Dims: p, CMu: s.CMu, LogvarMargin: s.LogvarMargin, ClipOrder: cfg.Clip.Order,
		LogvarFloor: floor, LogvarCap: cap, CAlphaMin: s.AlphaMin, CAlphaMax: s.AlphaMax,
		PriorMu: cfg.Prior.Mu, PriorVar: cfg.Prior.Var, PriorAlpha: s.PriorAlpha}
	slog.Info("calibrated clipping to the privacy target", "target_epsilon", t.Epsilon, "target_rd", t.RD, "releases", t.Releases,
		"c_mu", s.CMu, "logvar_margin", s.LogvarMargin, "c_alpha_min", s.AlphaMin, "c_alpha_max", s.AlphaMax,
		"epsilon", float64(cal.Guarantee.Epsilon), "achieved", cal.Achieved)
	if m := cal.Guarantee.Release; m != nil && !m.Exact {
		slog.Warn("the calibrated noise depends on the input: releasing this model's embeddings is refused unless unproved releases are allowed explicitly (docs/privacy.md, \"Floating-point safety\"); the variance and Dirichlet shares 0 give fixed noise, whose release is exact",
			"reason", m.Reason)
	}
	return c, nil
}

// calibrateGaussian is Calibrate of a gaussian release: its radius C, with
// the same calibrator as nvdp-clipped on the release's clip set
// (nvib.GaussianClipSet: the logvar range and the pseudo-counts fixed, only
// C free, the fixed-noise design).
func calibrateGaussian(o *Options, cfg nvib.Config, n, p int) (*Calibration, error) {
	base := nvib.GaussianClipSet(cfg.Clip.CMu, cfg.Prior.Var, n-1, p)
	sp := privacy.Split{FixMargin: true, FixAlphaMin: true}
	t := o.Target()
	cal, err := privacy.Calibrate(base, t, sp, nil, privacy.DirectionStandard)
	if err != nil {
		return nil, fmt.Errorf("privacy target (gaussian, N = %d components, P = %d dims): %w", n, p, err)
	}
	s := cal.Set
	lv := s.LogvarFloor[0]
	c := &Calibration{Label: privacy.LabelCertified, Variant: nvib.ModelGaussian,
		Scope:       privacy.CertifiedScope(t.Releases, n, p),
		Calibration: cal, Components: n, Dims: p, CMu: s.CMu,
		LogvarFloor: lv, LogvarCap: lv, CAlphaMin: s.AlphaMin, CAlphaMax: s.AlphaMax,
		PriorMu: 0, PriorVar: cfg.Prior.Var, PriorAlpha: s.PriorAlpha}
	slog.Info("calibrated the gaussian release's radius to the privacy target", "target_epsilon", t.Epsilon, "target_rd", t.RD,
		"releases", t.Releases, "c", s.CMu, "sigma", math.Sqrt(cfg.Prior.Var), "positions", n-1,
		"epsilon", float64(cal.Guarantee.Epsilon), "achieved", cal.Achieved)
	return c, nil
}

// Apply writes the clipping constants the certificate chose into o (C_mu,
// and for an NVIB release the logvar margin and C_amin) and marks them
// Calibrated: ModelConfig then builds the calibrated model, and a resumed
// run does not calibrate again.
func (c *Calibration) Apply(o *Options) {
	o.CMu = c.CMu
	if c.Variant != nvib.ModelGaussian {
		o.LogvarMargin, o.CAlphaMin = c.LogvarMargin, c.CAlphaMin
	}
	o.Calibrated = true
}

// PrepareModelConfig returns the model configuration of a run of resolved
// options o, for an encoder of shape enc over numLabels labels, in two steps.
// First, with a privacy target not yet calibrated, as [Options.HasTarget]
// and not Calibrated say, it calibrates: [Calibrate] for N = MaxSeqLen + 1
// components and the release's width, with its certificate applied to o.
// Then it calls [Options.ModelConfig]. The returned certificate is nil when
// no calibration was made.
func PrepareModelConfig(o *Options, enc encoder.Config, numLabels int) (nvib.Config, *Calibration, error) {
	var c *Calibration
	if o.HasTarget() && !o.Calibrated {
		base, err := o.modelConfig(enc, numLabels)
		if err != nil {
			return base, nil, err
		}
		if c, err = Calibrate(o, base, o.MaxSeqLen+1, base.Latent()); err != nil {
			return base, nil, err
		}
		c.Apply(o)
	}
	cfg, err := o.ModelConfig(enc, numLabels)
	return cfg, c, err
}

// SaveCalibration writes c to dir/certificate.json.
func SaveCalibration(dir string, c *Calibration) error {
	return atomicfile.WriteJSON(filepath.Join(dir, CertificateFile), c)
}

// LoadCalibration reads dir/certificate.json, which runs with a privacy
// target write. It returns an error when the file is missing or is not a
// certificate.
func LoadCalibration(dir string) (*Calibration, error) {
	path := filepath.Join(dir, CertificateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Calibration
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}
