package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
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
