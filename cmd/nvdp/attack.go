package main

import "github.com/spf13/cobra"

// attackCmd is `nvdp attack`, the parent of the empirical privacy attacks
// (docs/attacks.md); each attack registers itself on it in its file's init.
var attackCmd = newAttackCmd()

func newAttackCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "attack",
		Short: "Empirical privacy attacks on a model's release: what it actually leaks, next to its certified bound",
		Args:  cobra.NoArgs,
	}
}

func init() { rootCmd.AddCommand(attackCmd) }
