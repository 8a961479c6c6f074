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

// TestSameFile: one file by any of its names (a symbolic link, a hard link,
// a path through ".."), a missing path only by its own cleaned absolute
// path.
func TestSameFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "in.safetensors")
	other := filepath.Join(dir, "other.json")
	for _, p := range []string{file, other} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.json")
	if err := os.Link(file, hard); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	for _, tc := range []struct {
		name string
		a, b string
		want bool
	}{
		{"itself", file, file, true},
		{"through ..", file, filepath.Join(dir, "sub", "..", "in.safetensors"), true},
		{"symbolic link", file, link, true},
		{"hard link", file, hard, true},
		{"another file", file, other, false},
		{"a missing file", file, missing, false},
		{"missing, itself", missing, filepath.Join(dir, ".", "missing.json"), true},
		{"missing, another", missing, filepath.Join(dir, "gone.json"), false},
	} {
		if got := SameFile(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: SameFile(%s, %s) = %v, want %v", tc.name, tc.a, tc.b, got, tc.want)
		}
	}
}
