package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
)

// The progress bar goes only to a terminal: with a buffer, a regular file or
// --no-progress as stderr, newProgress draws nothing there (progress becomes
// slog lines), so logs and CI output are not filled with redraws.
func TestProgressBarOnlyToTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	for _, tc := range []struct {
		name       string
		stderr     io.Writer
		noProgress bool
	}{
		{"buffer", &buf, false},
		{"regular file", f, false},
		{"no-progress", f, true},
	} {
		cmd := &cobra.Command{}
		cmd.SetErr(tc.stderr)
		report := newProgress(cmd, tc.noProgress)
		for i := int64(0); i <= 3; i++ {
			report(progress.Event{Stage: "train", Unit: "steps", Done: i, Total: 3, Loss: 0.5})
		}
	}
	if st, err := f.Stat(); err != nil || st.Size() != 0 || buf.Len() != 0 {
		t.Errorf("a bar was drawn on a non-terminal: file %v bytes (%v), buffer %q", st.Size(), err, buf.String())
	}
	// A terminal, where the machine has one, does get the bar.
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		t.Logf("no terminal to check the positive case: %v", err)
		return
	}
	defer tty.Close()
	cmd := &cobra.Command{}
	cmd.SetErr(tty)
	newProgress(cmd, false)(progress.Event{Stage: "train", Unit: "steps", Done: 1, Total: 3, Loss: 0.5})
}

// TestParseInto: a list's error names its flag; an optional list left
// empty keeps the value.
func TestParseInto(t *testing.T) {
	if got, err := parseFloatList("--lambdas", " 1e-3, 1e-2,,1 "); err != nil || !slices.Equal(got, []float64{1e-3, 1e-2, 1}) {
		t.Errorf("floats: %v, %v", got, err)
	}
	seeds := []uint64{7}
	if err := parseInto(&seeds, "--c-mu-seeds", "", true, option.ParseUints); err != nil || !slices.Equal(seeds, []uint64{7}) {
		t.Errorf("optional, not given: %v, %v", seeds, err)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{parseInto(&seeds, "--seeds", "1,-2", false, option.ParseUints), `--seeds: "-2" is not a non-negative integer`},
		{func() error { _, err := parseFloatList("--bdp-orders", "0.1,x"); return err }(), `--bdp-orders: "x" is not a number`},
		{parseInto(new([]string), "--tasks", " , ", false, option.ParseList), "--tasks: empty list"},
		{parseInto(new([]string), "--tasks", "", false, option.ParseList), "--tasks: empty list"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("error %v, want %q", tc.err, tc.want)
		}
	}
}

// TestTrainFlagsBindDefaults: the train flags hold model.DefaultOptions()
// (so --help shows the real defaults; the options derived from others show
// auto), and every option a user sets has a flag, the one OptionError
// names.
func TestTrainFlagsBindDefaults(t *testing.T) {
	t.Setenv("NVDP_GLUE_DIR", "")
	t.Setenv("NVDP_VOCAB", "")
	cmd := newTrainCmd()
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	fs := cmd.Flags()
	for _, name := range []string{"epochs", "batch-size", "lambda", "patience", "grad-clip", "c-mu", "lr", "dropout", "delta", "order", "clip-order"} {
		if fs.Lookup(name) == nil {
			t.Fatalf("no --%s", name)
		}
	}
	for flag, def := range map[string]string{"epochs": "10", "batch-size": "32", "eval-batch-size": "16", "patience": "3", "grad-clip": "1",
		"lambda": "0.01", "warmup-ratio": "0.06", "checkpoint-every": "500", "c-mu": "auto", "c-alpha-max": "auto", "c-alpha-min": "auto",
		"logvar-margin": "auto", "lr": "auto", "dropout": "auto", "clip-order": "1.1", "delta": "1e-05", "order": "1.1", "releases": "1",
		"variant": "nvdp-clipped", "mode": "principled", "kl-schedule": "linear-decay", "max-seq-len": "128", "seed": "1", "latent-dim": "auto"} {
		if got := fs.Lookup(flag).DefValue; got != def {
			t.Errorf("--%s default %q, want %q", flag, got, def)
		}
	}
	var help bytes.Buffer
	cmd.SetOut(&help)
	_ = cmd.Usage()
	for _, s := range []string{"--epochs int", "(default 10)", "--c-mu float", "(default auto)", "MRPC 2, QNLI 7, RTE 6, SST-2 2, STS-B 10"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("--help lacks %q", s)
		}
	}
	// every option the user sets is a flag
	rt := reflect.TypeOf(model.Options{})
	notFlags := map[string]bool{"options_version": true, "fix_c_mu": true, "fix_logvar_margin": true, "fix_c_alpha_min": true,
		"calibrated": true, "scratch_config": true, "": true, "-": true}
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if notFlags[name] {
			continue
		}
		for _, c := range []*cobra.Command{newTrainCmd(), newRunCmd()} {
			if c.Flags().Lookup(optionFlag(name)) == nil {
				t.Errorf("option %s: no --%s on nvdp %s", name, optionFlag(name), c.Name())
			}
		}
	}
}

// TestCommandsCheckBeforeWork: bad flags of train, run and eval fail before
// any work, naming the flag, and write nothing (an explicit 0 is an error
// where it means nothing, never the default).
func TestCommandsCheckBeforeWork(t *testing.T) {
	glueDir, vocab := synthSST2(t, 16)
	common := []string{"--task", "sst2", "--glue-dir", glueDir, "--vocab", vocab, "--max-seq-len", "8", "--epochs", "1", "--batch-size", "4", "--hand-set-clipping"}
	for _, tc := range []struct {
		cmd  func() *cobra.Command
		args []string
		want string
	}{
		{newTrainCmd, []string{"--epochs", "0"}, "--epochs 0: must be >= 1"},
		{newTrainCmd, []string{"--batch-size", "0"}, "--batch-size 0: must be >= 1"},
		{newTrainCmd, []string{"--grad-clip", "NaN"}, "--grad-clip NaN: must be a finite number"},
		{newTrainCmd, []string{"--c-mu", "NaN"}, `invalid argument "NaN" for "--c-mu" flag`},
		{newTrainCmd, []string{"--lr", "0"}, "--lr 0: must be > 0"},
		{newTrainCmd, []string{"--patience", "-1"}, "--patience -1: must be >= 0 (0: no early stopping)"},
		{newTrainCmd, []string{"--glue-dir", "/nonexistent"}, `--glue-dir "/nonexistent": not a directory`},
		{newTrainCmd, []string{"--vocab", "/nonexistent/vocab.txt"}, `--vocab "/nonexistent/vocab.txt"`},
		{newTrainCmd, []string{"--encoder", "bert"}, `--encoder "bert": want scratch:PRESET`},
		{newTrainCmd, []string{"--latent-dim", "0"}, "--latent-dim 0: the release's width P must be >= 1"},
		{newTrainCmd, []string{"--latent-dim", "-32"}, "--latent-dim -32: the release's width P must be >= 1"},
		{newTrainCmd, []string{"--latent-dim", "33"}, "--latent-dim 33: not divisible by the NVDP block's 2 attention heads"},
		{newTrainCmd, []string{"--latent-dim", "64", "--mode", "reference"}, "--latent-dim 64: reference mode reproduces the released code"},
		{newTrainCmd, []string{"--latent-dim", "1.5"}, `invalid argument "1.5" for "--latent-dim" flag`},
		{newRunCmd, []string{"--latent-dim", "0"}, "--latent-dim 0"},
		{newRunCmd, []string{"--pairs", "-5"}, "pairs -5"},
		{newRunCmd, []string{"--glue-dir", "/nonexistent"}, `--glue-dir "/nonexistent": not a directory`},
		{newRunCmd, []string{"--audit-split", "test"}, "test.tsv does not exist"},
		{newRunCmd, []string{"--audit-limit", "-2"}, "--audit-limit -2"},
		{newRunCmd, []string{"--epochs", "0"}, "--epochs 0"},
	} {
		out := filepath.Join(t.TempDir(), "run")
		args := append(append(append([]string{}, common...), tc.args...), "--out", out)
		_, err := runCmd(tc.cmd(), args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
		if _, serr := os.Stat(out); !os.IsNotExist(serr) {
			t.Errorf("%v: %s was created (%v)", tc.args, out, serr)
		}
	}

	// eval: a tiny model, then bad flags fail before anything is written
	modelDir := tinyModel(t, glueDir, vocab, model.DefaultOptions().Variant)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--batch-size", "-1"}, "--batch-size -1: must be >= 1"},
		{[]string{"--batch-size", "0"}, "--batch-size 0: must be >= 1"},
		{[]string{"--max-seq-len", "2"}, "--max-seq-len 2: must be in [3, 16]"},
		{[]string{"--limit", "-1"}, "--limit -1"},
		{[]string{"--split", "validation2"}, `--split "validation2"`},
		{[]string{"--glue-dir", "/nonexistent"}, "/nonexistent"},
	} {
		out := filepath.Join(t.TempDir(), "eval")
		_, err := runCmd(newEvalCmd(), append([]string{"--model", modelDir, "--out", out}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("eval %v: error %v, want %q", tc.args, err, tc.want)
		}
		if _, serr := os.Stat(out); !os.IsNotExist(serr) {
			t.Errorf("eval %v: %s was created (%v)", tc.args, out, serr)
		}
	}
	if _, err := runCmd(newEvalCmd(), "--model", modelDir, "--out", filepath.Join(t.TempDir(), "eval"), "--json"); err != nil {
		t.Errorf("eval with the model's defaults: %v", err)
	}
}
