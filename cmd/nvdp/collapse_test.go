package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/train"
)

// imbalancedSST2 writes a synthetic SST-2 (train, dev) whose label is the
// sentiment word each sentence contains, with a 75/25 split of the labels
// (3 in 4 positive, shuffled), and a WordPiece vocab.txt. Returns the GLUE
// directory, the vocab file and the dev split's majority-class share, counted
// from the labels as written.
func imbalancedSST2(t *testing.T, nTrain, nDev int) (glueDir, vocab string, devMajority float64) {
	t.Helper()
	dir := t.TempDir()
	pos, neg := []string{"good", "great", "fine", "lovely"}, []string{"bad", "awful", "poor", "dull"}
	filler := []string{"the", "movie", "is", "very", "a", "plot", "and", "acting"}
	words := append([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}, append(append(pos, neg...), filler...)...)
	vocab = filepath.Join(dir, "vocab.txt")
	if err := os.WriteFile(vocab, []byte(strings.Join(words, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(13, 7))
	glueDir = filepath.Join(dir, "glue")
	if err := os.MkdirAll(filepath.Join(glueDir, "SST-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sp := range []struct {
		name string
		n    int
	}{{"train", nTrain}, {"dev", nDev}} {
		labels := make([]int, sp.n)
		for i := range labels {
			if i%4 != 0 {
				labels[i] = 1
			}
		}
		rng.Shuffle(len(labels), func(i, j int) { labels[i], labels[j] = labels[j], labels[i] })
		var b strings.Builder
		b.WriteString("sentence\tlabel\n")
		count := [2]int{}
		for _, l := range labels {
			n := 2 + rng.IntN(5)
			w := make([]string, n)
			for i := range w {
				w[i] = filler[rng.IntN(len(filler))]
			}
			src := neg
			if l == 1 {
				src = pos
			}
			w[rng.IntN(n)] = src[rng.IntN(len(src))]
			fmt.Fprintf(&b, "%s\t%d\n", strings.Join(w, " "), l)
			count[l]++
		}
		if err := os.WriteFile(filepath.Join(glueDir, "SST-2", sp.name+".tsv"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if sp.name == "dev" {
			devMajority = float64(max(count[0], count[1])) / float64(sp.n)
		}
	}
	return glueDir, vocab, devMajority
}

// tinyEncoderDir saves a randomly initialised BERT (hidden 32, 1 layer, 2
// heads, the vocabulary's size) with its vocab.txt as an HF directory, for
// --encoder hf:DIR: the CLI has no flag for a scratch configuration smaller
// than bert-tiny.
func tinyEncoderDir(t *testing.T, vocab string) string {
	t.Helper()
	cfg, err := encoder.Preset("bert-tiny")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(vocab)
	if err != nil {
		t.Fatal(err)
	}
	cfg.VocabSize = len(strings.Fields(string(raw)))
	cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize, cfg.MaxPositionEmbeddings = 32, 1, 2, 64, 16
	e, err := encoder.New(cfg, rand.New(rand.NewPCG(5, 6)))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "enc")
	if err := encoder.Save(dir, e, vocab); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunFailOnCollapse runs `nvdp run --fail-on-collapse` (the root command,
// as the main job does) twice on the same synthetic SST-2 with imbalanced
// labels (75/25; the label is a sentiment word) and a tiny randomly
// initialised encoder (hidden 32, 1 layer, given as hf:DIR), 8 epochs:
//
//   - a gaussian release whose token radius C is 1e-6: the release is pure
//     noise, every pair of dev releases is within 0.01 nats, the classifier can
//     do no better than the majority class. The command fails (main exits
//     non-zero) with the collapse reason, after writing report.json, whose
//     collapse block says collapsed, at chance (chance = the dev majority
//     share, counted here) and posterior on prior, with privacy.rd_max < 0.01;
//   - a gaussian release with C = 8: the sentiment word reaches the
//     classifier; the command succeeds and report.json says not collapsed,
//     the accuracy above chance (1.0 here), rd_max above 0.01 nats.
func TestRunFailOnCollapse(t *testing.T) {
	glueDir, vocab, majority := imbalancedSST2(t, 256, 32)
	enc := "hf:" + tinyEncoderDir(t, vocab)
	if majority != 0.75 {
		t.Fatalf("dev majority share %v, want 0.75", majority)
	}
	// PersistentPreRunE replaces the default logger and sets the GC target:
	// restore both for the other tests of the package.
	prevLog, prevGC := slog.Default(), debug.SetGCPercent(100)
	debug.SetGCPercent(prevGC)
	t.Cleanup(func() {
		slog.SetDefault(prevLog)
		debug.SetGCPercent(prevGC)
		rootCmd.SetArgs(nil)
		rootCmd.SetOut(nil)
		rootCmd.SetErr(nil)
	})
	for _, tc := range []struct {
		name      string
		cMu       string
		collapsed bool
	}{
		{"pure-noise release collapses", "1e-6", true},
		{"learnable release", "8", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			// Every flag that differs between the cases is given in both: the
			// run command's flags keep their values across executions of rootCmd.
			args := []string{"run", "--log-level", "error", "--no-progress", "--fail-on-collapse",
				"--task", "sst2", "--glue-dir", glueDir, "--encoder", enc, "--vocab", vocab,
				"--variant", "gaussian", "--c-mu", tc.cMu, "--hand-set-clipping", "--epochs", "8", "--batch-size", "16", "--eval-batch-size", "32",
				"--lr", "3e-3", "--max-seq-len", "8", "--patience", "0", "--seed", "1", "--eval-seed", "2", "--out", out}
			var stdout bytes.Buffer
			rootCmd.SetOut(&stdout)
			rootCmd.SetErr(&stdout)
			rootCmd.SetArgs(args)
			start := time.Now()
			err := rootCmd.ExecuteContext(context.Background())
			t.Logf("nvdp run --c-mu %s: %.2f s", tc.cMu, time.Since(start).Seconds())

			raw, rerr := os.ReadFile(filepath.Join(out, train.ReportFile))
			if rerr != nil {
				t.Fatalf("report.json not written (run error %v): %v", err, rerr)
			}
			var rep struct {
				Utility map[string]float64 `json:"utility"`
				Privacy *struct {
					RDMax *float64 `json:"rd_max"`
				} `json:"privacy"`
				Collapse *struct {
					Metric           string  `json:"metric"`
					Value            float64 `json:"value"`
					Chance           float64 `json:"chance"`
					AtChance         bool    `json:"at_chance"`
					PosteriorOnPrior bool    `json:"posterior_on_prior"`
					Collapsed        bool    `json:"collapsed"`
					Reason           string  `json:"reason"`
				} `json:"collapse"`
			}
			if err := json.Unmarshal(raw, &rep); err != nil {
				t.Fatal(err)
			}
			c := rep.Collapse
			if rep.Privacy == nil || rep.Privacy.RDMax == nil || c == nil {
				t.Fatalf("report.json: privacy %v collapse %v\n%s", rep.Privacy, c, raw)
			}
			rdMax, acc := *rep.Privacy.RDMax, rep.Utility["accuracy"]
			t.Logf("accuracy %.4f chance %.4f rd_max %.4g collapse %+v", acc, c.Chance, rdMax, *c)
			if c.Metric != "accuracy" || c.Value != acc || math.Abs(c.Chance-majority) > 1e-12 {
				t.Errorf("collapse: metric %q value %v (utility %v) chance %v, want accuracy and the dev majority share %v", c.Metric, c.Value, acc, c.Chance, majority)
			}
			if c.Collapsed != tc.collapsed {
				t.Errorf("collapsed %v, want %v", c.Collapsed, tc.collapsed)
			}
			if tc.collapsed {
				if err == nil || !strings.Contains(err.Error(), "collapsed") || !strings.Contains(err.Error(), "posterior sits on the prior") {
					t.Errorf("run error %v, want the collapse", err)
				}
				if !c.AtChance || !c.PosteriorOnPrior || !(acc <= majority+train.ChanceTolerance) {
					t.Errorf("at_chance %v posterior_on_prior %v accuracy %v (chance %v)", c.AtChance, c.PosteriorOnPrior, acc, majority)
				}
				if !(rdMax >= 0 && rdMax < train.PriorRDMax) {
					t.Errorf("rd_max %v, want below %v nats", rdMax, train.PriorRDMax)
				}
				if !strings.Contains(stdout.String(), "collapse check") || !strings.Contains(stdout.String(), "collapsed: accuracy") {
					t.Errorf("summary lacks the collapse row:\n%s", stdout.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("run error %v, want none", err)
			}
			if c.AtChance || c.PosteriorOnPrior || !(acc > majority+train.ChanceTolerance) || !(rdMax > train.PriorRDMax) {
				t.Errorf("at_chance %v posterior_on_prior %v accuracy %v rd_max %v: want learned", c.AtChance, c.PosteriorOnPrior, acc, rdMax)
			}
		})
	}
}
