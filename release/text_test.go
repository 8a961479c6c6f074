package release

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
)

// TestMetadataWriteText: the output's shape, the model, epsilon per release
// and, with more than one release per text, per text; the warning of a
// seeded output.
func TestMetadataWriteText(t *testing.T) {
	set := privacy.ClipSet{Components: 5, Dims: 3, CMu: 1, PriorMu: []float64{0}, PriorVar: []float64{1},
		ClipOrder: 2, LogvarMargin: 0.3, AlphaMin: 0.8, AlphaMax: 1.2, PriorAlpha: 1}
	g, err := privacy.CertifyCurve(set, privacy.CurveOptions{Direction: privacy.DirectionStandard, Releases: 1, Delta: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	md := &Metadata{Model: ModelInfo{Dir: "m", Task: "sst2", Variant: "nvdp-clipped", N: 5, P: 3}, Guarantee: g, GuaranteePerText: g,
		Texts: 7, ReleasesPerText: 1}
	for _, c := range []struct {
		name          string
		perText, seed bool
		want, absent  []string
	}{
		{"one release", false, false, []string{"output ", "out.st (7 texts x 1 releases: z [N 5, P 3], pi [N 5])\n", "model ", "m (sst2, nvdp-clipped, ",
			" " + g.Scope + "\n", "epsilon per release (delta 1e-05) ", " " + privacy.FormatValue(g.Epsilon) + ", " + g.How() + "\n"}, []string{"per text", "WARNING"}},
		{"two releases, seeded", true, true, []string{"epsilon per release", "epsilon per text (2 releases)", " " + NotForRelease}, nil},
	} {
		m := *md
		if c.perText {
			m.ReleasesPerText = 2
		}
		if c.seed {
			m.Seeded, m.Warning = true, NotForRelease
		}
		var b bytes.Buffer
		if err := m.WriteText(&b, "out.st"); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: lacks %q:\n%s", c.name, w, b.String())
			}
		}
		for _, a := range c.absent {
			if strings.Contains(b.String(), a) {
				t.Errorf("%s: has %q:\n%s", c.name, a, b.String())
			}
		}
	}
}
