package attack

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/option"
)

// TestDistinguishInputsValidate: each invalid input is an *option.Error
// naming it, before any file is read; RunDistinguish checks the options
// first, then the inputs, then names the model or posterior file it cannot
// read.
func TestDistinguishInputsValidate(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	pair := func(kind string) PairSpec { return PairSpec{Kind: kind, RandomPairs: 1} }
	for _, tc := range []struct {
		name         string
		in           DistinguishInputs
		opt          func(*DistinguishOptions)
		option, want string // want: in the error
	}{
		{"unknown kind", DistinguishInputs{Model: missing, Pair: pair("best")}, nil, "pair", `pair "best": want witness, argmax or random (or texts, pair_index)`},
		{"three texts", DistinguishInputs{Model: missing, Pair: PairSpec{Kind: PairTexts, Texts: []string{"a", "b", "c"}, RandomPairs: 1}}, nil, "texts", "3 texts, want 2"},
		{"no random pair", DistinguishInputs{Model: missing, Pair: PairSpec{Kind: PairRandom}}, nil, "random_pairs", "random_pairs 0: want >= 1"},
		{"options first", DistinguishInputs{Pair: pair("best")}, func(o *DistinguishOptions) { o.Releases = 1 }, "releases", "releases 1"},
		{"missing model", DistinguishInputs{Model: missing, Pair: pair(PairWitness)}, nil, "model", missing},
		{"missing posteriors", DistinguishInputs{Posteriors: missing, Pair: pair(PairWitness)}, nil, "posteriors", missing},
	} {
		opt := DefaultDistinguishOptions()
		if tc.opt != nil {
			tc.opt(&opt)
		}
		rep, err := RunDistinguish(context.Background(), tc.in, opt)
		var oe *option.Error
		if rep != nil || !errors.As(err, &oe) || oe.Option != tc.option || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: report %v, error %v: want an option error naming %s with %q", tc.name, rep, err, tc.option, tc.want)
		}
	}
}

// TestDistinguishInputsCombinations: inputs given together that do not
// combine are an *option.CombinationError naming each, in its order,
// whatever the pair's kind; texts or pair_index given is the pair.
func TestDistinguishInputsCombinations(t *testing.T) {
	given := func(names ...string) option.Given {
		return func(n string) bool { return slices.Contains(names, n) }
	}
	pair := func(kind string) PairSpec { return PairSpec{Kind: kind, RandomPairs: 1} }
	texts := PairSpec{Kind: PairWitness, Texts: []string{"a", "b"}, RandomPairs: 1}
	for _, tc := range []struct {
		name string
		in   DistinguishInputs
		want []string // the error's options; nil: valid
		msg  string
	}{
		{"nothing to attack", DistinguishInputs{Pair: pair(PairWitness)}, []string{"model", "posteriors"}, "model DIR or posteriors FILE is required"},
		{"texts and pair index", DistinguishInputs{Model: "m", Pair: texts, Given: given("texts", "pair_index")}, []string{"texts", "pair_index"}, "texts and pair_index: give one pair"},
		{"texts and pair", DistinguishInputs{Model: "m", Pair: texts, Given: given("texts", "pair")}, []string{"texts", "pair", "texts"}, "texts and pair: texts is the pair"},
		{"pair index and pair", DistinguishInputs{Model: "m", Pair: pair(PairArgmax), Given: given("pair_index", "pair")}, []string{"pair_index", "pair", "pair_index"}, ""},
		{"texts given without a model", DistinguishInputs{Posteriors: "p", Pair: texts, Given: given("texts")}, []string{"texts", "model"}, "texts needs model (the texts' posteriors come from the model)"},
		{"kind texts without a model", DistinguishInputs{Posteriors: "p", Pair: PairSpec{Kind: PairTexts, Texts: []string{"a", "b"}, RandomPairs: 1}}, []string{"texts", "model"}, ""},
		{"audit without argmax", DistinguishInputs{Model: "m", Pair: PairSpec{Kind: PairWitness, Audit: "a.json", RandomPairs: 1}}, []string{"audit", "pair"}, "audit gives the argmax pair: use it with pair argmax"},
		{"audit given empty", DistinguishInputs{Model: "m", Pair: pair(PairRandom), Given: given("audit")}, []string{"audit", "pair"}, ""},
		{"random pairs without random", DistinguishInputs{Model: "m", Pair: pair(PairArgmax), Given: given("random_pairs")}, []string{"random_pairs", "pair"}, "random_pairs is for pair random"},
		{"split with posteriors", DistinguishInputs{Model: "m", Posteriors: "p", Split: "dev", Pair: pair(PairArgmax), Given: given("split")}, []string{"split", "glue_dir", "model", "posteriors"}, ""},
		{"glue dir without a model", DistinguishInputs{Posteriors: "p", GlueDir: "g", Pair: pair(PairArgmax)}, []string{"split", "glue_dir", "model", "posteriors"}, ""},
		{"split given under a model", DistinguishInputs{Model: "m", Split: "test", Pair: pair(PairArgmax), Given: given("split", "glue_dir")}, nil, ""},
		{"random pairs with random", DistinguishInputs{Model: "m", Pair: pair(PairRandom), Given: given("random_pairs", "pair")}, nil, ""},
		{"texts given, kind left", DistinguishInputs{Model: "m", Pair: texts, Given: given("texts")}, nil, ""},
		{"audit with argmax", DistinguishInputs{Model: "m", Pair: PairSpec{Kind: PairArgmax, Audit: "a.json", RandomPairs: 1}, Given: given("audit", "pair")}, nil, ""},
	} {
		err := tc.in.Validate()
		var ce *option.CombinationError
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v, want none", tc.name, err)
		case tc.want == nil:
		case !errors.As(err, &ce) || !slices.Equal(ce.Options, tc.want):
			t.Errorf("%s: %v (%T), want a combination of %q", tc.name, err, err, tc.want)
		case tc.msg != "" && err.Error() != tc.msg:
			t.Errorf("%s: %q, want %q", tc.name, err, tc.msg)
		}
	}
	// given texts make the kind PairTexts, given pair_index PairIndex
	in := DistinguishInputs{Model: "m", Pair: texts, Given: given("texts")}
	if k := in.pairKind(); k != PairTexts {
		t.Errorf("texts given: kind %q", k)
	}
	in.Given = given("pair_index")
	if k := in.pairKind(); k != PairIndex {
		t.Errorf("pair_index given: kind %q", k)
	}
}

// TestLoadLearnedErrors: a model directory that cannot be read is an
// *option.Error naming model.
func TestLoadLearnedErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, _, err := loadLearned(LearnedInputs{Model: missing, Corpus: DefaultCorpusOptions()})
	var oe *option.Error
	if !errors.As(err, &oe) || oe.Option != "model" || !strings.Contains(err.Error(), missing) {
		t.Errorf("error %v: want an option error naming model and %s", err, missing)
	}
	if _, err := RunInvert(context.Background(), LearnedInputs{Model: missing}, InvertOptions{Decoder: "knn"}, nil); !errors.As(err, &oe) || oe.Option != "decoder" {
		t.Errorf("RunInvert with a bad decoder and a missing model: %v, want the decoder named first", err)
	}
}
