package report

import (
	"io"
	"os"
	"path/filepath"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/option"
)

// writers are the table formats of [Write] by name.
var writers = map[string]func(io.Writer, *Tables) error{
	"md": writeMarkdown, "markdown": writeMarkdown, "csv": writeCSV, "json": writeJSON,
}

// CheckFormat reports whether format names a table format of [Write]: md
// (or markdown), csv or json. Any other is an [*option.Error] naming format.
func CheckFormat(format string) error {
	if writers[format] == nil {
		return option.Errorf("format", format, "want md, csv or json")
	}
	return nil
}

// Write writes t to w in format ([CheckFormat]): markdown (the per-task
// tables and the best-trade-off summary), CSV (long format, one line per
// row, metric and audit mode) or JSON (the whole structure, non-finite
// numbers as jsonfloat strings). See docs/results.md, "nvdp report".
func Write(w io.Writer, t *Tables, format string) error {
	if err := CheckFormat(format); err != nil {
		return err
	}
	return writers[format](w, t)
}

// WriteFile writes t in format to path, making its directory first. The
// write is atomic: a failed one leaves no partial file.
func WriteFile(path string, t *Tables, format string) error {
	if err := CheckFormat(format); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error { return writers[format](w, t) })
}
