package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The progress bar goes only to a terminal: a buffer, a regular file or
// --no-progress give none, so logs and CI output are not filled with redraws.
func TestProgressWriterOnlyToTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		name       string
		stderr     io.Writer
		noProgress bool
	}{
		{"buffer", &bytes.Buffer{}, false},
		{"regular file", f, false},
		{"no-progress", f, true},
	} {
		cmd := &cobra.Command{}
		cmd.SetErr(tc.stderr)
		if w := progressWriter(cmd, tc.noProgress); w != nil {
			t.Errorf("%s: progress writer %T, want none", tc.name, w)
		}
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
	if progressWriter(cmd, false) == nil {
		t.Error("terminal: no progress writer")
	}
	if progressWriter(cmd, true) != nil {
		t.Error("terminal with --no-progress: progress writer")
	}
}

func TestResolveInitFrom(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		spec, want, err string
	}{
		{"hf:" + dir, dir, ""},
		{dir, dir, ""},
		{"hf:" + dir + "/missing", "", "directory does not exist"},
		{"./missing-dir", "", "directory does not exist"},
	} {
		got, err := resolveInitFrom(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.spec, got, err, tc.want)
		}
	}
	// --init-from with --resume or --config is refused before any work.
	for _, args := range [][]string{
		{"--init-from", "hf:" + dir, "--resume", "--out", dir},
		{"--init-from", "hf:" + dir, "--config", "bert-tiny", "--corpus", dir, "--steps", "1", "--out", t.TempDir()},
	} {
		cmd := newPretrainCmd()
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--init-from") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

func TestParseLists(t *testing.T) {
	if got, err := parseFloatList("--lambdas", " 1e-3, 1e-2,,1 "); err != nil || !slices.Equal(got, []float64{1e-3, 1e-2, 1}) {
		t.Errorf("floats: %v, %v", got, err)
	}
	if got, err := parseUintList("--seeds", "1,2,3"); err != nil || !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("uints: %v, %v", got, err)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{func() error { _, err := parseUintList("--seeds", "1,-2"); return err }(), `--seeds: "-2" is not a non-negative integer`},
		{func() error { _, err := parseFloatList("--bdp-orders", "0.1,x"); return err }(), `--bdp-orders: "x" is not a number`},
		{func() error { _, err := parseList("--tasks", " , "); return err }(), "--tasks: empty list"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("error %v, want %q", tc.err, tc.want)
		}
	}
}
