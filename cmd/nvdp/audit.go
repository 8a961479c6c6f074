package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/task"
	"github.com/spf13/cobra"
)

// auditFlags are the pinned flags of `nvdp audit` (issue 2); the numeric
// ones are bound to audit.DefaultOptions (their defaults).
type auditFlags struct {
	opt audit.Options
	auditStrings
	posteriors string
	jsonOut    bool
	noProgress bool
	allOrders  bool
	shard      string
	out        string
	dev        deviceFlags
}

func newAuditCmd() *cobra.Command {
	f := &auditFlags{opt: audit.DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "audit --posteriors FILE",
		Short: "Audit NVIB posteriors: Renyi bound over all pairs (Eq. rdp) and Bayesian DP",
		Long: `Audit a posterior file (safetensors: mu [M,N,P], logvar [M,N,P], alpha [M,N], optional attention_mask [M,N], 1 = real component).

principled (default): the paper's Eq. rdp bound (kappa = 1) for every ordered pair over the whole
file, both directions, undefined pairs reported as +Inf; BDP (Triastcyn & Faltings 2020) for the
worst individual and pooled over pairs, minimised over --bdp-orders.
reference: the released code number for number (pairs inside consecutive batches, z-filter,
modified accountant). See docs/privacy.md.

These numbers are empirical: the maximum over the pairs of the file's texts, not a bound for
other texts, and the BDP epsilon is a Student-t estimate. When the file's metadata carries the
clip constants (nvdp eval writes them), the certified guarantee is printed beside them: the
supremum of Eq. rdp over every pair of inputs the clipping allows (privacy.Certify), its
(epsilon, delta) conversion and the certified BDP; JSON: the "certified" object.

--device cuda evaluates every pair on the GPU (FP64, the CPU engine's formula; the report is the
CPU's up to rounding, docs/engine.md "The audit on the device"); --shard, --low-memory, --pairs and
--mode reference run on the CPU only and are refused there (auto runs them on the CPU).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runAudit(cmd, f) },
	}
	fl := cmd.Flags()
	o := &f.opt
	fl.StringVar(&f.posteriors, "posteriors", "", "posterior safetensors file (required)")
	fl.StringVar(&f.mode, "mode", string(privacy.ModePrincipled), "principled or reference")
	fl.Float64Var(&o.Order, "order", o.Order, "Renyi order lambda > 1 of the RD bound")
	fl.Float64Var(&o.Delta, "delta", o.Delta, "BDP delta_mu in (0, 1)")
	fl.IntVar(&o.BatchSize, "batch-size", o.BatchSize, "reference mode: batch size >= 2 (pairs inside consecutive batches)")
	fl.Float64Var(&o.Q, "q", 0, "reference mode: accountant sampling ratio in (0, 1] (default batch-size / M)")
	fl.BoolVar(&o.UseMask, "mask", false, "principled mode: drop padding components (treats the length as public; see docs/privacy.md)")
	fl.StringVar(&f.bdpOrders, "bdp-orders", joinFloats(audit.DefaultBDPOrders), "comma-separated BDP moment orders l > 0 (Renyi order l+1)")
	fl.Float64Var(&o.Confidence, "confidence", o.Confidence, "confidence of the Student-t upper bound, in (0.5, 1)")
	fl.BoolVar(&f.jsonOut, "json", false, "print one JSON object on stdout")
	fl.IntVar(&o.Pairs, "pairs", 0, "principled mode: audit a uniform sample of K ordered pairs instead of all (drawn as they are audited: memory does not grow with K)")
	fl.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the --pairs sample")
	fl.StringVar(&f.direction, "gaussian-direction", "", "principled mode: Gaussian term D(N_q||N_q') in the bound's own direction (standard, default) or as printed in Eq. rdp, D(N_q'||N_q) (paper)")
	fl.IntVar(&o.Workers, "workers", 0, "worker goroutines (default GOMAXPROCS)")
	fl.BoolVar(&o.LowMemory, "low-memory", false, "principled mode: convert each tile's posteriors as they are needed instead of holding float64 copies of the file (2x its size): with the memory-mapped file, audits larger than RAM run; same numbers, slower (docs/performance.md). Default: on when the copies would take more than half the available memory")
	fl.BoolVar(&f.allOrders, "all-orders", false, "principled mode: evaluate every BDP order on the data, also those at which the file's clip set is certified +Inf (skipped by default: reported +Inf)")
	fl.StringVar(&f.shard, "shard", "", "principled mode: audit shard i/n (0 <= i < n) only, the complete rows of the i-th block of first indices q; write its part to --out and combine the parts with `nvdp audit merge`")
	fl.StringVar(&f.out, "out", "", "with --shard: the part file (JSON) to write")
	fl.BoolVar(&f.noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	f.dev.bind(fl)
	_ = cmd.MarkFlagRequired("posteriors")
	return cmd
}

func init() {
	auditCmd := newAuditCmd()
	auditCmd.AddCommand(newAuditMergeCmd())
	rootCmd.AddCommand(auditCmd)
}

func joinFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

// options are the audit options of the flags, validated before any file
// is read. An explicit --q 0 is an error (left out, q is batch-size / M).
func (f *auditFlags) options(cmd *cobra.Command) (audit.Options, error) {
	opt := f.opt
	if err := f.apply(&opt, cmd.Flags().Changed("q")); err != nil {
		return opt, err
	}
	if (f.shard == "") != (f.out == "") {
		return opt, fmt.Errorf("--shard and --out go together: a shard writes its part to --out")
	}
	if f.out != "" && fsutil.SameFile(f.out, f.posteriors) {
		return opt, fmt.Errorf("--out %s is the --posteriors file %s: the part would replace the posteriors it audits; write it to another file", f.out, f.posteriors)
	}
	if f.shard != "" {
		if opt.Mode == privacy.ModeReference || opt.Pairs != 0 {
			return opt, fmt.Errorf("--shard audits every pair of its rows in principled mode: no --mode reference, no --pairs")
		}
		if f.jsonOut {
			return opt, fmt.Errorf("--shard writes its part to --out; --json applies to the merged report (nvdp audit merge --json)")
		}
	}
	if err := f.dev.check(); err != nil {
		return opt, err
	}
	if f.dev.precision != cuda.PrecisionFP32 {
		return opt, fmt.Errorf("--precision %s: the audit computes in FP64 on either device (it has no GEMM); leave --precision out", f.dev.precision)
	}
	if flag := f.deviceUnsupported(opt); flag != "" && f.dev.device != cuda.DeviceCPU {
		if f.dev.device == cuda.DeviceCUDA {
			return opt, fmt.Errorf("--device cuda: %s runs on the CPU only (the audit on the device evaluates every ordered pair of the whole file in principled mode); leave %s out or use --device cpu", flag, flag)
		}
		slog.Info("device: cpu (auto: the audit on the device does not run " + flag + ")")
		f.dev.device = cuda.DeviceCPU // runAudit opens no device
	}
	return opt, flagError(opt.Validate())
}

// deviceUnsupported names the flag of an option the audit on the device
// does not run ("": none): it evaluates every ordered pair of the whole
// file in principled mode, the posteriors in device memory.
func (f *auditFlags) deviceUnsupported(opt audit.Options) string {
	switch {
	case f.shard != "":
		return "--shard"
	case opt.LowMemory:
		return "--low-memory"
	case opt.Pairs != 0:
		return "--pairs"
	case opt.Mode == privacy.ModeReference:
		return "--mode reference"
	}
	return ""
}

// parseShard parses --shard "i/n" (0 <= i < n).
func parseShard(s string) (audit.Shard, error) {
	is, ns, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(is))
	n, err2 := strconv.Atoi(strings.TrimSpace(ns))
	if !ok || err1 != nil || err2 != nil {
		return audit.Shard{}, fmt.Errorf("--shard %q: want i/n, e.g. 0/4", s)
	}
	sh := audit.Shard{Index: i, Count: n}
	if err := sh.Validate(); err != nil {
		return sh, fmt.Errorf("--shard %q: want 0 <= i < n", s)
	}
	return sh, nil
}

func runAudit(cmd *cobra.Command, f *auditFlags) error {
	opt, err := f.options(cmd)
	if err != nil {
		return err
	}
	var shard audit.Shard
	if f.shard != "" {
		if shard, err = parseShard(f.shard); err != nil {
			return err
		}
	}
	// A read-only memory map: the file's pages are page cache, not a copy
	// (privacy.MapPosteriors); the audit holds its float64 working copies.
	p, unmap, err := privacy.MapPosteriors(f.posteriors)
	if err != nil {
		return err
	}
	defer func() { _ = unmap() }() // read-only: nothing to flush
	// The certified guarantee first: it is cheap, and bad clip metadata fails
	// before a long audit.
	cert, set, err := auditCertified(p, f.posteriors, opt.Order, opt.Direction, opt.Delta)
	if err != nil {
		return err
	}
	if set != nil && !f.allOrders && opt.Mode != privacy.ModeReference {
		opt.Certified = set // skip the BDP orders the clip set certifies +Inf
	}
	// The GPU (--device cuda, or auto where one loads): the pairs are
	// evaluated there; the host holds no float64 copy of the file.
	var dev *cuda.Device
	if f.dev.device != cuda.DeviceCPU {
		if dev, err = f.dev.open(); err != nil {
			return err
		}
		defer closeDevice(dev)
	}
	// float64 copies of mu and sigma^2 that would not fit: convert per tile
	if dev == nil && !cmd.Flags().Changed("low-memory") {
		if avail := audit.MemAvailable(); opt.FitMemory(p, avail) {
			slog.Info("low-memory audit: the float64 copies would take more than half the available memory", "copies_bytes", audit.CopiesBytes(p), "available_bytes", avail)
		}
	}
	if opt.Long(p) {
		opt.Progress = newProgress(cmd, f.noProgress)
	}
	if f.shard != "" {
		return runAuditShard(cmd, f, p, opt, shard)
	}
	var r *audit.Report
	if dev != nil {
		r, err = dnn.AuditOnDevice(cmd.Context(), dev, p, opt)
	} else {
		r, err = audit.Audit(cmd.Context(), p, opt)
	}
	if err != nil {
		return fmt.Errorf("audit %s: %w", f.posteriors, err)
	}
	return printAudit(cmd.OutOrStdout(), f.jsonOut, f.posteriors, p.Metadata, r, cert)
}

// printAudit prints the audit r of src, whose posteriors have the metadata
// md, with the certified guarantee cert (nil: none): as JSON
// (audit.Output) with --json, else as text.
func printAudit(w io.Writer, jsonOut bool, src string, md map[string]string, r *audit.Report, cert *privacy.CertifiedReport) error {
	emp := audit.EmpiricalOf(r, md["split"], task.ExamplesOf(md["task"]))
	if jsonOut {
		return json.NewEncoder(w).Encode(audit.Output{Report: r, Empirical: emp, Certified: cert})
	}
	r.WriteText(w, src, emp, cert)
	return nil
}

// runAuditShard audits shard of p and writes its part to f.out.
func runAuditShard(cmd *cobra.Command, f *auditFlags, p *privacy.Posteriors, opt audit.Options, shard audit.Shard) error {
	part, err := audit.AuditShard(cmd.Context(), p, opt, shard)
	if err != nil {
		return fmt.Errorf("audit %s: shard %s: %w", f.posteriors, f.shard, err)
	}
	if err := audit.WritePart(f.out, part); err != nil {
		return err
	}
	slog.Info("audit shard written", "shard", f.shard, "rows", fmt.Sprintf("[%d, %d)", part.Rows[0], part.Rows[1]),
		"pairs", part.FinitePairs+part.InvalidPairs, "seconds", part.Seconds, "out", f.out)
	return nil
}

// auditCertified certifies the clip set in p's metadata
// (privacy.ClipSetFromMetadata) at the audit's order, direction and delta,
// and returns the set; nil, nil when the metadata carries no clip
// constants. Errors name the file.
func auditCertified(p *privacy.Posteriors, path string, order float64, dir privacy.GaussianDirection, delta float64) (*privacy.CertifiedReport, *privacy.ClipSet, error) {
	set, ok, err := privacy.ClipSetFromMetadata(p)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if !ok {
		return nil, nil, nil
	}
	c, err := privacy.NewCertifiedReport(set, privacy.ReportOptions{Order: order, Direction: dir, Releases: 1, Delta: delta, Source: "clip constants in the metadata of " + path})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, &set, nil
}
