package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
)

// FileOptions configure [AuditFile] and [AuditFileShard]: the audit's
// [Options] and what the audit of a posterior file adds to them.
type FileOptions struct {
	Options
	// AllOrders evaluates every BDP order on the data, also those at which
	// the clip set of the file's metadata is certified +Inf. By default a
	// principled audit skips them (see Options.Certified).
	AllOrders bool
	// AutoLowMemory sets LowMemory on the CPU when the float64 copies of
	// the file would take more than half the available memory, see
	// [Options.FitMemory] and [MemAvailable]. A caller told LowMemory
	// explicitly leaves it false.
	AutoLowMemory bool
	// ExamplesOf names the examples of the task in the file's "task"
	// metadata for the empirical label, see [EmpiricalOf]; nil: "texts".
	ExamplesOf func(task string) string
	// OpenDevice opens the device that evaluates the pairs, once the file
	// is read and its clip set certified, so that a bad file fails before
	// a device is opened. It returns a nil Device for the CPU; nil
	// OpenDevice is the CPU. [AuditFile] closes the device it opened.
	// Options.DeviceUnsupported names the options a device does not run.
	OpenDevice func() (Device, error)
}

// A Device audits every ordered pair of a file in principled mode on an
// accelerator, the posteriors in its memory; dnn.AuditOnDevice on an open
// GPU is one. Close releases it.
type Device interface {
	Audit(ctx context.Context, p *privacy.Posteriors, opt Options) (*Report, error)
	Close()
}

// DeviceUnsupported returns the option of o that an audit on a [Device]
// does not run, "" when none: a device evaluates every ordered pair of the
// whole file in principled mode. sharded says the audit is one shard of
// the file ([AuditFileShard]). The names are shard, low_memory, pairs and
// mode (the reference mode), in that order.
func (o Options) DeviceUnsupported(sharded bool) string {
	switch {
	case sharded:
		return "shard"
	case o.LowMemory:
		return "low_memory"
	case o.Pairs != 0:
		return "pairs"
	case o.Mode == privacy.ModeReference:
		return "mode"
	}
	return ""
}

// CheckDevice checks the device and precision asked for an audit of o
// (sharded: one shard of the file), as [cuda.Select] takes them, before
// any work. The audit computes in FP64 on either device, so a precision
// other than [cuda.PrecisionFP32] is an [*option.Error] naming precision.
// A device does not run the option [Options.DeviceUnsupported] names:
// with [cuda.DeviceCUDA] that is an error, a [*option.CombinationError]
// naming device and the option; with [cuda.DeviceAuto] the audit runs on
// the CPU, and cpu is the reason, a [*option.CombinationError] naming the
// option (nil: the device asked for runs it).
func (o Options) CheckDevice(device, precision string, sharded bool) (cpu, err error) {
	if precision != cuda.PrecisionFP32 {
		return nil, option.MentionErrorf([]string{"precision"}, "precision", option.Show(precision),
			"the audit computes in FP64 on either device (it has no GEMM); leave precision out")
	}
	name := o.DeviceUnsupported(sharded)
	if name == "" || device == cuda.DeviceCPU {
		return nil, nil
	}
	what := "%s" // the option as given
	if name == "mode" {
		what = "%s " + string(privacy.ModeReference)
	}
	if device == cuda.DeviceCUDA {
		return nil, option.Combination("%s cuda: "+what+" runs on the CPU only (the audit on the device evaluates every ordered pair of the whole file "+
			"in principled mode); leave "+what+" out or use %s cpu", "device", name, name, "device")
	}
	return option.Combination("auto: the audit on the device does not run "+what, name), nil
}

// ParseShard parses a shard written "i/n", such as 0/4, with
// 0 <= i < n; spaces around either number are allowed. Its error is an
// [*option.Error] for the option "shard" with s as its value.
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(is))
	n, err2 := strconv.Atoi(strings.TrimSpace(ns))
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, option.Errorf("shard", s, "want i/n, e.g. 0/4")
	}
	sh := Shard{Index: i, Count: n}
	if err := sh.Validate(); err != nil {
		return sh, option.Errorf("shard", s, "want 0 <= i < n")
	}
	return sh, nil
}

// CheckShard checks, before any file is read, the inputs of the audit of
// one shard of the posterior file at path: shard, written "i/n"
// ([ParseShard]), and out, the file its part is written to, go together;
// out is not the posterior file; and a shard audits every pair of its
// rows in principled mode, so o has neither the reference mode nor a
// sample of pairs. It returns the shard, or nil for the audit of the whole
// file (shard and out "").
//
// Errors: a [*option.CombinationError] naming shard, out, posteriors,
// mode or pairs, or ParseShard's.
func (o Options) CheckShard(path, shard, out string) (*Shard, error) {
	switch {
	case (shard == "") != (out == ""):
		return nil, option.Combination("%s and %s go together: a shard writes its part to %s", "shard", "out", "out")
	case shard == "":
		return nil, nil
	case fsutil.SameFile(out, path):
		return nil, option.Combination("%s "+option.Escape(out)+" is the %s file "+option.Escape(path)+
			": the part would replace the posteriors it audits; write it to another file", "out", "posteriors")
	case o.Mode == privacy.ModeReference || o.Pairs != 0:
		return nil, option.Combination("%s audits every pair of its rows in principled mode: no %s reference, no %s", "shard", "mode", "pairs")
	}
	sh, err := ParseShard(shard)
	if err != nil {
		return nil, err
	}
	return &sh, nil
}

// A FileReport is the audit of a posterior file, or of the parts of a
// sharded one, with its empirical label and the certified guarantee of the
// clip set in the file's metadata. Its JSON is [Output]'s.
type FileReport struct {
	Output
	// Source names the file, or the parts merged, in the text.
	Source string
}

// WriteText writes the report as a table, see [Report.WriteText].
func (r *FileReport) WriteText(w io.Writer) error {
	r.Report.WriteText(w, r.Source, r.Empirical, r.Certified)
	return nil
}

// WriteJSON writes the report as one JSON object on a line.
func (r *FileReport) WriteJSON(w io.Writer) error { return json.NewEncoder(w).Encode(r.Output) }

// newFileReport labels r, of posteriors with metadata md, from source, with
// the certified guarantee cert (nil: none).
func newFileReport(r *Report, source string, md map[string]string, cert *privacy.CertifiedReport, examplesOf func(string) string) *FileReport {
	examples := "texts"
	if examplesOf != nil {
		examples = examplesOf(md["task"])
	}
	return &FileReport{Output: Output{Report: r, Empirical: EmpiricalOf(r, md["split"], examples), Certified: cert}, Source: source}
}

// certifiedOf certifies set (ok false: none) at the audit's order,
// direction and delta, for one release; its source says where set comes
// from.
func certifiedOf(set privacy.ClipSet, ok bool, source string, order float64, dir privacy.GaussianDirection, delta float64) (*privacy.CertifiedReport, error) {
	if !ok {
		return nil, nil
	}
	return privacy.NewCertifiedReport(set, privacy.ReportOptions{Order: order, Direction: dir, Releases: 1, Delta: delta, Source: source})
}

// openFile maps the posterior file path read-only and certifies the clip
// set of its metadata (nil: none), before a long audit. Unless o.AllOrders
// or in reference mode, o.Certified is the set. Errors name the file.
func openFile(path string, o *FileOptions) (*privacy.Posteriors, func() error, *privacy.CertifiedReport, error) {
	// A read-only memory map: the file's pages are page cache, not a copy
	// (privacy.MapPosteriors); the audit holds its float64 working copies.
	p, unmap, err := privacy.MapPosteriors(path)
	if err != nil {
		return nil, nil, nil, err
	}
	set, ok, err := privacy.ClipSetFromMetadata(p)
	if err == nil {
		var cert *privacy.CertifiedReport
		if cert, err = certifiedOf(set, ok, "clip constants in the metadata of "+path, o.Order, o.Direction, o.Delta); err == nil {
			if ok && !o.AllOrders && o.Mode != privacy.ModeReference {
				o.Certified = &set // skip the BDP orders the clip set certifies +Inf
			}
			return p, unmap, cert, nil
		}
	}
	_ = unmap()
	return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
}

// memAvailable is [MemAvailable]; tests replace it.
var memAvailable = MemAvailable

// prepare opens the device where o asks for one (nil: the CPU), sets
// LowMemory where AutoLowMemory asks for it on the CPU, and drops
// Progress for an audit too short to report it, see [Options.Long].
func prepare(p *privacy.Posteriors, o *FileOptions) (Device, error) {
	var dev Device
	if o.OpenDevice != nil {
		var err error
		if dev, err = o.OpenDevice(); err != nil {
			return nil, err
		}
	}
	// float64 copies of mu and sigma^2 that would not fit: convert per tile
	if dev == nil && o.AutoLowMemory {
		if avail := memAvailable(); o.FitMemory(p, avail) {
			slog.Info("low-memory audit: the float64 copies would take more than half the available memory", "copies_bytes", copiesBytes(p), "available_bytes", avail)
		}
	}
	if !o.Long(p) {
		o.Progress = nil
	}
	return dev, nil
}

// AuditFile audits the posterior file path, memory-mapped read-only, with
// the certified guarantee of the clip set in its metadata, computed first
// (it is cheap, and bad clip metadata fails before a long audit). The pairs
// are evaluated on the device o.OpenDevice opens, else by [Audit] on the
// CPU.
//
// Errors name the file: one that cannot be read, bad clip metadata, and
// the audit's errors, prefixed "audit <path>"; and the device's.
func AuditFile(ctx context.Context, path string, o FileOptions) (*FileReport, error) {
	p, unmap, cert, err := openFile(path, &o)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unmap() }() // read-only: nothing to flush
	dev, err := prepare(p, &o)
	if err != nil {
		return nil, err
	}
	var r *Report
	if dev != nil {
		defer dev.Close()
		r, err = dev.Audit(ctx, p, o.Options)
	} else {
		r, err = Audit(ctx, p, o.Options)
	}
	if err != nil {
		return nil, fmt.Errorf("audit %s: %w", path, err)
	}
	return newFileReport(r, path, p.Metadata, cert, o.ExamplesOf), nil
}

// AuditFileShard audits shard of the posterior file path, as [AuditFile]
// does the whole file on the CPU, and writes its part to out with
// [WritePart], logging it. o.OpenDevice must be nil: a device audits
// whole files.
//
// Errors are [AuditFile]'s, those of [AuditShard] prefixed with the shard,
// and the part's write.
func AuditFileShard(ctx context.Context, path string, o FileOptions, shard Shard, out string) (*Part, error) {
	if o.OpenDevice != nil {
		return nil, fmt.Errorf("audit %s: shard %d/%d: a device audits every pair of the whole file", path, shard.Index, shard.Count)
	}
	p, unmap, _, err := openFile(path, &o)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unmap() }()
	if _, err := prepare(p, &o); err != nil {
		return nil, err
	}
	part, err := AuditShard(ctx, p, o.Options, shard)
	if err != nil {
		return nil, fmt.Errorf("audit %s: shard %d/%d: %w", path, shard.Index, shard.Count, err)
	}
	if err := WritePart(out, part); err != nil {
		return nil, err
	}
	slog.Info("audit shard written", "shard", fmt.Sprintf("%d/%d", shard.Index, shard.Count), "rows", fmt.Sprintf("[%d, %d)", part.Rows[0], part.Rows[1]),
		"pairs", part.FinitePairs+part.InvalidPairs, "seconds", part.Seconds, "out", out)
	return part, nil
}

// MergeFiles reads the part files of every shard of one audit and merges
// them, see [Merge], with the certified guarantee of the clip set in the
// audited file's metadata. examplesOf is as FileOptions.ExamplesOf.
//
// Errors are [ReadPart]'s and [Merge]'s, and bad clip metadata naming the
// first part.
func MergeFiles(paths []string, examplesOf func(task string) string) (*FileReport, error) {
	parts := make([]*Part, len(paths))
	for i, path := range paths {
		p, err := ReadPart(path)
		if err != nil {
			return nil, err
		}
		parts[i] = p
	}
	r, err := Merge(parts)
	if err != nil {
		return nil, err
	}
	set, ok, err := parts[0].ClipSet()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", paths[0], err)
	}
	cert, err := certifiedOf(set, ok, "clip constants in the metadata of the audited file", r.Order, r.GaussianDirection, r.Delta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", paths[0], err)
	}
	return newFileReport(r, fmt.Sprintf("%d audit parts (%s, ...)", len(paths), paths[0]), r.Metadata, cert, examplesOf), nil
}
