package attack

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
)

// ScoreTokens on hand-made guesses: exact-token accuracy over all positions, precision / recall /
// F1 per text on sets of distinct ids, averaged over the texts with a position.
func TestScoreTokens(t *testing.T) {
	for _, tc := range []struct {
		name        string
		truth, pred [][]int
		want        TokenScores
	}{
		// text 0: 1 of 3 right; sets {1,2,3} vs {1,5}: P 1/2, R 1/3, F1 0.4. text 1: 1 of 2;
		// {4} vs {4,6}: P 1/2, R 1, F1 2/3.
		{"two texts", [][]int{{1, 2, 3}, {4, 4}}, [][]int{{1, 1, 5}, {4, 6}},
			TokenScores{Accuracy: 2.0 / 5, Precision: 0.5, Recall: (1.0/3 + 1) / 2, F1: (0.4 + 2.0/3) / 2, Correct: 2, Positions: 5, Texts: 2}},
		// a text without positions is left out; repeated true tokens count once in the sets
		{"empty text", [][]int{{}, {7, 7, 8}}, [][]int{{}, {8, 7, 7}},
			TokenScores{Accuracy: 1.0 / 3, Precision: 1, Recall: 1, F1: 1, Correct: 1, Positions: 3, Texts: 1}},
		{"all wrong", [][]int{{1, 2}}, [][]int{{3, 3}}, TokenScores{Positions: 2, Texts: 1}},
		{"all right", [][]int{{1, 2}, {3}}, [][]int{{1, 2}, {3}},
			TokenScores{Accuracy: 1, Precision: 1, Recall: 1, F1: 1, Correct: 3, Positions: 3, Texts: 2}},
	} {
		got, err := ScoreTokens(tc.truth, tc.pred)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, v := range [][2]float64{{got.Accuracy, tc.want.Accuracy}, {got.Precision, tc.want.Precision}, {got.Recall, tc.want.Recall}, {got.F1, tc.want.F1}} {
			if math.Abs(v[0]-v[1]) > 1e-12 {
				t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
				break
			}
		}
		if got.Correct != tc.want.Correct || got.Positions != tc.want.Positions || got.Texts != tc.want.Texts {
			t.Errorf("%s: counts %+v, want %+v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name        string
		truth, pred [][]int
		want        string
	}{
		{"texts", [][]int{{1}}, [][]int{{1}, {2}}, "1 texts of true tokens, 2 of guesses"},
		{"positions", [][]int{{1, 2}}, [][]int{{1}}, "text 0: 2 true tokens, 1 guesses"},
		{"nothing", [][]int{{}}, [][]int{{}}, "no position"},
	} {
		if _, err := ScoreTokens(tc.truth, tc.pred); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// nearest finds the nearest reference row in Euclidean distance, the first of ties, across blocks.
func TestNearest(t *testing.T) {
	refs := []float32{0, 0, 10, 0, 0, 10, 10, 0} // rows 1 and 3 are equal
	q := []float32{1, 1, 9, 1, 1, 8, 5, 0, -3, -3}
	if got, want := nearest(q, refs, 2), []int{0, 1, 2, 0, 0}; !slices.Equal(got, want) {
		// (5, 0) is 5 from rows 0, 1 and 3: the first
		t.Errorf("nearest %v, want %v", got, want)
	}
	// 200 queries against a grid of 2^16 rows, 64 queries a block: each finds its grid point
	const dims, side = 3, 256
	grid := make([]float32, side*side*dims)
	for k := range side * side {
		grid[k*dims], grid[k*dims+1] = float32(k/side), float32(k%side)
	}
	var qs []float32
	var want []int
	for i := range 200 {
		a, b := i*37%side, i*91%side
		qs = append(qs, float32(a)+0.2, float32(b)-0.1, 0.3)
		want = append(want, a*side+b)
	}
	if got := nearest(qs, grid, dims); !slices.Equal(got, want) {
		t.Errorf("nearest grid points %v, want %v", got, want)
	}
}

// tokenClasses numbers the tokens in id order; the majority is the most frequent, the smallest id of
// ties.
func TestTokenClasses(t *testing.T) {
	classes, majority := tokenClasses([]int{9, 4, 9, 4, 2})
	if majority != 4 || len(classes) != 3 || classes[2] != 0 || classes[4] != 1 || classes[9] != 2 {
		t.Errorf("classes %v, majority %d", classes, majority)
	}
}

// The options are checked before any work: each bad value is an *option.Error naming its JSON key;
// an explicit 0 where it means something (examples) is kept.
func TestInvertOptions(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*InvertOptions)
		name string
	}{
		{func(o *InvertOptions) { o.Decoder = "knn" }, "decoder"},
		{func(o *InvertOptions) { o.ReleasesPerText = 0 }, "releases_per_text"},
		{func(o *InvertOptions) { o.Examples = -1 }, "examples"},
		{func(o *InvertOptions) { o.Epochs = 0 }, "epochs"},
		{func(o *InvertOptions) { o.BatchSize = 0 }, "batch_size"},
		{func(o *InvertOptions) { o.LR = 0 }, "lr"},
		{func(o *InvertOptions) { o.LR = math.Inf(1) }, "lr"},
		{func(o *InvertOptions) { o.WeightDecay = math.NaN() }, "weight_decay"},
		{func(o *InvertOptions) { o.Hidden = 0 }, "mlp_hidden"},
		{func(o *InvertOptions) { o.Confidence = 1 }, "confidence"},
		{func(o *InvertOptions) { o.Bootstrap = 0 }, "bootstrap"},
	} {
		o := DefaultInvertOptions()
		tc.mod(&o)
		var oe *option.Error
		if err := o.Validate(); !errors.As(err, &oe) || oe.Option != tc.name {
			t.Errorf("error %v, want option %s", err, tc.name)
		}
		// nothing is released: the error comes before the (nil) target is used
		if _, err := Invert(context.Background(), nil, synthCorpus(8, 4), o, nil); !errors.As(err, &oe) || oe.Option != tc.name {
			t.Errorf("Invert: error %v, want option %s", err, tc.name)
		}
	}
	if err := DefaultInvertOptions().Validate(); err != nil {
		t.Error(err)
	}
}

// The inversion beats chance by far on a release that is the encoder output with tiny noise (gaussian,
// C = 100 above every row's norm, sigma^2 = 1e-6) and on nvdp-clipped with C_mu = 100 (sigma about
// 0.3 of the prior's): every decoder's accuracy interval lies 0.5 above the majority token's, its F1
// interval 0.5 above its shuffled guesses' F1; on a release of pure noise (C, C_mu = 1e-4) none does
// significantly better than the majority token's accuracy (the lower end of its interval at most
// 0.03 above it) or its own shuffled guesses' F1 (at most 0.05 above it; the intervals are about
// 0.04 wide, and over seeds 1-6 the nearest-neighbour decoder's F1 is 0.008-0.055 above its
// shuffled guesses', so a point estimate would fail on about one seed in six). The majority token's guesses shuffled
// are the same guesses. The encoder-output reference is the same model's and recovers at least
// 95% of the tokens in every case. The counts are those of the texts: every word is a token of the
// vocabulary, and a text keeps its first 6 (max-seq-len 8 less [CLS] and [SEP]).
func TestInvertBeatsChance(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 16 decoders")
	}
	c := synthCorpus(240, 80)
	tokens := func(texts []string) (n int) {
		for _, s := range texts {
			n += min(len(strings.Fields(s)), 6)
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		variant string
		cmu, v  float64
		private bool // pure noise
	}{
		{"gaussian non-private", nvib.ModelGaussian, 100, 1e-6, false},
		{"nvdp-clipped C_mu 100", nvib.ModelNVDPClipped, 100, 1, false},
		{"gaussian noise", nvib.ModelGaussian, 1e-4, 1, true},
		{"nvdp-clipped noise", nvib.ModelNVDPClipped, 1e-4, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tinyTarget(t, tc.variant, tc.cmu, tc.v)
			o := DefaultInvertOptions()
			o.Epochs, o.Bootstrap, o.ReleasesPerText = 20, 200, 2
			var stages []string
			report := progress.Func(func(e progress.Event) {
				if len(stages) == 0 || stages[len(stages)-1] != e.Stage {
					stages = append(stages, e.Stage)
				}
			})
			r, err := Invert(context.Background(), target, c, o, report)
			if err != nil {
				t.Fatal(err)
			}
			if r.PublicTexts != 240 || r.VictimTexts != 80 || r.PublicTokens != tokens(c.Public) || r.VictimTokens != tokens(c.Victims) ||
				r.Classes != len(contentWords)+len(digits)+len(names)+1 || r.Unseen != 0 {
				t.Errorf("counts: %d/%d texts, %d/%d tokens (want %d/%d), %d classes, %v unseen", r.PublicTexts, r.VictimTexts,
					r.PublicTokens, r.VictimTokens, tokens(c.Public), tokens(c.Victims), r.Classes, r.Unseen)
			}
			if want := []string{"release public", "release victims", "train release linear", "train release mlp",
				"train encoder linear", "train encoder mlp"}; !slices.Equal(stages, want) {
				t.Errorf("progress stages %v, want %v", stages, want)
			}
			chance := r.Results[0]
			if chance.Features != FeaturesNone || chance.Decoder != DecoderMajority || len(r.Results) != 7 {
				t.Fatalf("results %+v", r.Results)
			}
			// "the" opens every text: the majority guess is right once per text, and its one-token set
			// is always in the text's
			if chance.Correct != 80 || chance.Precision != 1 || chance.Shuffled != chance.TokenScores {
				t.Errorf("chance: %+v, shuffled %+v", chance.TokenScores, chance.Shuffled)
			}
			for _, res := range r.Results[1:] {
				t.Logf("%-8s %-8s acc %.3f [%.3f, %.3f] P %.3f R %.3f F1 %.3f [%.3f, %.3f] shuffled acc %.3f F1 %.3f", res.Features, res.Decoder,
					res.Accuracy, res.AccuracyCI[0], res.AccuracyCI[1], res.Precision, res.Recall, res.F1, res.F1CI[0], res.F1CI[1], res.Shuffled.Accuracy, res.Shuffled.F1)
				if len(res.Examples) != 3 || !(res.AccuracyCI[0] <= res.Accuracy && res.Accuracy <= res.AccuracyCI[1]) {
					t.Errorf("%s %s: %d examples, accuracy %v outside its interval %v", res.Features, res.Decoder, len(res.Examples), res.Accuracy, res.AccuracyCI)
				}
				switch {
				case res.Features == FeaturesEncoder && res.Accuracy < 0.95:
					t.Errorf("encoder %s: accuracy %.3f, want >= 0.95", res.Decoder, res.Accuracy)
				case res.Features == FeaturesRelease && !tc.private && (res.AccuracyCI[0] <= chance.AccuracyCI[1]+0.5 || res.F1CI[0] <= res.Shuffled.F1+0.5):
					t.Errorf("release %s: accuracy %v, F1 %v do not beat chance %v and the shuffled guesses' F1 %.3f by 0.5",
						res.Decoder, res.AccuracyCI, res.F1CI, chance.AccuracyCI, res.Shuffled.F1)
				case res.Features == FeaturesRelease && tc.private && (res.AccuracyCI[0] > chance.Accuracy+0.03 || res.F1CI[0] > res.Shuffled.F1+0.05):
					t.Errorf("release %s on noise: accuracy %.3f, F1 %.3f above chance %.3f and the shuffled guesses' F1 %.3f",
						res.Decoder, res.Accuracy, res.F1, chance.Accuracy, res.Shuffled.F1)
				}
			}
		})
	}
}

// Invert is reproducible from its seed, and a decoder's numbers do not depend on which others run;
// Examples 0 shows none; a cancelled context stops it; a corpus it cannot attack is an error saying
// why.
func TestInvertSeeded(t *testing.T) {
	target := tinyTarget(t, nvib.ModelGaussian, 1, 1)
	c := synthCorpus(60, 20)
	o := DefaultInvertOptions()
	o.Epochs, o.Bootstrap = 2, 50
	a, err := Invert(context.Background(), target, c, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Invert(context.Background(), target, c, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Seconds, b.Seconds = 0, 0
	if !reflect.DeepEqual(a, b) {
		t.Error("two runs with one seed differ")
	}
	o.Decoder, o.Examples = ModelMLP, 0
	m, err := Invert(context.Background(), target, c, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Results) != 3 || m.Results[1].Decoder != ModelMLP || len(m.Results[1].Examples) != 0 ||
		m.Results[1].TokenScores != a.Results[3].TokenScores || m.Results[1].F1CI != a.Results[3].F1CI {
		t.Errorf("mlp alone %+v, among all %+v", m.Results[1], a.Results[3])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Invert(ctx, target, c, o, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	for _, tc := range []struct {
		c    *Corpus
		want string
	}{
		{nil, "no corpus"},
		{&Corpus{Public: c.Public}, "no victim texts"},
		{&Corpus{Public: c.Public, Victims: []string{"the", " "}}, "victim text 1: blank text"},
		// words outside the vocabulary are [UNK]: no position to attack
		{&Corpus{Public: c.Public, Victims: []string{"zzz", "qqq www"}}, "the victim texts hold no token other than the tokenizer's specials"},
	} {
		if _, err := Invert(context.Background(), target, tc.c, o, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("corpus %+v: error %v, want %q", tc.c, err, tc.want)
		}
	}
}
