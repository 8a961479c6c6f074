// Package fsutil holds the file-system predicates that several nvdp packages
// need (one definition each).
package fsutil

import (
	"os"
	"path/filepath"
)

// IsFile reports whether path names an existing file that is not a
// directory (symbolic links followed). Any error of os.Stat (missing,
// permission denied) reports false: callers use it to choose among optional
// files or to test for a marker, and the open that follows reports the real
// error.
func IsFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// SameFile reports whether paths a and b name one file: os.SameFile when
// both exist (symbolic links followed, so a link to the other and a hard
// link count), else whether their cleaned absolute paths are equal (a
// missing file is the same as itself only). Callers refuse an output that
// would replace its own input.
func SameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}
