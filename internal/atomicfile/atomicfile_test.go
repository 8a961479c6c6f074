package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestWriteReplacesOrKeeps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if err := WriteBytes(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error {
		w.Write([]byte("partial"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("after a failed write the file holds %q, want the old content", b)
	}
	if err := Copy(path, filepath.Join(dir, "g.json")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "g.json")); string(b) != "old" {
		t.Errorf("copy holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d entries in the directory, want 2 (no temporary files left)", len(ents))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
}

func TestWriteJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteJSON(path, map[string]any{"b": 1.5, "a": []int{1, 2}}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": 1.5\n}\n"; string(got) != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
	// A value JSON cannot encode is an error naming the file, and nothing is written.
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := WriteJSON(bad, map[string]any{"x": func() {}}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("unencodable value: %v", err)
	}
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file written for an unencodable value: %v", err)
	}
}

// TestRemoveStale leaves a temporary file the way a killed writer does (the
// goroutine exits inside the write callback, so Write's clean-up never runs)
// and checks that RemoveStale removes it and nothing else.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.safetensors")
	keep := []string{"checkpoint.safetensors", ".hidden", "x.tmp1", ".x.tmpfile", ".tmp5"}
	for _, k := range keep {
		if err := os.WriteFile(filepath.Join(dir, k), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = Write(path, func(w io.Writer) error {
			w.Write(make([]byte, 1<<16))
			runtime.Goexit() // dies mid-write: no error path, no rename
			return nil
		})
	}()
	<-done
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(keep)+1 {
		t.Fatalf("after the killed write the directory has %d entries, want %d", len(entries), len(keep)+1)
	}
	removed, err := RemoveStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || !strings.HasPrefix(filepath.Base(removed[0]), ".checkpoint.safetensors.tmp") {
		t.Fatalf("removed %v, want the one temporary file", removed)
	}
	for _, k := range keep {
		if b, err := os.ReadFile(filepath.Join(dir, k)); err != nil || string(b) != "keep" {
			t.Errorf("%s: %v %q, want it kept", k, err, b)
		}
	}
	if r, err := RemoveStale(filepath.Join(dir, "missing")); err != nil || r != nil {
		t.Errorf("missing dir: %v %v", r, err)
	}
}

// TestRemoveStaleOf removes the temporary files of one output only: a
// killed Write's and CreateTemp's scratch file of out.safetensors go; the
// output itself, another output's temporary file, names that only look alike
// and a directory of a temporary name stay.
func TestRemoveStaleOf(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.safetensors")
	scratch, err := CreateTemp(path) // the scratch file of a writer killed since
	if err != nil {
		t.Fatal(err)
	}
	scratch.Close()
	for _, tc := range []struct {
		name   string
		dir    bool
		remove bool
	}{
		{".out.safetensors.tmp1234567890", false, true},
		{filepath.Base(scratch.Name()), false, true},
		{"out.safetensors", false, false},
		{".other.safetensors.tmp42", false, false},   // another output's
		{".out.safetensors.tmp", false, false},       // no digits
		{".out.safetensors.tmp12x", false, false},    // not digits only
		{".out.safetensors.json.tmp7", false, false}, // out.safetensors.json's
		{".a.out.safetensors.tmp7", false, false},    // a.out.safetensors's
		{"out.safetensors.tmp7", false, false},       // not hidden
		{".out.safetensors.tmp99", true, false},      // a directory
	} {
		p := filepath.Join(dir, tc.name)
		if tc.dir {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveStaleOf(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, ".out.safetensors.tmp1234567890"), scratch.Name()}
	slices.Sort(removed)
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if wantLeft := []string{".a.out.safetensors.tmp7", ".other.safetensors.tmp42", ".out.safetensors.json.tmp7", ".out.safetensors.tmp",
		".out.safetensors.tmp12x", ".out.safetensors.tmp99", "out.safetensors", "out.safetensors.tmp7"}; !slices.Equal(left, wantLeft) {
		t.Errorf("left %v, want %v", left, wantLeft)
	}
	if r, err := RemoveStaleOf(filepath.Join(dir, "missing", "out.json")); err != nil || r != nil {
		t.Errorf("missing dir: %v %v", r, err)
	}
}

// CopyInto copies files into a directory under their base names, leaves out
// a file that is its own destination (saving into the directory read from)
// and names a file it cannot copy.
func TestCopyInto(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	a, b := filepath.Join(src, "vocab.txt"), filepath.Join(dst, "merges.txt")
	for p, body := range map[string]string{a: "a\n", b: "b\n"} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := CopyInto(dst, []string{a, b}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{filepath.Join(dst, "vocab.txt"): "a\n", b: "b\n"} {
		if got, err := os.ReadFile(p); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
	// a file onto itself through another path is left alone
	if err := CopyInto(dst, []string{filepath.Join(dst, ".", "merges.txt")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(b); string(got) != "b\n" {
		t.Errorf("self copy changed %s: %q", b, got)
	}
	missing := filepath.Join(src, "missing.json")
	if err := CopyInto(dst, []string{missing}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
}

// WriteFile hands the writer the temporary file itself: a header written
// last at offset 0 (after seeking back) lands in the file, and a failing
// writer leaves no file and no temporary; a CreateTemp scratch file has
// Write's temporary name, so RemoveStale finds it.
func TestWriteFileSeeksAndCreateTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	err := WriteFile(path, func(f *os.File) error {
		if _, err := f.Write([]byte("....body")); err != nil {
			return err
		}
		_, err := f.WriteAt([]byte("HEAD"), 0)
		return err
	})
	if b, _ := os.ReadFile(path); err != nil || string(b) != "HEADbody" {
		t.Fatalf("WriteFile: %v, file %q, want HEADbody", err, b)
	}
	boom := errors.New("boom")
	failed := filepath.Join(dir, "failed.bin")
	if err := WriteFile(failed, func(f *os.File) error { f.Write([]byte("partial")); return boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if _, err := os.Stat(failed); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed write left %s: %v", failed, err)
	}
	scratch, err := CreateTemp(path)
	if err != nil {
		t.Fatal(err)
	}
	scratch.Close()
	removed, err := RemoveStale(dir)
	if err != nil || len(removed) != 1 || removed[0] != scratch.Name() {
		t.Errorf("RemoveStale removed %v (%v), want only the scratch file %s", removed, err, scratch.Name())
	}
}

// TestAppendSync: appends keep what was there, a new file gets the mode
// asked for (umask permitting), a directory that is missing is an error.
func TestAppendSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	for _, s := range []string{"one\n", "two\n"} {
		if err := AppendSync(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "one\ntwo\n" {
		t.Fatalf("file holds %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if err := AppendSync(filepath.Join(path+".d", "x"), []byte("x"), 0o600); err == nil {
		t.Error("append under a missing directory succeeded")
	}
}

// TestCreateTempNamesDirectory (issue 32): a missing directory, or a file
// where the directory should be, is named in the error, not the temporary
// file the caller never gave.
func TestCreateTempNamesDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, want string }{
		{filepath.Join(dir, "missing", "w.safetensors"), "directory " + filepath.Join(dir, "missing") + " of "},
		{filepath.Join(file, "w.safetensors"), file + " is not a directory"},
	}
	for _, c := range cases {
		f, err := CreateTemp(c.path)
		if err == nil {
			f.Close()
			t.Fatalf("CreateTemp(%s): no error", c.path)
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), tempMarker) {
			t.Errorf("CreateTemp(%s): %v, want %q and no temporary name", c.path, err, c.want)
		}
	}
	f, err := CreateTemp(filepath.Join(dir, "ok"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
