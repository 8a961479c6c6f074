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

// targetOptions are resolved options of an nvdp-clipped SST-2 run with max-seq-len 32 (N = 33).
func targetOptions(mod func(*Options)) Options {
	o := DefaultOptions()
	o.Task, o.GlueDir, o.Encoder, o.Vocab, o.Variant, o.MaxSeqLen, o.Out = "sst2", "unused", "scratch:bert-tiny", "unused", nvib.ModelNVDPClipped, 32, "unused"
	mod(&o)
	o.Resolve()
	return o
}

// The constants a target produces certify the target (within 1e-6
// relative, never above it); fixed constants are kept; a resolved (saved)
// options file gives the same clipping without calibrating again.
func TestCalibrateOptions(t *testing.T) {
	enc := encoder.Config{HiddenSize: 64, NumAttentionHeads: 2, IntermediateSize: 128, LayerNormEps: 1e-12}
	const n, p = 33, 64
	for _, c := range []struct {
		name string
		mod  func(*Options)
		// check the kept constants
		fixed func(t *testing.T, cl nvib.ClipConfig)
	}{
		{name: "epsilon 8, fixed noise", mod: func(o *Options) { o.TargetEpsilon = 8 },
			fixed: func(t *testing.T, cl nvib.ClipConfig) {
				if cl.CAlphaMin != cl.CAlphaMax || cl.LogvarMargin != math.Log(cl.Order/(cl.Order-1)) {
					t.Errorf("fixed-noise design: C_amin %v C_amax %v margin %v", cl.CAlphaMin, cl.CAlphaMax, cl.LogvarMargin)
				}
			}},
		{name: "epsilon 2, 4 releases, delta 1e-6", mod: func(o *Options) { o.TargetEpsilon, o.TargetDelta, o.Releases = 2, 1e-6, 4 }},
		{name: "epsilon 20, shares, clip order 1.5", mod: func(o *Options) {
			o.TargetEpsilon, o.VarianceShare, o.DirichletShare, o.ClipOrder = 20, 0.3, 0.2, 1.5
		}},
		{name: "RD 5 at order 1.1", mod: func(o *Options) { o.TargetRD = 5 }},
		{name: "RD 50 at order 2, shares", mod: func(o *Options) { o.TargetRD, o.TargetOrder, o.VarianceShare, o.DirichletShare = 50, 2, 0.4, 0.1 }},
		{name: "RD 40, C_mu fixed, margin calibrated", mod: func(o *Options) {
			o.TargetRD, o.CMu, o.FixCMu, o.DirichletShare = 40, 0.5, true, 0.25
		}, fixed: func(t *testing.T, cl nvib.ClipConfig) {
			if cl.CMu != 0.5 {
				t.Errorf("fixed C_mu changed to %v", cl.CMu)
			}
		}},
		{name: "epsilon 300, margin and C_amin fixed", mod: func(o *Options) {
			o.TargetEpsilon, o.LogvarMargin, o.CAlphaMin, o.FixLogvarMargin, o.FixCAlphaMin = 300, 2, 0.9, true, true
		}, fixed: func(t *testing.T, cl nvib.ClipConfig) {
			if cl.LogvarMargin != 2 || cl.CAlphaMin != 0.9 {
				t.Errorf("fixed margin %v / C_amin %v changed", cl.LogvarMargin, cl.CAlphaMin)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := targetOptions(c.mod)
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			cfg, rec, err := PrepareModelConfig(&o, enc, 2)
			if err != nil {
				t.Fatal(err)
			}
			cl := cfg.Clip
			if !o.Calibrated || o.CMu != cl.CMu || o.LogvarMargin != cl.LogvarMargin || o.CAlphaMin != cl.CAlphaMin {
				t.Errorf("options not updated: calibrated %v, C_mu %v/%v margin %v/%v C_amin %v/%v", o.Calibrated,
					o.CMu, cl.CMu, o.LogvarMargin, cl.LogvarMargin, o.CAlphaMin, cl.CAlphaMin)
			}
			if want := privacy.DefaultOrder; o.ClipOrder > 0 {
				want = o.ClipOrder
				if cl.Order != want {
					t.Errorf("clip order %v, want %v", cl.Order, want)
				}
			}
			if c.fixed != nil {
				c.fixed(t, cl)
			}
			// The certificate of the model's clipping is the target.
			set := cl.ClipSet(cfg.Prior, n, p)
			if o.TargetEpsilon > 0 {
				g, err := privacy.CertifyCurve(set, privacy.CurveOptions{Direction: privacy.DirectionStandard, Releases: o.Releases, Delta: o.TargetDelta})
				if err != nil {
					t.Fatal(err)
				}
				if e := float64(g.Epsilon); !(math.Abs(e-o.TargetEpsilon) <= 1e-6*o.TargetEpsilon) || e > o.TargetEpsilon {
					t.Errorf("certified epsilon %v, target %v", e, o.TargetEpsilon)
				}
			} else {
				cert, err := privacy.Certify(set, o.TargetOrder, privacy.DirectionStandard)
				if err != nil {
					t.Fatal(err)
				}
				if rd := float64(o.Releases) * float64(cert.RD); !(math.Abs(rd-o.TargetRD) <= 1e-6*o.TargetRD) || rd > o.TargetRD {
					t.Errorf("certified RD %v at order %v, target %v", rd, o.TargetOrder, o.TargetRD)
				}
			}
			if rec == nil || rec.Calibration == nil || rec.Components != n || rec.Dims != p || rec.CMu != cl.CMu || rec.ClipOrder != cl.Order ||
				rec.Label != "certified" || rec.Guarantee == nil {
				t.Fatalf("calibration record %+v", rec)
			}
			if _, err := json.Marshal(rec); err != nil {
				t.Fatal(err)
			}
			// The saved options resolve to the same clipping without a new calibration.
			b, err := json.Marshal(&o)
			if err != nil {
				t.Fatal(err)
			}
			var saved Options
			if err := json.Unmarshal(b, &saved); err != nil {
				t.Fatal(err)
			}
			cfg2, again, err := PrepareModelConfig(&saved, enc, 2)
			if err != nil {
				t.Fatal(err)
			}
			if cfg2.Clip != cl || again != nil {
				t.Errorf("resolved again: clip %+v, was %+v; new calibration %v", cfg2.Clip, cl, again != nil)
			}
		})
	}
}

func TestValidateTarget(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"baseline", func(o *Options) { o.TargetEpsilon, o.Variant = 8, nvib.ModelBaseline }, "only the nvdp-clipped and gaussian variants"},
		{"nvdp", func(o *Options) { o.TargetRD, o.Variant = 3, nvib.ModelNVDP }, "only the nvdp-clipped and gaussian variants"},
		{"reference", func(o *Options) { o.TargetEpsilon, o.Mode = 8, "reference" }, "principled mode"},
		{"both", func(o *Options) { o.TargetEpsilon, o.TargetRD = 8, 3 }, "give one"},
		{"infinite RD", func(o *Options) { o.TargetRD = math.Inf(1) }, "target_rd +Inf: must be a finite number"},
		{"negative share", func(o *Options) { o.TargetEpsilon, o.VarianceShare = 8, -0.1 }, "variance_share -0.1"},
		{"shares sum 1", func(o *Options) { o.TargetEpsilon, o.VarianceShare, o.DirichletShare = 8, 0.5, 0.5 }, "sum to < 1"},
		{"releases without target", func(o *Options) { o.Releases, o.HandSetClipping = 3, true }, "needs a target"},
		{"shares without target", func(o *Options) { o.DirichletShare, o.HandSetClipping = 0.1, true }, "need a target"},
		{"negative releases", func(o *Options) { o.TargetEpsilon, o.Releases = 8, -2 }, "releases -2"},
		{"delta", func(o *Options) { o.TargetEpsilon, o.TargetDelta = 8, 1 }, "target_delta 1"},
		{"delta 0 is not replaced", func(o *Options) { o.TargetEpsilon, o.TargetDelta = 8, 0 }, "target_delta 0"},
		{"order", func(o *Options) { o.TargetRD, o.TargetOrder = 3, 0.5 }, "target_order 0.5"},
		{"clip order", func(o *Options) { o.ClipOrder = 1 }, "clip_order 1"},
		{"all fixed", func(o *Options) { o.TargetEpsilon, o.FixCMu, o.FixLogvarMargin, o.FixCAlphaMin = 8, true, true, true }, "nothing left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := targetOptions(c.mod)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
	// Defaults of a target: one release, delta 1e-5, order 1.1.
	o := targetOptions(func(o *Options) { o.TargetEpsilon = 8 })
	r := targetOptions(func(o *Options) { o.TargetRD = 8 })
	if o.Releases != 1 || o.TargetDelta != privacy.DefaultDelta || r.TargetOrder != privacy.DefaultOrder || o.Validate() != nil || r.Validate() != nil {
		t.Errorf("defaults: releases %d delta %v order %v", o.Releases, o.TargetDelta, r.TargetOrder)
	}
}

// TestCalibrateIsAStep: ModelConfig and Calibrate read their options only
// (a target left uncalibrated stays so, the constants unchanged); the
// certificate's Apply is what writes the chosen constants, and
// PrepareModelConfig is the two steps, giving the configuration of the
// applied options.
func TestCalibrateIsAStep(t *testing.T) {
	enc := encoder.Config{HiddenSize: 64, NumAttentionHeads: 2, IntermediateSize: 128, LayerNormEps: 1e-12}
	for _, variant := range []string{nvib.ModelNVDPClipped, nvib.ModelGaussian} {
		o := targetOptions(func(o *Options) { o.TargetEpsilon, o.Variant = 8, variant })
		before := o
		base, err := o.ModelConfig(enc, 2)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Calibrate(&o, base, o.MaxSeqLen+1, base.Latent())
		if err != nil {
			t.Fatal(err)
		}
		if d := Differences(&before, &o); d != nil || o.Calibrated {
			t.Errorf("%s: ModelConfig / Calibrate changed the options: %v", variant, d)
		}
		c.Apply(&o)
		if !o.Calibrated || o.CMu != c.CMu || o.CMu == before.CMu {
			t.Errorf("%s: applied C_mu %v (certificate %v, before %v), calibrated %v", variant, o.CMu, c.CMu, before.CMu, o.Calibrated)
		}
		if variant != nvib.ModelGaussian && (o.LogvarMargin != c.LogvarMargin || o.CAlphaMin != c.CAlphaMin) {
			t.Errorf("%s: applied margin %v / C_amin %v, certificate %v / %v", variant, o.LogvarMargin, o.CAlphaMin, c.LogvarMargin, c.CAlphaMin)
		}
		want, err := o.ModelConfig(enc, 2)
		if err != nil {
			t.Fatal(err)
		}
		p := before
		got, c2, err := PrepareModelConfig(&p, enc, 2)
		if err != nil || got != want || c2 == nil || c2.CMu != c.CMu || Differences(&o, &p) != nil {
			t.Errorf("%s: PrepareModelConfig %+v, want %+v (certificate %+v, %v)", variant, got, want, c2, err)
		}
	}
}
