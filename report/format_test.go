package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/option"
)

// TestWriteFile: a format other than md, markdown, csv or json is an
// *option.Error naming format, and no file or directory is made; WriteFile
// makes the directory of its path and writes the tables whole, as Write
// writes them.
func TestWriteFile(t *testing.T) {
	root := t.TempDir()
	writeReport(t, root, "sst2/baseline/seed=1", map[string]any{"task": "sst2", "variant": "baseline", "mode": "principled",
		"encoder": "scratch:bert-tiny", "seed": 1, "utility": map[string]any{"accuracy": 0.9}})
	tables, err := Read(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		format, want string // want: a line of the output ("": an error)
	}{
		{"xml", ""},
		{"md", "| Non-private baseline | – | 1 | 90.0 |"},
		{"markdown", "| Non-private baseline | – | 1 | 90.0 |"},
		{"csv", "sst2,baseline,principled,,,1,accuracy,0.9,0,"},
		{"json", `"group": "Non-private baseline"`},
	} {
		path := filepath.Join(t.TempDir(), "new", "sub", "t."+tc.format)
		err := WriteFile(path, tables, tc.format)
		var buf bytes.Buffer
		werr := Write(&buf, tables, tc.format)
		if tc.want == "" {
			var oe *option.Error
			if !errors.As(err, &oe) || oe.Option != "format" || oe.Value != tc.format || !errors.As(werr, &oe) {
				t.Errorf("%s: WriteFile %v, Write %v: want an option error naming format", tc.format, err, werr)
			}
			if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
				t.Errorf("%s: a refused format made %s", tc.format, filepath.Dir(path))
			}
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil || werr != nil || !strings.Contains(string(b), tc.want) || !bytes.Equal(b, buf.Bytes()) {
			t.Errorf("%s: file (%v, Write %v) lacks %q or differs from Write's:\n%s", tc.format, err, werr, tc.want, b)
		}
	}
}
