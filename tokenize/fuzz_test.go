package tokenize

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The fuzz targets feed arbitrary tokenizer files to the readers (vocab.txt, tokenizer.json,
// vocab.json + merges.txt) and, when a file is accepted, encode a fuzzed text with it:
//
//	go test -run '^$' -fuzz FuzzVocabTxt -fuzztime 60s ./tokenize
//	go test -run '^$' -fuzz FuzzTokenizerJSON -fuzztime 60s ./tokenize
//	go test -run '^$' -fuzz FuzzByteLevelBPE -fuzztime 60s ./tokenize
//
// Seeds: the files of the tests (malformedFiles: out-of-range and shared ids, bad merges and
// templates), the BPE fixture, a BERT tokenizer.json and the head of the real vocab.txt.

// checkEncodes encodes text (alone, as a pair, truncated or not) with an accepted tokenizer:
// every id must be in the vocabulary and the Encoding's slices consistent. Errors are allowed
// (a character outside a vocabulary without unk token, a maxLen below the specials).
func checkEncodes(t *testing.T, tk *subword, text string) {
	t.Helper()
	if tk.VocabSize() <= 0 || tk.VocabSize() > MaxVocabSize {
		t.Fatalf("vocabulary size %d", tk.VocabSize())
	}
	for _, maxLen := range []int{0, 9} {
		for _, b := range []string{"", "x " + text} {
			e, err := tk.Encode(text, b, maxLen)
			if err != nil {
				continue
			}
			n := len(e.IDs)
			if len(e.TypeIDs) != n || len(e.AttentionMask) != n || len(e.WordIDs) != n || (maxLen > 0 && n > maxLen) {
				t.Fatalf("Encode(%q, %q, %d): inconsistent encoding %+v", text, b, maxLen, e)
			}
			for _, id := range e.IDs {
				if id < 0 || id >= tk.VocabSize() {
					t.Fatalf("Encode(%q, %q, %d): id %d outside the vocabulary of %d", text, b, maxLen, id, tk.VocabSize())
				}
				if back, ok := tk.TokenToID(tk.IDToToken(id)); !ok || back != id {
					t.Fatalf("Encode(%q, %q, %d): id %d is no token's id", text, b, maxLen, id)
				}
			}
		}
	}
}

func FuzzVocabTxt(f *testing.F) {
	f.Add([]byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n##lo\nworld\n"), true, "Hello, wörld!")
	f.Add([]byte("\ufeff[PAD]\r\n[UNK]\r\n\r\n[CLS]\r\n[SEP]\r\n[PAD]\r\na\r\n"), false, "a b")
	f.Add([]byte("[PAD]\n[CLS]\n[SEP]\nhello\n"), true, "hello") // no [UNK]
	if fh, err := os.Open(bertVocab); err == nil {
		var head bytes.Buffer
		sc := bufio.NewScanner(fh)
		for i := 0; i < 1200 && sc.Scan(); i++ {
			head.WriteString(sc.Text() + "\n")
		}
		fh.Close()
		f.Add(head.Bytes(), true, "The café's naïve 東京 [MASK]!")
	}
	for _, c := range malformedFiles() {
		if v, ok := c.files["vocab.txt"]; ok {
			f.Add([]byte(v), true, c.name)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, lower bool, text string) {
		vocab, err := parseVocabTxt(bytes.NewReader(data), "vocab.txt")
		if err != nil {
			return
		}
		tk, err := newBertWordPiece("vocab.txt", vocab, lower)
		if err != nil {
			return
		}
		checkEncodes(t, tk, text)
	})
}

func FuzzTokenizerJSON(f *testing.F) {
	vocab, merges := bpeFixtureData()
	pairs := make([][]string, len(merges))
	for i, m := range merges {
		pairs[i] = strings.Split(m, " ")
	}
	roberta, _ := json.Marshal(map[string]any{
		"added_tokens":   []map[string]any{{"id": 0, "content": "<s>", "special": true}},
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false},
		"post_processor": map[string]any{"type": "RobertaProcessing", "sep": []any{"</s>", 2}, "cls": []any{"<s>", 0}},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": pairs},
	})
	f.Add(roberta, "hello world")
	bert := `{"added_tokens":[{"id":0,"content":"[PAD]"}],
"normalizer":{"type":"Sequence","normalizers":[{"type":"NFD"},{"type":"Lowercase"},{"type":"StripAccents"}]},
"pre_tokenizer":{"type":"BertPreTokenizer"},
"post_processor":{"type":"TemplateProcessing",
 "single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],
 "pair":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}},{"Sequence":{"id":"B","type_id":1}},{"SpecialToken":{"id":"[SEP]","type_id":1}}],
 "special_tokens":{"[CLS]":{"id":"[CLS]","ids":[2]},"[SEP]":{"id":"[SEP]","ids":[3]}}},
"model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,
 "vocab":{"[PAD]":0,"[UNK]":1,"[CLS]":2,"[SEP]":3,"[MASK]":4,"hello":5,"world":6,"na":7,"##ive":8,",":9,"!":10}}}`
	f.Add([]byte(bert), "Héllo, NAÏVE!")
	for _, c := range malformedFiles() {
		if v, ok := c.files["tokenizer.json"]; ok {
			f.Add([]byte(v), c.name)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		tk, err := parseTokenizerJSON(data, "tokenizer.json")
		if err != nil {
			return
		}
		checkEncodes(t, tk, text)
	})
}

func FuzzByteLevelBPE(f *testing.F) {
	vocab, merges := bpeFixtureData()
	js, _ := json.Marshal(vocab)
	f.Add(js, []byte(bpeMergesTxt(merges)), "hello world  é")
	f.Add([]byte(`{"<s>":0,"<pad>":1,"</s>":2,"a":3,"b":4,"ab":5}`), []byte("a b\r\n"), "abba") // no unk token
	for _, c := range malformedFiles() {
		if v, ok := c.files["vocab.json"]; ok {
			f.Add([]byte(v), []byte(c.files["merges.txt"]), c.name)
		}
	}
	f.Fuzz(func(t *testing.T, vocab, merges []byte, text string) {
		tk, err := parseByteLevelBPE(vocab, "vocab.json", bytes.NewReader(merges), "merges.txt")
		if err != nil {
			return
		}
		checkEncodes(t, tk, text)
	})
}
