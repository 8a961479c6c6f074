// Package fsutil holds the file-system predicates that several nvdp packages
// need (one definition each).
package fsutil

import "os"

// IsFile reports whether path names an existing file that is not a
// directory (symbolic links followed). Any error of os.Stat (missing,
// permission denied) reports false: callers use it to choose among optional
// files or to test for a marker, and the open that follows reports the real
// error.
func IsFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
