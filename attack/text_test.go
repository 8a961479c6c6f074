package attack

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/jsonfloat"
)

// TestDistinguishReportWriteText: the model or posteriors, the certified
// epsilon or the note that it is unknown, a block of rows per pair (its
// indices or texts, audit RD) and the plots, in that order.
func TestDistinguishReportWriteText(t *testing.T) {
	pair, g := witnessPair(t, nvdpSet(1), 1e-5, false)
	res := distinguish(t, pair, 200, 1)
	rd := jsonfloat.Float(0.5)
	for _, c := range []struct {
		name string
		rep  DistinguishReport
		want []string
	}{
		{"model, certified", DistinguishReport{Model: "m", Task: "sst2", Variant: "nvdp", Certified: g,
			Pairs: []PairResult{{Kind: "witness", Result: res}}, Plots: []string{"roc.png"}},
			[]string{"model  ", "m (sst2, nvdp)\n", "certified ε (δ 1e-05)  ", g.How(), "pair ", "witness\n", "  releases ", "200 of each (N 5, P 3), seed 1",
				"  divergence ", "  likelihood-ratio test ", "  ε lower bound (δ ", "  threshold test ", "  privacy-loss test ", "plot ", "roc.png\n"}},
		{"posteriors, no clip", DistinguishReport{Posteriors: "p.safetensors",
			Pairs: []PairResult{{Kind: "closest", Index: []int{3, 7}, AuditRD: &rd, AuditOrder: 1.1, Result: res}, {Kind: "texts", Texts: []string{"a", "b"}, Result: res}}},
			[]string{"posteriors  ", "p.safetensors\n", "certified ε  ", "unknown: the posterior file carries no clip constants\n",
				"pair ", "closest (3, 7), audit RD 0.500000 at order 1.1\n", "pair ", `texts "a" | "b"` + "\n"}},
	} {
		var b bytes.Buffer
		if err := c.rep.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		s, at := b.String(), 0
		for _, w := range c.want {
			i := strings.Index(s[at:], w)
			if i < 0 {
				t.Errorf("%s: %q not found after byte %d in\n%s", c.name, w, at, s)
				break
			}
			at += i + len(w)
		}
	}
}
