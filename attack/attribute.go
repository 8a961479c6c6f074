package attack

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/release"
	"github.com/nvdp-project/nvdp/tokenize"
)

// Property is a sensitive property of a text that the task does not need,
// decided by a deterministic rule from the raw text, before tokenisation and
// truncation.
type Property struct {
	Name string `json:"name"`
	Rule string `json:"rule"` // the rule, in words
	has  func(text string) bool
}

// Has reports whether text has the property.
func (p Property) Has(text string) bool { return p.has(text) }

// The properties Attribute infers.
const (
	PropertyDigit  = "digit"
	PropertyName   = "name"
	PropertyFemale = "female-pronoun"
)

// GivenNames is the built-in list that the PropertyName rule matches, since no
// name list is available offline. It holds common English given names, the
// most frequent US given names of the 20th century, in lower case, less those
// that are also common English words or places, such as mark, frank, grace,
// jean, carol, jack, ray, austin, jordan, madison and virginia.
var GivenNames = strings.Fields(`
aaron adam albert alan alexander alexis alice amanda amy andrea andrew angela ann anna anthony arthur ashley
barbara benjamin betty beverly billy brandon brenda brian brittany bruce bryan carl carolyn catherine
charles charlotte cheryl christina christine christopher cynthia daniel danielle david debra deborah
denise dennis diana diane donna doris dorothy douglas dylan edward elijah elizabeth emily emma eric
ethan evelyn frances gabriel gary george gloria gregory hannah harold helen henry isabella jacob
jacqueline james janet janice jason jeffrey jennifer jeremy jerry jesse jessica joan joe john jonathan
jose joseph joshua joyce juan judith judy julia julie justin karen katherine kathleen kathryn kayla
keith kelly kenneth kevin kimberly kyle larry laura lauren lawrence linda lisa logan lori margaret
maria marie marilyn martha mary matthew megan melissa michael michelle nancy natalie nathan nicholas
nicole noah olivia pamela patricia patrick peter rachel randy raymond rebecca richard robert roger
ronald ruth ryan samantha samuel sandra sara sarah scott sean sharon shirley sophia stephanie stephen
steven susan teresa terry theresa thomas timothy tyler vincent walter wayne william willie zachary`)

var femalePronouns = []string{"she", "her", "hers", "herself"}

// words are the maximal runs of letters of text, case-folded (so "John's"
// holds "john" and "s").
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) })
}

func hasWord(list []string) func(string) bool {
	set := make(map[string]bool, len(list))
	for _, w := range list {
		set[w] = true
	}
	return func(text string) bool {
		return slices.ContainsFunc(words(text), func(w string) bool { return set[w] })
	}
}

var properties = []Property{
	{Name: PropertyName, Rule: fmt.Sprintf("a word (a maximal run of letters, case-folded) is one of the %d given names of attack.GivenNames", len(GivenNames)),
		has: hasWord(GivenNames)},
	{Name: PropertyDigit, Rule: "a decimal digit (Unicode category Nd) occurs",
		has: func(text string) bool { return strings.IndexFunc(text, unicode.IsDigit) >= 0 }},
	{Name: PropertyFemale, Rule: "a word (a maximal run of letters, case-folded) is " + strings.Join(femalePronouns, ", "),
		has: hasWord(femalePronouns)},
}

// Properties lists the properties Attribute infers.
func Properties() []Property { return slices.Clone(properties) }

// lookupProperty returns the property of a name. For an unknown name it
// returns an error listing the known ones.
func lookupProperty(name string) (Property, error) {
	names := make([]string, len(properties))
	for i, p := range properties {
		if p.Name == name {
			return p, nil
		}
		names[i] = p.Name
	}
	return Property{}, fmt.Errorf("unknown property %q (want %s)", name, strings.Join(names, ", "))
}

// The attribute's classifiers: ModelLinear, a logistic regression, ModelMLP,
// or ClassifierAll for both. ClassifierMajority is the majority baseline,
// always reported.
const (
	ClassifierAll      = "all"
	ClassifierMajority = "majority"
)

// AttributeOptions configure Attribute; DefaultAttributeOptions gives the
// defaults.
type AttributeOptions struct {
	Property   string `json:"property"`   // PropertyName, PropertyDigit or PropertyFemale
	Classifier string `json:"classifier"` // ModelLinear, ModelMLP or ClassifierAll
	LearnedOptions
}

// DefaultAttributeOptions returns the defaults of an attribute attack: the
// name property and both classifiers, trained 20 epochs, with 95% intervals
// from 1000 bootstrap resamples. Like every learned attack by default, the
// attacker makes one release per public text and trains with seed 1, in
// batches of 64 at learning rate 1e-3, with an MLP 256 wide.
func DefaultAttributeOptions() AttributeOptions {
	return AttributeOptions{Property: PropertyName, Classifier: ClassifierAll, LearnedOptions: defaultLearned(20)}
}

// Validate checks o; errors are *option.Error.
func (o AttributeOptions) Validate() error {
	if _, err := lookupProperty(o.Property); err != nil {
		return option.Errorf("property", o.Property, "%v", err)
	}
	if !slices.Contains([]string{ModelLinear, ModelMLP, ClassifierAll}, o.Classifier) {
		return option.Errorf("classifier", o.Classifier, "want %s, %s or %s", ModelLinear, ModelMLP, ClassifierAll)
	}
	return o.LearnedOptions.Validate()
}

// AttributeReport is the result of [Attribute], written by `nvdp attack
// attribute --json`.
type AttributeReport struct {
	Setup
	Options  AttributeOptions `json:"options"`
	Property Property         `json:"property"`
	// PublicPositive and VictimPositive count the texts with the property.
	PublicPositive int `json:"public_positive"`
	VictimPositive int `json:"victim_positive"`
	// CertifiedAUC is CertifiedAUC of the certified (epsilon, delta) of one
	// release: no classifier of the release results can have a larger
	// AUC in expectation.
	CertifiedAUC float64           `json:"certified_auc"`
	Results      []AttributeResult `json:"results"`
	Seconds      float64           `json:"seconds"`
}

// AttributeResult is one classifier reading features, scored on the
// victims: a text is called positive when the classifier's probability of
// the property is above 1/2.
type AttributeResult struct {
	Features   string `json:"features"`   // FeaturesRelease, FeaturesEncoder or FeaturesNone
	Classifier string `json:"classifier"` // ModelLinear, ModelMLP or ClassifierMajority
	// Accuracy is Correct / victims, AccuracyCI its Clopper-Pearson interval.
	Accuracy   float64    `json:"accuracy"`
	AccuracyCI [2]float64 `json:"accuracy_ci"`
	Correct    int        `json:"correct"`
	// AUC is the area under the ROC curve of the classifier's score on the
	// positive victims against the negative ones (AUC; 1/2 for the majority
	// baseline's constant score), AUCCI its percentile bootstrap interval
	// over the victims (Bootstrap; the same resamples for every result).
	AUC   float64    `json:"auc"`
	AUCCI [2]float64 `json:"auc_ci"`
}

// Attribute runs the attribute-inference attack of docs/attacks.md on target
// t and returns its report.
//
// The attacker releases each public text of c o.ReleasesPerText times and
// labels the texts with the property, which it reads from the public texts
// themselves. It trains its classifiers on the mean-pooled release, the mean
// of Z over all N components, of shape [P], and predicts the property of each
// victim text from its one release. The same classifiers on the mean-pooled
// encoder output, the mean of x over the text's tokens with the specials, of
// shape [H], are the non-private upper reference; the majority class of the
// public texts is the baseline.
//
// Everything is checked before any work: the options; the corpus, whose texts
// must be releasable, with both classes among the public texts and among the
// victims, or else the attack or its AUC is undefined; and the memory that
// the releases and the MLP take, as in [Invert]. Progress is reported for the
// releases and each classifier's training, as in [Invert]. Cancelling ctx
// stops between batches and steps.
func Attribute(ctx context.Context, t *Target, c *Corpus, o AttributeOptions, report progress.Func) (*AttributeReport, error) {
	start := time.Now()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	prop, _ := lookupProperty(o.Property) // ok: validated
	if err := c.check(); err != nil {
		return nil, err
	}
	pubY, pubPos := labels(prop, c.Public)
	vicY, vicPos := labels(prop, c.Victims)
	if err := bothClasses(prop, pubPos, len(pubY), "public"); err != nil {
		return nil, err
	}
	if err := bothClasses(prop, vicPos, len(vicY), "victim"); err != nil {
		return nil, err
	}
	setup, pubEnc, vicEnc, err := t.prepare(c)
	if err != nil {
		return nil, err
	}
	N, P, H := setup.Model.N, setup.Model.P, t.bundle.Model.Cfg.Hidden
	if err := o.checkMemory(t, learnedNeed{rows: len(c.Public), dims: max(P, H), classes: 2, mlp: o.Classifier != ModelLinear}); err != nil {
		return nil, err
	}
	pubZ, pubX := &rowSet{dims: P}, &rowSet{dims: H}
	vicZ, vicX := &rowSet{dims: P}, &rowSet{dims: H}
	src := release.NewSeededSource(o.Seed)
	for _, s := range []struct {
		stage     string
		texts     []string
		encs      []tokenize.Encoding
		y         []int
		k         int
		rel, encd *rowSet // the mean-pooled release and encoder output, one row per release / text
	}{{"release public", c.Public, pubEnc, pubY, o.ReleasesPerText, pubZ, pubX}, {"release victims", c.Victims, vicEnc, vicY, 1, vicZ, vicX}} {
		err := t.collect(ctx, s.texts, s.encs, s.k, src, report, s.stage, func(i int, v view) {
			for _, e := range v.releases {
				s.rel.add(meanRows(e.Z, N, P), s.y[i])
			}
			s.encd.add(meanRows(v.x[:v.enc.Len()*H], v.enc.Len(), H), s.y[i])
		})
		if err != nil {
			return nil, err
		}
	}
	r := &AttributeReport{Setup: setup, Options: o, Property: prop, PublicPositive: pubPos, VictimPositive: vicPos,
		CertifiedAUC: CertifiedAUC(float64(setup.Certified.Epsilon), setup.Certified.Delta)}
	majority := 0
	if 2*pubPos > len(pubY) {
		majority = 1
	}
	constant := make([]float64, len(vicY))
	res, err := attributeResult(FeaturesNone, ClassifierMajority, vicY, constant, majority, o)
	if err != nil {
		return nil, err
	}
	r.Results = append(r.Results, res)
	for _, f := range []struct {
		name        string
		train, test *rowSet
	}{{FeaturesRelease, pubZ, vicZ}, {FeaturesEncoder, pubX, vicX}} {
		for _, kind := range o.classifiers() {
			stage := "train " + f.name + " " + kind
			cl := newClassifier(kind, f.train.dims, o.Hidden, 2, rng(o.Seed, "init attribute "+stage))
			if err := cl.fit(ctx, f.train.x, f.train.labels, o.Learner, rng(o.Seed, "order attribute "+stage), report, stage); err != nil {
				return nil, err
			}
			score := make([]float64, f.test.len())
			cl.predict(f.test.x, func(row int, logits []float32) { score[row] = float64(logits[1]) - float64(logits[0]) })
			res, err := attributeResult(f.name, kind, vicY, score, -1, o)
			if err != nil {
				return nil, err
			}
			r.Results = append(r.Results, res)
		}
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// bothClasses returns an error when pos of the all texts of a set (named which) have the property,
// or none do: a classifier needs both classes.
func bothClasses(prop Property, pos, all int, which string) error {
	if pos == 0 || pos == all {
		return fmt.Errorf("attack: property %s: %d of the %d %s texts have it: both classes are needed (more texts, or another property)",
			prop.Name, pos, all, which)
	}
	return nil
}

// classifiers lists the classifiers o selects.
func (o AttributeOptions) classifiers() []string {
	if o.Classifier == ClassifierAll {
		return []string{ModelLinear, ModelMLP}
	}
	return []string{o.Classifier}
}

// labels are the property's labels of texts (1: has it) and their count.
func labels(p Property, texts []string) ([]int, int) {
	y := make([]int, len(texts))
	pos := 0
	for i, text := range texts {
		if p.Has(text) {
			y[i] = 1
			pos++
		}
	}
	return y, pos
}

// meanRows is the mean of the n rows of x [n*dims] (float64 sums).
func meanRows(x []float32, n, dims int) []float32 {
	sum := make([]float64, dims)
	for r := range n {
		for j, v := range x[r*dims : (r+1)*dims] {
			sum[j] += float64(v)
		}
	}
	out := make([]float32, dims)
	for j, s := range sum {
		out[j] = float32(s / float64(n))
	}
	return out
}

// attributeResult scores the victims' scores (the log-odds of the property)
// against their labels y: the call is score > 0, or the constant class
// call when call >= 0 (the majority baseline); AUC and its bootstrap
// interval from the scores.
func attributeResult(features, classifier string, y []int, score []float64, call int, o AttributeOptions) (AttributeResult, error) {
	res := AttributeResult{Features: features, Classifier: classifier}
	for i, s := range score {
		guess := call
		if call < 0 {
			guess = 0
			if s > 0 {
				guess = 1
			}
		}
		if guess == y[i] {
			res.Correct++
		}
	}
	n := len(y)
	res.Accuracy = float64(res.Correct) / float64(n)
	lo, hi, err := clopperPearson(res.Correct, n, o.Confidence)
	if err != nil {
		return res, err
	}
	res.AccuracyCI = [2]float64{lo, hi}
	auc := func(idx []int) float64 {
		var pos, neg []float64
		for _, i := range idx {
			if y[i] == 1 {
				pos = append(pos, score[i])
			} else {
				neg = append(neg, score[i])
			}
		}
		a, err := AUC(pos, neg)
		if err != nil {
			return math.NaN() // a resample with one class
		}
		return a
	}
	if res.AUC = auc(allIndices(n)); math.IsNaN(res.AUC) {
		return res, fmt.Errorf("attack: AUC of %s %s is undefined", features, classifier)
	}
	if lo, hi, err = Bootstrap(n, o.Bootstrap, o.Confidence, rng(o.Seed, "bootstrap attribute"), auc); err != nil {
		return res, err
	}
	res.AUCCI = [2]float64{lo, hi}
	return res, nil
}

// CertifiedAUC returns the largest area under the ROC curve of any test
// between two distributions that are (epsilon, delta)-indistinguishable both
// ways.
//
// It is the area under TPR = min(e^eps FPR + delta, 1 - e^-eps (1 - delta -
// FPR), 1), the boundary of the privacy region of Kairouz, Oh and Viswanath,
// ICML 2015, Theorem 2.1. The two lines meet at FPR* = (1 - delta)/(1 + e^eps),
// and the boundary reaches 1 at FPR = 1 - delta:
//
//	AUC <= e^eps x*^2/2 + delta x* + (1 - e^-eps (1 - delta))(1 - delta - x*) + e^-eps ((1 - delta)^2 - x*^2)/2 + delta,
//
// which is e^eps/(1 + e^eps) at delta = 0. It returns 1 for an infinite
// epsilon or delta >= 1.
//
// An (epsilon, delta) guarantee of one release against every other text
// bounds the test between the releases of any two populations of texts,
// since the hockey-stick divergence is jointly convex. So the AUC of an
// attribute classifier that never saw the victims is at most this in
// expectation.
func CertifiedAUC(eps, delta float64) float64 {
	if math.IsInf(eps, 1) || delta >= 1 {
		return 1
	}
	ie := math.Exp(-eps)              // e^-eps: no overflow at a large epsilon
	x := (1 - delta) * ie / (1 + ie)  // x* = (1 - delta)/(1 + e^eps)
	ex2 := (1 - delta) * x / (1 + ie) // e^eps x*^2
	return ex2/2 + delta*x + (1-ie*(1-delta))*(1-delta-x) + ie*((1-delta)*(1-delta)-x*x)/2 + delta
}
