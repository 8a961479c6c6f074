package tokenize

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode"

	"github.com/sugarme/tokenizer/model"
	"github.com/sugarme/tokenizer/model/wordpiece"
	"golang.org/x/text/unicode/norm"
)

// bertNorm is Hugging Face's BertNormalizer (tokenizers/src/normalizers/bert.rs): clean text,
// pad CJK ideographs with spaces, strip accents (NFD, drop Mn), lower-case, in that order.
type bertNorm struct {
	clean, chinese, strip, lower bool
}

func isBertControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs) {
		return true
	}
	// Cn (unassigned) counts as "other" too.
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.C)
}

func isBertWhitespace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || unicode.Is(unicode.White_Space, r)
}

// isCJK are the CJK Unified Ideograph blocks BERT splits out (same ranges as tokenizers' Rust
// code).
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) || (r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}

// isBertPunct is ASCII punctuation/symbols or any Unicode P* character.
func isBertPunct(r rune) bool {
	if r < 128 {
		return (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126)
	}
	return unicode.IsPunct(r)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func (n bertNorm) normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	if isASCII(s) {
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '\t' || c == '\n' || c == '\r':
				if n.clean {
					c = ' '
				}
			case (c < 0x20 || c == 0x7f || c == 0) && n.clean:
				continue
			case n.lower && c >= 'A' && c <= 'Z':
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
		return b.String()
	}
	for _, r := range s {
		if n.clean {
			if r == 0 || r == 0xFFFD || isBertControl(r) {
				continue
			}
			if isBertWhitespace(r) {
				r = ' '
			}
		}
		if n.chinese && isCJK(r) {
			b.WriteByte(' ')
			b.WriteRune(r)
			b.WriteByte(' ')
			continue
		}
		b.WriteRune(r)
	}
	out := b.String()
	if n.strip {
		d := norm.NFD.String(out)
		var sb strings.Builder
		sb.Grow(len(d))
		for _, r := range d {
			if !unicode.Is(unicode.Mn, r) {
				sb.WriteRune(r)
			}
		}
		out = sb.String()
	}
	if n.lower {
		out = strings.ToLower(out)
	}
	return out
}

// bertPreTokenize is BertPreTokenizer: split on whitespace (dropped) and isolate every
// punctuation character as its own word.
func bertPreTokenize(s string) []string {
	var words []string
	start := -1
	for i, r := range s {
		switch {
		case unicode.IsSpace(r) || unicode.Is(unicode.White_Space, r):
			if start >= 0 {
				words = append(words, s[start:i])
				start = -1
			}
		case isBertPunct(r):
			if start >= 0 {
				words = append(words, s[start:i])
				start = -1
			}
			words = append(words, string(r))
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words
}

// readVocabTxt reads a WordPiece vocab.txt: one token per line, id = 0-based line number.
func readVocabTxt(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vocab: %w", err)
	}
	defer f.Close()
	return parseVocabTxt(f, path)
}

// parseVocabTxt parses a vocab.txt stream (src names it in errors): one token per line, id =
// 0-based line number, CRLF and a leading BOM accepted; an empty line or a repeated token
// keeps its id unused (the first occurrence wins), as in Hugging Face's reader.
func parseVocabTxt(r io.Reader, src string) (map[string]int, error) {
	vocab := make(map[string]int, 32000)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	id := 0
	for sc.Scan() {
		if id >= MaxVocabSize {
			return nil, fmt.Errorf("vocab %s: more than %d lines (MaxVocabSize)", src, MaxVocabSize)
		}
		tok := strings.TrimRight(sc.Text(), "\r")
		if id == 0 {
			tok = strings.TrimPrefix(tok, "\ufeff")
		}
		if _, dup := vocab[tok]; !dup && tok != "" {
			vocab[tok] = id
		}
		id++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("vocab %s: line %d: %w", src, id+1, err)
	}
	if len(vocab) == 0 {
		return nil, fmt.Errorf("vocab %s: empty", src)
	}
	return vocab, nil
}

// readDoLowerCase reads "do_lower_case" from a tokenizer_config.json: true (lower-case)
// when the file does not exist or does not set it; an error when it cannot be read, is not
// JSON, or sets it to something other than a boolean.
func readDoLowerCase(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("tokenizer config: %w", err)
	}
	var cfg struct {
		DoLowerCase *bool `json:"do_lower_case"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return false, fmt.Errorf("tokenizer config %s: %w", path, err)
	}
	if cfg.DoLowerCase == nil {
		return true, nil
	}
	return *cfg.DoLowerCase, nil
}

// NewWordPiece builds a BERT WordPiece tokenizer from a vocab.txt, where a token's id is its 0-based
// line number. lowercase selects uncased models: lower-casing and accent stripping, as
// BertTokenizerFast(do_lower_case=True) does; cased models keep both. Unknown words become [UNK],
// and so do words longer than 100 characters, the max_input_chars_per_word.
//
// It returns an error for an unreadable or empty file, or a vocabulary without [PAD].
func NewWordPiece(vocabPath string, lowercase bool) (Tokenizer, error) {
	vocab, err := readVocabTxt(vocabPath)
	if err != nil {
		return nil, err
	}
	return newBertWordPiece(vocabPath, vocab, lowercase)
}

// newBertWordPiece is NewWordPiece on a parsed vocab.txt.
func newBertWordPiece(src string, vocab map[string]int, lowercase bool) (*subword, error) {
	return newWordPiece(src, vocab, "[UNK]", "##", 100, bertNorm{clean: true, chinese: true, strip: lowercase, lower: lowercase}, nil, nil)
}

func newWordPiece(src string, vocab map[string]int, unkTok, prefix string, maxChars int, nrm bertNorm, single, pair []piece) (*subword, error) {
	mv := model.Vocab(vocab)
	wp := wordpiece.NewWordPieceBuilder().Vocab(&mv).UnkToken(unkTok).ContinuingSubwordPrefix(prefix).MaxInputCharsPerWord(maxChars).Build()
	t := &subword{
		kind:  "wordpiece",
		model: wp,
		vocab: vocab,
		words: func(s string) []string { return bertPreTokenize(nrm.normalize(s)) },
		unk:   -1,
	}
	if id, ok := vocab[unkTok]; ok {
		t.unk, t.hasUnk = id, true
	} else {
		return nil, fmt.Errorf("%s: unknown token %q not in the vocabulary", src, unkTok)
	}
	if err := t.finish(src, bertNames); err != nil {
		return nil, err
	}
	if single == nil {
		if t.cls < 0 || t.sep < 0 {
			return nil, fmt.Errorf("%s: [CLS] or [SEP] missing from the vocabulary", src)
		}
		single, pair = bertTemplate(t.cls, t.sep)
	}
	if err := t.setTemplates(src, single, pair); err != nil {
		return nil, err
	}
	return t, nil
}
