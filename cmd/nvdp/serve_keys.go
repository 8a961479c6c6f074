package main

import (
	"errors"
	"fmt"
	"github.com/nvdp-project/nvdp/ledger/pgledger"
	"log/slog"
	"strings"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/spf13/cobra"
)

// keysFlags are the flags of `nvdp serve keys` and its subcommands.
type keysFlags struct {
	path, id string
	budget   float64
	labels   []string
	labelMap map[string]string // labels, parsed (parseLabels)
}

// newKeysCmd is `nvdp serve keys`: the API keys of a PostgreSQL ledger,
// added, rotated, revoked and re-budgeted while its servers run
// (--keys-in-ledger; docs/serving.md, "Keys in the database").
func newKeysCmd() *cobra.Command {
	f := &keysFlags{budget: option.Auto()}
	cmd := &cobra.Command{
		Use:   "keys add|rotate|revoke|budget|list --ledger postgres://...|env:VAR",
		Short: "Manage the API keys of a PostgreSQL ledger (servers with --keys-in-ledger see each change at their next request)",
		Long: `The keys of a PostgreSQL ledger: the SHA-256 of each key (never the key), its ID (the
account it charges), its budget in epsilon at the model's delta, and labels. Servers started
with --keys-in-ledger look each request's key up in the database, so a key added, rotated or
revoked here takes effect at the replicas' next request, without a restart. A revoked or
rotated-out key is refused (401); its account, and what it spent, stay in the ledger.`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&f.path, "ledger", "", "the PostgreSQL ledger: postgres://..., postgresql://... or env:VAR (required)")
	add := f.command("add --ledger URL --id ID --budget-epsilon E [--label k=v ...]",
		"Make a key: print it once, store its SHA-256 with its budget and labels", true, f.add)
	rotate := f.command("rotate --ledger URL --id ID",
		"Replace a key's secret: print the new key once; the old one is refused from now on", true, f.rotate)
	revoke := f.command("revoke --ledger URL --id ID", "Revoke a key: refused from now on; its account stays", true,
		func(_ *cobra.Command, l *pgledger.Ledger) error {
			if err := l.RevokeKey(f.id); err != nil {
				return err
			}
			slog.Info("key revoked", "id", f.id, "ledger", l.Name())
			return nil
		})
	setBudget := f.command("budget --ledger URL --id ID --budget-epsilon E",
		"Change a key's budget (epsilon at the model's delta; inf: no limit)", true, f.setBudget)
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

// command is a subcommand of `nvdp serve keys` that runs run on the opened
// ledger (closed after it), after the check of --id when needsID.
func (f *keysFlags) command(use, short string, needsID bool, run func(*cobra.Command, *pgledger.Ledger) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if needsID && f.id == "" {
				return errors.New("--id: required")
			}
			if cmd.Flags().Lookup("budget-epsilon") != nil {
				if option.IsAuto(f.budget) {
					return errors.New("--budget-epsilon: required: a key of the database has its own budget (a number >= 0, inf: no limit)")
				}
				if !(f.budget >= 0) {
					return fmt.Errorf("--budget-epsilon %v: must be >= 0", f.budget)
				}
			}
			if cmd.Flags().Lookup("label") != nil {
				if err := f.parseLabels(); err != nil {
					return err
				}
			}
			l, err := f.open()
			if err != nil {
				return err
			}
			defer l.Close()
			return run(cmd, l)
		}}
}

// open opens the PostgreSQL ledger of --ledger (a file ledger has a keys
// file instead).
func (f *keysFlags) open() (*pgledger.Ledger, error) {
	switch {
	case f.path == "":
		return nil, errors.New("--ledger: required")
	case !pgledger.IsPostgres(f.path):
		return nil, fmt.Errorf("--ledger %s: keys live in a PostgreSQL ledger; a file ledger's server reads a keys file (nvdp serve keygen)", f.path)
	}
	l, err := openLedgerToRead(f.path)
	if err != nil {
		return nil, ledgerHint(err, f.path)
	}
	return l.(*pgledger.Ledger), nil
}

// parseLabels checks the --label flags (KEY=VALUE) before any work.
func (f *keysFlags) parseLabels() error {
	f.labelMap = map[string]string{}
	for _, kv := range f.labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--label %q: want KEY=VALUE", kv)
		}
		f.labelMap[k] = v
	}
	if err := pgledger.CheckLabels(f.labelMap); err != nil {
		return fmt.Errorf("--label: %w", err)
	}
	return nil
}

// add makes a key, stores it with its budget and labels, and prints it.
func (f *keysFlags) add(cmd *cobra.Command, l *pgledger.Ledger) error {
	key, err := serve.GenerateKey()
	if err != nil {
		return err
	}
	if err := l.AddKey(f.id, key, f.budget, f.labelMap); err != nil {
		return err
	}
	slog.Info("key added", "id", f.id, "ledger", l.Name())
	fmt.Fprintln(cmd.OutOrStdout(), key)
	return nil
}

// rotate replaces the secret of key --id and prints the new key.
func (f *keysFlags) rotate(cmd *cobra.Command, l *pgledger.Ledger) error {
	key, err := serve.GenerateKey()
	if err != nil {
		return err
	}
	if err := l.RotateKey(f.id, key); err != nil {
		return err
	}
	slog.Info("key rotated", "id", f.id, "ledger", l.Name())
	fmt.Fprintln(cmd.OutOrStdout(), key)
	return nil
}

// setBudget changes the budget of key --id.
func (f *keysFlags) setBudget(_ *cobra.Command, l *pgledger.Ledger) error {
	if err := l.SetKeyBudget(f.id, f.budget); err != nil {
		return fmt.Errorf("--budget-epsilon: %w", err)
	}
	slog.Info("key budget changed", "id", f.id, "budget_epsilon", f.budget)
	return nil
}
