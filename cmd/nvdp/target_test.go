package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/internal/lidtest"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/train"
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
// default and bind train.NoTarget; "none" given is no target, a number is
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
		f := targetFlag{&v}
		err := f.Set(tc.in)
		switch {
		case tc.err && (err == nil || v != 5):
			t.Errorf("Set(%q): %v, value %v; want an error and the value kept", tc.in, err, v)
		case !tc.err && err != nil:
			t.Errorf("Set(%q): %v", tc.in, err)
		case !tc.err && tc.want == -1 && (!train.IsNoTarget(v) || f.String() != "none"):
			t.Errorf("Set(%q): %v (%s), want no target", tc.in, v, f)
		case !tc.err && tc.want != -1 && (v != tc.want || f.String() != tc.in):
			t.Errorf("Set(%q): %v (%s), want %v", tc.in, v, f, tc.want)
		}
	}
	if !strings.Contains(targetFlag{new(float64)}.String(), "0") {
		t.Error("an explicit 0 does not show as 0")
	}
}
