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

func latentDim(p int) *int { return &p }

// TestLatentOptions: LatentDim not set gives P = the encoder's hidden size
// and the configuration and options files of before the option (no
// latent_dim key); a given width goes to nvib.Config.LatentDim and round
// trips through train_options.json; 0, negative widths, widths not
// divisible by the encoder's heads and a width other than H in reference
// mode are errors naming latent_dim, before any work for a scratch encoder
// (Validate) and, for a pretrained encoder whose shape Validate does not
// know, in ModelConfig; the baseline ignores a valid width.
func TestLatentOptions(t *testing.T) {
	enc := encoder.Config{HiddenSize: 64, NumAttentionHeads: 2, IntermediateSize: 256, LayerNormEps: 1e-12}
	// no privacy target: the given clipping constants
	handSet := func(mod func(*Options)) Options {
		return targetOptions(func(o *Options) { o.HandSetClipping = true; mod(o) })
	}
	// not set: P = H, nothing written
	o := handSet(func(*Options) {})
	cfg, err := o.ModelConfig(enc, 2)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LatentDim != 0 || cfg.Latent() != 64 || cfg.BlockIntermediate() != 256 {
		t.Errorf("unset: latent_dim %d, P %d, block FFN %d", cfg.LatentDim, cfg.Latent(), cfg.BlockIntermediate())
	}
	for _, v := range []any{&o, cfg} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "latent_dim") {
			t.Errorf("unset latent width written: %s", b)
		}
	}
	// given: recorded, round trip
	o = handSet(func(o *Options) { o.LatentDim = latentDim(16) })
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg, err = o.ModelConfig(enc, 2); err != nil || cfg.LatentDim != 16 || cfg.BlockIntermediate() != 64 {
		t.Fatalf("P 16: latent_dim %d, block FFN %d, %v", cfg.LatentDim, cfg.BlockIntermediate(), err)
	}
	b, err := json.Marshal(&o)
	if err != nil {
		t.Fatal(err)
	}
	var back Options
	if err := json.Unmarshal(b, &back); err != nil || back.LatentDim == nil || *back.LatentDim != 16 {
		t.Fatalf("round trip of %s: %v, %v", b, back.LatentDim, err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string // "" = valid
	}{
		{"zero", func(o *Options) { o.LatentDim = latentDim(0) }, "latent_dim 0: the release's width P must be >= 1"},
		{"negative", func(o *Options) { o.LatentDim = latentDim(-8) }, "latent_dim -8: the release's width P must be >= 1"},
		{"zero, baseline", func(o *Options) { o.LatentDim, o.Variant = latentDim(0), nvib.ModelBaseline }, "latent_dim 0"},
		// bert-tiny: hidden 128, 2 heads
		{"not divisible", func(o *Options) { o.LatentDim = latentDim(33) }, "latent_dim 33: not divisible by the NVDP block's 2 attention heads"},
		{"reference", func(o *Options) { o.LatentDim, o.Mode = latentDim(64), privacy.ModeReference }, "latent_dim 64: reference mode reproduces the released code"},
		{"reference at H", func(o *Options) { o.LatentDim, o.Mode = latentDim(128), privacy.ModeReference }, ""},
		{"scratch config", func(o *Options) {
			o.LatentDim, o.ScratchConfig = latentDim(20), &encoder.Config{HiddenSize: 32, NumAttentionHeads: 8}
		}, "latent_dim 20: not divisible by the NVDP block's 8 attention heads"},
		{"baseline ignores it", func(o *Options) { o.LatentDim, o.Variant = latentDim(33), nvib.ModelBaseline }, ""},
		{"gaussian", func(o *Options) { o.LatentDim, o.Variant = latentDim(32), nvib.ModelGaussian }, ""},
		{"larger than H", func(o *Options) { o.LatentDim = latentDim(256) }, ""},
		// refused before anything is allocated: 1e6 x 1e6 block weights
		{"cannot fit", func(o *Options) { o.LatentDim = latentDim(1000000) }, "latent_dim 1000000: training the layers at the release's width P = 1000000 (parameters, gradients, AdamW moments) takes 1.94e+05 GiB, more than the 64 GiB the training may hold for them: lower latent_dim"},
		{"just fits", func(o *Options) { o.LatentDim = latentDim(16384) }, ""},
	} {
		o := handSet(tc.mod)
		err := o.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if _, ok := err.(*OptionError); err != nil && !ok {
			t.Errorf("%s: %T, want *OptionError", tc.name, err)
		}
	}
	// a pretrained encoder: its heads are known only once it is loaded
	hf := handSet(func(o *Options) { o.Encoder, o.Vocab, o.LatentDim = "hf:some/bert", "", latentDim(30) })
	if err := hf.Validate(); err != nil {
		t.Fatalf("pretrained encoder: %v", err)
	}
	enc12 := encoder.Config{HiddenSize: 768, NumAttentionHeads: 12, IntermediateSize: 3072}
	if _, err := hf.ModelConfig(enc12, 2); err == nil || !strings.Contains(err.Error(), "latent_dim 30: not divisible by the NVDP block's 12 attention heads") {
		t.Errorf("ModelConfig: %v", err)
	}
	hf.LatentDim = latentDim(60)
	if cfg, err := hf.ModelConfig(enc12, 2); err != nil || cfg.LatentDim != 60 || cfg.BlockIntermediate() != 240 {
		t.Errorf("P 60 of BERT-base: latent_dim %d, block FFN %d, %v", cfg.LatentDim, cfg.BlockIntermediate(), err)
	}
	// the baseline's configuration has no latent width
	bl := handSet(func(o *Options) { o.LatentDim, o.Variant = latentDim(32), nvib.ModelBaseline })
	if cfg, err := bl.ModelConfig(enc, 2); err != nil || cfg.LatentDim != 0 {
		t.Errorf("baseline: latent_dim %d, %v", cfg.LatentDim, err)
	}
}

// TestLatentCalibration: a target is calibrated for P = LatentDim (N =
// max-seq-len + 1): the certificate record has Dims = P, and privacy.Certify
// of the clip set of the calibrated constants at N and P (nvib.Config.ClipSet of
// the model configuration, and the same constants given by hand) meets the
// target. The fixed-noise design's certificate 2 lambda (N-1) C_mu^2 /
// sigma_p^2 does not depend on P, so C_mu is the same for P = 16 and P = H
// = 64; with a variance share the variance part grows with P, so the
// calibrated margin differs, and certifying the P = 16 constants at P = 64
// exceeds the target (the defect a certificate with H instead of P would
// hide in the other direction).
func TestLatentCalibration(t *testing.T) {
	enc := encoder.Config{HiddenSize: 64, NumAttentionHeads: 2, IntermediateSize: 128, LayerNormEps: 1e-12}
	const n = 33
	calibrated := func(P *int, mod func(*Options)) (Options, nvib.Config, *Calibration) {
		o := targetOptions(func(o *Options) { o.LatentDim = P; mod(o) })
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		cfg, rec, err := PrepareModelConfig(&o, enc, 2)
		if err != nil {
			t.Fatal(err)
		}
		return o, cfg, rec
	}
	certifiedEps := func(set privacy.ClipSet, o Options) float64 {
		g, err := privacy.CertifyCurve(set, privacy.CurveOptions{Direction: privacy.DirectionStandard, Releases: o.Releases, Delta: o.TargetDelta})
		if err != nil {
			t.Fatal(err)
		}
		return float64(g.Epsilon)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Options)
	}{
		{"epsilon 8, fixed noise", func(o *Options) { o.TargetEpsilon = 8 }},
		{"epsilon 50, variance share", func(o *Options) { o.TargetEpsilon, o.VarianceShare, o.DirichletShare = 50, 0.4, 0.1 }},
		{"gaussian epsilon 8", func(o *Options) { o.TargetEpsilon, o.Variant = 8, nvib.ModelGaussian }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, cfg, rec := calibrated(latentDim(16), tc.mod)
			if rec == nil || rec.Dims != 16 || rec.Components != n || !strings.Contains(rec.Scope, "P = 16 dims") {
				t.Fatalf("certificate record %+v", rec)
			}
			set, ok := cfg.ClipSet(n)
			if !ok || set.Dims != 16 || set.Components != n {
				t.Fatalf("model clip set ok %v, [N %d, P %d]", ok, set.Components, set.Dims)
			}
			var byHand privacy.ClipSet
			if cfg.Model == nvib.ModelGaussian {
				byHand = nvib.GaussianClipSet(o.CMu, cfg.Prior.Var, n-1, 16)
			} else {
				byHand = nvib.DefaultClip(privacy.ModePrincipled, o.CMu, o.CAlphaMax).ClipSet(cfg.Prior, n, 16)
				byHand.LogvarMargin, byHand.AlphaMin = o.LogvarMargin, o.CAlphaMin
			}
			for name, s := range map[string]privacy.ClipSet{"model": set, "by hand": byHand} {
				if e := certifiedEps(s, o); e > o.TargetEpsilon || math.Abs(e-o.TargetEpsilon) > 1e-6*o.TargetEpsilon {
					t.Errorf("%s: certified epsilon %v at P 16, target %v", name, e, o.TargetEpsilon)
				}
			}
			if e := float64(rec.Guarantee.Epsilon); math.Abs(e-certifiedEps(set, o)) > 1e-9*e {
				t.Errorf("record epsilon %v, Certify %v", e, certifiedEps(set, o))
			}
			oH, cfgH, _ := calibrated(nil, tc.mod)
			if o.VarianceShare == 0 { // the fixed-noise design: P does not enter
				if o.CMu != oH.CMu {
					t.Errorf("fixed noise: C_mu %v at P 16, %v at P 64", o.CMu, oH.CMu)
				}
				return
			}
			if o.LogvarMargin == oH.LogvarMargin {
				t.Errorf("variance share: margin %v at both P 16 and 64", o.LogvarMargin)
			}
			wide, _ := cfgH.ClipSet(n)
			wide.CMu, wide.LogvarMargin, wide.AlphaMin = o.CMu, o.LogvarMargin, o.CAlphaMin
			if e := certifiedEps(wide, o); !(e > o.TargetEpsilon*1.01) {
				t.Errorf("the P 16 constants at P 64 certify epsilon %v, want above the target %v", e, o.TargetEpsilon)
			}
		})
	}
}

// TestRunTimeOptions: a negative StopAfterSteps is an *OptionError naming
// stop_after_steps (before the fix the loop refused it without the name:
// "loop: negative count"); 0 (do not stop) and a count are valid.
func TestRunTimeOptions(t *testing.T) {
	for _, tc := range []struct {
		stop int
		want string // "" = valid
	}{{-1, "stop_after_steps -1: must be >= 0 (0: do not stop)"}, {0, ""}, {5, ""}} {
		o := targetOptions(func(o *Options) { o.HandSetClipping = true; o.StopAfterSteps = tc.stop })
		for name, err := range map[string]error{"Validate": o.Validate(), "RunTime.Validate": o.RunTime.Validate()} {
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want) {
				t.Errorf("stop %d: %s = %v, want %q", tc.stop, name, err, tc.want)
			}
			if _, ok := err.(*OptionError); err != nil && !ok {
				t.Errorf("stop %d: %s: %T, want *OptionError", tc.stop, name, err)
			}
		}
	}
}
