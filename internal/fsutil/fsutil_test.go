package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestIsFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "gone"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{file, true},
		{link, true},
		{dir, false},
		{filepath.Join(dir, "missing"), false},
		{dangling, false},
		{filepath.Join(file, "below-a-file"), false},
	} {
		if got := IsFile(tc.path); got != tc.want {
			t.Errorf("IsFile(%s) = %v, want %v", tc.path, got, tc.want)
		}
	}
}
