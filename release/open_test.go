package release

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenInput: a file or stdin ("-", named "stdin" in errors), read by
// the reader that column and field choose; Close closes the file.
func TestOpenInput(t *testing.T) {
	dir := t.TempDir()
	tsv := filepath.Join(dir, "dev.tsv")
	if err := os.WriteFile(tsv, []byte("label\tsentence\n1\ta film\n0\tdull\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, stdin, column, field string
		want                             []string
		err                              string
	}{
		{"a TSV file's column", tsv, "", "sentence", "", []string{"a film", "dull"}, ""},
		{"stdin's lines", "-", "one\ntwo\n", "", "", []string{"one", "two"}, ""},
		{"stdin's JSON lines", "-", `{"text": "x"}` + "\n", "", "text", []string{"x"}, ""},
		{"stdin named in errors", "-", "a\tb\n", "nope", "", nil, "stdin:1: "},
		{"a missing file", filepath.Join(dir, "none.txt"), "", "", "", nil, "none.txt: no such file"},
		{"no such column", tsv, "", "text", "", nil, tsv + ":1: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := OpenInput(tc.path, strings.NewReader(tc.stdin), tc.column, tc.field)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			texts, _, err := readAll(in)
			if err != nil || strings.Join(texts, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("texts %q, %v; want %q", texts, err, tc.want)
			}
			if err := in.Close(); err != nil {
				t.Fatal(err)
			}
			if f, ok := in.closer.(*os.File); ok {
				if _, err := f.Read(make([]byte, 1)); err == nil || err == io.EOF {
					t.Error("the file is still open after Close")
				}
			} else if tc.path != "-" {
				t.Error("a file without its closer")
			}
		})
	}
}

// TestFormatOf: .jsonl in any case is JSON lines, anything else safetensors.
func TestFormatOf(t *testing.T) {
	for out, want := range map[string]Format{"a.jsonl": FormatJSONL, "dir/A.JSONL": FormatJSONL, "a.safetensors": FormatSafetensors,
		"a.json": FormatSafetensors, "jsonl": FormatSafetensors, "a.jsonl.gz": FormatSafetensors} {
		if got := FormatOf(out); got != want {
			t.Errorf("FormatOf(%q) = %s, want %s", out, got, want)
		}
	}
}
