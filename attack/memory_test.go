package attack

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
)

// TestLearnedAttacksRefuseWhatCannotFit: releases per text or an MLP width
// that cannot fit in memory are an *option.Error naming the option before
// anything is released (they were Go out-of-memory crashes).
func TestLearnedAttacksRefuseWhatCannotFit(t *testing.T) {
	target := tinyTarget(t, nvib.ModelNVDPClipped, 1, 1)
	c := synthCorpus(20, 10)
	for _, tc := range []struct {
		name, option, want string
		releases, hidden   int
		decoder            string
	}{
		{"releases per text", "releases_per_text", "a batch may hold: lower releases_per_text", 1_000_000_000, 256, DecoderAll},
		{"releases per text, nearest decoder", "releases_per_text", "x 100000000 releases", 100_000_000, 256, DecoderNearest},
		{"mlp width", "mlp_hidden", "the MLP attacker", 1, 10_000_000_000, ModelMLP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				var oe *option.Error
				if !errors.As(err, &oe) || oe.Option != tc.option || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: err = %v, want an *option.Error for %s saying %q", what, err, tc.option, tc.want)
				}
			}
			o := DefaultInvertOptions()
			o.ReleasesPerText, o.Hidden, o.Decoder = tc.releases, tc.hidden, tc.decoder
			_, err := Invert(context.Background(), target, c, o, nil)
			check("Invert", err)
			if tc.decoder == DecoderNearest { // Attribute keeps a row per text, not per token
				return
			}
			a := DefaultAttributeOptions()
			a.ReleasesPerText, a.Hidden = tc.releases, tc.hidden
			if tc.decoder == ModelMLP {
				a.Classifier = ModelMLP
			}
			_, err = Attribute(context.Background(), target, c, a, nil)
			check("Attribute", err)
		})
	}
}

// TestDistinguishRefusesWhatCannotFit: releases whose scores cannot fit in
// memory are an *option.Error for releases from Validate, before anything
// is drawn (10^12 was a Go out-of-memory crash); the default fits.
func TestDistinguishRefusesWhatCannotFit(t *testing.T) {
	o := DefaultDistinguishOptions()
	if err := o.Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	o.Releases = 1_000_000_000_000
	var oe *option.Error
	if err := o.Validate(); !errors.As(err, &oe) || oe.Option != "releases" || !strings.Contains(err.Error(), "of this machine's memory") {
		t.Errorf("releases 10^12: err = %v, want an *option.Error for releases", err)
	}
}
