package train

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
	"github.com/nvdp-project/nvdp/internal/jsondiff"
	"github.com/nvdp-project/nvdp/privacy"
)

// tolDeviceAudit bounds the device audit's report against the CPU's
// (relative, absolute below 1 nat): dnn's tolReport, the bound `nvdp audit
// --device` documents and tests (TestAuditAllPairsMatchesCPU,
// TestAuditDevice). Derivation: each value within 1e-9 (1 + |D|) of the
// CPU's (FP64 on both sides, lgamma within a few ulp); maxima, means and
// quantiles of such values, and the BDP figures (exponentials of lambda D)
// multiply that by at most lambda |D| <= 1e3: < 1e-6.
const tolDeviceAudit = 1e-6

// TestPipelineAuditOnDevice: `nvdp run --device cuda` in the library. A
// tiny NVDP-Clipped run trained and evaluated on the device (the CPU
// stand-in, or the GPU with NVDP_CUDA_REAL=1) audits its dev posteriors
// there (report.json: audit_engine the device's backend, no fallback) and
// its report is audit.Audit's of the posterior file it wrote within
// tolDeviceAudit, counts, argmax and fields alike (with the mask, the paper
// direction and order 1.5 too). The audits the device does not run (the
// reference mode, a pair sample, LowMemory) fall back to the CPU: the
// engine "cpu", the reason in audit_fallback, and the report audit.Audit's
// exactly. report.json written before audit_engine existed still reads.
func TestPipelineAuditOnDevice(t *testing.T) {
	glueDir, vocab := synthGlue(t, 32, 12)
	dev := cudaemu.OpenDevice(t)
	o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "run"))
	o.Epochs, o.Device = 1, dev
	cases := []struct {
		name     string
		set      func(*audit.Options)
		engine   string  // want audit_engine
		fallback string  // want in audit_fallback ("": none)
		tol      float64 // the report against audit.Audit's
	}{
		{"principled", nil, dev.Backend(), "", tolDeviceAudit},
		{"mask-paper-1.5", func(a *audit.Options) {
			a.UseMask, a.Direction, a.Order = true, privacy.DirectionPaper, 1.5
		}, dev.Backend(), "", tolDeviceAudit},
		{"reference", func(a *audit.Options) { a.Mode, a.BatchSize = privacy.ModeReference, 4 }, AuditEngineCPU, "reference mode runs on the CPU only", 0},
		{"pairs", func(a *audit.Options) { a.Pairs = 40 }, AuditEngineCPU, "a pair sample (Pairs 40) runs on the CPU only", 0},
		{"low-memory", func(a *audit.Options) { a.LowMemory = true }, AuditEngineCPU, "LowMemory applies to the CPU engine", 0},
	}
	for i, c := range cases {
		po := DefaultPipelineOptions()
		po.Train, po.SkipTrain = o, i > 0 // the first case trains, the others audit its model again
		if c.set != nil {
			c.set(&po.Audit)
		}
		rep, err := RunPipeline(context.Background(), TextPipeline(), po, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if rep.Backend != dev.Backend() {
			t.Errorf("%s: backend %q, want the device's %q", c.name, rep.Backend, dev.Backend())
		}
		b, err := os.ReadFile(filepath.Join(o.Out, ReportFile))
		if err != nil {
			t.Fatal(err)
		}
		var onDisk Report
		if err := json.Unmarshal(b, &onDisk); err != nil {
			t.Fatalf("%s: report.json: %v", c.name, err)
		}
		s := onDisk.Privacy
		if s == nil || s.Full == nil {
			t.Fatalf("%s: report.json without the audit: %s", c.name, b)
		}
		if s.AuditEngine != c.engine || !strings.Contains(s.AuditFallback, c.fallback) || (c.fallback == "") != (s.AuditFallback == "") {
			t.Errorf("%s: audit_engine %q, audit_fallback %q; want %q, %q", c.name, s.AuditEngine, s.AuditFallback, c.engine, c.fallback)
		}
		post, err := privacy.ReadPosteriors(s.Posteriors)
		if err != nil {
			t.Fatal(err)
		}
		cpu, err := audit.Audit(context.Background(), post, po.Audit)
		if err != nil {
			t.Fatalf("%s: cpu audit: %v", c.name, err)
		}
		if cpu.Examples != 12 {
			t.Fatalf("%s: cpu audit over %d examples, want the 12 of dev", c.name, cpu.Examples)
		}
		var got, want any
		decodeAs(t, s.Full, &got)
		decodeAs(t, cpu, &want)
		for _, d := range jsondiff.Diff("full", got, want, c.tol, "seconds") {
			t.Errorf("%s: %s", c.name, d)
		}
		if !jsondiff.Close(float64(s.RDMax), float64(cpu.RDMax), c.tol) || s.Pairs != cpu.Pairs || s.InvalidPairs != cpu.InvalidPairs {
			t.Errorf("%s: summary rd_max %v, pairs %d, invalid %d; cpu %v, %d, %d", c.name, s.RDMax, s.Pairs, s.InvalidPairs, cpu.RDMax, cpu.Pairs, cpu.InvalidPairs)
		}
		t.Logf("%s: engine %s, rd_max %v (cpu %v), %d pairs", c.name, s.AuditEngine, s.RDMax, cpu.RDMax, s.Pairs)
	}

	// a report.json of before audit_engine (the last case's, every pair
	// audited on the CPU) without it still reads
	b, err := os.ReadFile(filepath.Join(o.Out, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	priv := raw["privacy"].(map[string]any)
	if priv["audit_engine"] != AuditEngineCPU {
		t.Fatalf("report.json: audit_engine %v, want %q", priv["audit_engine"], AuditEngineCPU)
	}
	delete(priv, "audit_engine")
	delete(priv, "audit_fallback")
	old, _ := json.Marshal(raw)
	var r Report
	if err := json.Unmarshal(old, &r); err != nil {
		t.Fatalf("an older report.json: %v", err)
	}
	if r.Privacy == nil || r.Privacy.AuditEngine != "" || r.Privacy.AuditFallback != "" || r.Privacy.Pairs != 12*11 || math.IsNaN(float64(r.Privacy.RDMax)) {
		t.Errorf("an older report.json read as %+v", r.Privacy)
	}
}

// decodeAs is v's JSON decoded into an untyped value.
func decodeAs(t *testing.T, v any, into *any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
}
