package mlm

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/tokenize"
)

// document is a run of consecutive lines, or sentences, kept together: the
// unit of the held-out split.
type document []string

// CorpusInfo describes where a corpus came from.
type CorpusInfo struct {
	Kind       string   `json:"kind"` // "text" or "glue"
	Sources    []string `json:"sources"`
	Lines      int      `json:"lines"`      // non-empty lines read
	Duplicates int      `json:"duplicates"` // exact duplicate lines dropped
	Documents  int      `json:"documents"`
}

// GLUE splits that feed a corpus. dev is never read: its labels (and
// sentences) are what fine-tuning is evaluated on.
var glueSplits = []string{"train", "test"}

// readCorpus reads a pretraining corpus given by spec:
//
//	glue:DIR          a GLUE directory: the text fields of every task's train and
//	                  test split, never dev; each row, a sentence or a pair, is a document
//	DIR               a GLUE directory, detected when DIR/<TASK>/train.tsv or
//	                  test.tsv exists; else every *.txt file under DIR, sorted
//	FILE              a text file
//
// Text files hold one sentence or document per line, and blank lines separate
// documents, as in Google BERT's format; a file without blank lines has one
// document per line. Lines are trimmed. Exact duplicate lines are dropped,
// keeping the first occurrence, and so are documents left empty.
//
// It returns an error for a missing path, an unreadable file, a GLUE
// directory without any task split, or an empty corpus.
func readCorpus(spec string) ([]document, CorpusInfo, error) {
	var docs []document
	var info CorpusInfo
	var err error
	if dir, ok := strings.CutPrefix(spec, "glue:"); ok {
		docs, info, err = readGLUE(dir)
	} else {
		st, serr := os.Stat(spec)
		switch {
		case serr != nil:
			return nil, info, fmt.Errorf("corpus %s: %w", spec, serr)
		case st.IsDir() && isGLUEDir(spec):
			docs, info, err = readGLUE(spec)
		case st.IsDir():
			docs, info, err = readTextDir(spec)
		default:
			info.Kind = "text"
			docs, err = readTextFile(spec, &info)
		}
	}
	if err != nil {
		return nil, info, err
	}
	docs = dedupe(docs, &info)
	info.Documents = len(docs)
	if len(docs) == 0 {
		return nil, info, fmt.Errorf("corpus %s: no text", spec)
	}
	return docs, info, nil
}

func isGLUEDir(dir string) bool {
	for _, name := range glue.TaskNames() {
		t, err := glue.LookupTask(name)
		if err != nil {
			continue
		}
		for _, s := range glueSplits {
			if _, err := os.Stat(filepath.Join(dir, t.Dir, s+".tsv")); err == nil {
				return true
			}
		}
	}
	return false
}

func readGLUE(dir string) ([]document, CorpusInfo, error) {
	info := CorpusInfo{Kind: "glue"}
	var docs []document
	for _, name := range glue.TaskNames() {
		t, err := glue.LookupTask(name)
		if err != nil {
			return nil, info, err
		}
		for _, split := range glueSplits {
			ds, err := glue.Load(dir, t, split, glue.LoadOptions{})
			if errors.Is(err, glue.ErrMissingSplit) {
				slog.Info("corpus: GLUE split not found, skipped", "task", t.Name, "split", split)
				continue
			}
			if err != nil {
				return nil, info, fmt.Errorf("corpus: %w", err)
			}
			info.Sources = append(info.Sources, ds.Path)
			for _, ex := range ds.Examples {
				var d document
				for _, s := range []string{ex.TextA, ex.TextB} {
					if s = strings.TrimSpace(s); s != "" {
						d = append(d, s)
						info.Lines++
					}
				}
				if len(d) > 0 {
					docs = append(docs, d)
				}
			}
		}
	}
	if len(info.Sources) == 0 {
		return nil, info, fmt.Errorf("corpus %s: no GLUE train or test split found (expected <TASK>/{train,test}.tsv)", dir)
	}
	return docs, info, nil
}

func readTextDir(dir string) ([]document, CorpusInfo, error) {
	info := CorpusInfo{Kind: "text"}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".txt") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, info, fmt.Errorf("corpus %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, info, fmt.Errorf("corpus %s: no .txt files (and not a GLUE directory)", dir)
	}
	sort.Strings(files)
	var docs []document
	for _, f := range files {
		d, err := readTextFile(f, &info)
		if err != nil {
			return nil, info, err
		}
		docs = append(docs, d...)
	}
	return docs, info, nil
}

func readTextFile(path string, info *CorpusInfo) ([]document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	defer f.Close()
	info.Sources = append(info.Sources, path)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var blocks []document
	var cur document
	blank := false
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(sc.Text(), "\ufeff"))
		if line == "" {
			blank = true
			if len(cur) > 0 {
				blocks = append(blocks, cur)
				cur = nil
			}
			continue
		}
		info.Lines++
		cur = append(cur, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("corpus %s: %w", path, err)
	}
	if len(cur) > 0 {
		blocks = append(blocks, cur)
	}
	if !blank && len(blocks) == 1 {
		// One sentence or document per line.
		var docs []document
		for _, l := range blocks[0] {
			docs = append(docs, document{l})
		}
		return docs, nil
	}
	return blocks, nil
}

func dedupe(docs []document, info *CorpusInfo) []document {
	seen := make(map[string]bool)
	out := docs[:0]
	for _, d := range docs {
		var kept document
		for _, l := range d {
			if seen[l] {
				info.Duplicates++
				continue
			}
			seen[l] = true
			kept = append(kept, l)
		}
		if len(kept) > 0 {
			out = append(out, kept)
		}
	}
	return out
}

// splitHeldOut moves n documents out of docs, chosen uniformly with the
// stream rngstream.PretrainHeldOut of seed; both parts keep the corpus order.
// n must be >= 1 and leave at least one training document; [DefaultHoldout]
// of len(docs) is the default.
func splitHeldOut(docs []document, n int, seed uint64) (train, heldOut []document, err error) {
	if n < 1 {
		return nil, nil, fmt.Errorf("held-out slice of %d documents: need at least 1", n)
	}
	if n >= len(docs) {
		return nil, nil, fmt.Errorf("held-out slice of %d documents leaves none of the %d for training", n, len(docs))
	}
	rng := rngstream.PretrainHeldOut.Rand(seed, 0)
	out := make([]bool, len(docs))
	for _, i := range rng.Perm(len(docs))[:n] {
		out[i] = true
	}
	for i, d := range docs {
		if out[i] {
			heldOut = append(heldOut, d)
		} else {
			train = append(train, d)
		}
	}
	return train, heldOut, nil
}

// Sequence is one model input before masking: [CLS] A [SEP], optionally
// followed by B [SEP]. The token type is 0 for [CLS] A [SEP] and 1 for
// B [SEP]. For whole-word masking each token has a word id, unique within the
// sequence, and -1 for specials.
type Sequence struct {
	IDs     []int32
	TypeIDs []int32
	WordIDs []int
}

// piece is one tokenised line (no specials).
type piece struct {
	ids   []int32
	words []int
}

// tokenizeLines encodes every line (without specials), in parallel.
func tokenizeLines(tok tokenize.Tokenizer, lines []string) ([]piece, error) {
	out := make([]piece, len(lines))
	errs := make([]error, len(lines))
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(lines); i += workers {
				enc, err := tok.Encode(lines[i], "", 0)
				if err != nil {
					errs[i] = fmt.Errorf("corpus line %d: %w", i+1, err)
					continue
				}
				p := piece{}
				for j, id := range enc.IDs {
					if enc.WordIDs[j] < 0 {
						continue // [CLS], [SEP]
					}
					p.ids = append(p.ids, int32(id))
					p.words = append(p.words, enc.WordIDs[j])
				}
				out[i] = p
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// buildSequences tokenises docs and builds sequences of at most seq tokens.
//
// With pack, consecutive lines are packed greedily, across documents and in
// corpus order, until the next would not fit in seq-3 tokens. A pack of two
// or more lines is split at a line boundary drawn from rng into segments A
// and B, giving [CLS] A [SEP] B [SEP]: the sentence-pair input that
// fine-tuning uses, as in BERT §3.1 without the next-sentence label. A single
// line gives [CLS] A [SEP].
//
// Without pack every line is its own [CLS] A [SEP] sequence. Lines longer
// than the budget are cut into consecutive chunks, so no text is dropped.
func buildSequences(tok tokenize.Tokenizer, docs []document, seq int, pack bool, rng *rand.Rand) ([]Sequence, error) {
	if seq < MinSeq {
		return nil, fmt.Errorf("sequence length %d is too short (need >= %d)", seq, MinSeq)
	}
	var lines []string
	for _, d := range docs {
		lines = append(lines, d...)
	}
	pieces, err := tokenizeLines(tok, lines)
	if err != nil {
		return nil, err
	}
	budget := seq - 3
	if !pack {
		budget = seq - 2
	}
	cls, sep := int32(tok.CLSID()), int32(tok.SEPID())
	var out []Sequence
	for _, group := range groupUnits(chunkPieces(pieces, budget), budget, pack) {
		out = append(out, groupSequence(group, cls, sep, rng))
	}
	if len(out) == 0 {
		return nil, errors.New("corpus gives no tokens")
	}
	return out, nil
}

// chunkPieces cuts long lines into consecutive chunks of at most budget
// tokens.
func chunkPieces(pieces []piece, budget int) []piece {
	var units []piece
	for _, p := range pieces {
		for lo := 0; lo < len(p.ids); lo += budget {
			hi := min(lo+budget, len(p.ids))
			units = append(units, piece{p.ids[lo:hi], p.words[lo:hi]})
		}
	}
	return units
}

// groupUnits groups the non-empty units, in order, into the contents of
// one sequence each: with pack, greedily while they fit in budget tokens;
// without, one unit per group.
func groupUnits(units []piece, budget int, pack bool) [][]piece {
	var groups [][]piece
	var group []piece
	n := 0
	for _, u := range units {
		if len(u.ids) == 0 {
			continue
		}
		if !pack {
			groups = append(groups, []piece{u})
			continue
		}
		if n+len(u.ids) > budget && len(group) > 0 {
			groups = append(groups, group)
			group, n = nil, 0
		}
		group = append(group, u)
		n += len(u.ids)
	}
	if len(group) > 0 {
		groups = append(groups, group)
	}
	return groups
}

// groupSequence is the sequence of a group: [CLS] A [SEP] for one unit,
// else [CLS] A [SEP] B [SEP] split at a unit boundary drawn from rng; word
// ids run on across the group's units.
func groupSequence(group []piece, cls, sep int32, rng *rand.Rand) Sequence {
	split := len(group)
	if len(group) >= 2 {
		split = 1 + rng.IntN(len(group)-1)
	}
	s := Sequence{IDs: []int32{cls}, TypeIDs: []int32{0}, WordIDs: []int{-1}}
	word := 0
	for gi, p := range group {
		if gi == split {
			s.IDs, s.TypeIDs, s.WordIDs = append(s.IDs, sep), append(s.TypeIDs, 0), append(s.WordIDs, -1)
		}
		typ := int32(0)
		if gi >= split {
			typ = 1
		}
		base, last := word, -1
		for j, id := range p.ids {
			w := base + p.words[j] - p.words[0]
			if w > last {
				last = w
			}
			s.IDs, s.TypeIDs, s.WordIDs = append(s.IDs, id), append(s.TypeIDs, typ), append(s.WordIDs, w)
		}
		word = last + 1
	}
	lastType := int32(0)
	if split < len(group) {
		lastType = 1
	}
	s.IDs, s.TypeIDs, s.WordIDs = append(s.IDs, sep), append(s.TypeIDs, lastType), append(s.WordIDs, -1)
	return s
}
