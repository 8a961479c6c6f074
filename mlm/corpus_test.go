package mlm

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/tokenize"
)

const bertVocab = "/work/shared/models/bert-base-uncased-vocab/vocab.txt"

func loadVocab(t *testing.T) tokenize.Tokenizer {
	t.Helper()
	if _, err := os.Stat(bertVocab); err != nil {
		t.Skipf("no vocabulary at %s", bertVocab)
	}
	tok, err := tokenize.Load(bertVocab)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadCorpusText(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "lines.txt"), "first line\n  second line  \nfirst line\n\n")
	writeFile(t, filepath.Join(dir, "sub", "docs.txt"), "doc one a\ndoc one b\n\ndoc two a\nsecond line\n")
	writeFile(t, filepath.Join(dir, "ignored.md"), "not text\n")
	docs, info, err := readCorpus(dir)
	if err != nil {
		t.Fatal(err)
	}
	// lines.txt has a blank line only at its end: still one document per block;
	// it is one block, so one document per line... except that a trailing blank
	// line counts as a separator: one document of two lines after dedupe.
	got := [][]string{}
	for _, d := range docs {
		got = append(got, d)
	}
	want := [][]string{{"first line", "second line"}, {"doc one a", "doc one b"}, {"doc two a"}}
	if len(got) != len(want) {
		t.Fatalf("documents %q, want %q", got, want)
	}
	for i := range want {
		if strings.Join(got[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("document %d = %q, want %q", i, got[i], want[i])
		}
	}
	if info.Duplicates != 2 || info.Lines != 7 || info.Kind != "text" {
		t.Errorf("info %+v, want 7 lines, 2 duplicates, text", info)
	}
	// a file without blank lines: one document per line
	f := filepath.Join(dir, "plain.txt")
	writeFile(t, f, "a b c\nd e f\ng h\n")
	docs, _, err = readCorpus(f)
	if err != nil || len(docs) != 3 {
		t.Fatalf("plain file: %d documents (%v), want 3", len(docs), err)
	}
	if _, _, err := readCorpus(filepath.Join(dir, "missing.txt")); err == nil {
		t.Error("missing corpus accepted")
	}
	empty := filepath.Join(dir, "empty.txt")
	writeFile(t, empty, "\n\n")
	if _, _, err := readCorpus(empty); err == nil || !strings.Contains(err.Error(), "no text") {
		t.Errorf("empty corpus: %v", err)
	}
}

// TestReadCorpusGLUENeverDev builds a GLUE directory whose dev files hold
// sentences found nowhere else and checks that they never reach the corpus,
// while both text fields of train and test rows do.
func TestReadCorpusGLUENeverDev(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "RTE", "train.tsv"), "index\tsentence1\tsentence2\tlabel\n0\tRTE train premise.\tRTE train hypothesis.\tentailment\n")
	writeFile(t, filepath.Join(dir, "RTE", "dev.tsv"), "index\tsentence1\tsentence2\tlabel\n0\tDEV premise.\tDEV hypothesis.\tentailment\n")
	writeFile(t, filepath.Join(dir, "RTE", "test.tsv"), "index\tsentence1\tsentence2\n0\tRTE test premise.\tRTE test hypothesis.\n")
	writeFile(t, filepath.Join(dir, "SST-2", "train.tsv"), "sentence\tlabel\nsst train one\t1\nRTE test premise.\t0\n")
	writeFile(t, filepath.Join(dir, "SST-2", "dev.tsv"), "sentence\tlabel\nDEV sst sentence\t1\n")
	for _, spec := range []string{"glue:" + dir, dir} {
		docs, info, err := readCorpus(spec)
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for _, d := range docs {
			all = append(all, d...)
		}
		text := strings.Join(all, "\n")
		if strings.Contains(text, "DEV") {
			t.Fatalf("%s: dev sentences in the corpus:\n%s", spec, text)
		}
		for _, s := range []string{"RTE train premise.", "RTE train hypothesis.", "RTE test premise.", "RTE test hypothesis.", "sst train one"} {
			if !strings.Contains(text, s) {
				t.Errorf("%s: %q missing from the corpus", spec, s)
			}
		}
		if info.Kind != "glue" || info.Duplicates != 1 || len(all) != 5 || len(info.Sources) != 3 {
			t.Errorf("%s: info %+v with %d lines, want glue, 1 duplicate, 5 lines, 3 sources", spec, info, len(all))
		}
		for _, src := range info.Sources {
			if strings.Contains(src, "dev") {
				t.Errorf("dev source %s", src)
			}
		}
	}
}

func TestSplitHeldOut(t *testing.T) {
	var docs []document
	for i := range 1000 {
		docs = append(docs, document{strings.Repeat("x", i+1)})
	}
	train, held, err := splitHeldOut(docs, DefaultHoldout(len(docs)), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 100 || len(train) != 900 {
		t.Fatalf("split %d/%d, want 900/100 (min(100, 10%%))", len(train), len(held))
	}
	seen := map[string]bool{}
	for _, d := range append(append([]document{}, train...), held...) {
		if seen[d[0]] {
			t.Fatal("document in both parts")
		}
		seen[d[0]] = true
	}
	_, held2, _ := splitHeldOut(docs, 100, 1)
	for i := range held {
		if held[i][0] != held2[i][0] {
			t.Fatal("held-out split not reproducible")
		}
	}
	for _, tc := range []struct{ documents, want int }{{20000, 200}, {1000, 100}, {500, 50}, {5, 1}, {1, 1}} {
		if got := DefaultHoldout(tc.documents); got != tc.want {
			t.Errorf("default slice of %d documents: %d, want %d", tc.documents, got, tc.want)
		}
	}
	if _, h, _ := splitHeldOut(docs[:5], DefaultHoldout(5), 1); len(h) != 1 {
		t.Errorf("default slice of 5 documents: %d, want 1", len(h))
	}
	if _, _, err := splitHeldOut(docs[:3], 3, 1); err == nil {
		t.Error("held-out slice leaving no training data accepted")
	}
	// 0 (and any n < 1) is an error, no longer "the default".
	for _, n := range []int{0, -1} {
		if _, _, err := splitHeldOut(docs, n, 1); err == nil || !strings.Contains(err.Error(), "need at least 1") {
			t.Errorf("SplitHeldOut(n = %d): %v, want an error", n, err)
		}
	}
}

func TestBuildSequences(t *testing.T) {
	tok := loadVocab(t)
	docs := []document{
		{"Unbelievably, dogs barked.", "The cat sat on the mat."},
		{strings.Repeat("word ", 70)}, // longer than the budget: cut
		{"A short one.", "And another short sentence here."},
	}
	total := 0
	for _, d := range docs {
		for _, l := range d {
			e, _ := tok.Encode(l, "", 0)
			total += e.Len() - 2
		}
	}
	for _, pack := range []bool{true, false} {
		seqs, err := buildSequences(tok, docs, 32, pack, rand.New(rand.NewPCG(1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range seqs {
			if len(s.IDs) > 32 || len(s.IDs) != len(s.TypeIDs) || len(s.IDs) != len(s.WordIDs) {
				t.Fatalf("pack=%v: sequence of %d ids, %d types, %d words", pack, len(s.IDs), len(s.TypeIDs), len(s.WordIDs))
			}
			if s.IDs[0] != int32(tok.CLSID()) || s.IDs[len(s.IDs)-1] != int32(tok.SEPID()) {
				t.Fatalf("pack=%v: sequence not [CLS] ... [SEP]: %v", pack, s.IDs)
			}
			seps := 0
			for j, id := range s.IDs {
				switch {
				case id == int32(tok.SEPID()):
					seps++
					if s.WordIDs[j] != -1 {
						t.Fatal("special with a word id")
					}
				case id != int32(tok.CLSID()):
					n++
					if s.WordIDs[j] < 0 {
						t.Fatal("token without word id")
					}
					// type 1 exactly after the first [SEP]
					if want := int32(min(seps, 1)); s.TypeIDs[j] != want {
						t.Fatalf("token %d type %d, want %d", j, s.TypeIDs[j], want)
					}
				}
			}
			if !pack && seps != 1 {
				t.Fatalf("unpacked sequence with %d [SEP]", seps)
			}
		}
		if n != total {
			t.Errorf("pack=%v: %d tokens in sequences, corpus has %d", pack, n, total)
		}
		if pack && len(seqs) >= 6 {
			t.Errorf("packing gave %d sequences", len(seqs))
		}
		// "Unbelievably" is several pieces sharing one word id
		s := seqs[0]
		pieces := map[int]int{}
		for _, w := range s.WordIDs {
			if w >= 0 {
				pieces[w]++
			}
		}
		multi := false
		for _, c := range pieces {
			multi = multi || c > 1
		}
		if !multi {
			t.Errorf("pack=%v: no multi-piece word in %v", pack, s.WordIDs)
		}
	}
}
