package pgledger_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/ledger/pgledger"
	"github.com/nvdp-project/nvdp/option"
)

// TestOpenAtErrors: OpenAt's errors are the ledger's sentinels (which
// the CLI turns into the command that fixes them) and never quote a
// PostgreSQL location (its URL may hold a password).
func TestOpenAtErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt.db")
	if err := os.WriteFile(corrupt, []byte(strings.Repeat("x", 8192)), 0o600); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "live.db")
	if _, err := ledger.CreateFile(live); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.OpenFile(live)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Backup(dir)
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NVDP_TEST_EMPTY_DSN", "")
	t.Setenv("NVDP_TEST_NOT_A_URL", "host=h password=secret")
	tests := []struct {
		name, loc string
		is        error
		want      []string // in order
	}{
		{"missing file", missing, ledger.ErrNoLedger, []string{missing}},
		{"empty file", empty, ledger.ErrEmpty, []string{empty}},
		{"corrupt file", corrupt, ledger.ErrCorrupt, []string{corrupt}},
		{"a backup", b.Path, nil, []string{"is a backup of ledger"}},
		{"empty variable", "env:NVDP_TEST_EMPTY_DSN", nil, []string{"env:NVDP_TEST_EMPTY_DSN: the environment variable NVDP_TEST_EMPTY_DSN is unset or empty"}},
		{"no URL in the variable", "env:NVDP_TEST_NOT_A_URL", nil, []string{"env:NVDP_TEST_NOT_A_URL: the variable holds no postgres:// or postgresql:// URL"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := pgledger.OpenAt(tc.loc, pgledger.DefaultOptions(), false) // as a server opens it
			if err == nil {
				l.Close()
				t.Fatal("opened")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want %v", err, tc.is)
			}
			msg := err.Error()
			for _, w := range tc.want {
				i := strings.Index(msg, w)
				if i < 0 {
					t.Fatalf("err = %q, want %q in it", msg, w)
				}
				msg = msg[i+len(w):]
			}
			if strings.Contains(err.Error(), "nvdp serve") {
				t.Errorf("err = %q names a command: the CLI's hint", err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("err = %q quotes the variable's value", err)
			}
		})
	}
	if l, err := pgledger.OpenAt(live, pgledger.DefaultOptions(), false); err != nil {
		t.Errorf("a live ledger: %v", err)
	} else {
		l.Close()
	}
}

// TestCheckBackup: a backup is a file ledger's, into a directory that
// exists; each refusal names its input.
func TestCheckBackup(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ loc, out, err string }{
		{"postgres://h/db", "", "ledger: backup is a file ledger's: a PostgreSQL ledger is backed up and restored by the database"},
		{"postgresql://h/db", dir, "ledger: backup is a file ledger's"},
		{"env:V", "", "ledger: backup is a file ledger's"},
		{"ledger.db", filepath.Join(dir, "missing"), "out " + filepath.Join(dir, "missing") + ": not a directory"},
		{"ledger.db", file, "out " + file + ": not a directory"},
		{"ledger.db", "", ""},
		{"ledger.db", dir, ""},
	} {
		err := pgledger.CheckBackup(tc.loc, tc.out)
		var oe *option.Error
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !errors.As(err, &oe) || !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("CheckBackup(%s, %s) = %v, want %q", tc.loc, tc.out, err, tc.err)
		}
	}
}

// TestRestoreInputs: a restore needs a backup and a ledger, the ledger a
// file; a live ledger (no backup mark) is refused naming backup, and the
// ledger at path is left alone.
func TestRestoreInputs(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	if _, err := ledger.CreateFile(live); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, "new.db")
	for _, tc := range []struct {
		backup, path, err string
		is                error
	}{
		{"", to, "backup and ledger are required", nil},
		{live, "", "backup and ledger are required", nil},
		{live, "postgres://h/db", "ledger: restore is a file ledger's: a PostgreSQL ledger is backed up and restored by the database", nil},
		{live, to, "backup: restore of " + live, ledger.ErrNotBackup},
	} {
		_, err := pgledger.Restore(tc.backup, tc.path, true)
		if err == nil || !strings.HasPrefix(err.Error(), tc.err) || tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("Restore(%q, %q) = %v, want %q", tc.backup, tc.path, err, tc.err)
		}
	}
	if _, err := os.Stat(to); !os.IsNotExist(err) {
		t.Errorf("a refused restore wrote %s: %v", to, err)
	}
}

// TestCheckAt: a PostgreSQL location's options and URL are checked before
// anything is opened, naming the option; a file's location is not.
func TestCheckAt(t *testing.T) {
	t.Setenv("NVDP_TEST_EMPTY_DSN", "")
	conns := pgledger.DefaultOptions()
	conns.MaxConns = 1
	tests := []struct {
		loc    string
		o      pgledger.Options
		err    string
		option string
	}{
		{"ledger.db", conns, "", ""}, // a file: no PostgreSQL option applies
		{"postgres://h/db", pgledger.DefaultOptions(), "", ""},
		{"postgres://h/db", conns, "ledger_max_conns 1: want 3 to 1000", "ledger_max_conns"},
		{"env:NVDP_TEST_EMPTY_DSN", pgledger.DefaultOptions(), "ledger: env:NVDP_TEST_EMPTY_DSN: the environment variable NVDP_TEST_EMPTY_DSN is unset or empty", "ledger"},
	}
	for _, tc := range tests {
		err := pgledger.CheckAt(tc.loc, tc.o)
		var oe *option.Error
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.loc, err)
		case tc.err == "":
		case err == nil || !strings.HasPrefix(err.Error(), tc.err) || !errors.As(err, &oe) || oe.Option != tc.option:
			t.Errorf("%s: err = %v, want %q (option %s)", tc.loc, err, tc.err, tc.option)
		}
	}
}

// TestParseLabelsAndBudget: a key's labels and budget are checked before
// the database is opened, naming the option.
func TestParseLabelsAndBudget(t *testing.T) {
	labels, err := pgledger.ParseLabels([]string{"team=x", "note=a=b", "empty="})
	if err != nil || len(labels) != 3 || labels["team"] != "x" || labels["note"] != "a=b" || labels["empty"] != "" {
		t.Errorf("labels %v, %v", labels, err)
	}
	for kv, want := range map[string]string{"team": `label "team": want KEY=VALUE`, "=x": `label "=x": want KEY=VALUE`,
		"k=\xff": `label: label "k=\xff": invalid UTF-8`} {
		if _, err := pgledger.ParseLabels([]string{kv}); err == nil || err.Error() != want {
			t.Errorf("%q: err = %v, want %q", kv, err, want)
		}
	}
	for b, want := range map[float64]string{option.Auto(): "budget_epsilon: required: a key of the database has its own budget", -2: "budget_epsilon -2: must be >= 0"} {
		if err := pgledger.CheckKeyBudget(b); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("budget %v: err = %v, want %q", b, err, want)
		}
	}
	for _, b := range []float64{0, 5, math.Inf(1)} {
		if err := pgledger.CheckKeyBudget(b); err != nil {
			t.Errorf("budget %v: %v", b, err)
		}
	}
}

// TestCheckKeysAt: keys are managed in a PostgreSQL ledger only; no
// location or a file is an option error naming ledger, the file shown as
// given.
func TestCheckKeysAt(t *testing.T) {
	for loc, want := range map[string]string{"": "ledger: required",
		"l.db":            "ledger l.db: keys live in a PostgreSQL ledger; a file ledger's server reads a keys file (nvdp serve keygen)",
		"postgres://h/db": "", "postgresql://h/db": "", "env:NVDP_LEDGER": ""} {
		err := pgledger.CheckKeysAt(loc)
		var oe *option.Error
		if want == "" && err != nil || want != "" && (!errors.As(err, &oe) || oe.Option != "ledger" || err.Error() != want) {
			t.Errorf("%q: %v, want %q", loc, err, want)
		}
	}
}
