package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/ledger/pgledger"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/serve"
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

// keysFlags are the flags of `nvdp serve keys` and its subcommands.
type keysFlags struct {
	path, id string
	budget   float64
	labels   []string
	labelMap map[string]string // labels, parsed (pgledger.ParseLabels)
}

// newKeysCmd is `nvdp serve keys`: the API keys of a PostgreSQL ledger,
// added, rotated, revoked and re-budgeted while its servers run
// (--keys-in-ledger; docs/serving.md, "Keys").
func newKeysCmd() *cobra.Command {
	f := &keysFlags{budget: option.Auto()}
	cmd := &cobra.Command{
		Use:   "keys add|rotate|revoke|budget|list --ledger postgres://...|env:VAR",
		Short: "Manage the API keys of a PostgreSQL ledger (servers with --keys-in-ledger see each change at their next request)",
		Long: `The keys of a PostgreSQL ledger: the SHA-256 of each key (never the key), its ID (the account it
charges), its budget in epsilon at the model's delta, and labels. Servers started with
--keys-in-ledger see a key added, rotated or revoked here at their next request. A revoked or
rotated-out key is refused (401); its account, and what it spent, stay in the ledger.
docs/serving.md, "Keys" ("Keys in the database").`,
	}
	cmd.PersistentFlags().StringVar(&f.path, "ledger", "", "the PostgreSQL ledger: postgres://..., postgresql://... or env:VAR (required)")
	add := f.command("add --ledger URL --id ID --budget-epsilon E [--label k=v ...]",
		"Make a key: print it once, store its SHA-256 with its budget and labels", true,
		func(cmd *cobra.Command, l *pgledger.Ledger) error {
			return f.newKey(cmd, l, "key added", func(key string) error { return l.AddKey(f.id, key, f.budget, f.labelMap) })
		})
	rotate := f.command("rotate --ledger URL --id ID",
		"Replace a key's secret: print the new key once; the old one is refused from now on", true,
		func(cmd *cobra.Command, l *pgledger.Ledger) error {
			return f.newKey(cmd, l, "key rotated", func(key string) error { return l.RotateKey(f.id, key) })
		})
	revoke := f.command("revoke --ledger URL --id ID", "Revoke a key: refused from now on; its account stays", true,
		func(_ *cobra.Command, l *pgledger.Ledger) error {
			if err := l.RevokeKey(f.id); err != nil {
				return err
			}
			slog.Info("key revoked", "id", f.id, "ledger", l.Name())
			return nil
		})
	setBudget := f.command("budget --ledger URL --id ID --budget-epsilon E",
		"Change a key's budget (epsilon at the model's delta; inf: no limit)", true,
		func(_ *cobra.Command, l *pgledger.Ledger) error {
			if err := l.SetKeyBudget(f.id, f.budget); err != nil {
				return fmt.Errorf("--budget-epsilon: %w", err)
			}
			slog.Info("key budget changed", "id", f.id, "budget_epsilon", f.budget)
			return nil
		})
	list := f.command("list --ledger URL", "Print the keys as JSON: ID, budget, labels, created, rotated, revoked (never a hash)", false,
		func(cmd *cobra.Command, l *pgledger.Ledger) error {
			keys, err := l.Keys()
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), keys)
		})
	for _, c := range []*cobra.Command{add, rotate, revoke, setBudget} {
		c.Flags().StringVar(&f.id, "id", "", "the key's ID: its account (required)")
	}
	for _, c := range []*cobra.Command{add, setBudget} {
		budgetVar(c.Flags(), &f.budget, "budget-epsilon", "the key's budget in epsilon at the model's delta (inf: no limit) (required)")
	}
	add.Flags().StringArrayVar(&f.labels, "label", nil, "a label KEY=VALUE (repeatable)")
	cmd.AddCommand(add, rotate, revoke, setBudget, list)
	return cmd
}

// command is a subcommand of `nvdp serve keys` that runs run on the
// ledger of --ledger after checking its flags.
func (f *keysFlags) command(use, short string, needsID bool, run func(*cobra.Command, *pgledger.Ledger) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if needsID && f.id == "" {
				return errors.New("--id: required")
			}
			if cmd.Flags().Lookup("budget-epsilon") != nil {
				if err := pgledger.CheckKeyBudget(f.budget); err != nil {
					return flagError(err)
				}
			}
			if cmd.Flags().Lookup("label") != nil {
				var err error
				if f.labelMap, err = pgledger.ParseLabels(f.labels); err != nil {
					return flagError(err)
				}
			}
			if err := pgledger.CheckKeysAt(f.path); err != nil {
				return flagError(err)
			}
			l, err := pgledger.OpenToRead(f.path)
			if err != nil {
				return fmt.Errorf("--ledger: %w", ledgerHint(err, f.path))
			}
			defer l.Close()
			return run(cmd, l.(*pgledger.Ledger))
		}}
}

// newKey makes, stores and prints a key: the one time it is shown.
func (f *keysFlags) newKey(cmd *cobra.Command, l *pgledger.Ledger, event string, store func(key string) error) error {
	key, err := serve.GenerateKey()
	if err != nil {
		return err
	}
	if err := store(key); err != nil {
		return err
	}
	slog.Info(event, "id", f.id, "ledger", l.Name())
	fmt.Fprintln(cmd.OutOrStdout(), key)
	return nil
}
