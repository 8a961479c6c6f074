package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

func TestFormatLambda(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{{1e-3, "1e-3"}, {1e-2, "1e-2"}, {0.1, "1e-1"}, {1, "1"}, {0, "0"}, {0.5, "5e-1"}, {2.5e-4, "2.5e-4"}, {10, "10"}, {1e-12, "1e-12"}} {
		if got := FormatLambda(c.in); got != c.want {
			t.Errorf("FormatLambda(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSelectCMu(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name      string
		cands     []CMuCandidate
		tol       float64
		want      float64
		tightest  float64
		eligible  []float64
		reasonHas string
		err       string
	}{
		{name: "smallest within tolerance",
			cands: []CMuCandidate{{CMu: 1, Utility: 0.80, RDMax: 0.1}, {CMu: 2, Utility: 0.905, RDMax: 0.2},
				{CMu: 4, Utility: 0.91, RDMax: 0.5}, {CMu: 8, Utility: 0.90, RDMax: 0.9}},
			tol: 0.01, want: 2, tightest: 2, eligible: []float64{2, 4, 8}, reasonHas: "also has the tightest"},
		{name: "input order irrelevant",
			cands: []CMuCandidate{{CMu: 8, Utility: 0.90, RDMax: 0.9}, {CMu: 4, Utility: 0.91, RDMax: 0.5},
				{CMu: 2, Utility: 0.905, RDMax: 0.2}, {CMu: 1, Utility: 0.80, RDMax: 0.1}},
			tol: 0.01, want: 2, tightest: 2, eligible: []float64{2, 4, 8}},
		{name: "tolerance zero: best only",
			cands: []CMuCandidate{{CMu: 1, Utility: 0.80}, {CMu: 2, Utility: 0.905}, {CMu: 4, Utility: 0.91}},
			tol:   0, want: 4, tightest: 4, eligible: []float64{4}},
		{name: "tolerance exactly a decimal difference counts",
			cands: []CMuCandidate{{CMu: 1, Utility: 0.89, RDMax: 1}, {CMu: 2, Utility: 0.9, RDMax: 2}},
			tol:   0.01, want: 1, tightest: 1, eligible: []float64{1, 2}},
		{name: "a larger eligible C_mu with a tighter audited bound is noted",
			cands: []CMuCandidate{{CMu: 2, Utility: 0.90, RDMax: 0.7}, {CMu: 4, Utility: 0.905, RDMax: 0.3}},
			tol:   0.01, want: 2, tightest: 4, eligible: []float64{2, 4}, reasonHas: "C_mu = 4 has a tighter audited worst case (rd_max 0.3 vs 0.7)"},
		{name: "rd ties broken by BDP",
			cands: []CMuCandidate{{CMu: 2, Utility: 0.9, RDMax: 0.5, BDPEpsilon: 11}, {CMu: 3, Utility: 0.9, RDMax: 0.5, BDPEpsilon: 10}},
			tol:   0.01, want: 2, tightest: 3, eligible: []float64{2, 3}},
		{name: "undefined bound is never the tightest",
			cands: []CMuCandidate{{CMu: 1, Utility: 0.9, RDMax: inf, BDPEpsilon: inf}, {CMu: 2, Utility: 0.9, RDMax: 3}},
			tol:   0.01, want: 1, tightest: 2, eligible: []float64{1, 2}, reasonHas: "rd_max 3 vs undefined"},
		{name: "empty", err: "no candidates"},
		{name: "NaN utility", cands: []CMuCandidate{{CMu: 1, Utility: math.NaN()}}, err: "NaN"},
		{name: "duplicate", cands: []CMuCandidate{{CMu: 1, Utility: 0.5}, {CMu: 1, Utility: 0.6}}, err: "duplicate C_mu 1"},
		{name: "negative tolerance", cands: []CMuCandidate{{CMu: 1, Utility: 0.5}}, tol: -1, err: "tolerance"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sel, err := SelectCMu(c.cands, c.tol)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sel.CMu != c.want || sel.Tightest != c.tightest {
				t.Errorf("C_mu = %v, tightest %v; want %v, %v (%s)", sel.CMu, sel.Tightest, c.want, c.tightest, sel.Reason)
			}
			var elig []float64
			for _, cd := range sel.Candidates {
				if cd.Eligible {
					elig = append(elig, cd.CMu)
				}
			}
			if fmt.Sprint(elig) != fmt.Sprint(c.eligible) {
				t.Errorf("eligible %v, want %v", elig, c.eligible)
			}
			if !strings.Contains(sel.Reason, c.reasonHas) {
				t.Errorf("reason %q lacks %q", sel.Reason, c.reasonHas)
			}
			if _, err := json.Marshal(sel); err != nil {
				t.Errorf("selection does not marshal: %v", err)
			}
		})
	}
}

// fakeRunner writes a report.json as RunPipeline would, with a utility and
// rd_max derived from the cell (C_mu grid: utility rises to C_mu 4, rd_max =
// C_mu / 10), recording the calls. failID fails one cell.
type fakeRunner struct {
	mu     sync.Mutex
	calls  []string
	resume map[string]bool
	failID string
}

func (f *fakeRunner) run(ctx context.Context, c Cell, po PipelineOptions) error {
	f.mu.Lock()
	f.calls = append(f.calls, c.ID)
	if f.resume == nil {
		f.resume = map[string]bool{}
	}
	f.resume[c.ID] = po.Train.Resume
	f.mu.Unlock()
	if po.Train.Out != c.Dir || po.Train.Task != c.Task || po.Train.Variant != c.Variant || po.Train.Seed != c.Seed {
		return fmt.Errorf("options %+v do not match cell %+v", po.Train, c)
	}
	if c.ID == f.failID {
		return errors.New("boom")
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	cmu := po.Train.CMu
	u := 0.5 + 0.1*math.Min(cmu, 4) + 0.001*float64(c.Seed)
	rep := Report{Task: c.Task, Variant: c.Variant, Mode: "principled", Lambda: po.Train.Lambda, CMu: cmu, Seed: c.Seed,
		Utility: Metrics{"accuracy": u}, Dir: c.Dir}
	if c.Variant != "baseline" {
		rep.Privacy = &PrivacySummary{Mode: privacy.ModePrincipled, RDMax: jsonfloat.Float(cmu / 10), BDPEpsilon: jsonfloat.New(10 + cmu),
			Pairs: 12, Split: "dev"}
	} else {
		rep.Lambda = 0
	}
	js, _ := json.Marshal(rep)
	return atomicfile.WriteBytes(filepath.Join(c.Dir, ReportFile), js)
}

func readManifest(t *testing.T, dir string) SweepManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, SweepManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m SweepManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSweepPlanSkipResumeAndCMuSelection(t *testing.T) {
	out := t.TempDir()
	f := &fakeRunner{}
	so := SweepOptions{Base: PipelineOptions{Train: Options{CMu: 99}}, Tasks: []string{"sst2", "rte"},
		Variants: []string{"baseline", "nvdp", "nvdp-clipped"}, Lambdas: []float64{1e-2, 1}, Seeds: []uint64{1, 2},
		Out: out, Runner: f.run, CMuGrid: []float64{1, 2, 4, 8}, CMuTolerance: 0.05, Jobs: 3}
	res, err := Sweep(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	// Per task: 4 grid cells (first seed) + 2 baseline + 2 x 2 x 2 NVDP cells = 14, of which the
	// clipped cell at the grid's lambda and seed with the chosen C_mu reuses the grid run.
	if res.Ran != 26 || len(res.Manifest.Cells) != 28 {
		t.Fatalf("ran %d, %d cells; want 26 of 28", res.Ran, len(res.Manifest.Cells))
	}
	for _, task := range []string{"sst2", "rte"} {
		id := task + "/nvdp-clipped/lambda=1e-2/seed=1"
		if slices.Contains(f.calls, id) {
			t.Errorf("%s ran again instead of reusing the grid run", id)
		}
		target, err := os.Readlink(filepath.Join(out, id))
		if want := filepath.Join("..", "..", CMuGridDir, "c_mu=4", "lambda=1e-2", "seed=1"); err != nil || target != want {
			t.Errorf("%s: link %q (%v), want %q", id, target, err, want)
		}
	}
	for _, id := range []string{"sst2/baseline/seed=2", "rte/nvdp/lambda=1e-2/seed=1", "rte/nvdp-clipped/lambda=1/seed=2",
		"sst2/cmu-grid/c_mu=8/lambda=1e-2/seed=1"} {
		if _, err := os.Stat(filepath.Join(out, id, ReportFile)); err != nil {
			t.Errorf("cell %s: %v", id, err)
		}
	}
	// Utility 0.5 + 0.1 min(C_mu, 4) + 0.001: best 0.901 at C_mu 4 and 8; within 0.05: 4, 8 (and not 2 at 0.701).
	for _, task := range []string{"sst2", "rte"} {
		b, err := os.ReadFile(filepath.Join(out, task, CMuSelectionFile))
		if err != nil {
			t.Fatal(err)
		}
		var sel CMuSelection
		if err := json.Unmarshal(b, &sel); err != nil {
			t.Fatal(err)
		}
		if sel.CMu != 4 || sel.Task != task || sel.Lambda != 1e-2 || len(sel.Candidates) != 4 {
			t.Errorf("%s selection %+v", task, sel)
		}
	}
	// The clipped cells ran with the selected C_mu (not --c-mu 99); nvdp keeps the base options.
	m := readManifest(t, out)
	if m.Counts[CellDone] != 28 {
		t.Errorf("manifest counts %v", m.Counts)
	}
	for _, c := range m.Cells {
		r, err := readReport(c.Dir)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.Grid && r.CMu != c.CMu:
			t.Errorf("grid cell %s ran with C_mu %v", c.ID, r.CMu)
		case !c.Grid && c.Variant == "nvdp-clipped" && (c.CMu != 4 || r.CMu != 4):
			t.Errorf("clipped cell %s: C_mu %v, report %v; want 4", c.ID, c.CMu, r.CMu)
		case c.Variant == "nvdp" && r.CMu != 99:
			t.Errorf("nvdp cell %s: C_mu %v, want the base 99", c.ID, r.CMu)
		}
	}

	// A second run does no work.
	f2 := &fakeRunner{}
	so.Runner = f2.run
	res, err = Sweep(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran != 0 || len(f2.calls) != 0 {
		t.Errorf("second run ran %d cells: %v", res.Ran, f2.calls)
	}

	// An interrupted cell (checkpoint, no report) is resumed; a cell without a checkpoint restarts.
	resumed := filepath.Join(out, "rte/nvdp/lambda=1/seed=2")
	restarted := filepath.Join(out, "sst2/baseline/seed=1")
	for _, d := range []string{resumed, restarted} {
		if err := os.Remove(filepath.Join(d, ReportFile)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(resumed, CheckpointFile), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f3 := &fakeRunner{}
	so.Runner = f3.run
	if res, err = Sweep(context.Background(), so); err != nil {
		t.Fatal(err)
	}
	if res.Ran != 2 || !f3.resume["rte/nvdp/lambda=1/seed=2"] || f3.resume["sst2/baseline/seed=1"] {
		t.Errorf("ran %d, resume flags %v", res.Ran, f3.resume)
	}

	// A finished cell that is not the run the sweep asks for is an error, not silently reused.
	so.Lambdas = []float64{1e-2, 1}
	so.CMuGrid, so.CMuLambda = nil, nil
	so.Base.Train.CMu = 8
	_, err = Sweep(context.Background(), so)
	if err == nil || !strings.Contains(err.Error(), "C_mu 4, the sweep wants 8") {
		t.Errorf("changed C_mu: err = %v", err)
	}
}

func TestSweepFailureAndInterruption(t *testing.T) {
	out := t.TempDir()
	f := &fakeRunner{failID: "sst2/nvdp/lambda=1e-3/seed=1"}
	so := SweepOptions{Tasks: []string{"sst2"}, Variants: []string{"nvdp"}, Lambdas: []float64{1e-3, 1e-1}, Seeds: []uint64{1, 2},
		Out: out, Runner: f.run}
	res, err := Sweep(context.Background(), so)
	if err == nil || !strings.Contains(err.Error(), "1 failed: sst2/nvdp/lambda=1e-3/seed=1: boom") {
		t.Fatalf("err = %v", err)
	}
	if res.Ran != 4 {
		t.Errorf("a failure stopped the others: ran %d of 4", res.Ran)
	}
	m := readManifest(t, out)
	if m.Counts[CellFailed] != 1 || m.Counts[CellDone] != 3 {
		t.Errorf("counts %v", m.Counts)
	}

	// Cancellation: the running cell is interrupted, the rest stay pending; a rerun finishes.
	out2 := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	so = SweepOptions{Tasks: []string{"sst2"}, Variants: []string{"nvdp"}, Lambdas: []float64{1e-3, 1e-1}, Seeds: []uint64{1, 2},
		Out: out2, Runner: func(ctx2 context.Context, c Cell, po PipelineOptions) error {
			n++
			if n == 2 {
				cancel()
				return fmt.Errorf("training interrupted: %w", ctx2.Err())
			}
			return (&fakeRunner{}).run(ctx2, c, po)
		}}
	_, err = Sweep(ctx, so)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	m = readManifest(t, out2)
	if m.Counts[CellDone] != 1 || m.Counts[CellInterrupted] != 1 || m.Counts[CellPending] != 2 {
		t.Errorf("after interruption: counts %v", m.Counts)
	}
	f2 := &fakeRunner{}
	so.Runner = f2.run
	if res, err = Sweep(context.Background(), so); err != nil || res.Ran != 3 {
		t.Errorf("rerun: ran %d, err %v", res.Ran, err)
	}
}

func TestSweepValidate(t *testing.T) {
	base := func() SweepOptions {
		return SweepOptions{Tasks: []string{"sst2"}, Variants: []string{"nvdp"}, Lambdas: []float64{1e-2}, Seeds: []uint64{1}, Out: t.TempDir()}
	}
	for _, c := range []struct {
		name string
		mod  func(*SweepOptions)
		want string
	}{
		{"no out", func(o *SweepOptions) { o.Out = "" }, "--out"},
		{"unknown task", func(o *SweepOptions) { o.Tasks = []string{"cola2"} }, "--tasks"},
		{"unknown variant", func(o *SweepOptions) { o.Variants = []string{"nvib"} }, `unknown variant "nvib"`},
		{"no lambdas", func(o *SweepOptions) { o.Lambdas = nil }, "--lambdas"},
		{"negative lambda", func(o *SweepOptions) { o.Lambdas = []float64{-1} }, "-1 must be finite"},
		{"duplicate seed", func(o *SweepOptions) { o.Seeds = []uint64{1, 1} }, "duplicate"},
		{"no seeds", func(o *SweepOptions) { o.Seeds = nil }, "--seeds"},
		{"grid without clipped", func(o *SweepOptions) { o.CMuGrid = []float64{1, 2} }, "not in --variants"},
		{"bad grid value", func(o *SweepOptions) { o.Variants = []string{"nvdp-clipped"}; o.CMuGrid = []float64{0} }, "--c-mu-grid"},
		{"negative jobs", func(o *SweepOptions) { o.Jobs = -2 }, "--jobs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := base()
			c.mod(&o)
			_, err := Sweep(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}
