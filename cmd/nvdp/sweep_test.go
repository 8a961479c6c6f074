package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/sweep"
)

// TestSweepFlagErrors: bad sweep flags fail before any work (the sweep
// directory is not made), naming the flag: the library's option errors are
// given their flag here; --jobs N > 1 with --in-process is refused (cells in
// one process run one at a time: they would share nn's cores and OpenBLAS's
// process-wide thread count).
func TestSweepFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--jobs", "2", "--in-process"}, "--jobs 2 with --in-process: cells in one process run one at a time"},
		{[]string{"--jobs", "0"}, "--jobs 0: must be >= 1"},
		{[]string{"--tasks", "cola2"}, "--tasks: "},
		{[]string{"--variants", "nvib"}, `--variants: unknown variant "nvib"`},
		{[]string{"--seeds", "1,1"}, "--seeds: duplicate value 1"},
		{[]string{"--variants", "nvdp-clipped", "--c-mu-grid", "1,2", "--c-mu-tolerance", "-1", "--hand-set-clipping"}, "--c-mu-tolerance: -1 must be >= 0"},
		{[]string{"--variants", "nvdp-clipped", "--c-mu-grid", "1,2", "--c-mu-seeds", "3,3", "--hand-set-clipping"}, "--c-mu-seeds: duplicate value 3"},
		{[]string{"--variants", "nvdp", "--target-epsilons", "1"}, "--target-epsilons: a privacy target calibrates the nvdp-clipped and gaussian cells"},
		{[]string{"--variants", "nvdp-clipped", "--releases", "2", "--hand-set-clipping"}, "--target-epsilon / --target-rd: releases"},
		{[]string{"--task", "rte"}, "--task is per cell in a sweep"},
	} {
		out := filepath.Join(t.TempDir(), "sweep")
		_, err := runCmd(newSweepCmd(), append(tc.args, "--glue-dir", t.TempDir(), "--out", out)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
		var oe *option.Error
		if errors.As(err, &oe) {
			t.Errorf("%v: the library's error was not given its flag: %v", tc.args, err)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: %s made before the flags were checked", tc.args, out)
		}
	}
}

// TestSweepZeroTolerance: `--c-mu-tolerance 0` keeps the best C_mu only; it
// is not replaced by the default 0.01 (c_mu_selection.json records 0).
func TestSweepZeroTolerance(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two tiny models")
	}
	glueDir, vocab := synthSST2(t, 32)
	out := filepath.Join(t.TempDir(), "sweep")
	stdout, err := runCmd(newSweepCmd(), "--tasks", "sst2", "--variants", "nvdp-clipped", "--lambdas", "1e-2", "--seeds", "1",
		"--c-mu-grid", "1,2", "--c-mu-tolerance", "0", "--hand-set-clipping", "--glue-dir", glueDir, "--vocab", vocab, "--encoder", "scratch:bert-tiny",
		"--max-seq-len", "8", "--epochs", "1", "--batch-size", "16", "--audit-limit", "4", "--no-progress", "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	var sel sweep.CMuSelection
	b, err := os.ReadFile(filepath.Join(out, "sst2", sweep.CMuSelectionFile))
	if err == nil {
		err = json.Unmarshal(b, &sel)
	}
	if err != nil || sel.Tolerance != 0 || !strings.Contains(stdout, "within 0 of it") {
		t.Errorf("selection %+v, %v; stdout:\n%s", sel, err, stdout)
	}
}
