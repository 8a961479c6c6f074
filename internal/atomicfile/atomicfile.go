// Package atomicfile writes files so that readers see either the old content
// or the complete new content, never a partial file: the data go to a
// temporary file in the same directory, which is synced, made 0644 and
// renamed over the destination.
package atomicfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// tempPrefix and tempMarker make the temporary name of path:
// "." + base(path) + ".tmp" + a random suffix (os.CreateTemp).
const (
	tempPrefix = "."
	tempMarker = ".tmp"
)

// Write writes path with the bytes that write produces. On error the
// temporary file is removed and path is left as it was. Errors are wrapped
// with the path.
func Write(path string, write func(io.Writer) error) error {
	return WriteFile(path, func(f *os.File) error { return write(f) })
}

// WriteFile is Write for writers that need the temporary file itself (to
// seek back and write a header last, or to sync as they go): write gets it
// open for writing at offset 0 and must not close it.
func WriteFile(path string, write func(*os.File) error) (err error) {
	tmp, err := CreateTemp(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("%s: sync: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("%s: close: %w", path, err)
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("%s: rename: %w", path, err)
	}
	return nil
}

// CreateTemp creates a new temporary file beside path, named as Write names
// its own ("." + base(path) + ".tmp" + digits), so that RemoveStale removes
// it after a kill: scratch space of a writer that assembles path from parts.
// The caller removes it. Errors name the directory when it is missing or
// not a directory (not the temporary file's name, which the user never gave).
func CreateTemp(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix+filepath.Base(path)+tempMarker+"*")
	if err == nil {
		return f, nil
	}
	if st, serr := os.Stat(dir); serr != nil {
		return nil, fmt.Errorf("directory %s of %s: %w", dir, path, serr)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s: %s is not a directory", path, dir)
	}
	return nil, fmt.Errorf("%s: %w", path, err)
}

// WriteBytes writes data to path atomically.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteJSON writes v to path atomically as indented JSON (two spaces) with a
// trailing newline, the form of every JSON file the project writes.
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return WriteBytes(path, append(data, '\n'))
}

// Copy copies the file src to dst atomically.
func Copy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return Write(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// CopyInto copies each of files into dir under its base name (Copy), leaving
// out a file that already is its destination (os.SameFile: a model saved
// into the directory it was read from). Errors name the file.
func CopyInto(dir string, files []string) error {
	for _, src := range files {
		dst := filepath.Join(dir, filepath.Base(src))
		if sa, err := os.Stat(src); err == nil {
			if sb, err := os.Stat(dst); err == nil && os.SameFile(sa, sb) {
				continue
			}
		}
		if err := Copy(src, dst); err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
	}
	return nil
}

// RemoveStale removes the temporary files that a process killed during Write
// (SIGKILL, power loss) left in dir, and returns their paths. Call it only on
// a directory that no other process is writing to, e.g. a run's output
// directory when the run starts or resumes. A missing dir has none.
func RemoveStale(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTemp(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, err
		}
		removed = append(removed, p)
	}
	return removed, nil
}

// RemoveStaleOf removes the temporary files of path alone that a process
// killed while writing path (Write, WriteFile, CreateTemp: "." + base(path)
// + ".tmp" + digits, beside it) left, and returns their paths; every other
// file of the directory, the temporary files of other outputs included, is
// left. Call it when a writer of path starts and no other process writes
// path at the same time (its temporary file would be removed). A missing
// directory has none. Errors name the file or directory.
func RemoveStaleOf(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("temporary files of %s: %w", path, err)
	}
	var removed []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTempOf(e.Name(), base) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("temporary file of %s: %w", path, err)
		}
		removed = append(removed, p)
	}
	return removed, nil
}

// isTemp reports whether name is a temporary name of Write: "." + base +
// ".tmp" + the decimal digits os.CreateTemp puts in place of "*".
func isTemp(name string) bool {
	if !strings.HasPrefix(name, tempPrefix) {
		return false
	}
	i := strings.LastIndex(name, tempMarker)
	if i <= len(tempPrefix) {
		return false
	}
	return allDigits(name[i+len(tempMarker):])
}

// isTempOf reports whether name is a temporary name of Write for a file
// named base: "." + base + ".tmp" + digits.
func isTempOf(name, base string) bool {
	digits, ok := strings.CutPrefix(name, tempPrefix+base+tempMarker)
	return ok && allDigits(digits)
}

// allDigits reports whether s is one or more decimal digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// AppendSync appends data to path (created with mode perm when missing) and
// syncs the file before it returns, so that what it wrote survives a crash
// (a crash during the call leaves at most a torn end). Errors are wrapped
// with the path.
func AppendSync(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("%s: sync: %w", path, err)
	}
	return f.Close()
}
