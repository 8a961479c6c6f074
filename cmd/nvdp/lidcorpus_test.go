package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLIDCorpusList(t *testing.T) {
	out, err := runCmd(newLIDCorpusCmd(), "--list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 45 {
		t.Fatalf("%d lines, want 45", len(lines))
	}
	for i, want := range map[int]string{0: "0\tArabic\tar\thunspell-ar", 2: "2\tBreton\t-\tespeak-ng has no Breton voice", 44: "44\tWelsh\tcy\taspell-cy"} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], want)
		}
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
