package main

import (
	"errors"
	"fmt"
	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/ledger/pgledger"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// newLedgerCmd is `nvdp serve ledger`: the read-out of a ledger's accounts,
// and its subcommands init, check, history, backup and restore
// (docs/serving.md, "The ledger").
func newLedgerCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "ledger --ledger FILE|postgres://...|env:VAR",
		Short: "Print the accounts of a privacy ledger as JSON (releases, spent epsilon at delta); init, check, history, back up and restore ledgers",
		Long: `Print every account of the ledger as JSON: the releases charged (in all and per model
curve), the requests, and the spent epsilon at the ledger's delta with its accountant
(analytic-gaussian: composed exactly, every release charged being Gaussian; rdp: the RDP sum,
with its order).
A file is opened read-only (never written: a read-only copy will do); a running server holds
it, so read a backup of it instead ('kill -USR1' the server). A PostgreSQL ledger is read
while its servers run.

A ledger is created once with 'nvdp serve ledger init' (which also migrates a PostgreSQL
ledger's schema). 'check' checks a ledger or a backup, 'history' prints the charges (who
received what, under which curve and model), 'backup' copies a file ledger no server holds,
'restore' makes a backup the ledger again, acknowledging the rollback.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("--ledger: required")
			}
			l, err := openLedgerToRead(path)
			if err != nil {
				return ledgerHint(err, path)
			}
			defer l.Close()
			accts, err := l.Accounts()
			if err != nil {
				return err
			}
			if accts == nil {
				accts = []ledger.Account{}
			}
			return printJSON(cmd.OutOrStdout(), accts)
		},
	}
	cmd.Flags().StringVar(&path, "ledger", "", "the ledger: a file, postgres://..., or env:VAR (required)")
	cmd.AddCommand(newLedgerInitCmd(), newLedgerCheckCmd(), newLedgerHistoryCmd(), newLedgerBackupCmd(), newLedgerRestoreCmd())
	return cmd
}

// openLedgerToRead opens the ledger at loc to read it: a file read-only, a
// PostgreSQL ledger with the default options.
func openLedgerToRead(loc string) (ledger.Ledger, error) {
	return pgledger.OpenLedgerAt(loc, pgledger.DefaultOptions(), true)
}

// fileOnly refuses a PostgreSQL ledger for a command of files (what).
func fileOnly(loc, what string) error {
	if pgledger.IsPostgres(loc) {
		return fmt.Errorf("--ledger: %s is a file ledger's: a PostgreSQL ledger is backed up and restored by the database (pg_dump and pg_restore, or continuous archiving), not by nvdp", what)
	}
	return nil
}

func newLedgerHistoryCmd() *cobra.Command {
	var path string
	q := ledger.HistoryQuery{Limit: 100}
	cmd := &cobra.Command{
		Use:   "history --ledger FILE|postgres://... [--account ID] [--before N] [--limit N]",
		Short: "Print a ledger's charges as JSON, newest first: what each key received, under which guarantee",
		Long: `Print the charges of the ledger, newest first, as JSON: each with its time, key ID (account),
releases, the curve it was charged under and the model; and the curves (their guarantee of
one release: epsilon at the ledger's delta, the order, the whole RDP curve, and a Gaussian
curve's mu) and models (their
descriptions) the charges name. --account selects one key's; --before N pages back (the
"before" of the previous page). A file ledger holds the charges made since it recorded them
(its charges bucket); a PostgreSQL ledger every charge, with the replica that made it.
A client sees its own with GET /v1/budget?history=N.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("--ledger: required")
			}
			l, err := openLedgerToRead(path)
			if err != nil {
				return ledgerHint(err, path)
			}
			defer l.Close()
			h, err := l.History(q)
			if err != nil {
				return flagError(err)
			}
			return printJSON(cmd.OutOrStdout(), h)
		},
	}
	cmd.Flags().StringVar(&path, "ledger", "", "the ledger: a file, postgres://..., or env:VAR (required)")
	cmd.Flags().StringVar(&q.Account, "account", "", "only this key ID's charges (default: every account's)")
	cmd.Flags().Uint64Var(&q.Before, "before", 0, "only charges with an ID below this (the previous page's \"before\"; 0: from the newest)")
	cmd.Flags().IntVar(&q.Limit, "limit", q.Limit, "at most this many charges (1 to 10000)")
	return cmd
}

func newLedgerInitCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "init --ledger FILE|postgres://...|env:VAR",
		Short: "Create a new, empty privacy ledger, or migrate a PostgreSQL ledger's schema (the one way a ledger is made)",
		Long: `Create a new ledger file (mode 0600) with no account and print its description as JSON. It
never replaces a file, not even an empty one: a ledger that lost its contents is restored
from a backup ('nvdp serve ledger restore'), never started over by accident. Remove a file
first only if you mean to reset every budget it held.

For a PostgreSQL database: create the ledger's schema (nvdp, with its version table) in one
transaction, or migrate an existing ledger to this build's schema version; a current ledger is
left as it is. Servers never create or migrate a schema: they refuse a database without it.
Run it once before the first server starts, and before a newer nvdp serves.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("--ledger: required")
			}
			if pgledger.IsPostgres(path) {
				dsn, err := pgledger.PostgresDSN(path)
				if err != nil {
					return fmt.Errorf("--ledger: %w", err)
				}
				info, applied, err := pgledger.Create(dsn, 30*time.Second)
				if err != nil {
					return fmt.Errorf("--ledger: %w", err)
				}
				slog.Info("ledger schema", "ledger", info.Path, "schema_version", info.SchemaVersion, "migrations_applied", applied)
				return printJSON(cmd.OutOrStdout(), info)
			}
			info, err := ledger.CreateFile(path)
			if err != nil {
				return fmt.Errorf("--ledger: %w", err)
			}
			return printJSON(cmd.OutOrStdout(), info)
		},
	}
	cmd.Flags().StringVar(&path, "ledger", "", "the ledger file to create, or the PostgreSQL database (postgres://..., env:VAR) (required)")
	return cmd
}

func newLedgerCheckCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check --ledger FILE|postgres://...",
		Short: "Check a ledger or a backup (its structure and every record) and describe it as JSON",
		Long: `Check the ledger file read-only, as a server checks it at start (the bbolt structure before
it is mapped, then every curve and account record), and print its description as JSON:
ledger ID, creation, last transaction, accounts, releases, restores, and for a backup what
it copies. A corrupt file is an error (exit status 1). A PostgreSQL ledger is checked as a
server opens it (its schema version, every curve) and described (accounts, releases,
charges, bytes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("--ledger: required")
			}
			l, err := openLedgerToRead(path)
			if err != nil {
				return ledgerHint(err, path)
			}
			defer l.Close()
			info, err := l.Info()
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), info)
		},
	}
	cmd.Flags().StringVar(&path, "ledger", "", "the ledger or backup file (required)")
	return cmd
}

func newLedgerBackupCmd() *cobra.Command {
	var path, out string
	cmd := &cobra.Command{
		Use:   "backup --ledger FILE [--out DIR]",
		Short: "Back up a ledger that no server holds (a running server backs its ledger up on SIGUSR1)",
		Long: `Write a consistent copy of the ledger into DIR (default: the ledger's directory) as
FILE.backup-ID-TIME, marked as a backup, and print its description as JSON. The ledger is
read only. A running server holds its ledger's lock: send it SIGUSR1 instead, and it writes
the backup itself (into its --backup-dir).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("--ledger: required")
			}
			if err := fileOnly(path, "backup"); err != nil {
				return err
			}
			if out != "" {
				if st, err := os.Stat(out); err != nil || !st.IsDir() {
					return fmt.Errorf("--out %s: not a directory", out)
				}
			}
			l, err := ledger.OpenFileReadOnly(path)
			if err != nil {
				return ledgerHint(err, path)
			}
			defer l.Close()
			info, err := l.Backup(out)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), info)
		},
	}
	cmd.Flags().StringVar(&path, "ledger", "", "the ledger file (required)")
	cmd.Flags().StringVar(&out, "out", "", "directory to write the backup into (default: the ledger's directory)")
	return cmd
}

func newLedgerRestoreCmd() *cobra.Command {
	var backup, path string
	var accept bool
	cmd := &cobra.Command{
		Use:   "restore --backup FILE --ledger FILE --accept-rollback",
		Short: "Make a backup the ledger again, acknowledging the rollback",
		Long: `Restore the backup as the ledger: check it, copy it beside the ledger, record the restore in
it, move the file at --ledger aside (to FILE.replaced-TIME, never deleted) and put the copy
in its place. The backup is left as it was. Print the restore's record as JSON.

A restore is a rollback: every charge made after the backup was taken is forgotten, so keys
can receive more than their budgets. --accept-rollback says you accept that; without it
nothing is changed. Stop the server first. docs/serving.md, "Backups and restores".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if backup == "" || path == "" {
				return errors.New("--backup and --ledger are required")
			}
			if err := fileOnly(path, "restore"); err != nil {
				return err
			}
			rec, err := ledger.Restore(backup, path, accept)
			if errors.Is(err, ledger.ErrRollbackNotAccepted) {
				return fmt.Errorf("%w: give --accept-rollback", err)
			}
			if errors.Is(err, ledger.ErrNotBackup) {
				return fmt.Errorf("--backup: %w", err)
			}
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), rec)
		},
	}
	cmd.Flags().StringVar(&backup, "backup", "", "the backup to restore (required)")
	cmd.Flags().StringVar(&path, "ledger", "", "the ledger file to restore it to (required)")
	cmd.Flags().BoolVar(&accept, "accept-rollback", false, "accept that the charges made after the backup are forgotten (required to restore)")
	return cmd
}

// ledgerHint adds to an error of opening the ledger at path the command
// that fixes it.
func ledgerHint(err error, path string) error {
	if pgledger.IsPostgres(path) { // never echo a URL: it may hold a password
		switch {
		case errors.Is(err, ledger.ErrNoLedger):
			return fmt.Errorf("--ledger: %w\na new service creates the ledger's schema once: nvdp serve ledger init --ledger with the same URL or env:VAR", err)
		case errors.Is(err, ledger.ErrCorrupt):
			return fmt.Errorf("--ledger: %w\nrestore the database from its backup", err)
		}
		return fmt.Errorf("--ledger: %w", err)
	}
	restore := fmt.Sprintf("nvdp serve ledger restore --backup BACKUP --ledger %s --accept-rollback", path)
	var backup *ledger.BackupFileError
	switch {
	case errors.Is(err, ledger.ErrNoLedger):
		return fmt.Errorf("--ledger: %w\na new service creates its ledger once: nvdp serve ledger init --ledger %s\na lost ledger is restored from a backup: %s", err, path, restore)
	case errors.Is(err, ledger.ErrEmpty), errors.Is(err, ledger.ErrCorrupt):
		return fmt.Errorf("--ledger: %w\nrestore it: %s", err, restore)
	case errors.As(err, &backup):
		return fmt.Errorf("--ledger: %w\nto serve from it, accepting the rollback: nvdp serve ledger restore --backup %s --ledger %s --accept-rollback", err, path, path)
	}
	return fmt.Errorf("--ledger: %w", err)
}
