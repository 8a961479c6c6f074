package attack

import (
	"context"
	"errors"
	"path/filepath"
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
		{"nothing to attack", DistinguishInputs{Pair: pair(PairWitness)}, nil, "model", "a model directory or posteriors is required"},
		{"unknown kind", DistinguishInputs{Model: missing, Pair: pair("best")}, nil, "pair", `pair "best": want witness, argmax or random (or texts, pair_index)`},
		{"texts without a model", DistinguishInputs{Posteriors: missing, Pair: PairSpec{Kind: PairTexts, Texts: []string{"a", "b"}, RandomPairs: 1}}, nil, "texts", "needs a model"},
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
