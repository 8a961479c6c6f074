package model

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestGaussianOptions: a gaussian run's options resolve to a gaussian model
// configuration (release length = max-seq-len, no KL weight, the radius from
// --c-mu); a target calibrates C with the nvdp-clipped calibrator so that the
// certificate of the model's clip set is the target (1e-6 relative, never
// above), recorded with the variant; the flags that do not apply are errors
// naming them.
func TestGaussianOptions(t *testing.T) {
	enc := encoder.Config{HiddenSize: 64, NumAttentionHeads: 2, IntermediateSize: 128, LayerNormEps: 1e-12}
	gauss := func(mod func(*Options)) Options {
		return targetOptions(func(o *Options) { o.Variant = nvib.ModelGaussian; mod(o) })
	}
	// hand-set radius: --c-mu is C
	o := gauss(func(o *Options) { o.CMu, o.HandSetClipping = 0.7, true })
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, rec, err := PrepareModelConfig(&o, enc, 2)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Model != nvib.ModelGaussian || cfg.ReleaseLen != 32 || cfg.Clip.CMu != 0.7 || cfg.LambdaG != 0 || cfg.LambdaD != 0 || rec != nil {
		t.Errorf("config %+v (calibration %v)", cfg, rec)
	}
	set, ok := cfg.ClipSet(33)
	c, err := privacy.Certify(set, 2, privacy.DirectionStandard)
	if want := 2 * 2 * privacy.StoredRadius(0.7) * privacy.StoredRadius(0.7) * 32; !ok || err != nil || math.Abs(float64(c.RD)-want) > 1e-9*want {
		t.Errorf("hand-set C 0.7: certified RD at order 2 %v (%v), want %v", c.RD, err, want)
	}

	for _, tc := range []struct {
		name string
		mod  func(*Options)
	}{
		{"epsilon 8", func(o *Options) { o.TargetEpsilon = 8 }},
		{"epsilon 64, 3 releases, delta 1e-6", func(o *Options) { o.TargetEpsilon, o.Releases, o.TargetDelta = 64, 3, 1e-6 }},
		{"RD 20 at order 4", func(o *Options) { o.TargetRD, o.TargetOrder = 20, 4 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := gauss(tc.mod)
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			cfg, rec, err := PrepareModelConfig(&o, enc, 2)
			if err != nil {
				t.Fatal(err)
			}
			if !o.Calibrated || o.CMu != cfg.Clip.CMu || !(cfg.Clip.CMu > 0) {
				t.Fatalf("calibrated %v, C %v / %v", o.Calibrated, o.CMu, cfg.Clip.CMu)
			}
			set, _ := cfg.ClipSet(33)
			if o.TargetEpsilon > 0 {
				g, err := privacy.CertifyCurve(set, privacy.CurveOptions{Direction: privacy.DirectionStandard, Releases: o.Releases, Delta: o.TargetDelta})
				if err != nil {
					t.Fatal(err)
				}
				if e := float64(g.Epsilon); e > o.TargetEpsilon || math.Abs(e-o.TargetEpsilon) > 1e-6*o.TargetEpsilon {
					t.Errorf("certified epsilon %v, target %v", e, o.TargetEpsilon)
				}
			} else {
				R := privacy.StoredRadius(cfg.Clip.CMu)
				if rd := 2 * o.TargetOrder * R * R * 32; rd > o.TargetRD || math.Abs(rd-o.TargetRD) > 1e-6*o.TargetRD {
					t.Errorf("closed-form RD %v, target %v", rd, o.TargetRD)
				}
			}
			if rec == nil || rec.Variant != nvib.ModelGaussian || rec.CMu != cfg.Clip.CMu || rec.Components != 33 || rec.Dims != 64 ||
				rec.LogvarFloor != 0 || rec.LogvarCap != 0 || rec.CAlphaMin != nvib.GaussianAlpha || rec.CAlphaMax != nvib.GaussianAlpha {
				t.Errorf("certificate record %+v", rec)
			}
			// The saved options (a resumed run) resolve to the same configuration without calibrating again.
			b, err := json.Marshal(&o)
			if err != nil {
				t.Fatal(err)
			}
			var saved Options
			if err := json.Unmarshal(b, &saved); err != nil {
				t.Fatal(err)
			}
			cfg2, again, err := PrepareModelConfig(&saved, enc, 2)
			if err != nil || cfg2 != cfg || again != nil {
				t.Errorf("resolved again: %+v, was %+v (new calibration %v, %v)", cfg2, cfg, again != nil, err)
			}
		})
	}

	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"reference mode", func(o *Options) { o.Mode = "reference" }, `mode "reference": the gaussian variant is principled only`},
		{"logvar margin", func(o *Options) { o.LogvarMargin = 0.5 }, "logvar_margin 0.5"},
		{"C_amin", func(o *Options) { o.CAlphaMin = 0.3 }, "c_alpha_min 0.3"},
		{"radius fixed with a target", func(o *Options) { o.TargetEpsilon, o.FixCMu = 8, true }, "fixed with a target"},
		{"shares", func(o *Options) { o.TargetEpsilon, o.VarianceShare = 8, 0.2 }, "variance_share 0.2"},
		{"negative radius", func(o *Options) { o.CMu = -1 }, "c_mu -1"},
	} {
		o := gauss(tc.mod)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}
