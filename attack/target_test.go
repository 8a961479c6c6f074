package attack

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/tokenize"
)

// The synthetic corpus of the attack tests: "the" and 2 to 5 content words, then with probability 1/2
// each a digit and a given name (so that both attribute classes are common); "the" is the majority
// token.
var (
	contentWords = strings.Fields("good great fine bad awful poor movie is very a plot and acting story film dull")
	digits       = []string{"7", "3"}
	names        = []string{"john", "mary"}
)

// synthVocab writes the WordPiece vocabulary of the synthetic corpus into dir.
func synthVocab(t testing.TB, dir string) string {
	t.Helper()
	words := append(append(append([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "she"}, contentWords...), digits...), names...)
	path := filepath.Join(dir, "vocab.txt")
	if err := os.WriteFile(path, []byte(strings.Join(words, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// synthTexts draws n texts of the synthetic corpus from rng.
func synthTexts(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		w := []string{"the"}
		for range 2 + rng.IntN(4) {
			w = append(w, contentWords[rng.IntN(len(contentWords))])
		}
		if rng.IntN(2) == 0 {
			w = append(w, digits[rng.IntN(len(digits))])
		}
		if rng.IntN(2) == 0 {
			w = append(w, names[rng.IntN(len(names))])
		}
		out[i] = strings.Join(w, " ")
	}
	return out
}

// synthCorpus is public texts and victim texts of the synthetic corpus.
func synthCorpus(public, victims int) *Corpus {
	rng := rand.New(rand.NewPCG(7, 8))
	return &Corpus{Public: synthTexts(rng, public), Victims: synthTexts(rng, victims)}
}

// tinyTarget builds (untrained: the encoder is the scratch initialisation, which already maps each
// token to its own direction) a target of variant with hidden size 16, one layer, max-seq-len 8
// (its release length for gaussian), radius cmu (C_mu, or the gaussian C) and, for gaussian, noise
// variance noiseVar (the prior variance; 1 by default).
func tinyTarget(t testing.TB, variant string, cmu, noiseVar float64) *Target {
	t.Helper()
	dir := t.TempDir()
	vocab := synthVocab(t, dir)
	enc, err := encoder.Preset("bert-tiny")
	if err != nil {
		t.Fatal(err)
	}
	enc.HiddenSize, enc.NumHiddenLayers, enc.NumAttentionHeads, enc.IntermediateSize, enc.MaxPositionEmbeddings = 16, 1, 2, 32, 16
	o := model.DefaultOptions()
	o.Task, o.GlueDir, o.Encoder, o.Vocab, o.Variant, o.ScratchConfig = "sst2", dir, "scratch:bert-tiny", vocab, variant, &enc
	o.EvalBatchSize, o.MaxSeqLen, o.CMu, o.Out = 32, 8, cmu, filepath.Join(dir, "model")
	o.HandSetClipping = nvib.Calibratable(variant) // C_mu as given, no privacy target
	o.Resolve()
	c, err := model.Check(o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := model.Build(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := b.Model.Gauss; g != nil {
		g.Var, b.Model.Cfg.Prior.Var = noiseVar, noiseVar
	}
	target, err := NewTarget(b)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// writeGlue writes an SST-2 directory with the given train and dev sentences (label 0) and returns it.
func writeGlue(t *testing.T, train, dev []string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "glue")
	if err := os.MkdirAll(filepath.Join(dir, "SST-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	for split, texts := range map[string][]string{"train": train, "dev": dev} {
		var b strings.Builder
		b.WriteString("sentence\tlabel\n")
		for _, s := range texts {
			fmt.Fprintf(&b, "%s\t0\n", s)
		}
		if err := os.WriteFile(filepath.Join(dir, "SST-2", split+".tsv"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// LoadCorpus reads the first text of the first K rows of the train split as public texts and of the
// dev split as victims (0: all), with their paths; a text that cannot be released is an error naming
// file:line; bad options are *option.Error naming the option.
func TestLoadCorpus(t *testing.T) {
	task, err := glue.LookupTask("sst2")
	if err != nil {
		t.Fatal(err)
	}
	dir := writeGlue(t, []string{"a b", "c d", "e f"}, []string{"x", "y"})
	for _, tc := range []struct {
		public, victim int
		want           [2]int
	}{{0, 0, [2]int{3, 2}}, {2, 1, [2]int{2, 1}}, {5, 0, [2]int{3, 2}}} {
		c, err := LoadCorpus(task, CorpusOptions{GlueDir: dir, PublicLimit: tc.public, VictimLimit: tc.victim})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Public) != tc.want[0] || len(c.Victims) != tc.want[1] || c.Public[0] != "a b" || c.Victims[0] != "x" {
			t.Errorf("limits %d, %d: %q / %q", tc.public, tc.victim, c.Public, c.Victims)
		}
		if c.PublicPath != filepath.Join(dir, "SST-2", "train.tsv") || c.VictimPath != filepath.Join(dir, "SST-2", "dev.tsv") {
			t.Errorf("paths %s, %s", c.PublicPath, c.VictimPath)
		}
	}
	blank := writeGlue(t, []string{"a b", "   "}, []string{"x"})
	if _, err := LoadCorpus(task, CorpusOptions{GlueDir: blank}); err == nil || !strings.Contains(err.Error(), "train.tsv:3: blank text") {
		t.Errorf("blank text: %v", err)
	}
	for _, tc := range []struct {
		o    CorpusOptions
		name string
	}{{CorpusOptions{}, "glue_dir"}, {CorpusOptions{GlueDir: dir, PublicLimit: -1}, "public_limit"}, {CorpusOptions{GlueDir: dir, VictimLimit: -2}, "victim_limit"}} {
		var oe *option.Error
		if _, err := LoadCorpus(task, tc.o); !errors.As(err, &oe) || oe.Option != tc.name {
			t.Errorf("%+v: error %v, want option %s", tc.o, err, tc.name)
		}
	}
	if _, err := LoadCorpus(task, CorpusOptions{GlueDir: t.TempDir()}); err == nil {
		t.Error("a GLUE directory without the task was read")
	}
}

// CheckVocabulary accepts the model's vocabulary and names the first id of another.
func TestCheckVocabulary(t *testing.T) {
	target := tinyTarget(t, nvib.ModelGaussian, 1, 1)
	dir := t.TempDir()
	same, err := tokenize.Load(synthVocab(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := target.CheckVocabulary(same); err != nil {
		t.Errorf("the model's vocabulary: %v", err)
	}
	swapped := filepath.Join(t.TempDir(), "vocab.txt")
	if err := os.WriteFile(swapped, []byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nshe\nthe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other, err := tokenize.Load(swapped)
	if err != nil {
		t.Fatal(err)
	}
	if err := target.CheckVocabulary(other); err == nil || !strings.Contains(err.Error(), "tokens") {
		t.Errorf("a smaller vocabulary: %v", err)
	}
	words := append(append(append([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "she", "the"}, contentWords...), digits...), names...)
	if err := os.WriteFile(swapped, []byte(strings.Join(words, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if other, err = tokenize.Load(swapped); err != nil {
		t.Fatal(err)
	}
	if err := target.CheckVocabulary(other); err == nil || !strings.Contains(err.Error(), `id 5 is "she", the model's is "the"`) {
		t.Errorf("a permuted vocabulary: %v", err)
	}
}
