package attack

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
)

// The properties' rules on hand-made texts.
func TestProperties(t *testing.T) {
	for _, tc := range []struct {
		text                string
		digit, name, female bool
	}{
		{"a charming movie", false, false, false},
		{"released in 2002", true, false, false},
		{"٣ stars", true, false, false}, // Arabic-Indic digit three (Nd)
		{"John's best film", false, true, false},
		{"with MARY and her sister", false, true, true},
		{"johnny is not john-like", false, true, false}, // "john" is a word of "john-like"
		{"johnny and marymount", false, false, false},   // a name inside a longer word does not count
		{"she said so herself", false, false, true},
		{"shell and here", false, false, false},
		{"frank and earnest, mark my words", false, false, false}, // not in the list: common words
	} {
		for _, p := range []struct {
			name string
			want bool
		}{{PropertyDigit, tc.digit}, {PropertyName, tc.name}, {PropertyFemale, tc.female}} {
			prop, err := lookupProperty(p.name)
			if err != nil {
				t.Fatal(err)
			}
			if got := prop.Has(tc.text); got != p.want {
				t.Errorf("%s(%q) = %v, want %v", p.name, tc.text, got, p.want)
			}
		}
	}
	if _, err := lookupProperty("age"); err == nil || !strings.Contains(err.Error(), "name, digit, female-pronoun") {
		t.Errorf("unknown property: %v", err)
	}
	seen := map[string]bool{}
	for _, n := range GivenNames {
		if seen[n] || n != strings.ToLower(n) {
			t.Errorf("given name %q repeated or not lower case", n)
		}
		seen[n] = true
	}
}

// The options are checked before any work: each bad value is an *option.Error naming its JSON key.
func TestAttributeOptions(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*AttributeOptions)
		name string
	}{
		{func(o *AttributeOptions) { o.Property = "age" }, "property"},
		{func(o *AttributeOptions) { o.Classifier = "svm" }, "classifier"},
		{func(o *AttributeOptions) { o.ReleasesPerText = 0 }, "releases_per_text"},
		{func(o *AttributeOptions) { o.Epochs = -1 }, "epochs"},
		{func(o *AttributeOptions) { o.Confidence = 0 }, "confidence"},
	} {
		o := DefaultAttributeOptions()
		tc.mod(&o)
		var oe *option.Error
		if _, err := Attribute(context.Background(), nil, synthCorpus(8, 4), o, nil); !errors.As(err, &oe) || oe.Option != tc.name {
			t.Errorf("error %v, want option %s", err, tc.name)
		}
	}
}

// The attribute classifiers beat the majority baseline by far on a release that is the encoder
// output with tiny noise (AUC >= 0.75, its interval above 1/2) and do not on pure noise (AUC < 0.65:
// with 200 victims its standard deviation is about 0.04); the encoder-output reference beats it in every case. The majority
// baseline's accuracy is the victims' share of the public texts' majority class, its AUC 1/2; the
// counts are those of the texts. No release classifier's AUC is significantly above the certified
// bound CertifiedAUC (on the gaussian pure-noise release, certified epsilon 0.004, it is 0.5009; the
// nvdp-clipped one with a tiny C_mu is certified for the variance and Dirichlet parts too, far less).
func TestAttributeBeatsChance(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 8 classifiers per property")
	}
	c := synthCorpus(800, 200)
	count := func(texts []string, has func(string) bool) (n int) {
		for _, s := range texts {
			if has(s) {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		variant string
		cmu, v  float64
		private bool
	}{
		{"gaussian non-private", nvib.ModelGaussian, 100, 1e-6, false},
		{"gaussian noise", nvib.ModelGaussian, 1e-4, 1, true},
		{"nvdp-clipped noise", nvib.ModelNVDPClipped, 1e-4, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tinyTarget(t, tc.variant, tc.cmu, tc.v)
			for _, prop := range []struct {
				name string
				has  func(string) bool
			}{
				{PropertyDigit, func(s string) bool { return strings.ContainsAny(s, "0123456789") }},
				{PropertyName, func(s string) bool { return strings.Contains(s, "john") || strings.Contains(s, "mary") }},
			} {
				o := DefaultAttributeOptions()
				o.Property, o.Bootstrap = prop.name, 200
				r, err := Attribute(context.Background(), target, c, o, nil)
				if err != nil {
					t.Fatal(err)
				}
				pubPos, vicPos := count(c.Public, prop.has), count(c.Victims, prop.has)
				if r.PublicTexts != 800 || r.VictimTexts != 200 || r.PublicPositive != pubPos || r.VictimPositive != vicPos || r.Property.Name != prop.name {
					t.Errorf("%s: counts %d/%d, %d/%d, want %d/800, %d/200", prop.name, r.PublicPositive, r.PublicTexts, r.VictimPositive, r.VictimTexts, pubPos, vicPos)
				}
				majority := r.Results[0]
				wantCorrect := r.VictimTexts - vicPos
				if 2*pubPos > r.PublicTexts {
					wantCorrect = vicPos
				}
				if majority.Classifier != ClassifierMajority || majority.Correct != wantCorrect || majority.AUC != 0.5 || majority.AUCCI != [2]float64{0.5, 0.5} || len(r.Results) != 5 {
					t.Fatalf("%s: majority %+v (want %d correct), %d results", prop.name, majority, wantCorrect, len(r.Results))
				}
				t.Logf("%s: certified epsilon %v, AUC at most %.4f", prop.name, r.Certified.Epsilon, r.CertifiedAUC)
				for _, res := range r.Results[1:] {
					if res.Features == FeaturesRelease && res.AUCCI[0] > r.CertifiedAUC {
						t.Errorf("%s %s: AUC %v above the certified %v", prop.name, res.Classifier, res.AUCCI, r.CertifiedAUC)
					}
					t.Logf("%s %-8s %-8s acc %.3f [%.3f, %.3f] AUC %.3f [%.3f, %.3f]", prop.name, res.Features, res.Classifier,
						res.Accuracy, res.AccuracyCI[0], res.AccuracyCI[1], res.AUC, res.AUCCI[0], res.AUCCI[1])
					leaks := res.Features == FeaturesEncoder || !tc.private
					switch {
					case leaks && (res.AUC < 0.75 || res.AUCCI[0] <= 0.5):
						t.Errorf("%s %s %s: AUC %.3f %v, want >= 0.75 and significantly above 1/2", prop.name, res.Features, res.Classifier, res.AUC, res.AUCCI)
					case !leaks && res.AUC >= 0.65:
						t.Errorf("%s %s %s on noise: AUC %.3f %v, want < 0.65", prop.name, res.Features, res.Classifier, res.AUC, res.AUCCI)
					}
				}
			}
		})
	}
}

// Both classes are needed among the public texts and among the victims (checked before any release).
func TestAttributeOneClass(t *testing.T) {
	o := DefaultAttributeOptions()
	o.Property = PropertyFemale
	for _, c := range []*Corpus{synthCorpus(20, 10), {Public: []string{"she", "he"}, Victims: []string{"he", "it"}}} {
		// nil target: the corpus is refused before the model is used
		if _, err := Attribute(context.Background(), nil, c, o, nil); err == nil || !strings.Contains(err.Error(), "both classes are needed") {
			t.Errorf("one class: %v", err)
		}
	}
}

// CertifiedAUC equals e^eps / (1 + e^eps) at delta = 0 and, for every (eps, delta), the area under
// min(1, e^eps x + delta, 1 - e^-eps (1 - delta - x)) integrated numerically (midpoint rule, 1e5
// steps); it is 1/2 for eps = delta = 0, grows with both, and is 1 for eps = +Inf, for an epsilon
// so large that e^eps overflows, or for delta = 1.
func TestCertifiedAUC(t *testing.T) {
	for _, eps := range []float64{0, 0.1, 1, 4, 16} {
		if got, want := CertifiedAUC(eps, 0), math.Exp(eps)/(1+math.Exp(eps)); math.Abs(got-want) > 1e-12 {
			t.Errorf("eps %v, delta 0: %v, want %v", eps, got, want)
		}
	}
	prev := 0.0
	for _, tc := range []struct{ eps, delta float64 }{{0, 0}, {0, 0.1}, {0.5, 1e-5}, {0.5, 0.3}, {2, 0.05}, {8, 1e-5}} {
		const steps = 100000
		area := 0.0
		for i := range steps {
			x := (float64(i) + 0.5) / steps
			area += math.Min(1, math.Min(math.Exp(tc.eps)*x+tc.delta, 1-math.Exp(-tc.eps)*(1-tc.delta-x))) / steps
		}
		got := CertifiedAUC(tc.eps, tc.delta)
		if math.Abs(got-area) > 1e-6 { // the midpoint rule's error at the kinks
			t.Errorf("eps %v, delta %v: %v, numerical area %v", tc.eps, tc.delta, got, area)
		}
		if got < prev {
			t.Errorf("eps %v, delta %v: %v below the previous %v", tc.eps, tc.delta, got, prev)
		}
		prev = got
	}
	if CertifiedAUC(0, 0) != 0.5 || CertifiedAUC(math.Inf(1), 0) != 1 || CertifiedAUC(3, 1) != 1 {
		t.Errorf("edges: %v %v %v", CertifiedAUC(0, 0), CertifiedAUC(math.Inf(1), 0), CertifiedAUC(3, 1))
	}
	// a large finite epsilon (e^eps overflows float64) is 1, not NaN
	for _, eps := range []float64{710, 1e3, 1.6e11} {
		if got := CertifiedAUC(eps, 1e-5); got != 1 {
			t.Errorf("eps %v: %v, want 1", eps, got)
		}
	}
}
