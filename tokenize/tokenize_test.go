package tokenize

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

const bertVocab = "/work/shared/models/bert-base-uncased-vocab/vocab.txt"

func needFile(t testing.TB, p string) {
	t.Helper()
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not available: %v", p, err)
	}
}

// lineIDs reads the vocab file independently of the package: id = 0-based line number.
func lineIDs(t testing.TB, toks ...string) []int {
	t.Helper()
	f, err := os.Open(bertVocab)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]int{}
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		if _, ok := want[sc.Text()]; !ok {
			want[sc.Text()] = i
		}
	}
	out := make([]int, len(toks))
	for i, tk := range toks {
		id, ok := want[tk]
		if !ok {
			t.Fatalf("token %q not in %s", tk, bertVocab)
		}
		out[i] = id
	}
	return out
}

func loadBert(t testing.TB) Tokenizer {
	t.Helper()
	needFile(t, bertVocab)
	tk, err := Load(bertVocab)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestBertVocabIDs(t *testing.T) {
	tk := loadBert(t)
	if got := tk.VocabSize(); got != 30522 {
		t.Errorf("VocabSize = %d, want 30522", got)
	}
	specials := map[string][2]int{"pad": {tk.PadID(), 0}, "unk": {tk.UnkID(), 100}, "cls": {tk.CLSID(), 101}, "sep": {tk.SEPID(), 102}, "mask": {tk.MaskID(), 103}}
	for name, v := range specials {
		if v[0] != v[1] {
			t.Errorf("%s id = %d, want %d", name, v[0], v[1])
		}
	}
	if got := lineIDs(t, "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"); !reflect.DeepEqual(got, []int{0, 100, 101, 102, 103}) {
		t.Fatalf("vocab file special lines = %v", got)
	}
	cases := []struct {
		text  string
		toks  []string
		ids   []int // asserted literally too, and checked against the vocab file
		words []int
	}{
		{"hello world", []string{"hello", "world"}, []int{7592, 2088}, []int{0, 1}},
		{"Hello, World!", []string{"hello", ",", "world", "!"}, []int{7592, 1010, 2088, 999}, []int{0, 1, 2, 3}},
		// Greedy longest-match-first: "una" is in this vocabulary and "##aff" is not, so the
		// BERT-paper example "un ##aff ##able" comes out as "una ##ffa ##ble" here (as with
		// Hugging Face's BertTokenizer on bert-base-uncased).
		{"unaffable", []string{"una", "##ffa", "##ble"}, []int{14477, 20961, 3468}, []int{0, 0, 0}},
		// accents stripped after NFD (sugarme's own normalizer maps these to [UNK]).
		{"Héllo Wörld naïve CAFÉ", []string{"hello", "world", "naive", "cafe"}, []int{7592, 2088, 15743, 7668}, []int{0, 1, 2, 3}},
		// CJK ideographs split one per word; 爱 is not in the vocabulary.
		{"我爱ok", []string{"我", "[UNK]", "ok"}, []int{1855, 100, 7929}, []int{0, 1, 2}},
		{"don't-stop 3.14 $100", []string{"don", "'", "t", "-", "stop", "3", ".", "14", "$", "100"}, nil, nil},
		{"  a\tb\nc\x00 ", []string{"a", "b", "c"}, []int{1037, 1038, 1039}, []int{0, 1, 2}},
		{"", nil, nil, nil},
	}
	for _, c := range cases {
		e, err := tk.Encode(c.text, "", 0)
		if err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		want := append(append([]int{101}, lineIDs(t, c.toks...)...), 102)
		if !reflect.DeepEqual(e.IDs, want) {
			t.Errorf("%q: ids %v, want %v", c.text, e.IDs, want)
		}
		if c.ids != nil && !reflect.DeepEqual(e.IDs[1:len(e.IDs)-1], c.ids) {
			t.Errorf("%q: ids %v, want literal %v", c.text, e.IDs, c.ids)
		}
		if c.words != nil {
			wantW := append(append([]int{-1}, c.words...), -1)
			if !reflect.DeepEqual(e.WordIDs, wantW) {
				t.Errorf("%q: word ids %v, want %v", c.text, e.WordIDs, wantW)
			}
		}
		for i := range e.IDs {
			if e.TypeIDs[i] != 0 || e.AttentionMask[i] != 1 {
				t.Fatalf("%q: type/mask at %d = %d/%d", c.text, i, e.TypeIDs[i], e.AttentionMask[i])
			}
		}
		toks, _ := tk.Tokens(c.text)
		if len(toks) != len(c.toks) || (len(toks) > 0 && !reflect.DeepEqual(toks, c.toks)) {
			t.Errorf("%q: tokens %q, want %q", c.text, toks, c.toks)
		}
	}
	if got := tk.IDToToken(7592); got != "hello" {
		t.Errorf("IDToToken(7592) = %q", got)
	}
	if got := tk.IDToToken(99999); got != "" {
		t.Errorf("IDToToken(99999) = %q, want empty", got)
	}
	if id, ok := tk.TokenToID("##ble"); !ok || id != 3468 {
		t.Errorf("TokenToID(##ble) = %d %v", id, ok)
	}
}

func TestBertPair(t *testing.T) {
	tk := loadBert(t)
	e, err := tk.Encode("Hello world", "unaffable", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := Encoding{
		IDs:           []int{101, 7592, 2088, 102, 14477, 20961, 3468, 102},
		TypeIDs:       []int{0, 0, 0, 0, 1, 1, 1, 1},
		AttentionMask: []int{1, 1, 1, 1, 1, 1, 1, 1},
		WordIDs:       []int{-1, 0, 1, -1, 2, 2, 2, -1},
	}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("pair = %+v\nwant   %+v", e, want)
	}
	if tk.NumSpecial(true) != 3 || tk.NumSpecial(false) != 2 {
		t.Errorf("NumSpecial = %d/%d", tk.NumSpecial(true), tk.NumSpecial(false))
	}
}

func TestTruncLongestFirst(t *testing.T) {
	cases := []struct{ n1, n2, budget, w1, w2 int }{
		{3, 4, 7, 3, 4},  // fits
		{10, 3, 7, 4, 3}, // only the longer one cut
		{3, 10, 7, 3, 4}, // same, other side
		{6, 6, 5, 2, 3},  // both cut, tie: second keeps the odd token
		{7, 6, 5, 3, 2},  // both cut, first longer keeps it
		{6, 6, 6, 3, 3},  // even budget
		{0, 9, 4, 0, 4},  // empty first
		{20, 1, 4, 3, 1}, // n1 > budget
		{100, 100, 0, 0, 0},
	}
	for _, c := range cases {
		g1, g2 := truncLongestFirst(c.n1, c.n2, c.budget)
		if g1 != c.w1 || g2 != c.w2 {
			t.Errorf("trunc(%d,%d,%d) = %d,%d want %d,%d", c.n1, c.n2, c.budget, g1, g2, c.w1, c.w2)
		}
		if c.n1+c.n2 > c.budget && g1+g2 != c.budget {
			t.Errorf("trunc(%d,%d,%d) keeps %d tokens", c.n1, c.n2, c.budget, g1+g2)
		}
	}
}

func TestBertTruncation(t *testing.T) {
	tk := loadBert(t)
	a := "a b c d e f g h i j" // 10 tokens: ids 1037..1046
	b := "k l m"               // 3 tokens
	e, err := tk.Encode(a, b, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{101, 1037, 1038, 1039, 1040, 102, 1047, 1048, 1049, 102}
	if !reflect.DeepEqual(e.IDs, want) || !reflect.DeepEqual(e.TypeIDs, []int{0, 0, 0, 0, 0, 0, 1, 1, 1, 1}) {
		t.Errorf("pair trunc: ids %v types %v, want %v", e.IDs, e.TypeIDs, want)
	}
	e, _ = tk.Encode("a b c d e f", "g h i j k l", 8) // budget 5 -> 2 + 3
	if want := []int{101, 1037, 1038, 102, 1043, 1044, 1045, 102}; !reflect.DeepEqual(e.IDs, want) {
		t.Errorf("both cut: %v, want %v", e.IDs, want)
	}
	e, _ = tk.Encode(a, "", 4)
	if want := []int{101, 1037, 1038, 102}; !reflect.DeepEqual(e.IDs, want) {
		t.Errorf("single trunc: %v, want %v", e.IDs, want)
	}
	e, _ = tk.Encode("unaffable", "", 3) // cuts inside a word
	if want := []int{101, 14477, 102}; !reflect.DeepEqual(e.IDs, want) {
		t.Errorf("single trunc inside word: %v, want %v", e.IDs, want)
	}
	if _, err := tk.Encode("a", "b", 3); err == nil {
		t.Error("maxLen 3 for a BERT pair (3 specials) should fail")
	}
}

func TestPad(t *testing.T) {
	tk := loadBert(t)
	e1, _ := tk.Encode("hello world", "", 0) // 4
	e2, _ := tk.Encode("hello", "world", 0)  // 5
	b := Pad([]Encoding{e1, e2}, tk.PadID(), 0)
	want := Batch{
		IDs:           []int{101, 7592, 2088, 102, 0, 101, 7592, 102, 2088, 102},
		TypeIDs:       []int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
		AttentionMask: []int{1, 1, 1, 1, 0, 1, 1, 1, 1, 1},
		WordIDs:       []int{-1, 0, 1, -1, -1, -1, 0, -1, 1, -1},
		Lengths:       []int{4, 5},
		B:             2, S: 5,
	}
	if !reflect.DeepEqual(b, want) {
		t.Errorf("dynamic pad = %+v\nwant %+v", b, want)
	}
	b = Pad([]Encoding{e1, e2}, 7, 8)
	if b.S != 8 || b.B != 2 || len(b.IDs) != 16 {
		t.Fatalf("fixed pad shape %dx%d len %d", b.B, b.S, len(b.IDs))
	}
	if got := b.IDs[8:16]; !reflect.DeepEqual(got, []int{101, 7592, 102, 2088, 102, 7, 7, 7}) {
		t.Errorf("fixed pad row 1 = %v", got)
	}
	if got := b.AttentionMask[0:8]; !reflect.DeepEqual(got, []int{1, 1, 1, 1, 0, 0, 0, 0}) {
		t.Errorf("fixed pad mask row 0 = %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("Pad with fixedLen shorter than an encoding should panic")
		}
	}()
	Pad([]Encoding{e2}, 0, 3)
}

func TestConcurrentEncode(t *testing.T) {
	tk := loadBert(t)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				e, err := tk.Encode("Hello world", "unaffable naïve", 0)
				if err != nil || !reflect.DeepEqual(e.IDs, []int{101, 7592, 2088, 102, 14477, 20961, 3468, 15743, 102}) {
					errs <- fmt.Sprintf("goroutine %d iteration %d: %v %v", g, i, e.IDs, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error("concurrent encode mismatch:", e)
	}
}

func TestNormalizerCases(t *testing.T) {
	n := bertNorm{clean: true, chinese: true, strip: true, lower: true}
	cases := map[string]string{
		"ÀÉÎõü":          "aeiou",
		"a\u200bb":       "ab", // zero-width space is Cf: removed
		"x\u00a0y":       "x y",
		"中文":             " 中  文 ",
		"Straße":         "straße",
		"e\u0301":        "e", // decomposed accent
		"\ufffdok\x01\t": "ok ",
	}
	for in, want := range cases {
		if got := n.normalize(in); got != want {
			t.Errorf("normalize(%q) = %q, want %q", in, got, want)
		}
	}
	cased := bertNorm{clean: true, chinese: true}
	if got := cased.normalize("Café"); got != "Café" {
		t.Errorf("cased normalize = %q", got)
	}
}

// --- byte-level BPE fixtures ---

// bpeFixture writes a tiny RoBERTa-style vocab.json + merges.txt: specials 0..3, the 256
// byte characters 4..259 in byte order, then merge results.
func bpeFixture(t *testing.T) (dir string, vocab map[string]int, merges []string) {
	t.Helper()
	vocab, merges = bpeFixtureData()
	dir = t.TempDir()
	js, _ := json.Marshal(vocab)
	if err := os.WriteFile(filepath.Join(dir, "vocab.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "merges.txt"), []byte(bpeMergesTxt(merges)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, vocab, merges
}

func bpeMergesTxt(merges []string) string {
	return "#version: 0.2\n" + strings.Join(merges, "\n") + "\n"
}

func bpeFixtureData() (vocab map[string]int, merges []string) {
	vocab = map[string]int{"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
	for b := range 256 {
		vocab[byteChar[b]] = 4 + b
	}
	merges = []string{"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d", "e l"}
	next := 260
	for _, m := range merges {
		p := strings.Split(m, " ")
		if _, ok := vocab[p[0]+p[1]]; !ok {
			vocab[p[0]+p[1]] = next
			next++
		}
	}
	vocab["<mask>"] = next
	return vocab, merges
}

func TestByteChar(t *testing.T) {
	if byteChar[' '] != "Ġ" || byteChar['\n'] != "Ċ" || byteChar['a'] != "a" || byteChar[0xC3] != "Ã" {
		t.Errorf("byteChar: space %q newline %q a %q 0xC3 %q", byteChar[' '], byteChar['\n'], byteChar['a'], byteChar[0xC3])
	}
	seen := map[string]bool{}
	for _, c := range byteChar {
		seen[c] = true
	}
	if len(seen) != 256 {
		t.Errorf("byteChar is not injective: %d distinct", len(seen))
	}
}

func TestGPT2Pieces(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"a  b", []string{"a", " ", " b"}},
		{"x   y", []string{"x", "  ", " y"}},
		{"a b ", []string{"a", " b", " "}},
		{"a \nb", []string{"a", " ", "\n", "b"}},
		{"a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"it's 3.14!", []string{"it", "'s", " 3", ".", "14", "!"}},
		{"héllo wörld", []string{"héllo", " wörld"}},
		{" ", []string{" "}},
		{"", nil},
	}
	for _, c := range cases {
		if got := gpt2Pieces(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("gpt2Pieces(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func checkBPE(t *testing.T, tk Tokenizer, vocab map[string]int) {
	t.Helper()
	v := func(toks ...string) []int {
		out := make([]int, len(toks))
		for i, s := range toks {
			id, ok := vocab[s]
			if !ok {
				t.Fatalf("fixture lacks %q", s)
			}
			out[i] = id
		}
		return out
	}
	if tk.Kind() != "bpe" || tk.CLSID() != 0 || tk.PadID() != 1 || tk.SEPID() != 2 || tk.UnkID() != 3 || tk.MaskID() != vocab["<mask>"] {
		t.Fatalf("specials: kind %s cls %d pad %d sep %d unk %d mask %d", tk.Kind(), tk.CLSID(), tk.PadID(), tk.SEPID(), tk.UnkID(), tk.MaskID())
	}
	if tk.VocabSize() != len(vocab) {
		t.Errorf("VocabSize = %d, want %d", tk.VocabSize(), len(vocab))
	}
	e, err := tk.Encode("hello world", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(append([]int{0}, v("hello", "Ġworld")...), 2); !reflect.DeepEqual(e.IDs, want) {
		t.Errorf("single: %v, want %v", e.IDs, want)
	}
	// "hello" merges h+e (rank 0), l+l (1), he+ll, hell+o; "e l" (rank 9) never wins.
	if got := e.IDs[1]; got != 4+256+3 {
		t.Errorf("hello id = %d, want %d (merge result of rank 3)", got, 4+256+3)
	}
	// Pair: RoBERTa template, no prefix space on the second sentence, type ids all 0.
	e, err = tk.Encode("hello", "world", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]int{0}, v("hello")...), 2, 2), append(v("w", "or", "l", "d"), 2)...)
	if !reflect.DeepEqual(e.IDs, want) {
		t.Errorf("pair: %v, want %v", e.IDs, want)
	}
	if !reflect.DeepEqual(e.TypeIDs, make([]int, len(want))) {
		t.Errorf("pair type ids %v, want zeros", e.TypeIDs)
	}
	if wantW := []int{-1, 0, -1, -1, 1, 1, 1, 1, -1}; !reflect.DeepEqual(e.WordIDs, wantW) {
		t.Errorf("pair word ids %v, want %v", e.WordIDs, wantW)
	}
	// Whitespace runs and non-ASCII bytes: "a  é" -> a, Ġ, Ġ, Ã, ©
	e, _ = tk.Encode("a  é", "", 0)
	if want := append(append([]int{0}, v("a", "Ġ", "Ġ", "Ã", "©")...), 2); !reflect.DeepEqual(e.IDs, want) {
		t.Errorf("bytes: %v, want %v", e.IDs, want)
	}
	// Truncation: 4 specials for a pair.
	e, _ = tk.Encode("hello", "world", 6) // budget 2: 1 + 1
	if want := append(append([]int{0}, v("hello")...), 2, 2, vocab["w"], 2); !reflect.DeepEqual(e.IDs, want) {
		t.Errorf("pair trunc: %v, want %v", e.IDs, want)
	}
	if _, err := tk.Encode("a", "b", 4); err == nil {
		t.Error("maxLen 4 for a RoBERTa pair should fail")
	}
}

func TestByteLevelBPEFiles(t *testing.T) {
	dir, vocab, _ := bpeFixture(t)
	for _, p := range []string{dir, filepath.Join(dir, "vocab.json")} {
		tk, err := Load(p)
		if err != nil {
			t.Fatalf("Load(%s): %v", p, err)
		}
		checkBPE(t, tk, vocab)
	}
}

func TestTokenizerJSONRoberta(t *testing.T) {
	_, vocab, merges := bpeFixture(t)
	pairs := make([][]string, len(merges))
	for i, m := range merges {
		pairs[i] = strings.Split(m, " ")
	}
	cfg := map[string]any{
		"version":       "1.0",
		"added_tokens":  []map[string]any{{"id": 0, "content": "<s>", "special": true}, {"id": vocab["<mask>"], "content": "<mask>", "special": true}},
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": map[string]any{"type": "RobertaProcessing", "sep": []any{"</s>", 2}, "cls": []any{"<s>", 0},
			"trim_offsets": true, "add_prefix_space": false},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "vocab": vocab, "merges": pairs},
	}
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	js, _ := json.Marshal(cfg)
	os.WriteFile(p, js, 0o644)
	tk, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	checkBPE(t, tk, vocab)
}

func TestTokenizerJSONBert(t *testing.T) {
	toks := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "na", "##ive", ",", "!"}
	vocab := map[string]int{}
	for i, s := range toks {
		vocab[s] = i
	}
	tmpl := func(items ...[2]any) []map[string]any {
		var out []map[string]any
		for _, it := range items {
			kind, id := "Sequence", it[0].(string)
			if strings.HasPrefix(id, "[") {
				kind = "SpecialToken"
			}
			out = append(out, map[string]any{kind: map[string]any{"id": id, "type_id": it[1]}})
		}
		return out
	}
	cfg := map[string]any{
		"added_tokens": []map[string]any{{"id": 0, "content": "[PAD]", "special": true}},
		"normalizer": map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
			"strip_accents": nil, "lowercase": true},
		"pre_tokenizer": map[string]any{"type": "BertPreTokenizer"},
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single": tmpl([2]any{"[CLS]", 0}, [2]any{"A", 0}, [2]any{"[SEP]", 0}),
			"pair":   tmpl([2]any{"[CLS]", 0}, [2]any{"A", 0}, [2]any{"[SEP]", 0}, [2]any{"B", 1}, [2]any{"[SEP]", 1}),
			"special_tokens": map[string]any{"[CLS]": map[string]any{"id": "[CLS]", "ids": []int{2}, "tokens": []string{"[CLS]"}},
				"[SEP]": map[string]any{"id": "[SEP]", "ids": []int{3}, "tokens": []string{"[SEP]"}}}},
		"model": map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
			"max_input_chars_per_word": 100, "vocab": vocab},
	}
	dir := t.TempDir()
	js, _ := json.Marshal(cfg)
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), js, 0o644)
	tk, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := tk.Encode("Héllo, NAÏVE!", "world zzz", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := Encoding{
		IDs:           []int{2, 5, 9, 7, 8, 10, 3, 6, 1, 3},
		TypeIDs:       []int{0, 0, 0, 0, 0, 0, 0, 1, 1, 1},
		AttentionMask: []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
		WordIDs:       []int{-1, 0, 1, 2, 2, 3, -1, 4, 5, -1},
	}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("got  %+v\nwant %+v", e, want)
	}
	if tk.Kind() != "wordpiece" || tk.MaskID() != 4 || tk.VocabSize() != len(toks) {
		t.Errorf("kind %s mask %d size %d", tk.Kind(), tk.MaskID(), tk.VocabSize())
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "tokenizer.json")
	os.WriteFile(bad, []byte(`{"model":{"type":"Unigram","vocab":{"a":0}},"pre_tokenizer":{"type":"Metaspace"}}`), 0o644)
	empty := t.TempDir()
	onlyVocab := t.TempDir()
	os.WriteFile(filepath.Join(onlyVocab, "vocab.json"), []byte(`{"a":0}`), 0o644)
	noPad := filepath.Join(t.TempDir(), "vocab.txt")
	os.WriteFile(noPad, []byte("[UNK]\n[CLS]\n[SEP]\nhello\n"), 0o644)
	cases := []struct{ path, wantSub string }{
		{filepath.Join(dir, "missing.txt"), "missing.txt"},
		{bad, "Metaspace"},
		{empty, "holds none of"},
		{onlyVocab, "merges.txt"},
		{noPad, "[PAD]"},
	}
	for _, c := range cases {
		_, err := Load(c.path)
		if err == nil || !strings.Contains(err.Error(), c.wantSub) {
			t.Errorf("Load(%s) error %v, want mention of %q", c.path, err, c.wantSub)
		}
	}
}

// malformedFile is a tokenizer directory that Load must reject: files (name -> content), the
// file to load, and a substring of the error.
type malformedFile struct {
	name  string
	files map[string]string
	load  string
	want  string
}

// malformedFiles are the cases of TestMalformedTokenizerFiles, also seeds of the fuzz targets.
func malformedFiles() []malformedFile {
	bertVocabJSON := `{"[PAD]":0,"[UNK]":1,"[CLS]":2,"[SEP]":3,"hello":4}`
	wp := func(vocab, post string) string {
		return `{"model":{"type":"WordPiece","vocab":` + vocab + `},"pre_tokenizer":{"type":"BertPreTokenizer"},"post_processor":` + post + `}`
	}
	tmpl := func(single, pair, specials string) string {
		return `{"type":"TemplateProcessing","single":` + single + `,"pair":` + pair + `,"special_tokens":` + specials + `}`
	}
	okSingle := `[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}}]`
	okPair := `[{"Sequence":{"id":"A","type_id":0}},{"Sequence":{"id":"B","type_id":1}}]`
	okSpecials := `{"[CLS]":{"id":"[CLS]","ids":[2]}}`
	bpeJSON := func(merges string) string {
		return `{"model":{"type":"BPE","vocab":{"<s>":0,"<pad>":1,"</s>":2,"a":3,"b":4,"ab":5},"merges":` + merges + `},"pre_tokenizer":{"type":"ByteLevel"},"post_processor":null}`
	}
	return []malformedFile{
		{"empty merge pair", map[string]string{"tokenizer.json": bpeJSON(`[[]]`)}, "tokenizer.json", "merge 0: want [a, b]"},
		{"three-part merge pair", map[string]string{"tokenizer.json": bpeJSON(`[["a","x","b"]]`)}, "tokenizer.json", "merge 0: want [a, b]"},
		{"huge id", map[string]string{"tokenizer.json": wp(`{"[PAD]":0,"[UNK]":1,"[CLS]":2,"[SEP]":3,"x":4000000000}`, "null")}, "tokenizer.json", `token "x" has id 4000000000`},
		{"huge id in vocab.json", map[string]string{"vocab.json": `{"<s>":0,"<pad>":1,"</s>":2,"x":99999999}`, "merges.txt": ""}, "vocab.json", `token "x" has id 99999999`},
		{"shared id", map[string]string{"vocab.json": `{"<s>":0,"<pad>":1,"</s>":2,"a":1}`, "merges.txt": ""}, "vocab.json", "share id 1"},
		{"added token reuses an id", map[string]string{"tokenizer.json": `{"added_tokens":[{"id":4,"content":"[NEW]"}],"model":{"type":"WordPiece","vocab":` + bertVocabJSON + `},"pre_tokenizer":{"type":"BertPreTokenizer"},"post_processor":null}`}, "tokenizer.json", "share id 4"},
		{"cls id beyond the vocabulary", map[string]string{"tokenizer.json": wp(bertVocabJSON, `{"type":"BertProcessing","cls":["[X]",99],"sep":["[SEP]",3]}`)}, "tokenizer.json", "cls id 99 is not in the vocabulary"},
		{"negative sep id", map[string]string{"tokenizer.json": wp(bertVocabJSON, `{"type":"BertProcessing","cls":["[CLS]",2],"sep":["[Y]",-3]}`)}, "tokenizer.json", "sep id -3 is not in the vocabulary"},
		{"fractional id", map[string]string{"tokenizer.json": wp(bertVocabJSON, `{"type":"BertProcessing","cls":["[CLS]",2.5],"sep":["[SEP]",3]}`)}, "tokenizer.json", "cls id 2.5"},
		{"negative template id", map[string]string{"tokenizer.json": wp(bertVocabJSON, tmpl(okSingle, okPair, `{"[CLS]":{"id":"[CLS]","ids":[-1]}}`))}, "tokenizer.json", "special token \"[CLS]\" id -1 is not in the vocabulary"},
		{"template id beyond the vocabulary", map[string]string{"tokenizer.json": wp(bertVocabJSON, tmpl(okSingle, okPair, `{"[CLS]":{"id":"[CLS]","ids":[7]}}`))}, "tokenizer.json", "id 7 is not in the vocabulary"},
		{"unknown sequence id", map[string]string{"tokenizer.json": wp(bertVocabJSON, tmpl(`[{"Sequence":{"id":"C","type_id":0}}]`, okPair, okSpecials))}, "tokenizer.json", `sequence id "C"`},
		{"single template without A", map[string]string{"tokenizer.json": wp(bertVocabJSON, tmpl(`[{"SpecialToken":{"id":"[CLS]","type_id":0}}]`, okPair, okSpecials))}, "tokenizer.json", "single template must hold $A once"},
		{"pair template without B", map[string]string{"tokenizer.json": wp(bertVocabJSON, tmpl(okSingle, `[{"Sequence":{"id":"A","type_id":0}},{"Sequence":{"id":"A","type_id":1}}]`, okSpecials))}, "tokenizer.json", "pair template must hold $A and $B once each"},
		{"malformed tokenizer_config.json", map[string]string{"vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n", "tokenizer_config.json": `{"do_lower_case": "no"}`}, "vocab.txt", "tokenizer_config.json"},
		{"truncated tokenizer_config.json", map[string]string{"vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n", "tokenizer_config.json": `{"do_lower_case": fal`}, "vocab.txt", "tokenizer_config.json"},
		{"merge line with three tokens", map[string]string{"vocab.json": `{"<s>":0,"<pad>":1,"</s>":2}`, "merges.txt": "#version: 0.2\na b c\n"}, "vocab.json", "merges.txt: line 2"},
		{"vocab.json not an object", map[string]string{"vocab.json": `["a"]`, "merges.txt": ""}, "vocab.json", "vocab.json"},
	}
}

// TestMalformedTokenizerFiles: each file is rejected with an error naming it and the defect
// (before: a panic, a huge allocation, or a tokenizer that emits ids outside its vocabulary).
func TestMalformedTokenizerFiles(t *testing.T) {
	cases := malformedFiles()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range c.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Load(filepath.Join(dir, c.load))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %v, want one naming the file and containing %q", err, c.want)
			}
		})
	}
}
