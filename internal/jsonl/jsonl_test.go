package jsonl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type rec struct {
	Step int     `json:"step"`
	Loss float64 `json:"loss"`
}

func readAll(t *testing.T, path string) ([]rec, bool, error) {
	t.Helper()
	var out []rec
	torn, err := Read(path, func(_ int, b []byte) error {
		var r rec
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, torn, err
}

func TestRead(t *testing.T) {
	cases := []struct {
		name    string
		content string // "" with missing = the file does not exist
		missing bool
		steps   []int
		torn    bool
		err     string // substring of the error; "" = no error
	}{
		{name: "missing", missing: true},
		{name: "empty file", content: ""},
		{name: "two lines", content: "{\"step\":1}\n{\"step\":2}\n", steps: []int{1, 2}},
		{name: "torn last line (killed mid-append)", content: "{\"step\":1}\n{\"step\":2,\"lo", steps: []int{1}, torn: true},
		{name: "complete last line without newline is still torn", content: "{\"step\":1}\n{\"step\":2}", steps: []int{1}, torn: true},
		{name: "malformed middle line", content: "{\"step\":1}\n{\"st\n{\"step\":3}\n", err: ":2: "},
		{name: "empty line", content: "{\"step\":1}\n\n{\"step\":3}\n", err: ":2: empty line"},
		{name: "only a newline", content: "\n", err: ":1: empty line"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.jsonl")
			if !c.missing {
				if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, torn, err := readAll(t, path)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, path, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if torn != c.torn || len(got) != len(c.steps) {
				t.Fatalf("got %v torn %v, want steps %v torn %v", got, torn, c.steps, c.torn)
			}
			for i, s := range c.steps {
				if got[i].Step != s {
					t.Errorf("line %d: step %d, want %d", i+1, got[i].Step, s)
				}
			}
		})
	}
}

func TestReadLongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	long := `{"step":1,"pad":"` + strings.Repeat("x", 100_000) + `"}` + "\n"
	if err := os.WriteFile(path, []byte(long+"{\"step\":2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _, err := readAll(t, path)
	if err != nil || len(got) != 2 || got[1].Step != 2 {
		t.Fatalf("lines over the bufio buffer: %v %v", got, err)
	}
}

func TestAppendTruncate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	for s := 1; s <= 5; s++ {
		if err := Append(path, rec{Step: s, Loss: 1 / float64(s)}); err != nil {
			t.Fatal(err)
		}
	}
	// A crash during the next append leaves a torn line; the resume cuts to step 3.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step":6,"lo`)
	f.Close()
	n, err := Truncate(path, func(_ int, b []byte) (bool, error) {
		var r rec
		err := json.Unmarshal(b, &r)
		return r.Step <= 3, err
	})
	if err != nil || n != 3 {
		t.Fatalf("Truncate kept %d (%v), want 3", n, err)
	}
	got, torn, err := readAll(t, path)
	if err != nil || torn || len(got) != 3 || got[2].Step != 3 || got[2].Loss != 1.0/3 {
		t.Fatalf("after truncate: %v torn %v %v", got, torn, err)
	}
	if err := Append(path, rec{Step: 4}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := readAll(t, path); len(got) != 4 {
		t.Fatalf("append after truncate: %v", got)
	}
	// A missing file stays missing.
	missing := filepath.Join(t.TempDir(), "none.jsonl")
	if n, err := Truncate(missing, func(int, []byte) (bool, error) { return true, nil }); n != 0 || err != nil {
		t.Fatalf("missing: %d %v", n, err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("Truncate created %s", missing)
	}
	// Append rejects values JSON cannot encode, naming the file.
	if err := Append(path, map[string]any{"x": make(chan int)}); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("unencodable value: %v", err)
	}
}
