package tokenize

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/nvdp-project/nvdp/internal/excerpt"
	"github.com/sugarme/tokenizer/model"
	"github.com/sugarme/tokenizer/model/bpe"
)

// byteChar is GPT-2's bytes_to_unicode table: printable bytes map to themselves, the others to
// U+0100 upwards (so a space is "Ġ", a newline "Ċ").
var byteChar = func() [256]string {
	var t [256]string
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = string(rune(b))
		} else {
			t[b] = string(rune(256 + n))
			n++
		}
	}
	return t
}()

// gpt2Split is the GPT-2 pre-tokenisation pattern without its `\s+(?!\S)` branch (Go's regexp
// has no look-ahead); byteLevelWords restores that branch's effect. Whitespace is Unicode
// whitespace as in the Rust/Oniguruma original, not Go's ASCII \s.
var gpt2Split = regexp.MustCompile(`^(?:'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\pZ\t\n\v\f\r\x{85}\p{L}\p{N}]+|[\pZ\t\n\v\f\r\x{85}]+)`)

func isSpaceRun(s string) bool {
	for _, r := range s {
		if !(r == ' ' || r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r' || r == 0x85 || isZ(r)) {
			return false
		}
	}
	return true
}

func isZ(r rune) bool {
	return r == 0xA0 || r == 0x1680 || (r >= 0x2000 && r <= 0x200A) || r == 0x2028 || r == 0x2029 || r == 0x202F || r == 0x205F || r == 0x3000
}

// gpt2Pieces splits s like the GPT-2 / RoBERTa regex
// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
// A whitespace run followed by a non-space gives its last character to the next piece
// (when that character is a plain space it becomes the next word's prefix).
func gpt2Pieces(s string) []string {
	var out []string
	for pos := 0; pos < len(s); {
		loc := gpt2Split.FindStringIndex(s[pos:])
		end := 0
		if loc != nil {
			end = loc[1]
		}
		if end == 0 { // cannot happen: the pattern covers every character; advance one rune
			_, sz := utf8.DecodeRuneInString(s[pos:])
			end = sz
		}
		m := s[pos : pos+end]
		if pos+end < len(s) && utf8.RuneCountInString(m) > 1 && isSpaceRun(m) {
			_, sz := utf8.DecodeLastRuneInString(m)
			end -= sz
			m = m[:end]
		}
		out = append(out, m)
		pos += end
	}
	return out
}

// byteLevelWords is the ByteLevel pre-tokenizer: optional prefix space, GPT-2 split, then
// each byte mapped through byteChar.
func byteLevelWords(s string, addPrefixSpace bool) []string {
	if addPrefixSpace && !strings.HasPrefix(s, " ") {
		s = " " + s
	}
	pieces := gpt2Pieces(s)
	for i, p := range pieces {
		var b strings.Builder
		b.Grow(2 * len(p))
		for j := 0; j < len(p); j++ {
			b.WriteString(byteChar[p[j]])
		}
		pieces[i] = b.String()
	}
	return pieces
}

// parseMergesTxt parses merges.txt ("a b" per line, ranked by order; a leading "#version"
// line and empty lines are skipped); src names it in errors.
func parseMergesTxt(r io.Reader, src string) ([]string, error) {
	var merges []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimRight(sc.Text(), "\r")
		if line == 1 && strings.HasPrefix(l, "#version") || l == "" {
			continue
		}
		if len(strings.Split(l, " ")) != 2 {
			return nil, fmt.Errorf("merges %s: line %d: want two space-separated tokens, got %s", src, line, excerpt.Quote(l))
		}
		merges = append(merges, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("merges %s: line %d: %w", src, line+1, err)
	}
	return merges, nil
}

// parseVocabJSON parses a vocab.json (a JSON object token -> id); src names it in errors.
func parseVocabJSON(data []byte, src string) (map[string]int, error) {
	vocab := map[string]int{}
	if err := json.Unmarshal(data, &vocab); err != nil {
		return nil, fmt.Errorf("vocab %s: %w", src, err)
	}
	return vocab, nil
}

// NewByteLevelBPE builds a RoBERTa or GPT-2 byte-level BPE tokenizer from vocab.json, mapping token
// to id, and merges.txt, the ranked merges. It uses RoBERTa's templates <s> A </s> and
// <s> A </s></s> B </s>, with no token types so that all type ids are 0, and no prefix space, as
// RobertaTokenizerFast(add_prefix_space=False).
//
// It returns an error for unreadable or malformed files, naming the file and line; a merge whose
// result is not in the vocabulary; ids out of range or shared, as in [Load]; or a missing <s>,
// </s> or <pad>.
func NewByteLevelBPE(vocabPath, mergesPath string) (Tokenizer, error) {
	data, err := os.ReadFile(vocabPath)
	if err != nil {
		return nil, fmt.Errorf("vocab: %w", err)
	}
	mf, err := os.Open(mergesPath)
	if err != nil {
		return nil, fmt.Errorf("merges: %w", err)
	}
	defer mf.Close()
	return parseByteLevelBPE(data, vocabPath, mf, mergesPath)
}

// parseByteLevelBPE is NewByteLevelBPE on the files' contents.
func parseByteLevelBPE(vocabData []byte, vocabSrc string, merges io.Reader, mergesSrc string) (*subword, error) {
	vocab, err := parseVocabJSON(vocabData, vocabSrc)
	if err != nil {
		return nil, err
	}
	m, err := parseMergesTxt(merges, mergesSrc)
	if err != nil {
		return nil, err
	}
	return newByteLevelBPE(vocabSrc, vocab, m, nil, false, nil, nil)
}

func newByteLevelBPE(src string, vocab map[string]int, merges []string, unkTok *string, addPrefixSpace bool, single, pair []piece) (*subword, error) {
	m, err := bpe.New(model.Vocab(vocab), merges, nil, unkTok, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: BPE model: %w", src, err)
	}
	t := &subword{
		kind:  "bpe",
		model: m,
		vocab: vocab,
		words: func(s string) []string { return byteLevelWords(s, addPrefixSpace) },
		unk:   -1,
	}
	if unkTok != nil {
		id, ok := vocab[*unkTok]
		if !ok {
			return nil, fmt.Errorf("%s: unk token %q not in the vocabulary", src, *unkTok)
		}
		t.unk, t.hasUnk = id, true
	}
	if err := t.finish(src, robertaNames); err != nil {
		return nil, err
	}
	if single == nil {
		if t.cls < 0 || t.sep < 0 {
			return nil, fmt.Errorf("%s: <s> or </s> missing from the vocabulary", src)
		}
		single, pair = robertaTemplate(t.cls, t.sep)
	}
	if err := t.setTemplates(src, single, pair); err != nil {
		return nil, err
	}
	return t, nil
}
