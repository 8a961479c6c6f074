package pgledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/option"
)

// OpenAt opens the ledger at loc, which must exist: a PostgreSQL database
// when loc names one ([IsPostgres]: a postgres:// or postgresql:// URL, or
// env:VAR), opened by [Open] with o; else the file at loc, opened by
// [ledger.OpenFile], or by [ledger.OpenFileReadOnly] when readOnly (o is
// then not used). A PostgreSQL ledger is opened the same way for reading:
// its readers and its servers share it.
//
// Errors are those of [PostgresDSN] and of the opens, with the nvdp
// command that fixes them on the lines after: `nvdp serve ledger init` for
// a ledger that does not exist, a restore from a backup for an empty or
// corrupt one ([ledger.ErrNoLedger], [ledger.ErrEmpty], [ledger.ErrCorrupt],
// [*ledger.BackupFileError]). A PostgreSQL location is never quoted: its
// URL may hold a password.
func OpenAt(loc string, o Options, readOnly bool) (ledger.Ledger, error) {
	l, err := openAt(loc, o, readOnly)
	if err != nil {
		return nil, withFix(err, loc)
	}
	return l, nil
}

// OpenToRead opens the ledger at loc to read it: [OpenAt] of a file
// read-only, of a PostgreSQL ledger with [DefaultOptions].
func OpenToRead(loc string) (ledger.Ledger, error) {
	return OpenAt(loc, DefaultOptions(), true)
}

func openAt(loc string, o Options, readOnly bool) (ledger.Ledger, error) {
	if !IsPostgres(loc) {
		if readOnly {
			return ledger.OpenFileReadOnly(loc)
		}
		return ledger.OpenFile(loc)
	}
	dsn, err := PostgresDSN(loc)
	if err != nil {
		return nil, err
	}
	return Open(dsn, o)
}

// CreateAt creates the ledger at loc, the one way a ledger is made: for a
// file, [ledger.CreateFile] (it never replaces a file); for a PostgreSQL
// location ([IsPostgres]), [Create] of its URL ([PostgresDSN]) with a
// 30-second bound, which also migrates an older schema and returns the
// migrations applied. Errors: those of PostgresDSN and the creations.
func CreateAt(loc string) (ledger.Info, []int, error) {
	if !IsPostgres(loc) {
		info, err := ledger.CreateFile(loc)
		return info, nil, err
	}
	dsn, err := PostgresDSN(loc)
	if err != nil {
		return ledger.Info{}, nil, err
	}
	return Create(dsn, 30*time.Second)
}

// CheckAt checks a ledger location and the options it is opened with,
// before anything is opened: for a PostgreSQL location ([IsPostgres]), o
// ([Options.Validate]) and the location's URL ([PostgresDSN]); a file's
// location is opened as it is. Errors: [*option.Error], naming the option
// by its JSON key, ledger for the location.
func CheckAt(loc string, o Options) error {
	if !IsPostgres(loc) {
		return nil
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if _, err := PostgresDSN(loc); err != nil {
		return &option.Error{Option: "ledger", Reason: err.Error()}
	}
	return nil
}

// FileOnly refuses a PostgreSQL location for what (backup, restore), an
// operation on ledger files: a database is backed up and restored by its
// own tools. It returns nil for a file.
func FileOnly(loc, what string) error {
	if IsPostgres(loc) {
		return fmt.Errorf("%s is a file ledger's: a PostgreSQL ledger is backed up and restored by the database (pg_dump and pg_restore, or continuous archiving), not by nvdp", what)
	}
	return nil
}

// withFix adds to err, an error of opening the ledger at loc, the lines
// that say which nvdp command fixes it.
func withFix(err error, loc string) error {
	if IsPostgres(loc) { // never echo a URL: it may hold a password
		switch {
		case errors.Is(err, ledger.ErrNoLedger):
			return fmt.Errorf("%w\na new service creates the ledger's schema once: nvdp serve ledger init --ledger with the same URL or env:VAR", err)
		case errors.Is(err, ledger.ErrCorrupt):
			return fmt.Errorf("%w\nrestore the database from its backup", err)
		}
		return err
	}
	restore := fmt.Sprintf("nvdp serve ledger restore --backup BACKUP --ledger %s --accept-rollback", loc)
	var backup *ledger.BackupFileError
	switch {
	case errors.Is(err, ledger.ErrNoLedger):
		return fmt.Errorf("%w\na new service creates its ledger once: nvdp serve ledger init --ledger %s\na lost ledger is restored from a backup: %s", err, loc, restore)
	case errors.Is(err, ledger.ErrEmpty), errors.Is(err, ledger.ErrCorrupt):
		return fmt.Errorf("%w\nrestore it: %s", err, restore)
	case errors.As(err, &backup):
		return fmt.Errorf("%w\nto serve from it, accepting the rollback: nvdp serve ledger restore --backup %s --ledger %s --accept-rollback", err, loc, loc)
	}
	return err
}
