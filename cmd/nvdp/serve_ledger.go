package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/nvdp-project/nvdp/serve"
	"github.com/spf13/cobra"
)

// newLedgerCmd is `nvdp serve ledger`: the read-out of a ledger's accounts,
// and its subcommands init, check, backup and restore (docs/serving.md,
// "The ledger").
func newLedgerCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "ledger --ledger FILE",
		Short: "Print the accounts of a privacy ledger as JSON (releases, spent epsilon at delta); init, check, back up and restore ledgers",
		Long: `Print every account of the ledger file as JSON: the releases charged (in all and per
model curve), the requests, and the spent epsilon at the ledger's delta with its order.
The file is opened read-only (never written: a read-only copy will do); a running server
holds it, so read a backup of it instead ('kill -USR1' the server).

A ledger is created once with 'nvdp serve ledger init'. 'check' checks a ledger or a backup,
'backup' copies a ledger no server holds, 'restore' makes a backup the ledger again,
acknowledging the rollback.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("--ledger: required")
			}
			l, err := serve.OpenLedgerReadOnly(path)
			if err != nil {
				return ledgerHint(err, path)
			}
			defer l.Close()
			accts, err := l.Accounts()
			if err != nil {
				return err
			}
			if accts == nil {
				accts = []serve.Account{}
			}
			return printJSON(cmd.OutOrStdout(), accts)
		},
	}
	cmd.Flags().StringVar(&path, "ledger", "", "the ledger file (required)")
	cmd.AddCommand(newLedgerInitCmd(), newLedgerCheckCmd(), newLedgerBackupCmd(), newLedgerRestoreCmd())
	return cmd
}

func newLedgerInitCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "init --ledger FILE",
		Short: "Create a new, empty privacy ledger (the one way a ledger is made)",
		Long: `Create a new ledger file (mode 0600) with no account and print its description as JSON. It
never replaces a file, not even an empty one: a ledger that lost its contents is restored
from a backup ('nvdp serve ledger restore'), never started over by accident. Remove a file
first only if you mean to reset every budget it held.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("--ledger: required")
			}
			info, err := serve.CreateLedger(path)
			if err != nil {
				return fmt.Errorf("--ledger: %w", err)
			}
			return printJSON(cmd.OutOrStdout(), info)
		},
	}
	cmd.Flags().StringVar(&path, "ledger", "", "the ledger file to create (required)")
	return cmd
}

func newLedgerCheckCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check --ledger FILE",
		Short: "Check a ledger or a backup (its structure and every record) and describe it as JSON",
		Long: `Check the ledger file read-only, as a server checks it at start (the bbolt structure before
it is mapped, then every curve and account record), and print its description as JSON:
ledger ID, creation, last transaction, accounts, releases, restores, and for a backup what
it copies. A corrupt file is an error (exit status 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("--ledger: required")
			}
			l, err := serve.OpenLedgerReadOnly(path)
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
			if out != "" {
				if st, err := os.Stat(out); err != nil || !st.IsDir() {
					return fmt.Errorf("--out %s: not a directory", out)
				}
			}
			l, err := serve.OpenLedgerReadOnly(path)
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
			rec, err := serve.RestoreLedger(backup, path, accept)
			if errors.Is(err, serve.ErrRollbackNotAccepted) {
				return fmt.Errorf("%w: give --accept-rollback", err)
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
	restore := fmt.Sprintf("nvdp serve ledger restore --backup BACKUP --ledger %s --accept-rollback", path)
	var backup *serve.BackupFileError
	switch {
	case errors.Is(err, serve.ErrNoLedger):
		return fmt.Errorf("--ledger: %w\na new service creates its ledger once: nvdp serve ledger init --ledger %s\na lost ledger is restored from a backup: %s", err, path, restore)
	case errors.Is(err, serve.ErrEmptyLedger), errors.Is(err, serve.ErrCorruptLedger):
		return fmt.Errorf("--ledger: %w\nrestore it: %s", err, restore)
	case errors.As(err, &backup):
		return fmt.Errorf("--ledger: %w\nto serve from it, accepting the rollback: nvdp serve ledger restore --backup %s --ledger %s --accept-rollback", err, path, path)
	}
	return fmt.Errorf("--ledger: %w", err)
}
