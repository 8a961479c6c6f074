// Package jsonl reads and writes the JSON-lines logs of training runs
// (metrics.jsonl, pretrain_metrics.jsonl): one JSON value per line, appended
// as the run goes, read back and cut to the last checkpoint on resume.
//
// Crash safety: Append writes one whole line and syncs it, so a crash leaves
// at most one torn line, the last, without its newline. Read skips such a
// torn final line (and says so) instead of refusing the file; a malformed
// line anywhere else is an error naming the file and line. Truncate rewrites
// the file atomically (internal/atomicfile), so a crash during a resume's cut
// leaves the old file.
package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
)

// MaxLine is the longest line Read accepts, in bytes.
const MaxLine = 16 << 20

// Append marshals v and appends it to path as one line (the file is created
// when missing), then syncs the file.
func Append(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.AppendSync(path, append(b, '\n'), 0o644)
}

// Read calls fn with each complete line of path (1-based line numbers, the
// line without its newline). A missing file has no lines. A last line without
// a newline is a torn write: it is not passed to fn and torn is true. Empty
// lines and lines longer than MaxLine are errors naming the file and line, as
// is any error fn returns.
func Read(path string, fn func(line int, b []byte) error) (torn bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for line := 1; ; line++ {
		b, err := readLine(r)
		if err == io.EOF {
			if len(b) > 0 {
				return true, nil
			}
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return false, fmt.Errorf("%s:%d: empty line", path, line)
		}
		if err := fn(line, b); err != nil {
			return false, fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
}

// readLine returns the next line without its '\n'; at the end of the input it
// returns what follows the last newline (empty when the file ends with one)
// and io.EOF.
func readLine(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > MaxLine {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLine)
		}
		switch {
		case err == nil:
			return out[:len(out)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return out, err
		}
	}
}

// Truncate keeps the complete lines of path for which keep returns true and
// drops the others and any torn last line, rewriting the file atomically. A
// missing file stays missing. It returns the number of lines kept.
func Truncate(path string, keep func(line int, b []byte) (bool, error)) (int, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	var kept [][]byte
	if _, err := Read(path, func(line int, b []byte) error {
		ok, err := keep(line, b)
		if ok {
			kept = append(kept, append([]byte(nil), b...))
		}
		return err
	}); err != nil {
		return 0, err
	}
	err := atomicfile.Write(path, func(w io.Writer) error {
		for _, l := range kept {
			if _, err := w.Write(append(l, '\n')); err != nil {
				return err
			}
		}
		return nil
	})
	return len(kept), err
}
