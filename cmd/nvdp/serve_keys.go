package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/spf13/cobra"
)

// newKeysCmd is `nvdp serve keys`: the API keys of a PostgreSQL ledger,
// added, rotated, revoked and re-budgeted while its servers run
// (--keys-in-ledger; docs/serving.md, "Keys in the database").
func newKeysCmd() *cobra.Command {
	var path string
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
	cmd.PersistentFlags().StringVar(&path, "ledger", "", "the PostgreSQL ledger: postgres://..., postgresql://... or env:VAR (required)")
	var id string
	budget := option.Auto()
	var labels []string
	open := func() (*serve.PGLedger, error) {
		switch {
		case path == "":
			return nil, errors.New("--ledger: required")
		case !serve.IsPostgres(path):
			return nil, fmt.Errorf("--ledger %s: keys live in a PostgreSQL ledger; a file ledger's server reads a keys file (nvdp serve keygen)", path)
		}
		l, err := openLedgerToRead(path)
		if err != nil {
			return nil, ledgerHint(err, path)
		}
		return l.(*serve.PGLedger), nil
	}
	needID := func() error {
		if id == "" {
			return errors.New("--id: required")
		}
		return nil
	}
	add := &cobra.Command{
		Use:   "add --ledger URL --id ID --budget-epsilon E [--label k=v ...]",
		Short: "Make a key: print it once, store its SHA-256 with its budget and labels",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needID(); err != nil {
				return err
			}
			if option.IsAuto(budget) {
				return errors.New("--budget-epsilon: required: a key of the database has its own budget (a number >= 0, inf: no limit)")
			}
			if !(budget >= 0) {
				return fmt.Errorf("--budget-epsilon %v: must be >= 0", budget)
			}
			lb := map[string]string{}
			for _, kv := range labels {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--label %q: want KEY=VALUE", kv)
				}
				lb[k] = v
			}
			l, err := open()
			if err != nil {
				return err
			}
			defer l.Close()
			key, err := serve.GenerateKey()
			if err != nil {
				return err
			}
			if err := l.AddKey(id, key, budget, lb); err != nil {
				return err
			}
			slog.Info("key added", "id", id, "ledger", l.Name())
			fmt.Fprintln(cmd.OutOrStdout(), key)
			return nil
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate --ledger URL --id ID",
		Short: "Replace a key's secret: print the new key once; the old one is refused from now on",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needID(); err != nil {
				return err
			}
			l, err := open()
			if err != nil {
				return err
			}
			defer l.Close()
			key, err := serve.GenerateKey()
			if err != nil {
				return err
			}
			if err := l.RotateKey(id, key); err != nil {
				return err
			}
			slog.Info("key rotated", "id", id, "ledger", l.Name())
			fmt.Fprintln(cmd.OutOrStdout(), key)
			return nil
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke --ledger URL --id ID",
		Short: "Revoke a key: refused from now on; its account stays",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needID(); err != nil {
				return err
			}
			l, err := open()
			if err != nil {
				return err
			}
			defer l.Close()
			if err := l.RevokeKey(id); err != nil {
				return err
			}
			slog.Info("key revoked", "id", id, "ledger", l.Name())
			return nil
		},
	}
	setBudget := &cobra.Command{
		Use:   "budget --ledger URL --id ID --budget-epsilon E",
		Short: "Change a key's budget (epsilon at the model's delta; inf: no limit)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needID(); err != nil {
				return err
			}
			if option.IsAuto(budget) {
				return errors.New("--budget-epsilon: required")
			}
			l, err := open()
			if err != nil {
				return err
			}
			defer l.Close()
			if err := l.SetKeyBudget(id, budget); err != nil {
				return fmt.Errorf("--budget-epsilon: %w", err)
			}
			slog.Info("key budget changed", "id", id, "budget_epsilon", budget)
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list --ledger URL",
		Short: "Print the keys as JSON: ID, budget, labels, created, rotated, revoked (never a hash)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := open()
			if err != nil {
				return err
			}
			defer l.Close()
			keys, err := l.Keys()
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), keys)
		},
	}
	for _, c := range []*cobra.Command{add, rotate, revoke, setBudget} {
		c.Flags().StringVar(&id, "id", "", "the key's ID: its account (required)")
	}
	for _, c := range []*cobra.Command{add, setBudget} {
		budgetVar(c.Flags(), &budget, "budget-epsilon", "the key's budget in epsilon at the model's delta (inf: no limit) (required)")
	}
	add.Flags().StringArrayVar(&labels, "label", nil, "a label KEY=VALUE (repeatable)")
	cmd.AddCommand(add, rotate, revoke, setBudget, list)
	return cmd
}
