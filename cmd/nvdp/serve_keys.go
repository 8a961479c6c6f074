package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/nvdp-project/nvdp/ledger/pgledger"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/spf13/cobra"
)

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
