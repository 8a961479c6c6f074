package sweep

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
	"github.com/nvdp-project/nvdp/internal/gluetest"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/train"
)

// bare is the base options of a test that sets only those it reads
// (CMu, Encoder, Epochs, GlueDir and Vocab of t, where not zero) over
// model.DefaultOptions, with the GLUE files of [glueFixture] (Run checks a
// cell's files before any work) and no privacy target (model.NoTarget: a
// zero TargetEpsilon is an explicit target 0, which Run refuses), so with
// hand-set clipping (HandSetClipping: a clipped cell needs a target or it).
func bare(tb testing.TB, t model.Options) train.PipelineOptions {
	o := model.DefaultOptions()
	o.Encoder = "scratch:bert-tiny"
	o.GlueDir, o.Vocab = glueFixture(tb)
	for _, f := range []struct {
		set  bool
		copy func()
	}{
		{t.CMu != 0, func() { o.CMu = t.CMu }},
		{t.Encoder != "", func() { o.Encoder = t.Encoder }},
		{t.Epochs != 0, func() { o.Epochs = t.Epochs }},
		{t.GlueDir != "", func() { o.GlueDir = t.GlueDir }},
		{t.Vocab != "", func() { o.Vocab = t.Vocab }},
	} {
		if f.set {
			f.copy()
		}
	}
	o.TargetEpsilon, o.TargetRD, o.HandSetClipping = model.NoTarget(), model.NoTarget(), true
	return train.PipelineOptions{Train: o}
}

// glueFixture writes the GLUE files of the tasks the tests sweep (SST-2
// and RTE, gluetest.Write) and returns the GLUE directory and vocabulary.
func glueFixture(tb testing.TB) (glueDir, vocab string) {
	return gluetest.Write(tb, tb.TempDir(), "sst2", "rte")
}

// fakeRunner writes a report.json as train.RunPipeline would, with a
// utility and rd_max derived from the cell (C_mu grid: utility rises to C_mu
// 4, or utility[C_mu] when given; rd_max = C_mu / 10), recording the calls.
// failID fails one cell.
type fakeRunner struct {
	mu      sync.Mutex
	calls   []string
	resume  map[string]bool
	opts    []train.PipelineOptions
	failID  string
	utility map[float64]float64
}

func (f *fakeRunner) run(ctx context.Context, c Cell, po CellSpec) error {
	f.mu.Lock()
	f.calls = append(f.calls, c.ID)
	f.opts = append(f.opts, po.PipelineOptions)
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
	if model.IsAuto(cmu) { // not set: the per-task default, not modelled here
		cmu = 0
	}
	u := 0.5 + 0.1*math.Min(cmu, 4) + 0.001*float64(c.Seed)
	if v, ok := f.utility[cmu]; ok {
		u = v
	}
	rep := train.Report{Task: c.Task, Variant: c.Variant, Mode: "principled", Lambda: po.Train.Lambda, CMu: cmu, Seed: c.Seed,
		Utility: train.Metrics{"accuracy": u}, Dir: c.Dir}
	if c.Variant != "baseline" {
		rep.Privacy = &train.PrivacySummary{Mode: privacy.ModePrincipled, RDMax: jsonfloat.Float(cmu / 10), BDPEpsilon: jsonfloat.New(10 + cmu),
			Pairs: 12, Split: "dev"}
	} else {
		rep.Lambda = 0
	}
	js, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(c.Dir, train.ReportFile), js)
}

// validating runs a cell as run does after resolving, validating and saving
// its train options as train.Run would (train_options.json).
func (f *fakeRunner) validating(ctx context.Context, c Cell, po CellSpec) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	t := resolved(po.Train)
	if err := t.Validate(); err != nil {
		return err
	}
	if err := model.SaveOptions(c.Dir, &t); err != nil {
		return err
	}
	return f.run(ctx, c, po)
}

func readManifest(t *testing.T, dir string) Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRunPlanSkipResumeAndCMuSelection(t *testing.T) {
	out := t.TempDir()
	f := &fakeRunner{}
	so := Options{Base: bare(t, model.Options{CMu: 99}), Tasks: []string{"sst2", "rte"},
		Variants: []string{"baseline", "nvdp", "nvdp-clipped"}, Lambdas: []float64{1e-2, 1}, Seeds: []uint64{1, 2},
		Out: out, Runner: f.run, CMuGrid: []float64{1, 2, 4, 8}, CMuTolerance: ptr(0.05), Jobs: 3}
	res, err := Run(context.Background(), so)
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
		if _, err := os.Stat(filepath.Join(out, id, train.ReportFile)); err != nil {
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
	// The clipped cells ran with the selected C_mu (not the base 99); nvdp keeps the base options.
	m := readManifest(t, out)
	if m.Counts[CellDone] != 28 {
		t.Errorf("manifest counts %v", m.Counts)
	}
	for _, c := range m.Cells {
		r, err := train.ReadReport(c.Dir)
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
	res, err = Run(context.Background(), so)
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
		if err := os.Remove(filepath.Join(d, train.ReportFile)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(resumed, train.CheckpointFile), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f3 := &fakeRunner{}
	so.Runner = f3.run
	if res, err = Run(context.Background(), so); err != nil {
		t.Fatal(err)
	}
	if res.Ran != 2 || !f3.resume["rte/nvdp/lambda=1/seed=2"] || f3.resume["sst2/baseline/seed=1"] {
		t.Errorf("ran %d, resume flags %v", res.Ran, f3.resume)
	}

	// A finished cell that is not the run the sweep asks for is an error, not silently reused.
	so.Lambdas = []float64{1e-2, 1}
	so.CMuGrid, so.CMuLambda = nil, nil
	so.Base.Train.CMu = 8
	_, err = Run(context.Background(), so)
	if err == nil || !strings.Contains(err.Error(), "C_mu 4, the sweep wants 8") {
		t.Errorf("changed C_mu: err = %v", err)
	}
}

func TestRunFailureAndInterruption(t *testing.T) {
	out := t.TempDir()
	f := &fakeRunner{failID: "sst2/nvdp/lambda=1e-3/seed=1"}
	so := Options{Base: bare(t, model.Options{}), Tasks: []string{"sst2"}, Variants: []string{"nvdp"}, Lambdas: []float64{1e-3, 1e-1}, Seeds: []uint64{1, 2},
		Out: out, Runner: f.run}
	res, err := Run(context.Background(), so)
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
	so = Options{Base: bare(t, model.Options{}), Tasks: []string{"sst2"}, Variants: []string{"nvdp"}, Lambdas: []float64{1e-3, 1e-1}, Seeds: []uint64{1, 2},
		Out: out2, Runner: func(ctx2 context.Context, c Cell, po CellSpec) error {
			n++
			if n == 2 {
				cancel()
				return fmt.Errorf("training interrupted: %w", ctx2.Err())
			}
			return (&fakeRunner{}).run(ctx2, c, po)
		}}
	_, err = Run(ctx, so)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	m = readManifest(t, out2)
	if m.Counts[CellDone] != 1 || m.Counts[CellInterrupted] != 1 || m.Counts[CellPending] != 2 {
		t.Errorf("after interruption: counts %v", m.Counts)
	}
	f2 := &fakeRunner{}
	so.Runner = f2.run
	if res, err = Run(context.Background(), so); err != nil || res.Ran != 3 {
		t.Errorf("rerun: ran %d, err %v", res.Ran, err)
	}
}

// TestValidate: bad options are an *option.Error naming the field, before
// any work (the sweep directory is not created); no error names a flag.
func TestValidate(t *testing.T) {
	base := func() Options {
		return Options{Base: bare(t, model.Options{}), Tasks: []string{"sst2"}, Variants: []string{"nvdp"}, Lambdas: []float64{1e-2}, Seeds: []uint64{1},
			Out: filepath.Join(t.TempDir(), "sweep"), Runner: (&fakeRunner{}).run}
	}
	for _, c := range []struct {
		name, field, want string
		mod               func(*Options)
	}{
		{"no out", "out", "no sweep directory", func(o *Options) { o.Out = "" }},
		{"unknown task", "tasks", "cola2", func(o *Options) { o.Tasks = []string{"cola2"} }},
		{"unknown variant", "variants", `unknown variant "nvib"`, func(o *Options) { o.Variants = []string{"nvib"} }},
		{"no lambdas", "lambdas", "nvdp and nvdp-clipped need a lambda", func(o *Options) { o.Lambdas = nil }},
		{"negative lambda", "lambdas", "-1 must be finite", func(o *Options) { o.Lambdas = []float64{-1} }},
		{"duplicate seed", "seeds", "duplicate value 1", func(o *Options) { o.Seeds = []uint64{1, 1} }},
		{"duplicate grid seed", "c_mu_seeds", "duplicate value 3", func(o *Options) {
			o.Variants, o.CMuGrid, o.CMuSeeds = []string{"nvdp-clipped"}, []float64{1, 2}, []uint64{3, 3}
		}},
		{"no seeds", "seeds", "empty", func(o *Options) { o.Seeds = nil }},
		{"no tasks", "tasks", "empty", func(o *Options) { o.Tasks = nil }},
		{"grid without clipped", "c_mu_grid", "not among the variants", func(o *Options) { o.CMuGrid = []float64{1, 2} }},
		{"bad grid value", "c_mu_grid", "0 must be finite and > 0", func(o *Options) { o.Variants = []string{"nvdp-clipped"}; o.CMuGrid = []float64{0} }},
		{"NaN tolerance", "c_mu_tolerance", "NaN must be >= 0", func(o *Options) {
			o.Variants, o.CMuGrid, o.CMuTolerance = []string{"nvdp-clipped"}, []float64{1}, ptr(math.NaN())
		}},
		{"negative grid lambda", "c_mu_lambda", "-0.5 must be finite", func(o *Options) {
			o.Variants, o.CMuGrid, o.CMuLambda = []string{"nvdp-clipped"}, []float64{1}, ptr(-0.5)
		}},
		{"negative jobs", "jobs", "-2 must be >= 1", func(o *Options) { o.Jobs = -2 }},
		// Concurrent cells in this process are refused (package documentation, "Concurrency").
		{"in-process jobs", "jobs", "need a Runner that runs each in its own process", func(o *Options) { o.Jobs, o.Runner = 2, nil }},
		// An explicit target of 0 is an error, never "no target" (issue 27).
		{"target epsilon 0", "target_epsilon", "target_epsilon 0: must be > 0 (leave it out for no target)", func(o *Options) {
			o.Variants, o.Base.Train.TargetEpsilon = []string{"nvdp-clipped"}, 0
		}},
		{"target RD 0", "target_rd", "target_rd 0: must be > 0 (leave it out for no target)", func(o *Options) {
			o.Variants, o.Base.Train.TargetRD = []string{"nvdp", "nvdp-clipped"}, 0
		}},
		{"negative target epsilon", "target_epsilon", "target_epsilon -1: must be > 0", func(o *Options) {
			o.Variants, o.Base.Train.TargetEpsilon = []string{"gaussian"}, -1
		}},
		{"target epsilon 0 without a calibrated variant", "target_epsilon", "target_epsilon 0: must be > 0", func(o *Options) { o.Base.Train.TargetEpsilon = 0 }},
		{"target epsilon 0 beside target epsilons", "target_epsilon", "target_epsilon 0: must be > 0", func(o *Options) {
			o.Variants, o.TargetEpsilons, o.Base.Train.TargetEpsilon = []string{"nvdp-clipped"}, []float64{4}, 0
		}},
		{"target epsilons 0", "target_epsilons", "0 must be finite and > 0", func(o *Options) {
			o.Variants, o.TargetEpsilons = []string{"nvdp-clipped"}, []float64{4, 0}
		}},
		{"zero train options: target 0", "target_epsilon", "target_epsilon 0: must be > 0", func(o *Options) {
			o.Variants, o.Base = []string{"nvdp-clipped"}, train.PipelineOptions{}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := base()
			c.mod(&o)
			_, err := Run(context.Background(), o)
			var oe *option.Error
			if !errors.As(err, &oe) || oe.Option != c.field || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want an option error on %s with %q", err, c.field, c.want)
			}
			if strings.Contains(err.Error(), "--") {
				t.Errorf("library error names a flag: %v", err)
			}
			if o.Out != "" {
				if _, err := os.Stat(o.Out); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("sweep directory made before the options were checked: %v", err)
				}
			}
		})
	}
}

// TestInProcessRunsOneCellAtATime: without a Runner (train.RunPipeline in
// this process) Jobs 0 and 1 are accepted, and Jobs > 1 is refused before any
// work, so two trainings never share the process (nn.Parallel's cores and
// OpenBLAS's process-wide thread count). The sweep below runs a real cell in
// process up to the data loading, which fails on a training split without
// its columns (Run checks that the files exist, not what they hold).
func TestInProcessRunsOneCellAtATime(t *testing.T) {
	for _, jobs := range []int{0, 1, 2, 8} {
		out := filepath.Join(t.TempDir(), "sweep")
		base := bare(t, model.Options{})
		if err := os.WriteFile(filepath.Join(base.Train.GlueDir, "SST-2", "train.tsv"), []byte("no\tcolumns\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		o := Options{Base: base,
			Tasks: []string{"sst2"}, Variants: []string{"baseline"}, Seeds: []uint64{1}, Out: out, Jobs: jobs}
		_, err := Run(context.Background(), o)
		var oe *option.Error
		if rejected := errors.As(err, &oe) && oe.Option == "jobs"; rejected != (jobs > 1) || !rejected && !strings.Contains(fmt.Sprint(err), "train.tsv") {
			t.Errorf("jobs %d: err = %v", jobs, err)
		}
		_, statErr := os.Stat(out)
		if ran := statErr == nil; ran != (jobs <= 1) {
			t.Errorf("jobs %d: sweep directory exists %v (err %v)", jobs, ran, err)
		}
	}
}

// TestExplicitZeroTolerance: a C_mu tolerance of 0 keeps the best C_mu
// only; it is not replaced by DefaultCMuTolerance, under which C_mu 2, 0.005
// below the best, would be eligible and chosen.
func TestExplicitZeroTolerance(t *testing.T) {
	for _, tc := range []struct {
		tol       *float64
		want, cmu float64
	}{
		{nil, DefaultCMuTolerance, 2},
		{ptr(0.0), 0, 4},
		{ptr(0.001), 0.001, 4},
	} {
		o := Options{Base: bare(t, model.Options{}), Tasks: []string{"sst2"}, Variants: []string{"nvdp-clipped"}, Lambdas: []float64{1e-2}, Seeds: []uint64{1},
			Out: t.TempDir(), Runner: (&fakeRunner{utility: map[float64]float64{2: 0.895, 4: 0.9}}).run,
			CMuGrid: []float64{2, 4}, CMuTolerance: tc.tol}
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if sel := res.Manifest.Selections["sst2"]; sel.Tolerance != tc.want || sel.CMu != tc.cmu {
			t.Errorf("tolerance %v: selection tolerance %v, C_mu %v; want %v, %v", tc.tol, sel.Tolerance, sel.CMu, tc.want, tc.cmu)
		}
	}
}

// TestRunTargetEpsilons: TargetEpsilons is a sweep dimension of the
// nvdp-clipped cells; the other variants run without the target.
func TestRunTargetEpsilons(t *testing.T) {
	out := t.TempDir()
	f := &fakeRunner{}
	base := train.DefaultPipelineOptions()
	base.Train.Encoder, base.Train.Out, base.Train.TargetDelta = "scratch:bert-tiny", out, 1e-6
	base.Train.GlueDir, base.Train.Vocab = glueFixture(t)
	so := Options{Base: base, Tasks: []string{"sst2"}, Variants: []string{"baseline", "nvdp", "nvdp-clipped"},
		Lambdas: []float64{1e-2}, Seeds: []uint64{1}, Out: out, Runner: f.validating, TargetEpsilons: []float64{1, 8}}
	res, err := Run(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Manifest.Cells {
		ids = append(ids, c.ID)
	}
	want := []string{"sst2/baseline/seed=1", "sst2/nvdp/lambda=1e-2/seed=1", "sst2/nvdp-clipped/epsilon=1/lambda=1e-2/seed=1",
		"sst2/nvdp-clipped/epsilon=8/lambda=1e-2/seed=1"}
	if !slices.Equal(ids, want) {
		t.Errorf("cells %v, want %v", ids, want)
	}
	for i, po := range f.opts {
		c := res.Manifest.Cells[i]
		ran := po.Train.TargetEpsilon
		if model.IsNoTarget(ran) {
			ran = 0 // the cell's "none"
		}
		if ran != c.TargetEpsilon || (c.Variant == nvib.ModelNVDPClipped) != po.Train.HasTarget() || !model.IsNoTarget(po.Train.TargetRD) {
			t.Errorf("%s ran with target epsilon %v RD %v, cell %v", c.ID, po.Train.TargetEpsilon, po.Train.TargetRD, c.TargetEpsilon)
		}
		if c.Variant == nvib.ModelNVDPClipped && po.Train.TargetDelta != 1e-6 {
			t.Errorf("%s: delta %v", c.ID, po.Train.TargetDelta)
		}
	}
	if m := readManifest(t, out); !slices.Equal(m.TargetEpsilons, []float64{1, 8}) || m.Counts[CellDone] != 4 {
		t.Errorf("manifest targets %v counts %v", m.TargetEpsilons, m.Counts)
	}
	// A finished cell calibrated to another target is an error, not reused.
	so.TargetEpsilons = []float64{1, 9}
	if err := os.Rename(filepath.Join(out, "sst2/nvdp-clipped/epsilon=8"), filepath.Join(out, "sst2/nvdp-clipped/epsilon=9")); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), so); err == nil || !strings.Contains(err.Error(), "target epsilon 8") {
		t.Errorf("changed target: err = %v", err)
	}
	// Validation.
	for _, c := range []struct {
		name, field, want string
		mod               func(*Options)
	}{
		{"no clipped variant", "target_epsilons", "not among the variants", func(o *Options) { o.Variants = []string{"nvdp"} }},
		{"with a C_mu grid", "target_epsilons", "excludes a C_mu grid", func(o *Options) { o.CMuGrid = []float64{1, 2} }},
		{"with a single target", "target_epsilons", "give one", func(o *Options) { o.Base.Train.TargetRD = 3 }},
		{"single target, no clipped variant", "target", "not among the variants", func(o *Options) {
			o.TargetEpsilons, o.Base.Train.TargetRD, o.Variants = nil, 3, []string{"nvdp"}
		}},
		{"non-positive", "target_epsilons", "0 must be finite and > 0", func(o *Options) { o.TargetEpsilons = []float64{0} }},
		{"duplicate", "target_epsilons", "duplicate value 1", func(o *Options) { o.TargetEpsilons = []float64{1, 1} }},
		{"share without a target", "target", "need a privacy target", func(o *Options) {
			o.TargetEpsilons, o.Base.Train.VarianceShare, o.Base.Train.HandSetClipping = nil, 0.2, true
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := so
			o.Out = t.TempDir()
			c.mod(&o)
			_, err := Run(context.Background(), o)
			var oe *option.Error
			if !errors.As(err, &oe) || oe.Option != c.field || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want an option error on %s with %q", err, c.field, c.want)
			}
		})
	}
}

// TestRunGaussian: TargetEpsilons is a dimension of the gaussian cells as of
// the nvdp-clipped ones, without lambda (Out/<task>/gaussian/epsilon=E/seed=S);
// a gaussian cell runs with its epsilon as the target, C calibrated (the
// fixed C_mu and logvar margin and the variance share given for the
// nvdp-clipped cells do not apply), and its options validate; a finished
// sweep reruns nothing. Without targets the gaussian cells are
// Out/<task>/gaussian/seed=S.
func TestRunGaussian(t *testing.T) {
	out := t.TempDir()
	f := &fakeRunner{}
	base := train.DefaultPipelineOptions()
	bt := &base.Train
	bt.Encoder, bt.Out, bt.CMu, bt.LogvarMargin = "scratch:bert-tiny", out, 2, 0.6931
	bt.GlueDir, bt.Vocab = glueFixture(t)
	bt.FixCMu, bt.FixLogvarMargin, bt.VarianceShare = true, true, 0.1
	so := Options{Base: base, Tasks: []string{"sst2"}, Variants: []string{"nvdp-clipped", "gaussian"},
		Lambdas: []float64{1e-2, 1}, Seeds: []uint64{1, 2}, Out: out, Runner: f.validating, TargetEpsilons: []float64{4, 16}}
	res, err := Run(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	var gauss []string
	for i, c := range res.Manifest.Cells {
		po := f.opts[i]
		if c.Variant != nvib.ModelGaussian {
			if po.Train.TargetEpsilon != c.TargetEpsilon || po.Train.LogvarMargin != 0.6931 || !po.Train.FixCMu {
				t.Errorf("%s: target %v margin %v fix C_mu %v", c.ID, po.Train.TargetEpsilon, po.Train.LogvarMargin, po.Train.FixCMu)
			}
			continue
		}
		gauss = append(gauss, c.ID)
		tr := po.Train
		// the clip constants a gaussian release does not use: their defaults (Auto)
		if tr.TargetEpsilon != c.TargetEpsilon || !model.IsAuto(tr.LogvarMargin) || tr.VarianceShare != 0 || tr.FixCMu || tr.FixLogvarMargin || c.Lambda != 0 {
			t.Errorf("%s: options %+v", c.ID, tr)
		}
	}
	want := []string{"sst2/gaussian/epsilon=4/seed=1", "sst2/gaussian/epsilon=4/seed=2", "sst2/gaussian/epsilon=16/seed=1", "sst2/gaussian/epsilon=16/seed=2"}
	if !slices.Equal(gauss, want) || len(res.Manifest.Cells) != 8+4 || res.Manifest.Counts[CellDone] != 12 {
		t.Errorf("gaussian cells %v (of %d, counts %v), want %v", gauss, len(res.Manifest.Cells), res.Manifest.Counts, want)
	}
	if again, err := Run(context.Background(), so); err != nil || again.Ran != 0 {
		t.Errorf("rerun: ran %v, err %v", again, err)
	}
	// without targets: one gaussian cell per seed
	f = &fakeRunner{}
	so.Out, so.TargetEpsilons, so.Variants, so.Runner = t.TempDir(), nil, []string{"gaussian"}, f.validating
	so.Base.Train.Out, so.Base.Train.VarianceShare, so.Base.Train.HandSetClipping = so.Out, 0, true
	res, err = Run(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Manifest.Cells {
		ids = append(ids, c.ID)
	}
	if !slices.Equal(ids, []string{"sst2/gaussian/seed=1", "sst2/gaussian/seed=2"}) || f.opts[0].Train.CMu != 2 || f.opts[0].Train.HasTarget() {
		t.Errorf("cells %v, C %v", ids, f.opts[0].Train.CMu)
	}
	// a target needs a variant it calibrates
	so.Variants, so.TargetEpsilons = []string{"nvdp"}, []float64{4}
	if _, err := Run(context.Background(), so); err == nil || !strings.Contains(err.Error(), "nvdp-clipped and gaussian") {
		t.Errorf("target without a calibrated variant: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestHandSetCells (issue 31, "A guarantee by default"): the nvdp-clipped
// and gaussian cells (principled mode) need a privacy target or
// Base.Train.HandSetClipping, not both; Run refuses before any work, naming
// the option and mentioning the others (the CLI gives them their flags).
// With a C_mu grid (which a target excludes) HandSetClipping is required by
// name. Reference mode and sweeps without a clipped variant need neither.
// The grid cells are hand-set by design: cellOptions gives them
// HandSetClipping whatever the base says; the cells without a clipping run
// without it, the calibrated cells too; the cells' options validate (the
// runner validates and saves them as train.Run does).
func TestHandSetCells(t *testing.T) {
	targets := []string{"target_epsilons", "target_epsilon", "target_rd"}
	required := append(slices.Clone(targets), "hand_set_clipping")
	base := func(v ...string) Options {
		b := bare(t, model.Options{})
		b.Train.HandSetClipping = false
		return Options{Base: b, Tasks: []string{"sst2"}, Variants: v, Lambdas: []float64{1e-2}, Seeds: []uint64{1},
			Out: filepath.Join(t.TempDir(), "sweep"), Runner: (&fakeRunner{}).run}
	}
	for _, tc := range []struct {
		name, field, want string // field "": valid
		mentions          []string
		o                 func() Options
	}{
		{"nvdp-clipped, neither", "target", "required for the nvdp-clipped and gaussian cells: target_epsilons (", required,
			func() Options { return base("baseline", "nvdp-clipped") }},
		{"gaussian, neither", "target", "or hand_set_clipping for the given constants and whatever epsilon they certify", required,
			func() Options { return base("gaussian") }},
		{"C_mu grid, neither", "hand_set_clipping", "required with a c_mu_grid: the nvdp-clipped cells run at the C_mu the grid selects", []string{"c_mu_grid"},
			func() Options { o := base("nvdp-clipped"); o.CMuGrid = []float64{1, 2}; return o }},
		{"epsilons and hand-set", "hand_set_clipping", "and a privacy target (target_epsilons, target_epsilon or target_rd) are both given: give one", targets,
			func() Options {
				o := base("nvdp-clipped")
				o.TargetEpsilons, o.Base.Train.HandSetClipping = []float64{4}, true
				return o
			}},
		{"one target and hand-set", "hand_set_clipping", "are both given", targets,
			func() Options {
				o := base("gaussian")
				o.Base.Train.TargetRD, o.Base.Train.HandSetClipping = 3, true
				return o
			}},
		{"hand-set", "", "", nil, func() Options {
			o := base("baseline", "nvdp-clipped", "gaussian")
			o.Base.Train.HandSetClipping = true
			return o
		}},
		{"epsilons", "", "", nil, func() Options { o := base("nvdp-clipped", "gaussian"); o.TargetEpsilons = []float64{4}; return o }},
		{"one target", "", "", nil, func() Options { o := base("nvdp-clipped"); o.Base.Train.TargetEpsilon = 8; return o }},
		{"reference mode", "", "", nil, func() Options { o := base("nvdp-clipped"); o.Base.Train.Mode = privacy.ModeReference; return o }},
		{"no clipped variant", "", "", nil, func() Options { return base("baseline", "nvdp") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o()
			_, err := Run(context.Background(), o)
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var oe *option.Error
			if !errors.As(err, &oe) || oe.Option != tc.field || !strings.Contains(err.Error(), tc.want) || !slices.Equal(oe.Mentions, tc.mentions) {
				t.Fatalf("err = %v (%+v), want an option error on %s with %q mentioning %v", err, oe, tc.field, tc.want, tc.mentions)
			}
			if _, err := os.Stat(o.Out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s made before the options were checked", o.Out)
			}
		})
	}

	// cellOptions: the grid cells hand-set whatever the base says
	o := base("baseline", "nvdp", "nvdp-clipped", "gaussian")
	o.CMuGrid, o.CMuLambda, o.CMuSeeds = []float64{1, 2}, ptr(1e-2), []uint64{1}
	grid, main := plan(&o)
	for _, hand := range []bool{false, true} {
		o.Base.Train.HandSetClipping = hand
		for _, c := range slices.Concat(grid, main) {
			want := c.Grid || hand && nvib.Calibratable(c.Variant)
			if got := cellOptions(&o, c).Train.HandSetClipping; got != want {
				t.Errorf("base hand-set %v, cell %s: hand_set_clipping %v, want %v", hand, c.ID, got, want)
			}
		}
	}
	// a target epsilon cell is calibrated, never hand-set
	if c := (&Cell{Task: "sst2", Variant: nvib.ModelNVDPClipped, Lambda: 1e-2, Seed: 1, TargetEpsilon: 8}).place(o.Out); cellOptions(&o, c).Train.HandSetClipping {
		t.Errorf("cell %s calibrated to epsilon 8 runs hand-set", c.ID)
	}

	// a grid sweep end to end: every cell's options validate and save (train.Run's checks)
	f := &fakeRunner{}
	so := base("baseline", "nvdp-clipped")
	so.Base = train.DefaultPipelineOptions()
	bt := &so.Base.Train
	bt.Encoder, bt.Out, bt.HandSetClipping = "scratch:bert-tiny", so.Out, true
	bt.GlueDir, bt.Vocab = glueFixture(t)
	so.CMuGrid, so.Runner = []float64{1, 2}, f.validating
	res, err := Run(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest.Counts[CellDone] != 4 || len(f.opts) != 3 { // the clipped cell at the selected C_mu links to its grid cell
		t.Fatalf("counts %v, %d ran", res.Manifest.Counts, len(f.opts))
	}
	for i, po := range f.opts {
		id, variant := f.calls[i], po.Train.Variant
		if po.Train.HandSetClipping != nvib.Calibratable(variant) {
			t.Errorf("%s ran with hand_set_clipping %v", id, po.Train.HandSetClipping)
		}
		saved, err := model.LoadOptions(po.Train.Out)
		if err != nil || saved.HandSetClipping != nvib.Calibratable(variant) {
			t.Errorf("%s saved hand_set_clipping %v (%v)", id, saved != nil && saved.HandSetClipping, err)
		}
	}
}
