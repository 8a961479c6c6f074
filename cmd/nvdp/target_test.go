package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/internal/lidtest"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/option"
	"github.com/spf13/cobra"
)

// TestTargetZeroIsAnError (issue 27, item 4): an explicit --target-epsilon
// or --target-rd of 0 (or below) is an error naming the flag in every
// command that takes a target (train, run, sweep; the text and the speech
// task), before any work: nothing is trained, no directory is made. Before,
// 0 meant "no target" and `nvdp train --target-epsilon 0` trained with the
// hand-set clipping (certified epsilon 11,162).
func TestTargetZeroIsAnError(t *testing.T) {
	glueDir, vocab := synthSST2(t, 16)
	text := []string{"--glue-dir", glueDir, "--vocab", vocab, "--max-seq-len", "8", "--epochs", "1", "--batch-size", "4", "--no-progress"}
	lidDir := t.TempDir()
	lidtest.WriteToneCorpus(t, lidDir, map[string]int{"train": 4, "dev": 3, "test": 3})
	lid := []string{"--lid-dir", lidDir, "--max-seconds", "0.5", "--epochs", "1", "--batch-size", "4", "--no-progress"}
	const reason = ": must be > 0 (leave it out for no target)"
	for _, tc := range []struct {
		name string
		cmd  func() *cobra.Command
		args []string
		want string // the whole error
	}{
		{"train epsilon 0", newTrainCmd, append([]string{"--task", "sst2", "--variant", "nvdp-clipped", "--target-epsilon", "0"}, text...), "--target-epsilon 0" + reason},
		{"train RD 0", newTrainCmd, append([]string{"--task", "sst2", "--variant", "nvdp-clipped", "--target-rd", "0"}, text...), "--target-rd 0" + reason},
		{"train RD 0 with its order", newTrainCmd, append([]string{"--task", "sst2", "--target-rd", "0", "--order", "2"}, text...), "--target-rd 0" + reason},
		{"train epsilon 0 with its delta", newTrainCmd, append([]string{"--task", "sst2", "--target-epsilon", "0", "--delta", "1e-6"}, text...), "--target-epsilon 0" + reason},
		{"train negative epsilon", newTrainCmd, append([]string{"--task", "sst2", "--target-epsilon", "-3"}, text...), "--target-epsilon -3" + reason},
		{"train gaussian epsilon 0", newTrainCmd, append([]string{"--task", "sst2", "--variant", "gaussian", "--target-epsilon", "0"}, text...), "--target-epsilon 0" + reason},
		{"train baseline epsilon 0", newTrainCmd, append([]string{"--task", "sst2", "--variant", "baseline", "--target-epsilon", "0"}, text...), "--target-epsilon 0" + reason},
		{"train infinite epsilon", newTrainCmd, append([]string{"--task", "sst2", "--target-epsilon", "inf"}, text...), "--target-epsilon +Inf: must be a finite number"},
		{"train NaN epsilon", newTrainCmd, append([]string{"--task", "sst2", "--target-epsilon", "NaN"}, text...),
			`invalid argument "NaN" for "--target-epsilon" flag: "NaN" is neither a number nor none`},
		{"train lid epsilon 0", newTrainCmd, append([]string{"--task", "lid", "--variant", "nvdp-clipped", "--target-epsilon", "0"}, lid...), "--target-epsilon 0" + reason},
		{"run epsilon 0", newRunCmd, append([]string{"--task", "sst2", "--variant", "nvdp-clipped", "--target-epsilon", "0"}, text...), "--target-epsilon 0" + reason},
		{"run RD 0", newRunCmd, append([]string{"--task", "sst2", "--variant", "nvdp-clipped", "--target-rd", "0"}, text...), "--target-rd 0" + reason},
		{"run skip-train epsilon 0", newRunCmd, append([]string{"--task", "sst2", "--skip-train", "--target-epsilon", "0"}, text...), "--target-epsilon 0" + reason},
		{"run lid epsilon 0", newRunCmd, append([]string{"--task", "lid", "--variant", "nvdp-clipped", "--target-epsilon", "0"}, lid...), "--target-epsilon 0" + reason},
		{"run lid RD 0", newRunCmd, append([]string{"--task", "lid", "--variant", "nvdp-clipped", "--target-rd", "0"}, lid...), "--target-rd 0" + reason},
		{"sweep epsilon 0", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "nvdp-clipped", "--lambdas", "1e-2", "--target-epsilon", "0"}, text...), "--target-epsilon 0" + reason},
		{"sweep RD 0", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "nvdp,nvdp-clipped", "--lambdas", "1e-2", "--target-rd", "0"}, text...), "--target-rd 0" + reason},
		{"sweep epsilon 0 of uncalibrated cells", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "nvdp", "--lambdas", "1e-2", "--target-epsilon", "0"}, text...), "--target-epsilon 0" + reason},
		{"sweep epsilons 0", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "nvdp-clipped", "--lambdas", "1e-2", "--target-epsilons", "0"}, text...), "--target-epsilons: 0 must be finite and > 0"},
		{"sweep epsilons 4,0", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "gaussian", "--target-epsilons", "4,0"}, text...), "--target-epsilons: 0 must be finite and > 0"},
		{"sweep epsilons -1", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "nvdp-clipped", "--lambdas", "1e-2", "--target-epsilons", "-1"}, text...), "--target-epsilons: -1 must be finite and > 0"},
		{"sweep lid epsilon 0", newSweepCmd, append([]string{"--tasks", "lid", "--variants", "nvdp-clipped", "--lambdas", "1e-6", "--target-epsilon", "0"}, lid...), "--target-epsilon 0" + reason},
		{"sweep lid epsilons 0", newSweepCmd, append([]string{"--tasks", "lid", "--variants", "nvdp-clipped", "--lambdas", "1e-6", "--target-epsilons", "0"}, lid...), "--target-epsilons: 0 must be finite and > 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			stdout, err := runCmd(tc.cmd(), append(tc.args, "--out", out)...)
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v, want %q\n%s", err, tc.want, stdout)
			}
			var oe *option.Error
			if errors.As(err, &oe) {
				t.Errorf("the library's error was not given its flag: %v", err)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was made (%v): the target was not checked before any work", out, err)
			}
		})
	}
}

// TestTargetFlag: --target-epsilon and --target-rd show "none" as their
// default and bind model.NoTarget; "none" given is no target, a number is
// kept as given (0 included, for Validate to refuse), NaN and words are
// refused when parsed.
func TestTargetFlag(t *testing.T) {
	for _, name := range []string{"target-epsilon", "target-rd"} {
		for _, c := range []*cobra.Command{newTrainCmd(), newRunCmd(), newSweepCmd()} {
			if f := c.Flags().Lookup(name); f == nil || f.DefValue != "none" || f.Value.Type() != "float" {
				t.Errorf("nvdp %s --%s: %+v, want the default none", c.Name(), name, f)
			}
		}
	}
	for _, tc := range []struct {
		in   string
		want float64 // -1: NoTarget
		err  bool
	}{{"none", -1, false}, {"8", 8, false}, {"0", 0, false}, {"-2.5", -2.5, false}, {"0.001", 1e-3, false},
		{"NaN", 0, true}, {"nan", 0, true}, {"", 0, true}, {"auto", 0, true}, {"eight", 0, true}} {
		v := 5.0
		f := targetValue(&v)
		err := f.Set(tc.in)
		switch {
		case tc.err && (err == nil || v != 5):
			t.Errorf("Set(%q): %v, value %v; want an error and the value kept", tc.in, err, v)
		case !tc.err && err != nil:
			t.Errorf("Set(%q): %v", tc.in, err)
		case !tc.err && tc.want == -1 && (!model.IsNoTarget(v) || f.String() != "none"):
			t.Errorf("Set(%q): %v (%s), want no target", tc.in, v, f)
		case !tc.err && tc.want != -1 && (v != tc.want || f.String() != tc.in):
			t.Errorf("Set(%q): %v (%s), want %v", tc.in, v, f, tc.want)
		}
	}
	if !strings.Contains(targetValue(new(float64)).String(), "0") {
		t.Error("an explicit 0 does not show as 0")
	}
}

// TestGuaranteeByDefault (issue 31, "A guarantee by default"): a clipped
// variant (nvdp-clipped, the default, and gaussian) in principled mode
// without a privacy target fails in train, run and sweep (text and --task
// lid) before any work, naming --target-epsilon and --hand-set-clipping;
// --hand-set-clipping with a target fails naming both; the sweep's C_mu
// grid asks for --hand-set-clipping (a target excludes the grid). Each
// alone, reference mode and the variants without a clipping get past the
// rule: they fail on the next error planted (--epochs 0, a bad C_mu
// tolerance) instead. Before, such a run trained with the hand-set
// clipping, certified epsilon in the thousands, without a word.
func TestGuaranteeByDefault(t *testing.T) {
	glueDir, vocab := synthSST2(t, 16)
	text := []string{"--glue-dir", glueDir, "--vocab", vocab, "--max-seq-len", "8", "--epochs", "1", "--batch-size", "4", "--no-progress"}
	lidDir := t.TempDir()
	lidtest.WriteToneCorpus(t, lidDir, map[string]int{"train": 4, "dev": 3, "test": 3})
	lid := []string{"--lid-dir", lidDir, "--max-seconds", "0.5", "--epochs", "1", "--batch-size", "4", "--no-progress"}
	required := func(variant string) string {
		return "--target-epsilon: required for the " + variant + ` variant: a certified epsilon per release to calibrate the clipping to ` +
			`(e.g. 8; docs/privacy.md, "A guarantee by default"), or --hand-set-clipping for the given constants and whatever epsilon they certify`
	}
	const sweepRequired = `--target-epsilon / --target-rd: required for the nvdp-clipped and gaussian cells: --target-epsilons (a certified ` +
		`epsilon per release for each cell to be calibrated to, e.g. 8; docs/privacy.md, "A guarantee by default"), one --target-epsilon ` +
		`or --target-rd for every such cell, or --hand-set-clipping for the given constants and whatever epsilon they certify`
	both := func(target string) string {
		return "--hand-set-clipping: and a target (" + target + ") are both given: give one"
	}
	const sweepBoth = "--hand-set-clipping: and a privacy target (--target-epsilons, --target-epsilon or --target-rd) are both given: give one"
	const epochs0 = "--epochs 0: must be >= 1"
	for _, tc := range []struct {
		name string
		cmd  func() *cobra.Command
		args []string
		want string // the whole error
	}{
		{"train nvdp-clipped", newTrainCmd, append([]string{"--task", "sst2", "--variant", "nvdp-clipped"}, text...), required("nvdp-clipped")},
		{"train default variant", newTrainCmd, append([]string{"--task", "sst2"}, text...), required("nvdp-clipped")},
		{"train gaussian", newTrainCmd, append([]string{"--task", "sst2", "--variant", "gaussian", "--c-mu", "0.5"}, text...), required("gaussian")},
		{"train clipping constants alone", newTrainCmd, append([]string{"--task", "sst2", "--c-mu", "2", "--logvar-margin", "0.6931", "--c-alpha-min", "0.3"}, text...), required("nvdp-clipped")},
		{"train both", newTrainCmd, append([]string{"--task", "sst2", "--hand-set-clipping", "--target-epsilon", "8"}, text...), both("--target-epsilon 8")},
		{"train both, RD", newTrainCmd, append([]string{"--task", "sst2", "--hand-set-clipping", "--target-rd", "3"}, text...), both("--target-rd 3")},
		{"train lid", newTrainCmd, append([]string{"--task", "lid", "--variant", "nvdp-clipped"}, lid...), required("nvdp-clipped")},
		{"train lid both", newTrainCmd, append([]string{"--task", "lid", "--hand-set-clipping", "--target-epsilon", "8"}, lid...), both("--target-epsilon 8")},
		{"run nvdp-clipped", newRunCmd, append([]string{"--task", "sst2", "--variant", "nvdp-clipped"}, text...), required("nvdp-clipped")},
		{"run gaussian", newRunCmd, append([]string{"--task", "sst2", "--variant", "gaussian"}, text...), required("gaussian")},
		{"run both", newRunCmd, append([]string{"--task", "sst2", "--hand-set-clipping", "--target-epsilon", "8"}, text...), both("--target-epsilon 8")},
		{"run lid", newRunCmd, append([]string{"--task", "lid", "--variant", "nvdp-clipped"}, lid...), required("nvdp-clipped")},
		{"run lid gaussian", newRunCmd, append([]string{"--task", "lid", "--variant", "gaussian"}, lid...), required("gaussian")},
		{"run lid both", newRunCmd, append([]string{"--task", "lid", "--hand-set-clipping", "--target-rd", "3"}, lid...), both("--target-rd 3")},
		{"sweep nvdp-clipped", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "nvdp-clipped", "--lambdas", "1e-2"}, text...), sweepRequired},
		{"sweep default variants", newSweepCmd, append([]string{"--tasks", "sst2"}, text...), sweepRequired},
		{"sweep gaussian", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "baseline,gaussian"}, text...), sweepRequired},
		{"sweep C_mu grid", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "nvdp-clipped", "--lambdas", "1e-2", "--c-mu-grid", "1,2"}, text...),
			`--hand-set-clipping: required with a --c-mu-grid: the nvdp-clipped cells run at the C_mu the grid selects, with no target ` +
				`(a target excludes the grid), so their certified epsilon is whatever it gives (docs/privacy.md, "A guarantee by default")`},
		{"sweep both, epsilons", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "nvdp-clipped", "--lambdas", "1e-2", "--hand-set-clipping", "--target-epsilons", "4,8"}, text...), sweepBoth},
		{"sweep both, one epsilon", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "gaussian", "--hand-set-clipping", "--target-epsilon", "8"}, text...), sweepBoth},
		{"sweep lid", newSweepCmd, append([]string{"--tasks", "lid", "--variants", "nvdp-clipped", "--lambdas", "1e-6"}, lid...), sweepRequired},
		{"sweep lid both", newSweepCmd, append([]string{"--tasks", "lid", "--variants", "nvdp-clipped", "--lambdas", "1e-6", "--hand-set-clipping", "--target-epsilons", "8"}, lid...), sweepBoth},
		// past the rule: the next error planted
		{"train hand-set", newTrainCmd, append([]string{"--task", "sst2", "--hand-set-clipping"}, append(text, "--epochs", "0")...), epochs0},
		{"train target", newTrainCmd, append([]string{"--task", "sst2", "--target-epsilon", "8"}, append(text, "--epochs", "0")...), epochs0},
		{"train gaussian hand-set", newTrainCmd, append([]string{"--task", "sst2", "--variant", "gaussian", "--hand-set-clipping"}, append(text, "--epochs", "0")...), epochs0},
		{"train reference", newTrainCmd, append([]string{"--task", "sst2", "--mode", "reference"}, append(text, "--epochs", "0")...), epochs0},
		{"train baseline", newTrainCmd, append([]string{"--task", "sst2", "--variant", "baseline"}, append(text, "--epochs", "0")...), epochs0},
		{"train nvdp", newTrainCmd, append([]string{"--task", "sst2", "--variant", "nvdp"}, append(text, "--epochs", "0")...), epochs0},
		{"run hand-set", newRunCmd, append([]string{"--task", "sst2", "--hand-set-clipping"}, append(text, "--epochs", "0")...), epochs0},
		{"run lid hand-set", newRunCmd, append([]string{"--task", "lid", "--hand-set-clipping"}, append(lid, "--epochs", "0")...), epochs0},
		{"sweep hand-set grid", newSweepCmd, append([]string{"--tasks", "sst2", "--variants", "nvdp-clipped", "--lambdas", "1e-2", "--hand-set-clipping",
			"--c-mu-grid", "1,2", "--c-mu-tolerance", "-1"}, text...), "--c-mu-tolerance: -1 must be >= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			stdout, err := runCmd(tc.cmd(), append(tc.args, "--out", out)...)
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v\nwant %q\n%s", err, tc.want, stdout)
			}
			var oe *option.Error
			if errors.As(err, &oe) {
				t.Errorf("the library's error was not given its flag: %v", err)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was made (%v): the rule was not checked before any work", out, err)
			}
		})
	}
}
