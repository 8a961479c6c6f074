package tokenize

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/nvdp-project/nvdp/internal/excerpt"
)

// hfJSON is the subset of a Hugging Face tokenizer.json that BERT and RoBERTa tokenizers use.
type hfJSON struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         struct {
		Type                    string          `json:"type"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		UnkToken                *string         `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		MaxInputCharsPerWord    *int            `json:"max_input_chars_per_word"`
		Dropout                 *float64        `json:"dropout"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	} `json:"model"`
}

type hfComponent struct {
	Type string `json:"type"`
	// BertNormalizer
	CleanText          *bool `json:"clean_text"`
	HandleChineseChars *bool `json:"handle_chinese_chars"`
	StripAccents       *bool `json:"strip_accents"`
	Lowercase          *bool `json:"lowercase"`
	// ByteLevel
	AddPrefixSpace *bool `json:"add_prefix_space"`
	// Sequence
	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	// Bert/RobertaProcessing: [token, id]
	Sep []any `json:"sep"`
	Cls []any `json:"cls"`
	// TemplateProcessing
	Single        []map[string]hfTemplateItem `json:"single"`
	Pair          []map[string]hfTemplateItem `json:"pair"`
	SpecialTokens map[string]struct {
		IDs []int `json:"ids"`
	} `json:"special_tokens"`
}

type hfTemplateItem struct {
	ID     string `json:"id"`
	TypeID int    `json:"type_id"`
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

func orBool(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

// parseNormalizer maps BertNormalizer, or a Sequence of NFD / Lowercase / StripAccents (/
// BertNormalizer), onto bertNorm.
func parseNormalizer(raw json.RawMessage, n *bertNorm) error {
	if isNull(raw) {
		return nil
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("normalizer: %w", err)
	}
	switch c.Type {
	case "BertNormalizer":
		n.clean = orBool(c.CleanText, true)
		n.chinese = orBool(c.HandleChineseChars, true)
		n.lower = orBool(c.Lowercase, true)
		n.strip = orBool(c.StripAccents, n.lower) // null: follow lowercase
	case "Lowercase":
		n.lower = true
	case "StripAccents":
		n.strip = true
	case "NFD":
		// applied by the accent stripper; alone it changes no ids of a WordPiece vocabulary
		// built on NFC text except accented letters, which we leave composed.
	case "Sequence":
		for i, sub := range c.Normalizers {
			if err := parseNormalizer(sub, n); err != nil {
				return fmt.Errorf("normalizer sequence item %d: %w", i, err)
			}
		}
	default:
		return fmt.Errorf("normalizer type %q is not supported (BertNormalizer, Lowercase, StripAccents, NFD, Sequence)", c.Type)
	}
	return nil
}

// parsePreTokenizer returns "bert" or "bytelevel" and the ByteLevel add_prefix_space flag.
func parsePreTokenizer(raw json.RawMessage) (kind string, addPrefix bool, err error) {
	if isNull(raw) {
		return "", false, fmt.Errorf("pre_tokenizer is null; BertPreTokenizer or ByteLevel needed")
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", false, fmt.Errorf("pre_tokenizer: %w", err)
	}
	switch c.Type {
	case "BertPreTokenizer":
		return "bert", false, nil
	case "ByteLevel":
		return "bytelevel", orBool(c.AddPrefixSpace, true), nil
	case "Sequence":
		if len(c.PreTokenizers) == 1 {
			return parsePreTokenizer(c.PreTokenizers[0])
		}
	}
	return "", false, fmt.Errorf("pre_tokenizer type %q is not supported (BertPreTokenizer, ByteLevel)", c.Type)
}

// idSet reports whether an id belongs to a token of the vocabulary.
type idSet func(id int) bool

func newIDSet(vocab map[string]int, inv []string) idSet {
	return func(id int) bool {
		if id < 0 || id >= len(inv) {
			return false
		}
		v, ok := vocab[inv[id]]
		return ok && v == id
	}
}

func specialID(pair []any, vocab map[string]int, known idSet, what string) (int, error) {
	if len(pair) != 2 {
		return 0, fmt.Errorf("post_processor %s: want [token, id], got %v", what, pair)
	}
	tok, _ := pair[0].(string)
	f, ok := pair[1].(float64)
	if !ok {
		return 0, fmt.Errorf("post_processor %s: id %v is not a number", what, pair[1])
	}
	id := int(f)
	if float64(id) != f || !known(id) {
		return 0, fmt.Errorf("post_processor %s id %v is not in the vocabulary", what, f)
	}
	if v, ok := vocab[tok]; ok && v != id {
		return 0, fmt.Errorf("post_processor %s: %s has id %d but the vocabulary says %d", what, excerpt.Quote(tok), id, v)
	}
	return id, nil
}

// parsePostProcessor returns the special-token templates (nil, nil: none found); every
// special id must be known.
func parsePostProcessor(raw json.RawMessage, vocab map[string]int, known idSet) (single, pair []piece, err error) {
	if isNull(raw) {
		s, p := plainTemplate()
		return s, p, nil
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, fmt.Errorf("post_processor: %w", err)
	}
	switch c.Type {
	case "BertProcessing", "RobertaProcessing":
		return parseClsSepProcessor(&c, vocab, known)
	case "TemplateProcessing":
		if single, err = templatePieces(&c, c.Single, "single", known); err != nil {
			return nil, nil, err
		}
		if pair, err = templatePieces(&c, c.Pair, "pair", known); err != nil {
			return nil, nil, err
		}
		return single, pair, nil
	case "ByteLevel":
		s, p := plainTemplate()
		return s, p, nil
	case "Sequence":
		return parseSequenceProcessor(&c, vocab, known)
	}
	return nil, nil, fmt.Errorf("post_processor type %q is not supported (BertProcessing, RobertaProcessing, TemplateProcessing, ByteLevel, Sequence)", c.Type)
}

// parseClsSepProcessor is the template of a BertProcessing or RobertaProcessing c: its cls,
// then its sep.
func parseClsSepProcessor(c *hfComponent, vocab map[string]int, known idSet) (single, pair []piece, err error) {
	cls, err := specialID(c.Cls, vocab, known, "cls")
	if err != nil {
		return nil, nil, err
	}
	sep, err := specialID(c.Sep, vocab, known, "sep")
	if err != nil {
		return nil, nil, err
	}
	if c.Type == "BertProcessing" {
		s, p := bertTemplate(cls, sep)
		return s, p, nil
	}
	s, p := robertaTemplate(cls, sep)
	return s, p, nil
}

// templatePieces is the template items (c's single or pair, named name in errors) of a
// TemplateProcessing c as pieces: each special token's ids, which must be known, or a
// sequence A or B.
func templatePieces(c *hfComponent, items []map[string]hfTemplateItem, name string, known idSet) ([]piece, error) {
	var out []piece
	for i, it := range items {
		if sp, ok := it["SpecialToken"]; ok {
			st, ok := c.SpecialTokens[sp.ID]
			if !ok || len(st.IDs) == 0 {
				return nil, fmt.Errorf("post_processor %s[%d]: special token %s has no ids", name, i, excerpt.Quote(sp.ID))
			}
			for _, id := range st.IDs {
				if !known(id) {
					return nil, fmt.Errorf("post_processor %s[%d]: special token %s id %d is not in the vocabulary", name, i, excerpt.Quote(sp.ID), id)
				}
				out = append(out, piece{special: id, seq: -1, typeID: sp.TypeID})
			}
		} else if sq, ok := it["Sequence"]; ok {
			if sq.ID != "A" && sq.ID != "B" {
				return nil, fmt.Errorf("post_processor %s[%d]: sequence id %s (want A or B)", name, i, excerpt.Quote(sq.ID))
			}
			seq := 0
			if sq.ID == "B" {
				seq = 1
			}
			out = append(out, piece{special: -1, seq: seq, typeID: sq.TypeID})
		} else {
			return nil, fmt.Errorf("post_processor %s[%d]: neither SpecialToken nor Sequence", name, i)
		}
	}
	return out, nil
}

// parseSequenceProcessor is the template of a Sequence c (e.g. [ByteLevel,
// TemplateProcessing]): the last of its processors that adds specials wins.
func parseSequenceProcessor(c *hfComponent, vocab map[string]int, known idSet) (single, pair []piece, err error) {
	single, pair = plainTemplate()
	for i, sub := range c.Processors {
		s, p, err := parsePostProcessor(sub, vocab, known)
		if err != nil {
			return nil, nil, fmt.Errorf("post_processor sequence item %d: %w", i, err)
		}
		if len(s) > 1 || len(p) > 2 {
			single, pair = s, p
		}
	}
	return single, pair, nil
}

// LoadTokenizerJSON builds a tokenizer from a Hugging Face tokenizer.json holding either a
// WordPiece model with BertNormalizer and BertPreTokenizer, as BERT's, or a BPE model with the
// ByteLevel pre-tokenizer, as RoBERTa's and GPT-2's. The special-token template comes from the
// post_processor: BertProcessing, RobertaProcessing or TemplateProcessing. Added tokens extend the
// vocabulary; they are not matched inside raw text.
//
// Errors name the file and the unsupported or malformed component.
func LoadTokenizerJSON(path string) (Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return parseTokenizerJSON(data, path)
}

// parseTokenizerJSON is LoadTokenizerJSON on the file's contents; path names it in errors.
func parseTokenizerJSON(data []byte, path string) (*subword, error) {
	var cfg hfJSON
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	vocab, inv, err := readVocab(&cfg, path)
	if err != nil {
		return nil, err
	}
	preKind, addPrefix, err := parsePreTokenizer(cfg.PreTokenizer)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	single, pair, err := parsePostProcessor(cfg.PostProcessor, vocab, newIDSet(vocab, inv))
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	mtype := modelType(&cfg)
	switch {
	case mtype == "WordPiece" && preKind == "bert":
		return wordPieceFromJSON(&cfg, path, vocab, single, pair)
	case mtype == "BPE" && preKind == "bytelevel":
		return byteLevelBPEFromJSON(&cfg, path, vocab, addPrefix, single, pair)
	}
	return nil, fmt.Errorf("tokenizer %s: model %q with pre-tokenizer %q is not supported (WordPiece+BertPreTokenizer, BPE+ByteLevel)", path, mtype, preKind)
}

// readVocab is the model's vocabulary, which must not be empty, extended by the added
// tokens (each must agree with the model's id of its content, if any), and its inverse.
func readVocab(cfg *hfJSON, path string) (map[string]int, []string, error) {
	vocab := cfg.Model.Vocab
	if len(vocab) == 0 {
		return nil, nil, fmt.Errorf("tokenizer %s: model.vocab is empty", path)
	}
	for _, at := range cfg.AddedTokens {
		if v, ok := vocab[at.Content]; ok && v != at.ID {
			return nil, nil, fmt.Errorf("tokenizer %s: added token %s has id %d but the model vocabulary says %d", path, excerpt.Quote(at.Content), at.ID, v)
		}
		vocab[at.Content] = at.ID
	}
	inv, err := inverse("tokenizer "+path, vocab)
	if err != nil {
		return nil, nil, err
	}
	return vocab, inv, nil
}

// modelType is the model's type; older files omit it: BPE when they have merges, else
// WordPiece.
func modelType(cfg *hfJSON) string {
	if cfg.Model.Type != "" {
		return cfg.Model.Type
	}
	if cfg.Model.Merges != nil {
		return "BPE"
	}
	return "WordPiece"
}

// wordPieceFromJSON is the WordPiece tokenizer of cfg: its BERT normalizer, and the
// model's unknown token, continuing-subword prefix and longest word, with BERT's defaults.
func wordPieceFromJSON(cfg *hfJSON, path string, vocab map[string]int, single, pair []piece) (*subword, error) {
	var nrm bertNorm
	if err := parseNormalizer(cfg.Normalizer, &nrm); err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	unk, prefix, maxChars := "[UNK]", "##", 100
	if cfg.Model.UnkToken != nil {
		unk = *cfg.Model.UnkToken
	}
	if cfg.Model.ContinuingSubwordPrefix != nil {
		prefix = *cfg.Model.ContinuingSubwordPrefix
	}
	if cfg.Model.MaxInputCharsPerWord != nil {
		maxChars = *cfg.Model.MaxInputCharsPerWord
	}
	return newWordPiece(path, vocab, unk, prefix, maxChars, nrm, single, pair)
}

// byteLevelBPEFromJSON is the byte-level BPE tokenizer of cfg, which has no normalizer,
// no dropout, no continuing-subword prefix and no end-of-word suffix.
func byteLevelBPEFromJSON(cfg *hfJSON, path string, vocab map[string]int, addPrefix bool, single, pair []piece) (*subword, error) {
	if !isNull(cfg.Normalizer) {
		return nil, fmt.Errorf("tokenizer %s: a normalizer with a byte-level BPE model is not supported", path)
	}
	if cfg.Model.Dropout != nil && *cfg.Model.Dropout > 0 {
		return nil, fmt.Errorf("tokenizer %s: BPE dropout %g is not supported", path, *cfg.Model.Dropout)
	}
	if (cfg.Model.ContinuingSubwordPrefix != nil && *cfg.Model.ContinuingSubwordPrefix != "") ||
		(cfg.Model.EndOfWordSuffix != nil && *cfg.Model.EndOfWordSuffix != "") {
		return nil, fmt.Errorf("tokenizer %s: BPE continuing_subword_prefix / end_of_word_suffix are not supported", path)
	}
	merges, err := parseMerges(cfg.Model.Merges, path)
	if err != nil {
		return nil, err
	}
	return newByteLevelBPE(path, vocab, merges, cfg.Model.UnkToken, addPrefix, single, pair)
}

// parseMerges is model.merges, each "a b" or ["a", "b"], as "a b".
func parseMerges(data json.RawMessage, path string) ([]string, error) {
	var merges []string
	var raw []any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("tokenizer %s: model.merges: %w", path, err)
	}
	for i, m := range raw {
		switch v := m.(type) {
		case string:
			if len(strings.Split(v, " ")) != 2 {
				return nil, fmt.Errorf("tokenizer %s: merge %d %s: want two space-separated tokens", path, i, excerpt.Quote(v))
			}
			merges = append(merges, v)
		case []any:
			var a, b string
			ok := len(v) == 2
			if ok {
				a, ok = v[0].(string)
			}
			if ok {
				b, ok = v[1].(string)
			}
			if !ok || strings.Contains(a, " ") || strings.Contains(b, " ") {
				return nil, fmt.Errorf("tokenizer %s: merge %d: want [a, b] (two strings without spaces), got %.80v", path, i, v)
			}
			merges = append(merges, a+" "+b)
		default:
			return nil, fmt.Errorf("tokenizer %s: merge %d: unexpected %T", path, i, m)
		}
	}
	return merges, nil
}
