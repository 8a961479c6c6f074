package tokenize

import (
	"fmt"
	"sync"

	"github.com/nvdp-project/nvdp/internal/excerpt"
	sugar "github.com/sugarme/tokenizer"
)

// piece is one element of a special-token template: a special token (special >= 0) or a
// placeholder for sequence A (seq 0) or B (seq 1), with its token type id.
type piece struct {
	special int
	seq     int
	typeID  int
}

// subword is the one Tokenizer implementation: a text pre-processor that yields words (already
// normalised, and byte-mapped for byte-level BPE), a sugarme subword model applied per word, and
// a special-token template.
type subword struct {
	kind   string
	words  func(string) []string // normalise + pre-tokenise
	model  sugar.Model
	vocab  map[string]int
	inv    []string
	single []piece
	pair   []piece

	pad, cls, sep, mask, unk int
	hasUnk                   bool

	mu    sync.RWMutex
	cache map[string][]int // word -> subword ids
}

const maxCacheWords = 1 << 18

func (t *subword) Kind() string                     { return t.kind }
func (t *subword) VocabSize() int                   { return len(t.inv) }
func (t *subword) PadID() int                       { return t.pad }
func (t *subword) CLSID() int                       { return t.cls }
func (t *subword) SEPID() int                       { return t.sep }
func (t *subword) MaskID() int                      { return t.mask }
func (t *subword) UnkID() int                       { return t.unk }
func (t *subword) TokenToID(tok string) (int, bool) { id, ok := t.vocab[tok]; return id, ok }
func (t *subword) IDToToken(id int) string {
	if id < 0 || id >= len(t.inv) {
		return ""
	}
	return t.inv[id]
}

func (t *subword) NumSpecial(pair bool) int {
	tm := t.single
	if pair {
		tm = t.pair
	}
	n := 0
	for _, p := range tm {
		if p.special >= 0 {
			n++
		}
	}
	return n
}

// wordIDs runs the subword model on one pre-tokenised word, with a bounded cache.
func (t *subword) wordIDs(w string) ([]int, error) {
	t.mu.RLock()
	ids, ok := t.cache[w]
	t.mu.RUnlock()
	if ok {
		return ids, nil
	}
	if !t.hasUnk {
		// sugarme's BPE panics on a character outside the vocabulary when there is no unk token.
		for _, r := range w {
			if _, ok := t.vocab[string(r)]; !ok {
				return nil, fmt.Errorf("character %q of word %q is not in the vocabulary and the model has no unk token", r, w)
			}
		}
	}
	toks, err := t.model.Tokenize(w)
	if err != nil {
		return nil, fmt.Errorf("word %q: %w", w, err)
	}
	ids = make([]int, len(toks))
	for i, tk := range toks {
		ids[i] = tk.Id
	}
	t.mu.Lock()
	if len(t.cache) < maxCacheWords {
		t.cache[w] = ids
	}
	t.mu.Unlock()
	return ids, nil
}

// encodeText returns the subword ids of text and, per token, its word index.
func (t *subword) encodeText(text string) (ids, words []int, err error) {
	for wi, w := range t.words(text) {
		wids, err := t.wordIDs(w)
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, wids...)
		for range wids {
			words = append(words, wi)
		}
	}
	return ids, words, nil
}

func (t *subword) Tokens(text string) ([]string, error) {
	ids, _, err := t.encodeText(text)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = t.IDToToken(id)
	}
	return out, nil
}

// truncLongestFirst returns the lengths to keep of two sequences of lengths n1, n2 so that
// they fit in budget tokens, following Hugging Face tokenizers' (Rust) LongestFirst strategy:
// only the longer one is cut if that suffices, else both are cut to budget/2, the originally
// longer one (the second on ties) keeping the odd token.
func truncLongestFirst(n1, n2, budget int) (int, int) {
	if n1+n2 <= budget {
		return n1, n2
	}
	swap := false
	if n1 > n2 {
		swap = true
		n1, n2 = n2, n1
	}
	if n1 > budget {
		n2 = n1
	} else {
		n2 = max(n1, budget-n1)
	}
	if n1+n2 > budget {
		n1 = budget / 2
		n2 = n1 + budget%2
	}
	if swap {
		n1, n2 = n2, n1
	}
	return n1, n2
}

func (t *subword) Encode(a, b string, maxLen int) (Encoding, error) {
	pair := b != ""
	tmpl := t.single
	if pair {
		tmpl = t.pair
	}
	nSpecial := t.NumSpecial(pair)
	if maxLen > 0 && maxLen < nSpecial+1 {
		return Encoding{}, fmt.Errorf("tokenize: maxLen %d leaves no room next to %d special tokens", maxLen, nSpecial)
	}
	idsA, wA, err := t.encodeText(a)
	if err != nil {
		return Encoding{}, fmt.Errorf("tokenize: first text: %w", err)
	}
	var idsB, wB []int
	if pair {
		if idsB, wB, err = t.encodeText(b); err != nil {
			return Encoding{}, fmt.Errorf("tokenize: second text: %w", err)
		}
	}
	if maxLen > 0 {
		budget := maxLen - nSpecial
		if pair {
			n1, n2 := truncLongestFirst(len(idsA), len(idsB), budget)
			idsA, wA, idsB, wB = idsA[:n1], wA[:n1], idsB[:n2], wB[:n2]
		} else if len(idsA) > budget {
			idsA, wA = idsA[:budget], wA[:budget]
		}
	}
	// Word ids of B continue after A's.
	offB := 0
	if len(wA) > 0 {
		offB = wA[len(wA)-1] + 1
	}
	n := len(idsA) + len(idsB) + nSpecial
	e := Encoding{
		IDs:           make([]int, 0, n),
		TypeIDs:       make([]int, 0, n),
		AttentionMask: make([]int, 0, n),
		WordIDs:       make([]int, 0, n),
	}
	for _, p := range tmpl {
		switch {
		case p.special >= 0:
			e.IDs = append(e.IDs, p.special)
			e.TypeIDs = append(e.TypeIDs, p.typeID)
			e.WordIDs = append(e.WordIDs, -1)
		case p.seq == 0:
			e.IDs = append(e.IDs, idsA...)
			e.WordIDs = append(e.WordIDs, wA...)
			for range idsA {
				e.TypeIDs = append(e.TypeIDs, p.typeID)
			}
		default:
			e.IDs = append(e.IDs, idsB...)
			for _, w := range wB {
				e.WordIDs = append(e.WordIDs, w+offB)
			}
			for range idsB {
				e.TypeIDs = append(e.TypeIDs, p.typeID)
			}
		}
	}
	for range e.IDs {
		e.AttentionMask = append(e.AttentionMask, 1)
	}
	return e, nil
}

// bertTemplate is [CLS] A [SEP] (single) and [CLS] A [SEP] B [SEP] with type ids 0..0 1..1.
func bertTemplate(cls, sep int) (single, pair []piece) {
	single = []piece{{cls, -1, 0}, {-1, 0, 0}, {sep, -1, 0}}
	pair = []piece{{cls, -1, 0}, {-1, 0, 0}, {sep, -1, 0}, {-1, 1, 1}, {sep, -1, 1}}
	return
}

// robertaTemplate is <s> A </s> (single) and <s> A </s></s> B </s>, all type ids 0.
func robertaTemplate(cls, sep int) (single, pair []piece) {
	single = []piece{{cls, -1, 0}, {-1, 0, 0}, {sep, -1, 0}}
	pair = []piece{{cls, -1, 0}, {-1, 0, 0}, {sep, -1, 0}, {sep, -1, 0}, {-1, 1, 0}, {sep, -1, 0}}
	return
}

// plainTemplate adds no special tokens.
func plainTemplate() (single, pair []piece) {
	return []piece{{-1, 0, 0}}, []piece{{-1, 0, 0}, {-1, 1, 1}}
}

// inverse checks a vocabulary's ids and returns the id -> token table (length: the largest
// id + 1): ids must be in [0, MaxVocabSize) and no two tokens may share one (else the table,
// and IDToToken, would depend on map order).
func inverse(src string, vocab map[string]int) ([]string, error) {
	maxID := -1
	for tok, id := range vocab {
		if id < 0 || id >= MaxVocabSize {
			return nil, fmt.Errorf("%s: token %s has id %d, outside [0, %d)", src, excerpt.Quote(tok), id, MaxVocabSize)
		}
		maxID = max(maxID, id)
	}
	inv := make([]string, maxID+1)
	set := make([]bool, maxID+1)
	for tok, id := range vocab {
		if set[id] {
			a, b := min(tok, inv[id]), max(tok, inv[id])
			return nil, fmt.Errorf("%s: tokens %s and %s share id %d", src, excerpt.Quote(a), excerpt.Quote(b), id)
		}
		inv[id], set[id] = tok, true
	}
	return inv, nil
}

// finish builds the inverse vocabulary and resolves special-token ids by name, trying the
// candidates in order. cls and sep are required when the template uses them; pad and unk
// fall back to -1 only where the model cannot need them.
func (t *subword) finish(src string, names map[string][]string) error {
	inv, err := inverse(src, t.vocab)
	if err != nil {
		return err
	}
	t.inv = inv
	look := func(key string) int {
		for _, n := range names[key] {
			if id, ok := t.vocab[n]; ok {
				return id
			}
		}
		return -1
	}
	t.cls, t.sep, t.pad, t.mask = look("cls"), look("sep"), look("pad"), look("mask")
	if t.unk < 0 {
		t.unk = look("unk")
	}
	if t.pad < 0 {
		return fmt.Errorf("%s: no padding token (%v) in the vocabulary", src, names["pad"])
	}
	if t.cache == nil {
		t.cache = make(map[string][]int)
	}
	return nil
}

// setTemplates installs the special-token templates after checking them: every special id
// is in the vocabulary, single holds sequence A once and no B, pair holds A and B once each.
func (t *subword) setTemplates(src string, single, pair []piece) error {
	for _, tm := range []struct {
		name   string
		pieces []piece
		a, b   int
	}{{"single", single, 1, 0}, {"pair", pair, 1, 1}} {
		var a, b int
		for _, p := range tm.pieces {
			switch {
			case p.special >= len(t.inv):
				return fmt.Errorf("%s: %s template: special token id %d is not in the vocabulary (size %d)", src, tm.name, p.special, len(t.inv))
			case p.special >= 0:
			case p.seq == 0:
				a++
			default:
				b++
			}
		}
		if a != tm.a || b != tm.b {
			if tm.b == 0 {
				return fmt.Errorf("%s: single template must hold $A once and no $B (has %d, %d)", src, a, b)
			}
			return fmt.Errorf("%s: pair template must hold $A and $B once each (has %d, %d)", src, a, b)
		}
	}
	t.single, t.pair = single, pair
	return nil
}

var (
	bertNames    = map[string][]string{"cls": {"[CLS]"}, "sep": {"[SEP]"}, "pad": {"[PAD]"}, "mask": {"[MASK]"}, "unk": {"[UNK]"}}
	robertaNames = map[string][]string{"cls": {"<s>"}, "sep": {"</s>"}, "pad": {"<pad>"}, "mask": {"<mask>"}, "unk": {"<unk>"}}
)
