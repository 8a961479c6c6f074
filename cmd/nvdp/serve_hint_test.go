package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	nvledger "github.com/nvdp-project/nvdp/ledger"
)

// TestLedgerHint: an error of opening a ledger gets, on the lines after
// it, the nvdp command that fixes it, and a PostgreSQL location is never
// quoted (its URL may hold a password). The errors are those
// pgledger.OpenAt returns (TestOpenAtErrors there; TestServeCorruptLedger
// runs the commands on real files).
func TestLedgerHint(t *testing.T) {
	const file, url = "/srv/ledger.db", "postgres://u:secret@h/db"
	restore := "nvdp serve ledger restore --backup BACKUP --ledger " + file + " --accept-rollback"
	wrap := func(err error) error { return fmt.Errorf("ledger %s: %w", file, err) }
	other := errors.New("permission denied")
	for _, tc := range []struct {
		name, loc string
		err       error
		want      string // the lines after err's own
	}{
		{"missing file", file, wrap(nvledger.ErrNoLedger),
			"\na new service creates its ledger once: nvdp serve ledger init --ledger " + file + "\na lost ledger is restored from a backup: " + restore},
		{"empty file", file, wrap(nvledger.ErrEmpty), "\nrestore it: " + restore},
		{"corrupt file", file, wrap(nvledger.ErrCorrupt), "\nrestore it: " + restore},
		{"a backup", file, &nvledger.BackupFileError{Path: file},
			"\nto serve from it, accepting the rollback: nvdp serve ledger restore --backup " + file + " --ledger " + file + " --accept-rollback"},
		{"another error", file, other, ""},
		{"no database schema", url, nvledger.ErrNoLedger,
			"\na new service creates the ledger's schema once: nvdp serve ledger init --ledger with the same URL or env:VAR"},
		{"corrupt database", url, nvledger.ErrCorrupt, "\nrestore the database from its backup"},
		{"database error", url, other, ""},
	} {
		got := ledgerHint(tc.err, tc.loc)
		if !errors.Is(got, tc.err) {
			t.Errorf("%s: %v does not wrap %v", tc.name, got, tc.err)
		}
		if want := tc.err.Error() + tc.want; got.Error() != want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, want)
		}
		if strings.Contains(got.Error(), "secret") {
			t.Errorf("%s: %q quotes the URL", tc.name, got)
		}
	}
}
