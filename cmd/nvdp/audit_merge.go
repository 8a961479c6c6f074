package main

import (
	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/task"
	"github.com/spf13/cobra"
)

// newAuditMergeCmd is `nvdp audit merge`: the report of a sharded audit
// from the parts of its shards (`nvdp audit --shard i/n --out PART.json`).
func newAuditMergeCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "merge PART.json...",
		Short: "Merge the parts of a sharded audit (nvdp audit --shard i/n --out PART.json) into its report",
		Long: `Merge the part files of every shard of one audit into the report of the one-process audit
(the quantiles from a mergeable sketch). docs/privacy.md, "Shards".`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runAuditMerge(cmd, args, jsonOut) },
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}

func runAuditMerge(cmd *cobra.Command, paths []string, jsonOut bool) error {
	r, err := audit.MergeFiles(paths, task.ExamplesOf)
	if err != nil {
		return err
	}
	return printReport(cmd.OutOrStdout(), jsonOut, r)
}
