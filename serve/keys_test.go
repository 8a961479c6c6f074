package serve

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"github.com/nvdp-project/nvdp/ledger"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// hashHex is the keys-file form of the hash of key.
func hashHex(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

func TestParseKeys(t *testing.T) {
	ha, hb := hashHex("secret-a"), hashHex("secret-b")
	tests := []struct {
		name, file string
		want       map[string]float64 // ID -> budget (NaN: none)
		err        string
	}{
		{"two keys, comments, tabs", "# keys\n\nalice " + ha + " 8\n  bob\t" + strings.ToUpper(hb) + "\n", map[string]float64{"alice": 8, "bob": math.NaN()}, ""},
		{"explicit 0 and inf", "a " + ha + " 0\nb " + hb + " inf\n", map[string]float64{"a": 0, "b": math.Inf(1)}, ""},
		{"no key", "# nothing\n\n", nil, "keys.txt: no key"},
		{"one field", "alice\n", nil, "keys.txt:1: 1 fields"},
		{"four fields", "alice " + ha + " 1 2\n", nil, "keys.txt:1: 4 fields"},
		{"bad id", "-alice " + ha + "\n", nil, `keys.txt:1: ID "-alice"`},
		{"short hash", "alice abc\n", nil, `keys.txt:1: key "alice": hash is not 64 hex digits`},
		{"not hex", "alice " + strings.Repeat("zz", 32) + "\n", nil, "hash is not 64 hex digits"},
		{"negative budget", "alice " + ha + " -1\n", nil, `keys.txt:1: key "alice": budget "-1"`},
		{"NaN budget", "alice " + ha + " NaN\n", nil, `budget "NaN"`},
		{"duplicate id", "alice " + ha + "\nalice " + hb + "\n", nil, `keys.txt:2: ID "alice" already on line 1`},
		{"duplicate hash", "alice " + ha + "\n# x\nbob " + ha + "\n", nil, `keys.txt:3: the hash of line 1 (key "alice") again`},
		{"long line", "alice " + ha + " " + strings.Repeat("1", 5000) + "\n", nil, "keys.txt:1: line longer than 4096 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKeys("keys.txt", strings.NewReader(tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(k.All()) != len(tc.want) {
				t.Fatalf("%d keys, want %d", len(k.All()), len(tc.want))
			}
			for id, b := range tc.want {
				key := k.ID(id)
				if key == nil {
					t.Fatalf("no key %q", id)
				}
				if !(key.Budget == b || math.IsNaN(b) && math.IsNaN(key.Budget)) {
					t.Errorf("%s: budget %v, want %v", id, key.Budget, b)
				}
			}
			if got := k.Lookup("secret-a"); got == nil || got != k.All()[0] {
				t.Errorf("Lookup(secret-a) = %v, want the first key", got)
			}
			for _, s := range []string{"", "secret-c", ha} {
				if k.Lookup(s) != nil {
					t.Errorf("Lookup(%q) found a key", s)
				}
			}
		})
	}
}

// TestGenerateKey: a key is the prefix and 32 random bytes in base64url;
// two keys differ; its line appended to a keys file authenticates it, the
// file never holds it, an explicit budget 0 is kept.
func TestGenerateKey(t *testing.T) {
	k1, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := GenerateKey()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(k1, KeyPrefix))
	if !strings.HasPrefix(k1, KeyPrefix) || err != nil || len(raw) != 32 || len(k1) != 48 {
		t.Fatalf("key %q: want %q + 43 base64url characters of 32 bytes (%v)", k1, KeyPrefix, err)
	}
	if k1 == k2 {
		t.Fatal("two keys are equal")
	}
	path := filepath.Join(t.TempDir(), "keys.txt")
	if err := AppendKey(path, "alice", k1, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(must(os.ReadFile(path)), "# no newline at the end"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := AppendKey(path, "bob", k2, 2.5); err != nil {
		t.Fatal(err)
	}
	if err := AppendKey(path, "alice", "other", 1); err == nil || !strings.Contains(err.Error(), `ID "alice" already on line 1`) {
		t.Errorf("duplicate ID: %v", err)
	}
	if err := AppendKey(path, "carol", k2, 1); err == nil || !strings.Contains(err.Error(), "the hash of line") {
		t.Errorf("duplicate key: %v", err)
	}
	if err := AppendKey(path, "bad id", k2, 1); err == nil {
		t.Error("an ID with a space was accepted")
	}
	data := string(must(os.ReadFile(path)))
	if strings.Contains(data, k1) || strings.Contains(data, k2) {
		t.Fatal("the keys file holds a key")
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	keys, err := ReadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := keys.Lookup(k1), keys.Lookup(k2); a == nil || a.ID != "alice" || a.Budget != 0 || b == nil || b.ID != "bob" || b.Budget != 2.5 {
		t.Fatalf("lookups: %+v %+v", a, b)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// FuzzParseKeys: ParseKeys never panics; what it accepts has valid IDs and
// budgets, and written back as lines it parses to the same keys.
func FuzzParseKeys(f *testing.F) {
	f.Add("alice " + hashHex("a") + " 8\n")
	f.Add("# c\nbob " + hashHex("b") + "\n")
	f.Add("x " + hashHex("c") + " inf\ny " + hashHex("d") + " 0\n")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKeys("fuzz", strings.NewReader(s))
		if err != nil {
			return
		}
		var again strings.Builder
		for _, key := range k.All() {
			if ledger.CheckKeyID(key.ID) != nil || !(math.IsNaN(key.Budget) || key.Budget >= 0) {
				t.Fatalf("accepted %+v", key)
			}
			again.WriteString(key.ID + " " + hex.EncodeToString(key.Hash[:]))
			if !math.IsNaN(key.Budget) {
				again.WriteString(" " + strconv.FormatFloat(key.Budget, 'g', -1, 64))
			}
			again.WriteString("\n")
		}
		k2, err := ParseKeys("again", strings.NewReader(again.String()))
		if err != nil {
			t.Fatalf("written back: %v", err)
		}
		for i, key := range k2.All() {
			want := k.All()[i]
			if key.ID != want.ID || key.Hash != want.Hash || !(key.Budget == want.Budget || math.IsNaN(key.Budget) && math.IsNaN(want.Budget)) {
				t.Fatalf("written back: %+v, want %+v", key, want)
			}
		}
	})
}

// TestKeysFileMode: a keys file that its group or others may write is
// refused by ReadKeys and AppendKey (anyone who can write it could add a
// key), naming the file and its mode; 0600, 0640 and 0400 are read.
func TestKeysFileMode(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		err  string
	}{
		{0o600, ""},
		{0o640, ""},
		{0o400, ""},
		{0o620, "is writable by group or others (mode 0620)"},
		{0o606, "is writable by group or others (mode 0606)"},
		{0o666, "is writable by group or others (mode 0666)"},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keys.txt")
			if err := AppendKey(path, "alice", "secret", 1); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, err := ReadKeys(path)
			aerr := AppendKey(path, "bob", "other secret", 1)
			if tc.err == "" {
				if err != nil || (tc.mode&0o200 != 0 && aerr != nil) {
					t.Fatalf("ReadKeys: %v, AppendKey: %v", err, aerr)
				}
				return
			}
			for _, e := range []error{err, aerr} {
				if e == nil || !strings.Contains(e.Error(), "keys "+path+" "+tc.err) {
					t.Errorf("err = %v, want %q", e, tc.err)
				}
			}
		})
	}
}
