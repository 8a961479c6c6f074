package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
)

func TestParseShard(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    Shard
		wantErr string
	}{
		{"0/4", Shard{0, 4}, ""},
		{" 2 / 3 ", Shard{2, 3}, ""},
		{"0/1", Shard{0, 1}, ""},
		{"a", Shard{}, `shard "a": want i/n, e.g. 0/4`},
		{"1", Shard{}, `shard "1": want i/n, e.g. 0/4`},
		{"1/x", Shard{}, `shard "1/x": want i/n, e.g. 0/4`},
		{"0/1/2", Shard{}, `shard "0/1/2": want i/n, e.g. 0/4`},
		{"2/2", Shard{}, `shard "2/2": want 0 <= i < n`},
		{"-1/2", Shard{}, `shard "-1/2": want 0 <= i < n`},
		{"0/0", Shard{}, `shard "0/0": want 0 <= i < n`},
	} {
		got, err := ParseShard(c.in)
		if c.wantErr != "" {
			var oe *option.Error
			if err == nil || err.Error() != c.wantErr || !errors.As(err, &oe) || oe.Option != "shard" || oe.Value != c.in {
				t.Errorf("ParseShard(%q): %v, want the option error %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseShard(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

// FuzzParseShard: a shard ParseShard accepts is valid and reads back from
// its canonical i/n; anything else is an option error for "shard".
//
//	go test ./audit -run '^$' -fuzz FuzzParseShard -fuzztime 30s
func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"0/4", " 1 / 2", "3/3", "a/b", "/", "", "-0/1", "9223372036854775807/1", "0/9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShard(s)
		if err != nil {
			var oe *option.Error
			if !errors.As(err, &oe) || oe.Option != "shard" {
				t.Fatalf("ParseShard(%q): %v is not an option error for shard", s, err)
			}
			return
		}
		if err := sh.Validate(); err != nil {
			t.Fatalf("ParseShard(%q) accepted an invalid shard: %v", s, err)
		}
		if back, err := ParseShard(fmt.Sprintf("%d/%d", sh.Index, sh.Count)); err != nil || back != sh {
			t.Fatalf("ParseShard(%q) = %+v, which reads back as %+v, %v", s, sh, back, err)
		}
	})
}

func TestDeviceUnsupported(t *testing.T) {
	for _, c := range []struct {
		set     func(*Options)
		sharded bool
		want    string
	}{
		{func(*Options) {}, false, ""},
		{func(o *Options) { o.UseMask, o.Direction = true, privacy.DirectionPaper }, false, ""},
		{func(*Options) {}, true, "shard"},
		{func(o *Options) { o.LowMemory, o.Pairs = true, 5 }, true, "shard"},
		{func(o *Options) { o.LowMemory, o.Pairs = true, 5 }, false, "low_memory"},
		{func(o *Options) { o.Pairs, o.Mode = 5, privacy.ModeReference }, false, "pairs"},
		{func(o *Options) { o.Mode = privacy.ModeReference }, false, "mode"},
	} {
		o := DefaultOptions()
		c.set(&o)
		if got := o.DeviceUnsupported(c.sharded); got != c.want {
			t.Errorf("%+v sharded %v: %q, want %q", o, c.sharded, got, c.want)
		}
	}
}

// writeFile writes p to a file in a fresh directory, with the clip
// constants of set in its metadata when set is not nil.
func writeFile(t *testing.T, p *privacy.Posteriors, set *privacy.ClipSet) string {
	t.Helper()
	p.Metadata = map[string]string{"split": "dev", "task": "lid"}
	if set != nil {
		for k, v := range set.Metadata() {
			p.Metadata[k] = v
		}
	}
	path := filepath.Join(t.TempDir(), "post.safetensors")
	if err := privacy.WritePosteriors(path, p); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeDevice records the audits asked of it and answers a fixed report.
type fakeDevice struct {
	audits, closes int
	opt            Options
	r              *Report
}

func (d *fakeDevice) Audit(_ context.Context, _ *privacy.Posteriors, opt Options) (*Report, error) {
	d.audits++
	d.opt = opt
	return d.r, nil
}

func (d *fakeDevice) Close() { d.closes++ }

func examplesOf(task string) string { return "examples of " + task }

// TestAuditFile: AuditFile is Audit of the file with the certified report of
// the clip set in its metadata, the BDP orders that set certifies +Inf
// skipped unless AllOrders (and in reference mode); a file without clip
// constants has no certificate; a device's report is the device's, and the
// device is closed; a bad file fails before a device is opened; a short
// audit reports no progress.
func TestAuditFile(t *testing.T) {
	p := synthPosteriors(12, 5, 16, 3)
	set := synthClipSet(p.N, p.P)
	clipped, plain := writeFile(t, p, &set), writeFile(t, p, nil)
	wantCert, err := privacy.NewCertifiedReport(set, privacy.ReportOptions{Order: privacy.DefaultOrder, Releases: 1, Delta: privacy.DefaultDelta,
		Source: "clip constants in the metadata of " + clipped})
	if err != nil {
		t.Fatal(err)
	}
	base := DefaultOptions()
	base.Workers = 1
	for _, c := range []struct {
		name      string
		path      string
		mode      privacy.Mode
		allOrders bool
		skip      bool // want Certified = set
	}{
		{"clipped", clipped, privacy.ModePrincipled, false, true},
		{"clipped, all orders", clipped, privacy.ModePrincipled, true, false},
		{"clipped, reference", clipped, privacy.ModeReference, false, false},
		{"no clip constants", plain, privacy.ModePrincipled, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := FileOptions{Options: base, AllOrders: c.allOrders, ExamplesOf: examplesOf}
			o.Mode, o.BatchSize = c.mode, 4
			calls := 0
			o.Progress = func(progress.Event) { calls++ }
			got, err := AuditFile(context.Background(), c.path, o)
			if err != nil {
				t.Fatal(err)
			}
			want := o.Options
			want.Progress = nil
			if c.skip {
				want.Certified = &set
			}
			rp, _ := privacy.ReadPosteriors(c.path)
			wr, err := Audit(context.Background(), rp, want)
			if err != nil {
				t.Fatal(err)
			}
			wr.Seconds, got.Report.Seconds = 0, 0
			if !sameJSON(got.Report, wr) {
				t.Errorf("report differs from Audit's")
			}
			if calls != 0 {
				t.Errorf("a short audit reported progress %d times", calls)
			}
			if got.Source != c.path || got.Empirical != EmpiricalOf(wr, "dev", "examples of lid") {
				t.Errorf("source %q, empirical %+v", got.Source, got.Empirical)
			}
			if (c.path == plain) != (got.Certified == nil) || c.path == clipped && !sameJSON(got.Certified, wantCert) {
				t.Errorf("certified %+v, want %+v", got.Certified, wantCert)
			}
		})
	}

	dev := &fakeDevice{r: &Report{Mode: privacy.ModePrincipled, Examples: 99}}
	o := FileOptions{Options: base, OpenDevice: func() (Device, error) { return dev, nil }}
	got, err := AuditFile(context.Background(), clipped, o)
	if err != nil || got.Report != dev.r || dev.audits != 1 || dev.closes != 1 || dev.opt.Certified == nil || dev.opt.LowMemory {
		t.Errorf("device: %v, report %p (device's %p), %d audits, %d closes, options %+v", err, got.Report, dev.r, dev.audits, dev.closes, dev.opt)
	}
	opened := 0
	o.OpenDevice = func() (Device, error) { opened++; return nil, nil } // no GPU under auto: the CPU
	if got, err := AuditFile(context.Background(), clipped, o); err != nil || got.Report.Examples != 12 || opened != 1 {
		t.Errorf("nil device: %v, %d opened", err, opened)
	}
	bad := filepath.Join(t.TempDir(), "missing.safetensors")
	if _, err := AuditFile(context.Background(), bad, o); !errors.Is(err, os.ErrNotExist) || opened != 1 {
		t.Errorf("missing file: %v, device opened %d times (want 1, before)", err, opened)
	}
	p.Metadata = nil
	badSet := writeFile(t, p, &set)
	rp, _ := privacy.ReadPosteriors(badSet)
	rp.Metadata["clip_mu"] = "two"
	if err := privacy.WritePosteriors(badSet, rp); err != nil {
		t.Fatal(err)
	}
	if _, err := AuditFile(context.Background(), badSet, o); err == nil || !strings.Contains(err.Error(), badSet+": ") || !strings.Contains(err.Error(), "clip_mu") || opened != 1 {
		t.Errorf("bad clip metadata: %v (device opened %d times)", err, opened)
	}
	o = FileOptions{Options: base}
	o.Order = 1
	if _, err := AuditFile(context.Background(), clipped, o); err == nil || !strings.HasPrefix(err.Error(), clipped+": ") {
		t.Errorf("order 1: %v", err)
	}
}

// TestAuditFileLowMemory: AutoLowMemory sets LowMemory on the CPU when the
// float64 copies would take more than half the available memory, saying so
// in the log, with the report of the default audit; never on a device, and
// not without AutoLowMemory.
func TestAuditFileLowMemory(t *testing.T) {
	p := synthPosteriors(8, 4, 8, 11)
	path := writeFile(t, p, nil)
	defer func(f func() float64) { memAvailable = f }(memAvailable)
	memAvailable = func() float64 { return copiesBytes(p) } // twice what fits
	var logs bytes.Buffer
	defer func(l *slog.Logger) { slog.SetDefault(l) }(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	base := DefaultOptions()
	base.Workers = 1
	var reports []*Report
	for _, c := range []struct {
		auto, device, want bool
	}{{true, false, true}, {false, false, false}, {true, true, false}} {
		logs.Reset()
		dev := &fakeDevice{r: &Report{}}
		o := FileOptions{Options: base, AutoLowMemory: c.auto}
		if c.device {
			o.OpenDevice = func() (Device, error) { return dev, nil }
		}
		r, err := AuditFile(context.Background(), path, o)
		if err != nil {
			t.Fatal(err)
		}
		logged := strings.Contains(logs.String(), "low-memory audit")
		if logged != c.want || dev.opt.LowMemory {
			t.Errorf("auto %v device %v: logged %v (want %v), device's LowMemory %v", c.auto, c.device, logged, c.want, dev.opt.LowMemory)
		}
		if !c.device {
			r.Report.Seconds = 0
			reports = append(reports, r.Report)
		}
	}
	if !sameJSON(reports[0], reports[1]) {
		t.Error("the low-memory report differs from the default's")
	}
}

// TestAuditFileShardMerge: the parts AuditFileShard writes merge, by
// MergeFiles, into the report of AuditFile, with the same certificate but
// for its source; a shard refuses a device.
func TestAuditFileShardMerge(t *testing.T) {
	p := synthPosteriors(9, 4, 8, 5)
	set := synthClipSet(p.N, p.P)
	path := writeFile(t, p, &set)
	o := FileOptions{Options: DefaultOptions(), ExamplesOf: examplesOf}
	whole, err := AuditFile(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var parts []string
	for i := range 3 {
		out := filepath.Join(dir, fmt.Sprintf("part%d.json", i))
		part, err := AuditFileShard(context.Background(), path, o, Shard{i, 3}, out)
		if err != nil {
			t.Fatal(err)
		}
		if read, err := ReadPart(out); err != nil || read.Shard != part.Shard {
			t.Fatalf("part %d: %v", i, err)
		}
		parts = append(parts, out)
	}
	m, err := MergeFiles(parts, examplesOf)
	if err != nil {
		t.Fatal(err)
	}
	if m.Pairs != whole.Pairs || m.RDMax != whole.RDMax || !reflect.DeepEqual(m.Argmax, whole.Argmax) || m.Shards != 3 {
		t.Errorf("merged %d pairs, rd_max %v at %v; whole %d, %v at %v", m.Pairs, m.RDMax, m.Argmax, whole.Pairs, whole.RDMax, whole.Argmax)
	}
	if want := fmt.Sprintf("3 audit parts (%s, ...)", parts[0]); m.Source != want || m.Empirical.Label != privacy.LabelEmpirical {
		t.Errorf("source %q, want %q; empirical %+v", m.Source, want, m.Empirical)
	}
	if m.Certified == nil || m.Certified.Source != "clip constants in the metadata of the audited file" || m.Certified.Epsilon != whole.Certified.Epsilon {
		t.Errorf("merged certificate %+v, whole file's %+v", m.Certified, whole.Certified)
	}
	o.OpenDevice = func() (Device, error) { return nil, nil }
	if _, err := AuditFileShard(context.Background(), path, o, Shard{0, 2}, filepath.Join(dir, "x.json")); err == nil {
		t.Error("a shard on a device: no error")
	}
	if _, err := MergeFiles(parts[:2], nil); err == nil || !strings.Contains(err.Error(), "2 parts of an audit in 3 shards") {
		t.Errorf("2 of 3 parts: %v", err)
	}
}

// TestFileReportWrite: WriteJSON is Output's JSON on one line, WriteText the
// report's table with the file and the labels.
func TestFileReportWrite(t *testing.T) {
	p := synthPosteriors(6, 3, 4, 7)
	set := synthClipSet(p.N, p.P)
	path := writeFile(t, p, &set)
	r, err := AuditFile(context.Background(), path, FileOptions{Options: DefaultOptions(), ExamplesOf: examplesOf})
	if err != nil {
		t.Fatal(err)
	}
	var got, want bytes.Buffer
	if err := r.WriteJSON(&got); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(Output{Report: r.Report, Empirical: r.Empirical, Certified: r.Certified})
	if got.String() != string(b)+"\n" {
		t.Errorf("JSON:\n%s\nwant\n%s", got.String(), b)
	}
	got.Reset()
	if err := r.WriteText(&got); err != nil {
		t.Fatal(err)
	}
	r.Report.WriteText(&want, path, r.Empirical, r.Certified)
	if got.String() != want.String() || !strings.Contains(r.Empirical.Scope, "of 6 dev examples of lid") || !strings.Contains(got.String(), path) ||
		!strings.Contains(got.String(), "certified RD") || math.IsNaN(float64(r.RDMax)) {
		t.Errorf("text:\n%s", got.String())
	}
}

// TestCheckShard: a shard and its part file go together, the part is not
// the posterior file, and a shard is principled over all pairs; each
// refusal names its options, and a valid shard is parsed.
func TestCheckShard(t *testing.T) {
	dir := t.TempDir()
	post := filepath.Join(dir, "post%1.safetensors") // a % in a path stays as it is
	if err := os.WriteFile(post, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(dir, "part.json")
	ref := DefaultOptions()
	ref.Mode = privacy.ModeReference
	sample := DefaultOptions()
	sample.Pairs = 5
	for _, tc := range []struct {
		name         string
		o            Options
		shard, out   string
		want         *Shard
		options, msg []string // the combination's options and its message's parts; nil: valid
	}{
		{"whole file", DefaultOptions(), "", "", nil, nil, nil},
		{"a shard", DefaultOptions(), "1/3", part, &Shard{Index: 1, Count: 3}, nil, nil},
		{"shard without out", DefaultOptions(), "0/2", "", nil, []string{"shard", "out", "out"}, []string{"shard and out go together"}},
		{"out without shard", DefaultOptions(), "", part, nil, []string{"shard", "out", "out"}, nil},
		{"out is the posteriors", DefaultOptions(), "0/2", post, nil, []string{"out", "posteriors"}, []string{"out " + post + " is the posteriors file " + post + ":"}},
		{"reference mode", ref, "0/2", part, nil, []string{"shard", "mode", "pairs"}, []string{"no mode reference, no pairs"}},
		{"a sample of pairs", sample, "0/2", part, nil, []string{"shard", "mode", "pairs"}, nil},
	} {
		got, err := tc.o.CheckShard(post, tc.shard, tc.out)
		if tc.options == nil {
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: %v, %v, want %v", tc.name, got, err, tc.want)
			}
			continue
		}
		var c *option.CombinationError
		if !errors.As(err, &c) || !reflect.DeepEqual(c.Options, tc.options) || got != nil {
			t.Errorf("%s: %v, %v, want a combination of %q", tc.name, got, err, tc.options)
			continue
		}
		for _, m := range tc.msg {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%s: %q, want %q in it", tc.name, err, m)
			}
		}
	}
	var oe *option.Error
	if _, err := DefaultOptions().CheckShard(post, "2/2", part); !errors.As(err, &oe) || oe.Option != "shard" {
		t.Errorf("shard 2/2: %v, want ParseShard's error", err)
	}
}

// TestCheckDevice: a precision other than fp32 is refused; an option a
// device does not run is an error with cuda and the CPU with auto, named
// (the reference mode as "mode reference"); the CPU runs everything.
func TestCheckDevice(t *testing.T) {
	ref := DefaultOptions()
	ref.Mode = privacy.ModeReference
	pairs := DefaultOptions()
	pairs.Pairs = 3
	flag := func(o string) string { return "--" + strings.ReplaceAll(o, "_", "-") }
	for _, tc := range []struct {
		name              string
		o                 Options
		device, precision string
		sharded           bool
		cpu, err          string // With(flag) of the reason and of the error; "": none
	}{
		{"every pair on cuda", DefaultOptions(), "cuda", "fp32", false, "", ""},
		{"the cpu runs a sample", pairs, "cpu", "fp32", false, "", ""},
		{"tf32", DefaultOptions(), "cpu", "tf32", false, "", "--precision tf32: the audit computes in FP64 on either device (it has no GEMM); leave --precision out"},
		{"a sample on cuda", pairs, "cuda", "fp32", false, "", "--device cuda: --pairs runs on the CPU only"},
		{"reference on cuda", ref, "cuda", "fp32", false, "", "--device cuda: --mode reference runs on the CPU only (the audit on the device evaluates every ordered pair of the whole file in principled mode); leave --mode reference out or use --device cpu"},
		{"a shard on auto", DefaultOptions(), "auto", "fp32", true, "auto: the audit on the device does not run --shard", ""},
		{"reference on auto", ref, "auto", "fp32", false, "auto: the audit on the device does not run --mode reference", ""},
	} {
		cpu, err := tc.o.CheckDevice(tc.device, tc.precision, tc.sharded)
		var got, gotErr string
		var ce *option.CombinationError
		var oe *option.Error
		if errors.As(cpu, &ce) {
			got = ce.With(flag)
		}
		switch {
		case errors.As(err, &ce):
			gotErr = ce.With(flag)
		case errors.As(err, &oe):
			gotErr = flag(oe.Option) + option.FormatValue(oe.Value) + ": " + oe.ReasonWith(flag)
		}
		if got != tc.cpu || !strings.HasPrefix(gotErr, tc.err) || (tc.err == "") != (err == nil) || (tc.cpu == "") != (cpu == nil) {
			t.Errorf("%s: cpu %q (%v), error %q (%v); want %q, %q", tc.name, got, cpu, gotErr, err, tc.cpu, tc.err)
		}
	}
}

// TestCheckGiven: an explicit q of 0 is an error naming q and mentioning
// it (a program renames both to its flag); q 0 left out (batch size / M)
// and a q given in range are not.
func TestCheckGiven(t *testing.T) {
	for _, tc := range []struct {
		q     float64
		given option.Given
		err   string
	}{
		{0, option.GivenNames("q"), "q 0: the sampling ratio must be in (0, 1]; leave q out for batch size / M"},
		{0, option.GivenNames("order"), ""},
		{0, nil, ""},
		{0.5, option.GivenNames("q"), ""},
	} {
		o := DefaultOptions()
		o.Q = tc.q
		err := o.CheckGiven(tc.given)
		if tc.err == "" {
			if err != nil {
				t.Errorf("q %v: %v", tc.q, err)
			}
			continue
		}
		var oe *option.Error
		if !errors.As(err, &oe) || err.Error() != tc.err || oe.ReasonWith(func(o string) string { return "--" + o }) != "the sampling ratio must be in (0, 1]; leave --q out for batch size / M" {
			t.Errorf("q %v given: %v, want %q naming and mentioning q", tc.q, err, tc.err)
		}
	}
}
