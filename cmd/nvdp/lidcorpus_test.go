package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/lid"
)

// TestLIDCorpusList: --list prints lid.WriteStandIns's table (its lines
// are checked by lid's TestWriteStandIns).
func TestLIDCorpusList(t *testing.T) {
	out, err := runCmd(newLIDCorpusCmd(), "--list")
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	if err := lid.WriteStandIns(&want); err != nil {
		t.Fatal(err)
	}
	if out != want.String() || strings.Count(out, "\n") != 45 {
		t.Errorf("--list printed\n%s\nwant the 45 lines of lid.WriteStandIns:\n%s", out, want.String())
	}
}

// TestLIDCorpusFlagErrors: invalid options are named by their flags and
// nothing is written.
func TestLIDCorpusFlagErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "corpus")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--out: required"},
		{[]string{"--out", out, "--min-words", "0"}, "--min-words 0: must be >= 1"},
		{[]string{"--out", out, "--max-pitch", "100"}, "--max-pitch 100: must be in [min_pitch, 99]"},
		{[]string{"--out", out, "--languages", "Welsh,Sakha"}, `--languages "Sakha": espeak-ng has no Sakha voice`},
		{[]string{"--out", out, "--espeak", "/nonexistent/espeak-ng"}, "--espeak: /nonexistent/espeak-ng --version"},
	} {
		_, err := runCmd(newLIDCorpusCmd(), tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: %s was created", tc.args, out)
		}
	}
}
