package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/spf13/cobra"
)

// attackWords are the words of the synthetic SST-2 of the attack commands' tests.
var attackWords = strings.Fields("the good great bad awful movie is very plot 7 3 john mary")

// synthAttackSST2 writes an SST-2 directory of n train and n dev rows ("the" and three words, the
// last with probability 1/2 a digit, with probability 1/2 a name; label: a positive word occurs)
// and its WordPiece vocabulary.
func synthAttackSST2(t *testing.T, n int) (glueDir, vocab string) {
	t.Helper()
	dir := t.TempDir()
	vocab = filepath.Join(dir, "vocab.txt")
	if err := os.WriteFile(vocab, []byte(strings.Join(append([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}, attackWords...), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	glueDir = filepath.Join(dir, "glue")
	if err := os.MkdirAll(filepath.Join(glueDir, "SST-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, split := range []string{"train", "dev"} {
		var b strings.Builder
		b.WriteString("sentence\tlabel\n")
		for range n {
			w := []string{"the", attackWords[1+rng.IntN(8)], attackWords[1+rng.IntN(8)], attackWords[9+rng.IntN(2)]}
			if rng.IntN(2) == 0 {
				w[3] = attackWords[11+rng.IntN(2)]
			}
			label := 0
			if strings.Contains(strings.Join(w, " "), "good") || strings.Contains(strings.Join(w, " "), "great") {
				label = 1
			}
			fmt.Fprintf(&b, "%s\t%d\n", strings.Join(w, " "), label)
		}
		if err := os.WriteFile(filepath.Join(glueDir, "SST-2", split+".tsv"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return glueDir, vocab
}

// attackJSON runs an attack command with --json, decodes its report into v
// and returns the file the JSON is saved in (attack_<command>.json).
func attackJSON(t *testing.T, v any, args ...string) (path string) {
	t.Helper()
	out, err := runCmd(newAttackCmdTree(), append(args, "--json", "--no-progress")...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	js := []byte(out[strings.Index(out, "{"):])
	if err := json.Unmarshal(js, v); err != nil {
		t.Fatalf("%v --json: %v\n%s", args, err, out)
	}
	path = filepath.Join(t.TempDir(), "attack_"+args[0]+".json")
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// newAttackCmdTree is a fresh `attack` command with its subcommands.
func newAttackCmdTree() *cobra.Command { return newAttackCmd() }

// `nvdp attack invert` end to end on a model trained in the test: the JSON report has the model, its
// certified epsilon, the corpus read from the model's GLUE directory with the limits, the chance row
// and each decoder on the release and on the encoder output; the table shows them; --vocab takes the
// model's vocabulary and refuses another.
func TestAttackInvertEndToEnd(t *testing.T) {
	glueDir, vocab := synthAttackSST2(t, 48)
	model := tinyModel(t, glueDir, vocab, nvib.ModelNVDPClipped)
	var r attack.InvertReport
	path := attackJSON(t, &r, "invert", "--model", model, "--public-limit", "40", "--victim-limit", "0", "--epochs", "2", "--bootstrap", "20", "--vocab", vocab)
	if _, err := attack.ReadInvertReport(path); err != nil { // what nvdp report --attacks reads
		t.Error(err)
	}
	if r.Model.Dir != model || r.PublicTexts != 40 || r.VictimTexts != 48 || r.Corpus.VictimPath != filepath.Join(glueDir, "SST-2", "dev.tsv") ||
		!(r.Certified.Epsilon > 0) || r.PublicTokens != 4*40 || r.VictimTokens != 4*48 || r.Options.Epochs != 2 {
		t.Errorf("report %+v", r)
	}
	var got []string
	for _, res := range r.Results {
		got = append(got, res.Features+" "+res.Decoder)
	}
	if want := "none majority,release nn,release linear,release mlp,encoder nn,encoder linear,encoder mlp"; strings.Join(got, ",") != want {
		t.Errorf("results %q, want %s", got, want)
	}
	out, err := runCmd(newAttackCmdTree(), "invert", "--model", model, "--decoder", "nn", "--bootstrap", "10", "--no-progress")
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"certified epsilon", "features decoder accuracy", "release nn", "encoder nn", "release nn: \"the"} {
		if !strings.Contains(words, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	other := filepath.Join(t.TempDir(), "vocab.txt")
	if err := os.WriteFile(other, []byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(newAttackCmdTree(), "invert", "--model", model, "--vocab", other); err == nil || !strings.Contains(err.Error(), "is not the model's vocabulary") {
		t.Errorf("another vocabulary: %v", err)
	}
}

// Bad flags are errors naming the flag, before any work; a model that cannot be attacked names
// --model.
func TestAttackFlagErrors(t *testing.T) {
	glueDir, vocab := synthAttackSST2(t, 8)
	model := tinyModel(t, glueDir, vocab, nvib.ModelGaussian)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"invert", "--model", model, "--decoder", "knn"}, `--decoder "knn": want nn, linear, mlp or all`},
		{[]string{"invert", "--model", model, "--epochs", "0"}, "--epochs 0: must be >= 1"},
		{[]string{"invert", "--model", model, "--releases-per-text", "0"}, "--releases-per-text 0: must be >= 1"},
		{[]string{"invert", "--model", model, "--public-limit", "-1"}, "--public-limit -1: must be >= 0 (0: all)"},
		{[]string{"invert", "--model", model, "--confidence", "1.5"}, "--confidence 1.5: must be in (0, 1)"},
		{[]string{"invert", "--model", model, "--glue-dir", t.TempDir()}, "train.tsv"},
		{[]string{"invert", "--model", filepath.Join(t.TempDir(), "none")}, "--model: "},
		{[]string{"invert"}, `required flag(s) "model" not set`},
		{[]string{"attribute", "--model", model, "--property", "age"}, `--property "age": unknown property "age"`},
		{[]string{"attribute", "--model", model, "--classifier", "svm"}, `--classifier "svm": want linear, mlp or all`},
		{[]string{"attribute", "--model", model, "--mlp-hidden", "0"}, "--mlp-hidden 0: must be >= 1"},
		{[]string{"attribute", "--model", model, "--victim-limit", "-3"}, "--victim-limit -3: must be >= 0 (0: all)"},
		{[]string{"attribute", "--model", model, "--property", "female-pronoun"}, "both classes are needed"},
		// what cannot fit in memory, before any release (they were Go out-of-memory crashes)
		{[]string{"invert", "--model", model, "--releases-per-text", "1000000000"}, "--releases-per-text 1000000000: a batch of"},
		{[]string{"invert", "--model", model, "--decoder", "mlp", "--mlp-hidden", "10000000000"}, "--mlp-hidden 10000000000: the MLP attacker"},
		{[]string{"attribute", "--model", model, "--releases-per-text", "1000000000"}, "lower --releases-per-text"},
		{[]string{"distinguish", "--model", model, "--releases", "1000000000000"}, "--releases 1000000000000: the scores and ROC"},
	} {
		if _, err := runCmd(newAttackCmdTree(), tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestBenchRefusesWhatCannotFit: `nvdp bench --batch 100000000` is an
// error naming --batch before anything is allocated (it was a Go
// out-of-memory crash).
func TestBenchRefusesWhatCannotFit(t *testing.T) {
	_, err := runCmd(newBenchCmd(), "--batch", "100000000")
	if err == nil || !strings.Contains(err.Error(), "--batch 100000000: a training step of bert-tiny on 100000000 x 128 tokens") || !strings.Contains(err.Error(), "lower --batch or --seq") {
		t.Errorf("error %v, want --batch named", err)
	}
}
