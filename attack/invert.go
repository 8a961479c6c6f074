package attack

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/release"
	"github.com/nvdp-project/nvdp/tokenize"
)

// The inversion's decoders, described in docs/attacks.md: DecoderNearest,
// ModelLinear and ModelMLP, or DecoderAll for all of them. DecoderMajority is
// the chance reference, always reported.
const (
	DecoderNearest  = "nn"       // the token of the nearest public row
	DecoderAll      = "all"      // nn, linear and mlp
	DecoderMajority = "majority" // the most frequent public token, everywhere
)

// The features an attack reads: the release; the model's encoder output,
// which is the non-private upper reference; or none, which is the chance
// reference.
const (
	FeaturesRelease = "release"
	FeaturesEncoder = "encoder"
	FeaturesNone    = "none"
)

// InvertOptions configure Invert; DefaultInvertOptions gives the defaults.
type InvertOptions struct {
	Decoder string `json:"decoder"` // DecoderNearest, ModelLinear, ModelMLP or DecoderAll
	// Examples is the number of victim texts whose reconstruction each
	// result shows (>= 0).
	Examples int `json:"examples"`
	LearnedOptions
}

// DefaultInvertOptions returns the defaults of an inversion attack: every
// decoder and 3 examples, with the decoders trained 5 epochs and 95%
// intervals from 1000 bootstrap resamples. Like every learned attack by
// default, the attacker makes one release per public text and trains with
// seed 1, in batches of 64 at learning rate 1e-3, with an MLP 256 wide.
func DefaultInvertOptions() InvertOptions {
	return InvertOptions{Decoder: DecoderAll, Examples: 3, LearnedOptions: defaultLearned(5)}
}

// Validate checks o; errors are *option.Error.
func (o InvertOptions) Validate() error {
	switch {
	case !slices.Contains([]string{DecoderNearest, ModelLinear, ModelMLP, DecoderAll}, o.Decoder):
		return option.Errorf("decoder", o.Decoder, "want %s, %s, %s or %s", DecoderNearest, ModelLinear, ModelMLP, DecoderAll)
	case o.Examples < 0:
		return option.Errorf("examples", o.Examples, "must be >= 0")
	}
	return o.LearnedOptions.Validate()
}

// decoders lists the decoders o selects.
func (o InvertOptions) decoders() []string {
	if o.Decoder == DecoderAll {
		return []string{DecoderNearest, ModelLinear, ModelMLP}
	}
	return []string{o.Decoder}
}

// InvertReport is the result of [Invert], written by `nvdp attack invert
// --json`.
type InvertReport struct {
	Setup
	Options InvertOptions `json:"options"`
	// PublicTokens and VictimTokens count the attacked positions of the
	// texts (tokens other than the tokenizer's specials, as the model reads
	// them: truncated to max_seq_len).
	PublicTokens int `json:"public_tokens"`
	VictimTokens int `json:"victim_tokens"`
	// Classes is the number of distinct public tokens: the learned
	// decoders' output space, and the only tokens any decoder here predicts.
	Classes int `json:"classes"`
	// Unseen is the fraction of victim positions whose token is not among
	// them: no decoder here recovers those (accuracy <= 1 - Unseen).
	Unseen  float64        `json:"unseen"`
	Results []InvertResult `json:"results"`
	Seconds float64        `json:"seconds"`
}

// InvertResult is one attack: a decoder reading features.
type InvertResult struct {
	Features string `json:"features"` // FeaturesRelease, FeaturesEncoder or FeaturesNone
	Decoder  string `json:"decoder"`  // DecoderNearest, ModelLinear, ModelMLP or DecoderMajority
	TokenScores
	// AccuracyCI and F1CI are percentile bootstrap intervals over the
	// victim texts (Bootstrap; the same resamples for every result).
	AccuracyCI [2]float64 `json:"accuracy_ci"`
	F1CI       [2]float64 `json:"f1_ci"`
	// Shuffled are the scores of the same guesses permuted at random across
	// all victim positions: what guesses of the same distribution score
	// when they carry nothing of the text (this decoder's own chance level;
	// a decoder on a release of pure noise scores about this).
	Shuffled TokenScores `json:"shuffled"`
	// Examples are the reconstructions of the first victim texts.
	Examples []Reconstruction `json:"examples,omitempty"`
}

// Reconstruction is one victim text's attacked tokens and the decoder's
// guess at the same positions, as token strings separated by spaces.
type Reconstruction struct {
	Text  string `json:"text"`
	Guess string `json:"guess"`
}

// TokenScores are the inversion metrics of TextObfuscator, Zhou et al.,
// Findings of ACL 2023, and DP-Forward, Du et al., CCS 2023, over texts whose
// attacked positions hold true tokens and a guess each:
//
//   - exact-token accuracy: correct positions / positions, over all texts;
//   - token precision, recall and F1: per text on its bag of tokens, the set
//     of distinct token ids, then the mean over the texts. Precision is
//     |guessed ∩ true| / |guessed|, recall is |guessed ∩ true| / |true|, and
//     F1 is their harmonic mean, 0 when both are 0. A text without an
//     attacked position is left out.
type TokenScores struct {
	Accuracy  float64 `json:"accuracy"`
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	F1        float64 `json:"f1"`
	Correct   int     `json:"correct"`   // positions guessed right
	Positions int     `json:"positions"` // positions attacked
	Texts     int     `json:"texts"`     // texts with at least one position
}

// textScore is one text's share of TokenScores.
type textScore struct {
	correct, n            int // positions guessed right, positions
	precision, recall, f1 float64
}

// scoreText scores the guesses pred of one text's true tokens truth (same
// length).
func scoreText(truth, pred []int) textScore {
	s := textScore{n: len(truth)}
	if len(truth) == 0 {
		return s
	}
	tset, pset := map[int]bool{}, map[int]bool{}
	for j, id := range truth {
		tset[id], pset[pred[j]] = true, true
		if pred[j] == id {
			s.correct++
		}
	}
	both := 0
	for id := range pset {
		if tset[id] {
			both++
		}
	}
	s.precision, s.recall = float64(both)/float64(len(pset)), float64(both)/float64(len(tset))
	if both > 0 {
		s.f1 = 2 * s.precision * s.recall / (s.precision + s.recall)
	}
	return s
}

// aggregate is TokenScores of the texts idx of ts (with repeats, for a
// bootstrap resample); a resample without a position has NaN scores.
func aggregate(ts []textScore, idx []int) TokenScores {
	var out TokenScores
	for _, i := range idx {
		s := ts[i]
		if s.n == 0 {
			continue
		}
		out.Texts++
		out.Correct += s.correct
		out.Positions += s.n
		out.Precision += s.precision
		out.Recall += s.recall
		out.F1 += s.f1
	}
	if out.Texts == 0 {
		nan := math.NaN()
		return TokenScores{Accuracy: nan, Precision: nan, Recall: nan, F1: nan}
	}
	k := float64(out.Texts)
	out.Accuracy = float64(out.Correct) / float64(out.Positions)
	out.Precision, out.Recall, out.F1 = out.Precision/k, out.Recall/k, out.F1/k
	return out
}

// ScoreTokens scores guesses: truth[i] and pred[i] are the true tokens of
// text i at its attacked positions and the guesses there, of equal lengths.
// It returns an error for lists or texts of different lengths, and for no
// position at all.
func ScoreTokens(truth, pred [][]int) (TokenScores, error) {
	ts, err := scoreTexts(truth, pred)
	if err != nil {
		return TokenScores{}, err
	}
	return aggregate(ts, allIndices(len(ts))), nil
}

func scoreTexts(truth, pred [][]int) ([]textScore, error) {
	if len(truth) != len(pred) {
		return nil, fmt.Errorf("attack: %d texts of true tokens, %d of guesses", len(truth), len(pred))
	}
	ts := make([]textScore, len(truth))
	scored := false
	for i := range truth {
		if len(truth[i]) != len(pred[i]) {
			return nil, fmt.Errorf("attack: text %d: %d true tokens, %d guesses", i, len(truth[i]), len(pred[i]))
		}
		ts[i] = scoreText(truth[i], pred[i])
		scored = scored || ts[i].n > 0
	}
	if !scored {
		return nil, errors.New("attack: no position to score")
	}
	return ts, nil
}

func allIndices(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// rowSet is a training or test set of the learned attackers: rows of dims
// features (the inversion: one per attacked position; the attribute: one
// per text) and a label per row.
type rowSet struct {
	dims   int
	x      []float32
	labels []int // per row: its token id (the inversion) or its class (the attribute)
}

func (r *rowSet) add(row []float32, label int) {
	r.x = append(r.x, row...)
	r.labels = append(r.labels, label)
}

func (r *rowSet) len() int { return len(r.labels) }

// positions lists the attacked positions of an encoding: the indices j of
// its tokens that are not the tokenizer's specials (component j+1 of the
// release, row j of the encoder output).
func (t *Target) positions(ids []int) []int {
	var out []int
	for j, id := range ids {
		if !t.isSpecial(id) {
			out = append(out, j)
		}
	}
	return out
}

// Invert runs the inversion attack of docs/attacks.md on target t and returns
// its report.
//
// The attacker releases each public text of c o.ReleasesPerText times and
// trains its decoders from a released row Z_t, of shape [P], to the token at
// component t. It then guesses the token at every attacked position of each
// victim text's one release. The decoders are:
//
//   - [DecoderNearest]: the token of the nearest row, in Euclidean distance,
//     among the public texts' noiseless means, the rows the release is drawn
//     around, since the attacker knows the mechanism;
//   - [ModelLinear] and [ModelMLP]: a [Learner] trained on the public
//     releases.
//
// The same decoders read the model's encoder output rows, of shape [H], as
// the non-private upper reference, [FeaturesEncoder]: the nearest public
// encoder row, and decoders trained on the public encoder rows.
// [DecoderMajority], the most frequent public token, is the chance reference.
// The attacker is told which components hold the text's tokens, although a
// release hides the length: it is stronger than a real attacker, so the
// numbers overstate what a release gives away.
//
// Everything is checked before any work: the options; the corpus, whose texts
// must be releasable; every text's tokens; and the memory the releases and
// the MLP take, with an [*option.Error] for releases_per_text or mlp_hidden
// when they cannot fit. Progress is reported for the releases, as "release
// public" and "release victims" in texts, and for each decoder's training, as
// "train <features> <decoder>" in steps with the loss. Cancelling ctx stops
// between batches and steps.
func Invert(ctx context.Context, t *Target, c *Corpus, o InvertOptions, report progress.Func) (*InvertReport, error) {
	start := time.Now()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	setup, pubEnc, vicEnc, err := t.prepare(c)
	if err != nil {
		return nil, err
	}
	for _, s := range []struct {
		what string
		encs []tokenize.Encoding
	}{{"public", pubEnc}, {"victim", vicEnc}} {
		if !slices.ContainsFunc(s.encs, func(e tokenize.Encoding) bool { return len(t.positions(e.IDs)) > 0 }) {
			return nil, fmt.Errorf("attack: the %s texts hold no token other than the tokenizer's specials: nothing to attack", s.what)
		}
	}
	P, H := setup.Model.P, t.bundle.Model.Cfg.Hidden
	rows, tokens := 0, map[int]bool{}
	for _, e := range pubEnc {
		for _, j := range t.positions(e.IDs) {
			rows++
			tokens[e.IDs[j]] = true
		}
	}
	if err := o.checkMemory(t, learnedNeed{rows: rows, dims: max(P, H), classes: len(tokens), mlp: slices.Contains(o.decoders(), ModelMLP)}); err != nil {
		return nil, err
	}
	pubZ, pubMu, pubX := &rowSet{dims: P}, &rowSet{dims: P}, &rowSet{dims: H}
	src := release.NewSeededSource(o.Seed)
	err = t.collect(ctx, c.Public, pubEnc, o.ReleasesPerText, src, report, "release public", func(_ int, v view) {
		pos := t.positions(v.enc.IDs)
		for _, j := range pos {
			id := v.enc.IDs[j]
			pubMu.add(v.mu[(j+1)*P:(j+2)*P], id)
			pubX.add(v.x[j*H:(j+1)*H], id)
		}
		for _, e := range v.releases {
			for _, j := range pos {
				pubZ.add(e.Z[(j+1)*P:(j+2)*P], v.enc.IDs[j])
			}
		}
	})
	if err != nil {
		return nil, err
	}
	vicZ, vicX := &rowSet{dims: P}, &rowSet{dims: H}
	starts := make([]int, len(c.Victims)+1) // victim text i's positions are rows starts[i]..starts[i+1]-1
	err = t.collect(ctx, c.Victims, vicEnc, 1, src, report, "release victims", func(i int, v view) {
		for _, j := range t.positions(v.enc.IDs) {
			vicZ.add(v.releases[0].Z[(j+1)*P:(j+2)*P], v.enc.IDs[j])
			vicX.add(v.x[j*H:(j+1)*H], v.enc.IDs[j])
		}
		starts[i+1] = vicX.len()
	})
	if err != nil {
		return nil, err
	}

	classes, majority := tokenClasses(pubX.labels)
	unseen := 0
	for _, id := range vicX.labels {
		if _, ok := classes[id]; !ok {
			unseen++
		}
	}
	r := &InvertReport{Setup: setup, Options: o, PublicTokens: pubX.len(), VictimTokens: vicX.len(),
		Classes: len(classes), Unseen: float64(unseen) / float64(vicX.len())}
	score := func(features, decoder string, guess []int) error {
		res, err := t.invertResult(features, decoder, vicX.labels, guess, starts, o)
		if err != nil {
			return err
		}
		r.Results = append(r.Results, res)
		return nil
	}
	chance := make([]int, vicX.len())
	for i := range chance {
		chance[i] = majority
	}
	if err := score(FeaturesNone, DecoderMajority, chance); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name              string
		train, refs, test *rowSet
	}{{FeaturesRelease, pubZ, pubMu, vicZ}, {FeaturesEncoder, pubX, pubX, vicX}} {
		for _, d := range o.decoders() {
			var guess []int
			if d == DecoderNearest {
				guess = make([]int, f.test.len())
				for i, k := range nearest(f.test.x, f.refs.x, f.refs.dims) {
					guess[i] = f.refs.labels[k]
				}
			} else if guess, err = decode(ctx, d, f.train, f.test, classes, o, report, "train "+f.name+" "+d); err != nil {
				return nil, err
			}
			if err := score(f.name, d, guess); err != nil {
				return nil, err
			}
		}
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// tokenClasses numbers the distinct tokens in increasing id order and
// returns the most frequent one (the smallest id of ties).
func tokenClasses(tokens []int) (map[int]int, int) {
	count := map[int]int{}
	for _, id := range tokens {
		count[id]++
	}
	ids := make([]int, 0, len(count))
	for id := range count {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	classes := make(map[int]int, len(ids))
	majority := ids[0]
	for k, id := range ids {
		classes[id] = k
		if count[id] > count[majority] {
			majority = id
		}
	}
	return classes, majority
}

// decode trains a learned decoder (ModelLinear, ModelMLP) on the rows of
// train, over the token classes, and returns its guess (a token id) for
// every row of test.
func decode(ctx context.Context, kind string, train, test *rowSet, classes map[int]int, o InvertOptions,
	report progress.Func, stage string) ([]int, error) {
	ids := make([]int, len(classes))
	for id, k := range classes {
		ids[k] = id
	}
	y := make([]int, train.len())
	for i, id := range train.labels {
		y[i] = classes[id]
	}
	c := newClassifier(kind, train.dims, o.Hidden, len(classes), rng(o.Seed, "init "+stage))
	if err := c.fit(ctx, train.x, y, o.Learner, rng(o.Seed, "order "+stage), report, stage); err != nil {
		return nil, err
	}
	guess := make([]int, test.len())
	c.predict(test.x, func(row int, logits []float32) { guess[row] = ids[argmax(logits)] })
	return guess, nil
}

// invertResult scores the guesses of one attack, and the guesses shuffled
// across the victim positions, and bootstraps its intervals over the victim
// texts (the permutation and the resamples drawn from the seed alone, so
// every result gets the same ones).
func (t *Target) invertResult(features, decoder string, truth, guess, starts []int, o InvertOptions) (InvertResult, error) {
	n := len(starts) - 1
	tr, gs := make([][]int, n), make([][]int, n)
	for i := range n {
		tr[i], gs[i] = truth[starts[i]:starts[i+1]], guess[starts[i]:starts[i+1]]
	}
	ts, err := scoreTexts(tr, gs)
	if err != nil {
		return InvertResult{}, err
	}
	res := InvertResult{Features: features, Decoder: decoder, TokenScores: aggregate(ts, allIndices(n))}
	perm := rng(o.Seed, "shuffle invert").Perm(len(guess))
	shuffled := make([][]int, n)
	for i := range n {
		shuffled[i] = make([]int, starts[i+1]-starts[i])
		for j := range shuffled[i] {
			shuffled[i][j] = guess[perm[starts[i]+j]]
		}
	}
	if res.Shuffled, err = ScoreTokens(tr, shuffled); err != nil {
		return InvertResult{}, err
	}
	for _, ci := range []struct {
		out  *[2]float64
		stat func(TokenScores) float64
	}{{&res.AccuracyCI, func(s TokenScores) float64 { return s.Accuracy }}, {&res.F1CI, func(s TokenScores) float64 { return s.F1 }}} {
		lo, hi, err := Bootstrap(n, o.Bootstrap, o.Confidence, rng(o.Seed, "bootstrap invert"),
			func(idx []int) float64 { return ci.stat(aggregate(ts, idx)) })
		if err != nil {
			return InvertResult{}, err
		}
		*ci.out = [2]float64{lo, hi}
	}
	for i := 0; i < n && len(res.Examples) < o.Examples; i++ {
		if len(tr[i]) > 0 {
			res.Examples = append(res.Examples, Reconstruction{Text: t.tokenText(tr[i]), Guess: t.tokenText(gs[i])})
		}
	}
	return res, nil
}

// tokenText writes token ids as their strings separated by spaces.
func (t *Target) tokenText(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = t.bundle.Tokenizer.IDToToken(id)
	}
	return strings.Join(s, " ")
}

// nearest returns, for each row of q [*, dims], the index of the nearest
// row of refs [*, dims] in Euclidean distance (the first of ties), from
// ||r||^2 - 2 q.r (float32, nn.Gemm) by blocks of queries.
func nearest(q, refs []float32, dims int) []int {
	nq, nr := len(q)/dims, len(refs)/dims
	norms := make([]float32, nr)
	for k := range nr {
		var s float32
		for _, v := range refs[k*dims : (k+1)*dims] {
			s += v * v
		}
		norms[k] = s
	}
	block := max(1, (4<<20)/max(1, nr)) // about 16 MB of dot products at a time
	dots := make([]float32, min(block, nq)*nr)
	out := make([]int, nq)
	for lo := 0; lo < nq; lo += block {
		hi := min(lo+block, nq)
		m := hi - lo
		nn.Gemm(false, true, m, nr, dims, 1, q[lo*dims:hi*dims], refs, 0, dots[:m*nr])
		for i := range m {
			row := dots[i*nr : (i+1)*nr]
			best, bestD := 0, float32(math.Inf(1))
			for k, d := range row {
				if dist := norms[k] - 2*d; dist < bestD {
					best, bestD = k, dist
				}
			}
			out[lo+i] = best
		}
	}
	return out
}

// rng is the generator of one purpose of an attack: PCG(seed, FNV-1a of
// the purpose), so that purposes draw independent streams and an attack's
// numbers do not depend on which other attacks run.
func rng(seed uint64, purpose string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(purpose))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}
