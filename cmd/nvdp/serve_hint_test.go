package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	nvledger "github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/ledger/pgledger"
)

// TestLedgerHint: the server's error of opening a ledger carries, on the
// lines after it, the nvdp command that fixes it, and a PostgreSQL
// location is never quoted (its URL may hold a password).
func TestLedgerHint(t *testing.T) {
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
	if _, err := nvledger.CreateFile(live); err != nil {
		t.Fatal(err)
	}
	l, err := nvledger.OpenFile(live)
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
	restore := func(p string) string {
		return "nvdp serve ledger restore --backup BACKUP --ledger " + p + " --accept-rollback"
	}
	tests := []struct {
		name, loc string
		is        error
		want      []string // in order
	}{
		{"missing file", missing, nvledger.ErrNoLedger, []string{"\na new service creates its ledger once: nvdp serve ledger init --ledger " + missing,
			"\na lost ledger is restored from a backup: " + restore(missing)}},
		{"empty file", empty, nvledger.ErrEmpty, []string{"\nrestore it: " + restore(empty)}},
		{"corrupt file", corrupt, nvledger.ErrCorrupt, []string{"\nrestore it: " + restore(corrupt)}},
		{"a backup", b.Path, nil, []string{"is a backup of ledger", "\nto serve from it, accepting the rollback: nvdp serve ledger restore --backup " + b.Path + " --ledger " + b.Path + " --accept-rollback"}},
		{"empty variable", "env:NVDP_TEST_EMPTY_DSN", nil, []string{"env:NVDP_TEST_EMPTY_DSN: the environment variable NVDP_TEST_EMPTY_DSN is unset or empty"}},
		{"no URL in the variable", "env:NVDP_TEST_NOT_A_URL", nil, []string{"env:NVDP_TEST_NOT_A_URL: the variable holds no postgres:// or postgresql:// URL"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := pgledger.OpenAt(tc.loc, pgledger.DefaultOptions(), false) // as a server opens it
			err = ledgerHint(err, tc.loc)
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
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("err = %q quotes the variable's value", err)
			}
		})
	}
}
