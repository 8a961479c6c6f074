package pgledger

import (
	"errors"
	"os"
	"time"

	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/option"
)

// OpenAt opens the ledger at loc, which must exist. When loc names a
// PostgreSQL database, as [IsPostgres] decides, [Open] opens it with o: loc
// is then a postgres:// or postgresql:// URL, or env:VAR. Else
// [ledger.OpenFile] opens the file at loc, or [ledger.OpenFileReadOnly]
// when readOnly, and o is not used. A PostgreSQL ledger is opened the same
// way for reading: its readers and its servers share it.
//
// Errors are those of [PostgresDSN] and of the opens: [ledger.ErrNoLedger]
// for a ledger that does not exist, [ledger.ErrEmpty] or
// [ledger.ErrCorrupt] for one to restore from a backup, a
// [*ledger.BackupFileError] for a backup not restored. A PostgreSQL
// location is never quoted in them: its URL may hold a password.
func OpenAt(loc string, o Options, readOnly bool) (ledger.Ledger, error) {
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

// OpenToRead opens the ledger at loc to read it: [OpenAt] of a file
// read-only, of a PostgreSQL ledger with [DefaultOptions].
func OpenToRead(loc string) (ledger.Ledger, error) {
	return OpenAt(loc, DefaultOptions(), true)
}

// CreateAt creates the ledger at loc, the one way a ledger is made. A file
// is created by [ledger.CreateFile], which never replaces a file. A
// PostgreSQL location, as [IsPostgres] decides, is created by [Create] of
// its URL from [PostgresDSN] with a 30-second bound, which also migrates an
// older schema and returns the migrations applied. Errors: those of
// PostgresDSN and the creations.
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
// before anything is opened. For a PostgreSQL location, as [IsPostgres]
// decides, it checks o with [Options.Validate] and the location's URL with
// [PostgresDSN]; a file's location is opened as it is. Errors: an
// [*option.Error] naming the option by its JSON key, and ledger for the
// location.
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

// CheckBackup checks the inputs of a backup of the ledger at loc into the
// directory out ("": the ledger's own) before the ledger is opened: loc must
// be a file ledger, since a database is backed up by its own tools, and out,
// when given, a directory. Errors are [*option.Error]s naming ledger or out.
func CheckBackup(loc, out string) error {
	if err := fileOnly(loc, "backup"); err != nil {
		return err
	}
	if out != "" {
		if st, err := os.Stat(out); err != nil || !st.IsDir() {
			return option.Errorf("out", option.Show(out), "not a directory")
		}
	}
	return nil
}

// Restore restores the file ledger at path from backup ([ledger.Restore])
// after checking its inputs. Errors: a [*option.CombinationError] naming
// backup and ledger when either is missing; an [*option.Error] naming
// ledger for a PostgreSQL location (a database is restored by its own
// tools), and one naming backup, wrapping [ledger.ErrNotBackup], for a file
// without the backup mark; ledger.Restore's others, among them
// [ledger.ErrRollbackNotAccepted].
func Restore(backup, path string, acceptRollback bool) (ledger.RestoreRecord, error) {
	if backup == "" || path == "" {
		return ledger.RestoreRecord{}, option.Combination("%s and %s are required", "backup", "ledger")
	}
	if err := fileOnly(path, "restore"); err != nil {
		return ledger.RestoreRecord{}, err
	}
	rec, err := ledger.Restore(backup, path, acceptRollback)
	if errors.Is(err, ledger.ErrNotBackup) {
		return rec, option.Wrap("backup", err)
	}
	return rec, err
}

// fileOnly refuses a PostgreSQL location for what, an operation on ledger
// files such as backup or restore, with an [*option.Error] naming ledger.
func fileOnly(loc, what string) error {
	if IsPostgres(loc) {
		return option.Errorf("ledger", nil, "%s is a file ledger's: a PostgreSQL ledger is backed up and restored by the database (pg_dump and pg_restore, or continuous archiving), not by nvdp", what)
	}
	return nil
}
