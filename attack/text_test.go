package attack

import (
	"bytes"
	"testing"

	"github.com/nvdp-project/nvdp/internal/texttest"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
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
		s := b.String()
		texttest.InOrder(t, c.name, s, c.want)
	}
}

// TestLearnedReportsWriteText: the setup rows (model, certified epsilon,
// corpus), the attack's own rows, a blank line, the results' table and, for
// an inversion, the example guesses of the release features only.
func TestLearnedReportsWriteText(t *testing.T) {
	_, g := witnessPair(t, nvdpSet(1), 1e-5, false)
	setup := Setup{Model: release.ModelInfo{Dir: "m", Task: "sst2", Variant: "nvdp-clipped", Mode: "principled", N: 5, P: 3},
		Certified: g, Corpus: &Corpus{PublicPath: "pub.tsv", VictimPath: "vic.tsv"}}
	inv := &InvertReport{Setup: setup, PublicTokens: 40, VictimTokens: 20, Classes: 9, Unseen: 0.25,
		Results: []InvertResult{{Features: FeaturesRelease, Decoder: "nearest", Examples: []Reconstruction{{Text: "a b", Guess: "a c"}}},
			{Features: FeaturesNone, Decoder: "majority", Examples: []Reconstruction{{Text: "x", Guess: "y"}}}}}
	inv.Options.Confidence = 0.95
	attr := &AttributeReport{Setup: setup, Property: Property{Name: "negation", Rule: "has not"}, CertifiedAUC: 0.75,
		Results: []AttributeResult{{Features: FeaturesRelease, Classifier: "linear", Accuracy: 0.5}}}
	attr.Options.Confidence = 0.95
	head := []string{"model  ", "m (sst2, nvdp-clipped, principled): N 5 components, P 3\n", "certified  ", "epsilon " + privacy.FormatValue(g.Epsilon) + " at delta 1e-05",
		"corpus  ", "public pub.tsv, victims vic.tsv\n"}
	for _, c := range []struct {
		name   string
		write  func(*bytes.Buffer)
		want   []string
		absent string
	}{
		{"invert", func(b *bytes.Buffer) { inv.WriteText(b) }, append(head, "public  ", "40 tokens, 9 distinct", "victims  ", "25.0% unseen", "\n\nfeatures  ",
			"95% CI", "\n"+FeaturesRelease+"  ", FeaturesRelease+" nearest: \"a b\" -> \"a c\"\n"), `"x" -> "y"`},
		{"attribute", func(b *bytes.Buffer) { attr.WriteText(b) }, append(head, "property  ", "negation: has not\n", "certified AUC  ", "at most 0.7500",
			"\n\nfeatures  ", "classifier", "\n"+FeaturesRelease+"  ", "linear  ", "0.5000"), "->"},
	} {
		var b bytes.Buffer
		c.write(&b)
		s := b.String()
		texttest.InOrder(t, c.name, s, c.want)
		texttest.Absent(t, c.name, s, []string{c.absent})
	}
}
