package mlm

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// masker chooses the tokens to predict and corrupts the input as BERT's
// masked-language-model task does, from Devlin et al. 2019, §3.1 and
// Appendix A.1, and Google's create_pretraining_data.py.
//
// round(Prob * n) of the n maskable tokens of a sequence, and at least one
// when n > 0, are chosen uniformly without replacement. Each chosen token is
// replaced by [MASK] with probability MaskFrac, by a random token with
// probability RandomFrac, and kept otherwise. The Special set, such as [CLS],
// [SEP], [PAD], [MASK] and [UNK], is never chosen and never drawn as a random
// replacement.
//
// With WholeWord the units chosen are whole words, the WordPiece pieces that
// share a word id. Words are visited in random order and taken while the
// total stays within the budget, so every piece of a chosen word is
// predicted. As in Google's whole-word-masking release, a word longer than
// the remaining budget is skipped. The 80/10/10 decision is made per token.
type masker struct {
	// Prob is the fraction of maskable tokens to predict (DefaultMaskProb).
	Prob float64
	// MaskFrac and RandomFrac are the fractions of chosen tokens replaced by
	// [MASK] (0.8) and by a random token (0.1); the rest are kept.
	MaskFrac, RandomFrac float64
	// MaskID is the [MASK] token id.
	MaskID int
	// VocabSize bounds random replacements: ids in [0, VocabSize) not in Special.
	VocabSize int
	// Special holds the ids that are never masked nor used as replacements.
	Special map[int]bool
	// WholeWord masks all pieces of a chosen word.
	WholeWord bool
}

// DefaultMaskProb is BERT's fraction of the tokens predicted, 15%, from its
// §3.1.
const DefaultMaskProb = 0.15

// newMasker returns a masker with the BERT defaults, [DefaultMaskProb] and
// 80/10/10, for a vocabulary of vocabSize ids with the given [MASK] id and
// special ids. It returns an error when maskID < 0, as for a vocabulary
// without a mask token, or the vocabulary has no ordinary token.
func newMasker(maskID, vocabSize int, special []int, wholeWord bool) (*masker, error) {
	if maskID < 0 || maskID >= vocabSize {
		return nil, fmt.Errorf("masker: mask token id %d outside the vocabulary [0, %d) (does the vocabulary have [MASK]?)", maskID, vocabSize)
	}
	sp := map[int]bool{maskID: true}
	for _, id := range special {
		if id >= 0 {
			sp[id] = true
		}
	}
	if len(sp) >= vocabSize {
		return nil, fmt.Errorf("masker: vocabulary of %d ids has no ordinary token", vocabSize)
	}
	return &masker{Prob: DefaultMaskProb, MaskFrac: 0.8, RandomFrac: 0.1, MaskID: maskID, VocabSize: vocabSize, Special: sp, WholeWord: wholeWord}, nil
}

// Mask corrupts one sequence in place and returns the positions chosen, in
// ascending order, and their original ids, the labels. ids [S] are token ids,
// padding and specials included. wordIDs [S], nil unless WholeWord, give each
// token's word index, -1 for specials and padding. Randomness comes from rng
// in a fixed order, so a seeded rng gives reproducible masks.
func (m *masker) Mask(ids []int32, wordIDs []int, rng *rand.Rand) (positions []int, labels []int) {
	if m.WholeWord && len(wordIDs) != len(ids) {
		panic(fmt.Sprintf("mlm.masker: %d word ids for %d tokens", len(wordIDs), len(ids)))
	}
	// Units: runs of maskable tokens (one token each, or one word each).
	type unit struct{ lo, hi int }
	var units []unit
	n := 0
	for i := 0; i < len(ids); i++ {
		if m.Special[int(ids[i])] {
			continue
		}
		n++
		if m.WholeWord && wordIDs[i] >= 0 && len(units) > 0 {
			last := &units[len(units)-1]
			if last.hi == i && wordIDs[last.lo] == wordIDs[i] {
				last.hi = i + 1
				continue
			}
		}
		units = append(units, unit{i, i + 1})
	}
	if n == 0 {
		return nil, nil
	}
	budget := max(1, int(math.Round(m.Prob*float64(n))))
	rng.Shuffle(len(units), func(a, b int) { units[a], units[b] = units[b], units[a] })
	chosen := make([]bool, len(ids))
	count := 0
	for _, u := range units {
		if count >= budget {
			break
		}
		if count+(u.hi-u.lo) > budget {
			continue
		}
		for i := u.lo; i < u.hi; i++ {
			chosen[i] = true
		}
		count += u.hi - u.lo
	}
	positions = make([]int, 0, count)
	labels = make([]int, 0, count)
	for i, c := range chosen {
		if !c {
			continue
		}
		positions = append(positions, i)
		labels = append(labels, int(ids[i]))
		r := rng.Float64()
		switch {
		case r < m.MaskFrac:
			ids[i] = int32(m.MaskID)
		case r < m.MaskFrac+m.RandomFrac:
			ids[i] = int32(m.randomToken(rng))
		}
	}
	return positions, labels
}

// randomToken draws an id uniformly from the non-special vocabulary.
func (m *masker) randomToken(rng *rand.Rand) int {
	for {
		id := rng.IntN(m.VocabSize)
		if !m.Special[id] {
			return id
		}
	}
}
