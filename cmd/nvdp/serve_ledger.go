package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/ledger/pgledger"
	"github.com/spf13/cobra"
)

// newLedgerCmd is `nvdp serve ledger`: the read-out of a ledger's accounts,
// and its subcommands init, check, history, backup and restore
// (docs/serving.md, "The ledger").
func newLedgerCmd() *cobra.Command {
	cmd := ledgerCmd("ledger --ledger FILE|postgres://...|env:VAR",
		"Print the accounts of a privacy ledger as JSON (releases, spent epsilon at delta); init, check, history, back up and restore ledgers",
		`Print every account of the ledger as JSON: the releases charged (in all and per model curve),
the requests, and the spent epsilon at the ledger's delta with its accountant. A running server
holds a file ledger: read a backup of it ('kill -USR1' the server); a PostgreSQL ledger is read
while its servers run. docs/serving.md, "The ledger".`,
		"the ledger: a file, postgres://..., or env:VAR (required)",
		func(cmd *cobra.Command, loc string) error {
			return printFromLedger(cmd, loc, func(l ledger.Ledger) (any, error) {
				accts, err := l.Accounts()
				if accts == nil {
					accts = []ledger.Account{}
				}
				return accts, err
			})
		})
	cmd.AddCommand(newLedgerInitCmd(), newLedgerCheckCmd(), newLedgerHistoryCmd(), newLedgerBackupCmd(), newLedgerRestoreCmd())
	return cmd
}

// ledgerCmd is a command with the flag --ledger (required, usage) whose
// value run gets.
func ledgerCmd(use, short, long, usage string, run func(cmd *cobra.Command, loc string) error) *cobra.Command {
	return requiredFlagCmd(&cobra.Command{Use: use, Short: short, Long: long}, "ledger", usage, run)
}

// printFromLedger opens the ledger at loc to read it and prints what read
// returns as JSON.
func printFromLedger(cmd *cobra.Command, loc string, read func(ledger.Ledger) (any, error)) error {
	l, err := pgledger.OpenToRead(loc)
	if err != nil {
		return fmt.Errorf("--ledger: %w", ledgerHint(err, loc))
	}
	defer l.Close()
	v, err := read(l)
	if err != nil {
		return err
	}
	return printJSON(cmd.OutOrStdout(), v)
}

func newLedgerHistoryCmd() *cobra.Command {
	q := ledger.HistoryQuery{Limit: 100}
	cmd := ledgerCmd("history --ledger FILE|postgres://... [--account ID] [--before N] [--limit N]",
		"Print a ledger's charges as JSON, newest first: what each key received, under which guarantee",
		`Print the charges of the ledger, newest first, as JSON: each with its time, key ID, releases,
curve and model, and the curves and models they name. --before N pages back (the "before" of the
previous page). docs/serving.md, "The PostgreSQL ledger" ("Budget history").`,
		"the ledger: a file, postgres://..., or env:VAR (required)",
		func(cmd *cobra.Command, loc string) error {
			return printFromLedger(cmd, loc, func(l ledger.Ledger) (any, error) {
				h, err := l.History(q)
				return h, flagError(err)
			})
		})
	cmd.Flags().StringVar(&q.Account, "account", "", "only this key ID's charges (default: every account's)")
	cmd.Flags().Uint64Var(&q.Before, "before", 0, "only charges with an ID below this (the previous page's \"before\"; 0: from the newest)")
	cmd.Flags().IntVar(&q.Limit, "limit", q.Limit, "at most this many charges (1 to 10000)")
	return cmd
}

func newLedgerInitCmd() *cobra.Command {
	return ledgerCmd("init --ledger FILE|postgres://...|env:VAR",
		"Create a new, empty privacy ledger, or migrate a PostgreSQL ledger's schema (the one way a ledger is made)",
		`Create a new ledger file (never over a file, not even an empty one) and print its description as
JSON; or create or migrate a PostgreSQL ledger's schema, which servers never do. Run it once before
the first server starts, and before a newer nvdp serves. docs/serving.md, "The ledger".`,
		"the ledger file to create, or the PostgreSQL database (postgres://..., env:VAR) (required)",
		func(cmd *cobra.Command, loc string) error {
			info, applied, err := pgledger.CreateAt(loc)
			if err != nil {
				return fmt.Errorf("--ledger: %w", err)
			}
			if pgledger.IsPostgres(loc) {
				slog.Info("ledger schema", "ledger", info.Path, "schema_version", info.SchemaVersion, "migrations_applied", applied)
			}
			return printJSON(cmd.OutOrStdout(), info)
		})
}

func newLedgerCheckCmd() *cobra.Command {
	return ledgerCmd("check --ledger FILE|postgres://...",
		"Check a ledger or a backup (its structure and every record) and describe it as JSON",
		`Check the ledger read-only as a server does at start (a file's structure and every record; a
database's schema version and curves) and print its description as JSON. A corrupt ledger is an
error (exit status 1). docs/serving.md, "Backups and restores".`,
		"the ledger or backup file (required)",
		func(cmd *cobra.Command, loc string) error {
			return printFromLedger(cmd, loc, func(l ledger.Ledger) (any, error) { return l.Info() })
		})
}

func newLedgerBackupCmd() *cobra.Command {
	var out string
	cmd := ledgerCmd("backup --ledger FILE [--out DIR]",
		"Back up a ledger that no server holds (a running server backs its ledger up on SIGUSR1)",
		`Write a consistent copy of the ledger file, marked as a backup, into DIR and print its description
as JSON. A running server holds its ledger: send it SIGUSR1 instead. docs/serving.md, "Backups and
restores".`,
		"the ledger file (required)",
		func(cmd *cobra.Command, loc string) error {
			if err := pgledger.CheckBackup(loc, out); err != nil {
				return flagError(err)
			}
			return printFromLedger(cmd, loc, func(l ledger.Ledger) (any, error) { return l.(*ledger.File).Backup(out) })
		})
	cmd.Flags().StringVar(&out, "out", "", "directory to write the backup into (default: the ledger's directory)")
	return cmd
}

func newLedgerRestoreCmd() *cobra.Command {
	var backup, path string
	var accept bool
	cmd := &cobra.Command{
		Use:   "restore --backup FILE --ledger FILE --accept-rollback",
		Short: "Make a backup the ledger again, acknowledging the rollback",
		Long: `Restore the backup as the ledger (the file at --ledger is moved aside, never deleted) and print the
restore's record as JSON. A restore is a rollback: the charges made after the backup are forgotten,
so keys can receive more than their budgets; --accept-rollback says you accept that. Stop the
server first. docs/serving.md, "Backups and restores".`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rec, err := pgledger.Restore(backup, path, accept)
			if errors.Is(err, ledger.ErrRollbackNotAccepted) {
				return fmt.Errorf("%w: give --accept-rollback", err)
			} else if err != nil {
				return flagError(err)
			}
			return printJSON(cmd.OutOrStdout(), rec)
		},
	}
	cmd.Flags().StringVar(&backup, "backup", "", "the backup to restore (required)")
	cmd.Flags().StringVar(&path, "ledger", "", "the ledger file to restore it to (required)")
	cmd.Flags().BoolVar(&accept, "accept-rollback", false, "accept that the charges made after the backup are forgotten (required to restore)")
	return cmd
}

// ledgerHint adds to err, the error of opening the ledger at loc, the nvdp
// command that fixes it.
func ledgerHint(err error, loc string) error {
	if pgledger.IsPostgres(loc) { // never echo a URL: it may hold a password
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
