// Package tokenize turns text into model inputs. It provides BERT WordPiece and RoBERTa byte-level
// BPE tokenizers over Hugging Face files (vocab.txt, vocab.json with merges.txt, or
// tokenizer.json), sentence-pair templates with token type ids, longest-first truncation, and
// padding.
//
// The subword models, WordPiece's greedy longest match and BPE's merges, are those of
// github.com/sugarme/tokenizer v0.3.0. Normalisation, pre-tokenisation, the special-token template,
// truncation and padding are done here, because the library's versions deviate from Hugging Face
// tokenizers in ways that change token ids, as docs/data.md explains:
//   - its BertNormalizer strips accents without NFD decomposition first, so "café" becomes [UNK]
//     instead of "cafe";
//   - its tokenizer.json reader panics on JSON nulls, such as "strip_accents": null and
//     "unk_token": null, and ignores a WordPiece continuing_subword_prefix;
//   - its byte-level pre-tokenizer drops the `\s+(?!\S)` branch of the GPT-2 pattern, so runs of
//     whitespace split differently from Hugging Face.
//
// Encoding semantics follow the Hugging Face "fast" tokenizers that the reference code uses, per
// ref §8: AutoTokenizer(model, fast) with truncation=True, longest first.
package tokenize

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvdp-project/nvdp/internal/fsutil"
)

// Encoding is one encoded example, a sentence or a sentence pair, with its special tokens, before
// padding. All slices have the same length L <= maxLen.
type Encoding struct {
	// IDs are the token ids, specials included: [CLS] a [SEP] b [SEP] for BERT, and
	// <s> a </s></s> b </s> for RoBERTa.
	IDs []int
	// TypeIDs are the segment ids: for BERT, 0 for the first sentence and its specials and 1 for
	// the second sentence and its final [SEP]; for RoBERTa, all 0.
	TypeIDs []int
	// AttentionMask is 1 for every token, since there is no padding inside an Encoding.
	AttentionMask []int
	// WordIDs gives, for each token, the index of the pre-tokenised word it comes from, or -1 for
	// special tokens. Indices are unique over the whole encoding: the second sentence's words
	// continue after the first sentence's, where Hugging Face restarts at 0 per sequence. Tokens of
	// one word share an index, which whole-word masking needs.
	WordIDs []int
}

// Len returns the number of tokens.
func (e Encoding) Len() int { return len(e.IDs) }

// Batch is a padded batch of encodings, each field a row-major [B, S] matrix.
type Batch struct {
	IDs           []int // [B*S] token ids, PadID in padded positions
	TypeIDs       []int // [B*S] segment ids, 0 in padded positions
	AttentionMask []int // [B*S] 1 for real tokens, 0 for padding
	WordIDs       []int // [B*S] word index per token, -1 for specials and padding
	Lengths       []int // [B] number of real (unpadded) tokens per row
	B, S          int
}

// Tokenizer encodes text for BERT- or RoBERTa-style encoders. Implementations are safe for
// concurrent use by multiple goroutines.
type Tokenizer interface {
	// Encode encodes a single sentence, when b == "", or a sentence pair with the model's special
	// token template. With maxLen > 0 the sentences are truncated from the right, longest first
	// as Hugging Face's "longest_first", so that the result, specials included, has at most maxLen
	// tokens; maxLen <= 0 means no truncation. It returns an error when maxLen is smaller than the
	// number of special tokens the template needs: 3 for a BERT pair, 4 for RoBERTa.
	Encode(a, b string, maxLen int) (Encoding, error)
	// Tokens returns the subword tokens of one text without specials, for inspection.
	Tokens(text string) ([]string, error)
	// VocabSize returns the embedding-table size: the largest id + 1, added tokens included.
	VocabSize() int
	PadID() int
	CLSID() int
	SEPID() int
	// MaskID returns the id of [MASK] or <mask>, for masked-language-model pretraining, or -1 if
	// the vocabulary has none.
	MaskID() int
	UnkID() int
	TokenToID(tok string) (int, bool)
	// IDToToken returns the token string of id, or "" when id is not in the vocabulary.
	IDToToken(id int) string
	// Kind returns "wordpiece" or "bpe".
	Kind() string
	// NumSpecial returns how many special tokens the template adds: for a pair, 3 for BERT and 4
	// for RoBERTa; for a single sentence, 2.
	NumSpecial(pair bool) int
}

// MaxVocabSize bounds token ids: a vocabulary file with an id >= MaxVocabSize is rejected rather
// than sizing the id-to-token table, and a model's embedding, by it. The largest public
// vocabularies have about 2.6e5 entries.
const MaxVocabSize = 1 << 22

// Load builds a tokenizer from Hugging Face files. path may be
//   - a tokenizer.json file, with a WordPiece or BPE model;
//   - a vocab.txt file, for BERT WordPiece, lower-cased unless a tokenizer_config.json beside it
//     says "do_lower_case": false; a malformed tokenizer_config.json is an error;
//   - a vocab.json file with merges.txt beside it, for RoBERTa byte-level BPE;
//   - a directory holding one of these, preferring tokenizer.json, then vocab.txt, then
//     vocab.json with merges.txt.
//
// Errors name the path and what is missing or malformed. Every reader rejects a vocabulary with a
// negative id, an id >= [MaxVocabSize] or two tokens sharing an id, and special-token templates
// whose ids are not in the vocabulary.
func Load(path string) (Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
		dir := path
		for _, cand := range []string{"tokenizer.json", "vocab.txt", "vocab.json"} {
			p := filepath.Join(dir, cand)
			if _, err := os.Stat(p); err == nil {
				return Load(p)
			}
		}
		return nil, fmt.Errorf("tokenizer: directory %s holds none of tokenizer.json, vocab.txt, vocab.json+merges.txt", dir)
	}
	base := filepath.Base(path)
	switch {
	case filepath.Ext(base) == ".txt":
		lower, err := readDoLowerCase(filepath.Join(filepath.Dir(path), "tokenizer_config.json"))
		if err != nil {
			return nil, err
		}
		return NewWordPiece(path, lower)
	case base == "vocab.json" || (filepath.Ext(base) == ".json" && base != "tokenizer.json" && fsutil.IsFile(filepath.Join(filepath.Dir(path), "merges.txt"))):
		merges := filepath.Join(filepath.Dir(path), "merges.txt")
		if !fsutil.IsFile(merges) {
			return nil, fmt.Errorf("tokenizer: %s needs merges.txt beside it (%s not found)", path, merges)
		}
		return NewByteLevelBPE(path, merges)
	case filepath.Ext(base) == ".json":
		return LoadTokenizerJSON(path)
	}
	return nil, fmt.Errorf("tokenizer: %s: unrecognised file (want tokenizer.json, vocab.txt, or vocab.json with merges.txt)", path)
}

// Pad stacks encodings into a right-padded [B, S] batch. S is fixedLen when fixedLen > 0, and
// otherwise the longest encoding's length, for dynamic padding. Padded positions get padID, type
// id 0, attention mask 0 and word id -1. Pad panics if an encoding is longer than fixedLen, so
// encode with maxLen <= fixedLen.
func Pad(encs []Encoding, padID int, fixedLen int) Batch {
	S := fixedLen
	if S <= 0 {
		S = 0
		for _, e := range encs {
			S = max(S, len(e.IDs))
		}
	}
	B := len(encs)
	bt := Batch{
		IDs:           make([]int, B*S),
		TypeIDs:       make([]int, B*S),
		AttentionMask: make([]int, B*S),
		WordIDs:       make([]int, B*S),
		Lengths:       make([]int, B),
		B:             B,
		S:             S,
	}
	for i, e := range encs {
		n := len(e.IDs)
		if n > S {
			panic(fmt.Sprintf("tokenize.Pad: encoding %d has %d tokens, more than fixed length %d", i, n, S))
		}
		row := i * S
		copy(bt.IDs[row:row+n], e.IDs)
		copy(bt.TypeIDs[row:row+n], e.TypeIDs)
		copy(bt.AttentionMask[row:row+n], e.AttentionMask)
		if len(e.WordIDs) == n {
			copy(bt.WordIDs[row:row+n], e.WordIDs)
		} else {
			for j := range n {
				bt.WordIDs[row+j] = -1
			}
		}
		for j := n; j < S; j++ {
			bt.IDs[row+j] = padID
			bt.WordIDs[row+j] = -1
		}
		bt.Lengths[i] = n
	}
	return bt
}
