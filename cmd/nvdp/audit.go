package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/task"
	"github.com/spf13/cobra"
)

// auditFlags are the pinned flags of `nvdp audit` (issue 2); the numeric
// ones are bound to audit.DefaultOptions (their defaults).
type auditFlags struct {
	opt audit.FileOptions
	auditStrings
	posteriors, shard, out string
	part                   *audit.Shard // --shard, parsed by options
	jsonOut, noProgress    bool
	dev                    deviceFlags
}

func newAuditCmd() *cobra.Command {
	f := &auditFlags{opt: audit.FileOptions{Options: audit.DefaultOptions(), ExamplesOf: task.ExamplesOf}}
	cmd := &cobra.Command{
		Use:   "audit --posteriors FILE",
		Short: "Audit NVIB posteriors: Renyi bound over all pairs (Eq. rdp) and Bayesian DP",
		Long: `Audit a posterior file (mu, logvar, alpha and an optional attention mask, as 'nvdp eval' writes
it): the Renyi bound of Eq. rdp over every ordered pair (principled) or the released code's
batches (reference), and the Bayesian-DP estimate. Empirical numbers, not a guarantee for other
texts; a file with the clip constants gets its certified guarantee beside them. docs/privacy.md,
"The posterior file" and "The commands".`,
		RunE: func(cmd *cobra.Command, args []string) error { return runAudit(cmd, f) },
	}
	fl := cmd.Flags()
	o := &f.opt
	fl.StringVar(&f.posteriors, "posteriors", "", "posterior safetensors file (required)")
	fl.StringVar((*string)(&o.Mode), "mode", string(o.Mode), "principled or reference")
	fl.Float64Var(&o.Order, "order", o.Order, "Renyi order lambda > 1 of the RD bound")
	fl.Float64Var(&o.Delta, "delta", o.Delta, "BDP delta_mu in (0, 1)")
	fl.IntVar(&o.BatchSize, "batch-size", o.BatchSize, "reference mode: batch size >= 2 (pairs inside consecutive batches)")
	fl.Float64Var(&o.Q, "q", 0, "reference mode: accountant sampling ratio in (0, 1] (default batch-size / M)")
	fl.BoolVar(&o.UseMask, "mask", false, "principled mode: drop padding components (treats the length as public; see docs/privacy.md)")
	fl.StringVar(&f.bdpOrders, "bdp-orders", option.FormatFloats(audit.DefaultBDPOrders), "comma-separated BDP moment orders l > 0 (Renyi order l+1)")
	fl.Float64Var(&o.Confidence, "confidence", o.Confidence, "confidence of the Student-t upper bound, in (0.5, 1)")
	fl.BoolVar(&f.jsonOut, "json", false, "print one JSON object on stdout")
	fl.IntVar(&o.Pairs, "pairs", 0, "principled mode: audit a uniform sample of K ordered pairs instead of all (drawn as they are audited: memory does not grow with K)")
	fl.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the --pairs sample")
	fl.StringVar((*string)(&o.Direction), "gaussian-direction", "", "principled mode: Gaussian term D(N_q||N_q') in the bound's own direction (standard, default) or as printed in Eq. rdp, D(N_q'||N_q) (paper)")
	fl.IntVar(&o.Workers, "workers", 0, "worker goroutines (default GOMAXPROCS)")
	fl.BoolVar(&o.LowMemory, "low-memory", false, "principled mode: convert each tile's posteriors as they are needed instead of holding float64 copies of the file (2x its size): with the memory-mapped file, audits larger than RAM run; same numbers, slower (docs/performance.md). Default: on when the copies would take more than half the available memory")
	fl.BoolVar(&o.AllOrders, "all-orders", false, "principled mode: evaluate every BDP order on the data, also those at which the file's clip set is certified +Inf (skipped by default: reported +Inf)")
	fl.StringVar(&f.shard, "shard", "", "principled mode: audit shard i/n (0 <= i < n) only, the complete rows of the i-th block of first indices q; write its part to --out and combine the parts with `nvdp audit merge`")
	fl.StringVar(&f.out, "out", "", "with --shard: the part file (JSON) to write")
	fl.BoolVar(&f.noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	f.dev.bind(fl)
	_ = cmd.MarkFlagRequired("posteriors")
	cmd.AddCommand(newAuditMergeCmd())
	return cmd
}

// options are the audit options of the flags, validated before any file
// is read, and f.part, the shard of --shard and --out
// (audit.Options.CheckShard).
func (f *auditFlags) options(cmd *cobra.Command) (audit.FileOptions, error) {
	o := f.opt
	o.AutoLowMemory = !cmd.Flags().Changed("low-memory")
	if err := f.apply(&o.Options, givenFlags(cmd)); err != nil {
		return o, err
	}
	var err error
	if f.part, err = o.CheckShard(f.posteriors, f.shard, f.out); err != nil {
		return o, flagError(err)
	}
	if f.part != nil && f.jsonOut {
		return o, fmt.Errorf("--shard writes its part to --out; --json applies to the merged report (nvdp audit merge --json)")
	}
	if err := f.dev.check(); err != nil {
		return o, err
	}
	cpu, err := o.CheckDevice(f.dev.device, f.dev.precision, f.part != nil)
	if err != nil {
		return o, flagError(err)
	}
	if cpu != nil {
		slog.Info("device: cpu (" + flagError(cpu).Error() + ")")
		f.dev.device = cuda.DeviceCPU // runAudit opens no device
	}
	return o, flagError(o.Validate())
}

// gpuAudit is the audit on an open GPU (dnn.AuditOnDevice).
type gpuAudit struct{ d *cuda.Device }

func (g gpuAudit) Audit(ctx context.Context, p *privacy.Posteriors, o audit.Options) (*audit.Report, error) {
	return dnn.AuditOnDevice(ctx, g.d, p, o)
}

func (g gpuAudit) Close() { cuda.CloseLogged(g.d) }

func runAudit(cmd *cobra.Command, f *auditFlags) error {
	o, err := f.options(cmd)
	if err != nil {
		return err
	}
	o.Progress = newProgress(cmd, f.noProgress)
	if f.part != nil {
		_, err = audit.AuditFileShard(cmd.Context(), f.posteriors, o, *f.part, f.out)
		return err
	}
	if f.dev.device != cuda.DeviceCPU { // --device cuda, or auto where a GPU loads
		o.OpenDevice = func() (audit.Device, error) {
			d, err := f.dev.open()
			if d == nil {
				return nil, err
			}
			return gpuAudit{d}, nil
		}
	}
	r, err := audit.AuditFile(cmd.Context(), f.posteriors, o)
	if err != nil {
		return err
	}
	return printReport(cmd.OutOrStdout(), f.jsonOut, r)
}

// printReport prints r as JSON with --json, else as text.
func printReport(w io.Writer, jsonOut bool, r *audit.FileReport) error {
	if jsonOut {
		return r.WriteJSON(w)
	}
	return r.WriteText(w)
}

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
