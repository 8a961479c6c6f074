package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/speech"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
)

// Subprocess splits the cores between the cell subprocesses unless the
// environment sets the thread counts.
func TestSubprocessEnv(t *testing.T) {
	get := func(env []string, k string) []string {
		var v []string
		for _, e := range env {
			if strings.HasPrefix(e, k+"=") {
				v = append(v, strings.TrimPrefix(e, k+"="))
			}
		}
		return v
	}
	for _, tc := range []struct {
		name        string
		environ     []string
		cpus, jobs  int
		blas, procs string
	}{
		{"2 cores, 2 jobs", []string{"HOME=/h"}, 2, 2, "1", "1"},
		{"16 cores, 4 jobs", nil, 16, 4, "4", "4"},
		{"more jobs than cores", nil, 2, 8, "1", "1"},
		{"user's setting kept", []string{"OPENBLAS_NUM_THREADS=3"}, 8, 2, "3", "4"},
	} {
		env := subprocessEnv(tc.environ, tc.cpus, tc.jobs)
		if b, p := get(env, "OPENBLAS_NUM_THREADS"), get(env, "GOMAXPROCS"); !slices.Equal(b, []string{tc.blas}) || !slices.Equal(p, []string{tc.procs}) {
			t.Errorf("%s: OPENBLAS_NUM_THREADS %v GOMAXPROCS %v, want %s %s", tc.name, b, p, tc.blas, tc.procs)
		}
		if len(tc.environ) > 0 && env[0] != tc.environ[0] {
			t.Errorf("%s: environment not kept: %v", tc.name, env)
		}
	}
}

const helperEnv = "NVDP_SWEEP_HELPER_CELL"

// TestHelperCell is the child of TestSubprocess (as `nvdp sweep-cell`):
// it reads the cell's options from stdin, logs its thread settings and
// writes the cell's report as fakeRunner does; seed 99 fails.
func TestHelperCell(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("the child process of TestSubprocess")
	}
	po, err := ReadCellOptions(os.Stdin)
	if err == nil && po.Train.Seed == 99 {
		err = fmt.Errorf("cell error: boom")
	}
	if err == nil {
		fmt.Printf("OPENBLAS_NUM_THREADS=%s GOMAXPROCS=%s\n", os.Getenv("OPENBLAS_NUM_THREADS"), os.Getenv("GOMAXPROCS"))
		tr := po.Train
		err = (&fakeRunner{}).run(context.Background(), Cell{ID: "child", Task: tr.Task, Variant: tr.Variant, Seed: tr.Seed, Dir: tr.Out}, po)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestSubprocess: with Subprocess, Jobs cells run at once, each in its own
// process with its share of the cores and its options passed through
// exactly, its output in Out/logs/<cell>.log; a failing child's error quotes
// its log's last line.
func TestSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts test binaries")
	}
	var environ []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "OPENBLAS_NUM_THREADS=") && !strings.HasPrefix(e, "GOMAXPROCS=") {
			environ = append(environ, e)
		}
	}
	argv := []string{os.Args[0], "-test.run=^TestHelperCell$"}
	out := t.TempDir()
	runner := Subprocess(argv, subprocessEnv(append(environ, helperEnv+"=1"), 4, 2), filepath.Join(out, logDir))
	base := bare(t, model.Options{Encoder: "scratch:bert-tiny", Epochs: 3})
	base.Audit = audit.Options{Order: 1.1}
	o := Options{Base: base, Tasks: []string{"sst2"}, Variants: []string{"nvdp"}, Lambdas: []float64{1e-2, 1}, Seeds: []uint64{1, 2},
		Out: out, Runner: runner, Jobs: 2}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran != 4 || res.Manifest.Counts[CellDone] != 4 {
		t.Fatalf("ran %d, counts %v", res.Ran, res.Manifest.Counts)
	}
	for _, c := range res.Manifest.Cells {
		log, err := os.ReadFile(filepath.Join(out, logDir, strings.ReplaceAll(c.ID, "/", "_")+".log"))
		if err != nil || !strings.Contains(string(log), "OPENBLAS_NUM_THREADS=2 GOMAXPROCS=2") || !strings.Contains(string(log), "cell "+c.ID) {
			t.Errorf("log of %s: %q, %v", c.ID, log, err)
		}
		if r, err := train.ReadReport(c.Dir); err != nil || r.Lambda != c.Lambda || r.Seed != c.Seed {
			t.Errorf("report of %s: %+v, %v", c.ID, r, err)
		}
	}
	o.Out, o.Seeds, o.Lambdas = t.TempDir(), []uint64{99}, []float64{1e-2}
	o.Runner = Subprocess(argv, append(environ, helperEnv+"=1"), filepath.Join(o.Out, logDir))
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "cell error: boom") ||
		!strings.Contains(err.Error(), filepath.Join(o.Out, logDir, "sst2_nvdp_lambda=1e-2_seed=99.log")) {
		t.Errorf("failing child: %v", err)
	}
}

// TestReadCellOptions: the cell a Subprocess writes reads back exactly;
// unknown fields (a child older than the sweep) and trailing data are errors.
func TestReadCellOptions(t *testing.T) {
	drop := 0.1
	po := train.PipelineOptions{Train: model.Options{Task: "rte", Variant: "nvdp-clipped", Lambda: 1e-3, CMu: 2.5,
		Epochs: 4, Seed: 7, Dropout: drop, TargetEpsilon: 8, Releases: 2, RunTime: model.RunTime{Out: "/x/rte"}}, AuditSplit: "test", AuditLimit: 30,
		EvalSeed: 3, Audit: audit.Options{Mode: privacy.ModeReference, Order: 2, Delta: 1e-6}}
	b, err := json.Marshal(po)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadCellOptions(strings.NewReader(string(b) + "\n"))
	if err != nil || !reflect.DeepEqual(got, CellSpec{PipelineOptions: po}) {
		t.Errorf("read back %+v, %v; want %+v", got, err, po)
	}
	// A speech cell: its data beside the pipeline options.
	lid := CellSpec{PipelineOptions: po, Data: &task.Data{DataDir: "/corpus", MaxSeconds: 1.5}}
	if b, err = json.Marshal(lid); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadCellOptions(strings.NewReader(string(b))); err != nil || !reflect.DeepEqual(got, lid) {
		t.Errorf("speech cell read back %+v, %v; want %+v", got, err, lid)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"Train": {"task": "rte", "no_such_option": 1}}`, "no_such_option"},
		{string(b) + ` {}`, "data after the JSON object"},
		{string(b) + ` x`, "data after the JSON object"},
		{``, "EOF"},
		{`{"Train": `, "unexpected EOF"},
	} {
		if _, err := ReadCellOptions(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.40q: err = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestSpeechCellSpecs: every cell of a speech sweep whose base options are
// the speech task's defaults (lambda Auto: it depends on the variant) and
// hand-set clipping travels to a subprocess: marshalled and read back
// equal, with the variant's lambda (the paper's for the baseline, which has
// no KL term) and hand_set_clipping for the clipped variants only.
func TestSpeechCellSpecs(t *testing.T) {
	base := train.DefaultPipelineOptions()
	base.Train = speech.DefaultOptions().Train
	base.Train.HandSetClipping = true
	o := Options{Base: base, Tasks: []string{speech.TaskName}, Variants: []string{"baseline", "nvdp", "nvdp-clipped", "gaussian"},
		Lambdas: []float64{1e-3}, Seeds: []uint64{1}, Out: t.TempDir(), Data: &task.Data{DataDir: t.TempDir(), MaxSeconds: 1}}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	_, cells := plan(&o)
	if len(cells) != 4 {
		t.Fatalf("%d cells", len(cells))
	}
	for _, c := range cells {
		spec := cellOptions(&o, c)
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		got, err := ReadCellOptions(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		// Auto options are NaN: compare the JSON, not the values.
		if again, err := json.Marshal(got); err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%s: read back\n%s\nwant\n%s (%v)", c.ID, again, b, err)
		}
		want := 1e-3
		if c.Variant == "baseline" || c.Variant == "gaussian" {
			want = speech.PaperLambdaNVDP
		}
		if spec.Train.Lambda != want || spec.Data == nil || spec.Train.Task != speech.TaskName {
			t.Errorf("%s: lambda %v (want %v), speech %v", c.ID, spec.Train.Lambda, want, spec.Data)
		}
		if clipped := nvib.Calibratable(c.Variant); got.Train.HandSetClipping != clipped || bytes.Contains(b, []byte(`"hand_set_clipping":true`)) != clipped {
			t.Errorf("%s: hand_set_clipping %v in the spec read back (%s), want %v", c.ID, got.Train.HandSetClipping, b, clipped)
		}
	}
	if _, err := checkCells(&o, cells); err != nil {
		t.Errorf("check: %v", err)
	}
}

// speechSweep is a sweep of the speech task over variants with hand-set
// clipping, 2 seeds and an empty corpus directory (checkCells checks that
// it is a directory; the cells' runs read it).
func speechSweep(t *testing.T, variants ...string) Options {
	base := train.DefaultPipelineOptions()
	base.Train = speech.DefaultOptions().Train
	base.Train.HandSetClipping = true
	return Options{Base: base, Tasks: []string{speech.TaskName}, Variants: variants, Lambdas: []float64{1e-3}, Seeds: []uint64{1, 2},
		Out: filepath.Join(t.TempDir(), "sweep"), Data: &task.Data{DataDir: t.TempDir(), MaxSeconds: 1}}
}

// runOrPlan is Run's error (name "Run") or PlanStages': the two entry
// points that must check every cell before writing.
func runOrPlan(name string, o Options) error {
	if name == "Run" {
		_, err := Run(context.Background(), o)
		return err
	}
	_, err := PlanStages(o)
	return err
}

// TestSweepChecksBeforeWriting: a speech sweep whose second variant's
// cells are invalid (a radius schedule, which needs a clipped variant, on
// the baseline) is refused with the option named before any cell runs,
// and writes nothing, by Run and by PlanStages.
func TestSweepChecksBeforeWriting(t *testing.T) {
	for _, name := range []string{"Run", "PlanStages"} {
		o := speechSweep(t, nvib.ModelNVDPClipped, nvib.ModelBaseline)
		o.Base.Train.RadiusSchedule = &model.RadiusSchedule{Start: 2, Fraction: 0.5}
		f := &fakeRunner{}
		o.Runner = f.run
		err := runOrPlan(name, o)
		var oe *option.Error
		if !errors.As(err, &oe) || oe.Option != "radius_schedule" {
			t.Errorf("%s: %v, want the option error of radius_schedule", name, err)
		}
		if _, err := os.Stat(o.Out); !os.IsNotExist(err) || len(f.calls) > 0 {
			t.Errorf("%s: the refused sweep wrote %s (%v) or ran cells %v", name, o.Out, err, f.calls)
		}
	}
}

// TestTextSweepChecksBeforeWriting: a GLUE sweep whose cells miss an input
// (no vocabulary for the scratch encoder, as `nvdp sweep --tasks sst2
// --glue-dir /nonexistent` with the defaults; a GLUE directory that does
// not exist; a second task without its files) is refused with the input
// named, before any cell runs, and writes nothing, by Run and by
// PlanStages.
func TestTextSweepChecksBeforeWriting(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		tasks      []string
		set        func(o *model.Options)
	}{
		{"no vocab", "vocab", []string{"sst2"}, func(o *model.Options) { o.GlueDir, o.Vocab = "/nonexistent", "" }},
		{"no GLUE directory", "glue_dir", []string{"sst2"}, func(o *model.Options) { o.GlueDir = filepath.Join(t.TempDir(), "nonexistent") }},
		{"second task's files", "", []string{"sst2", "mrpc"}, func(o *model.Options) {}},
	} {
		for _, name := range []string{"Run", "PlanStages"} {
			f := &fakeRunner{}
			o := Options{Base: bare(t, model.Options{}), Tasks: tc.tasks, Variants: []string{nvib.ModelNVDP}, Lambdas: []float64{1e-2},
				Seeds: []uint64{1}, Out: filepath.Join(t.TempDir(), "sweep"), Runner: f.run}
			tc.set(&o.Base.Train)
			err := runOrPlan(name, o)
			var oe *option.Error
			switch {
			case err == nil:
				t.Errorf("%s %s: no error", tc.name, name)
			case tc.want != "" && (!errors.As(err, &oe) || oe.Option != tc.want):
				t.Errorf("%s %s: %v, want the option error of %s", tc.name, name, err, tc.want)
			case tc.want == "" && !strings.Contains(err.Error(), "MRPC"):
				t.Errorf("%s %s: %v, want MRPC's missing files", tc.name, name, err)
			}
			if _, err := os.Stat(o.Out); !os.IsNotExist(err) || len(f.calls) > 0 {
				t.Errorf("%s %s: the refused sweep wrote %s (%v) or ran cells %v", tc.name, name, o.Out, err, f.calls)
			}
		}
	}
}

// TestPreparedCells: the first cell of each variant of a speech sweep is
// checked once, before any work, and a new run of it runs with the run
// checkCells prepared (CellSpec.prepared, which RunCell trains with); the
// others are not prepared, nor is a resumed cell (its run prepares it from
// its saved options). Run again over the finished sweep with options that
// are not valid, it is refused before writing anything.
func TestPreparedCells(t *testing.T) {
	o := speechSweep(t, nvib.ModelNVDPClipped, nvib.ModelBaseline)
	f := &fakeRunner{}
	prepared := map[string]bool{}
	o.Runner = func(ctx context.Context, c Cell, spec CellSpec) error {
		prepared[c.ID] = spec.prepared != nil
		return f.run(ctx, c, spec)
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"lid/nvdp-clipped/lambda=1e-3/seed=1": true, "lid/nvdp-clipped/lambda=1e-3/seed=2": false,
		"lid/baseline/seed=1": true, "lid/baseline/seed=2": false}
	if res.Ran != 4 || !reflect.DeepEqual(prepared, want) {
		t.Errorf("ran %d cells, prepared %v; want 4, %v", res.Ran, prepared, want)
	}
	for id, resume := range map[string]bool{"lid/baseline/seed=1": false, "lid/nvdp-clipped/lambda=1e-3/seed=1": true} {
		dir := filepath.Join(o.Out, id)
		if err := os.Remove(filepath.Join(dir, train.ReportFile)); err != nil {
			t.Fatal(err)
		}
		if resume {
			if err := os.WriteFile(filepath.Join(dir, train.CheckpointFile), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	clear(prepared)
	want = map[string]bool{"lid/baseline/seed=1": true, "lid/nvdp-clipped/lambda=1e-3/seed=1": false}
	if res, err = Run(context.Background(), o); err != nil || res.Ran != 2 || !reflect.DeepEqual(prepared, want) ||
		!f.resume["lid/nvdp-clipped/lambda=1e-3/seed=1"] {
		t.Errorf("again with a new and a resumed cell: ran %v, prepared %v, resumed %v (%v); want 2, %v",
			res, prepared, f.resume, err, want)
	}
	before, err := os.ReadFile(filepath.Join(o.Out, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	o.Data.MaxSeconds = -1
	var oe *option.Error
	if _, err := Run(context.Background(), o); !errors.As(err, &oe) || oe.Option != "max_seconds" {
		t.Errorf("the finished sweep run again with max_seconds -1: %v, want its option error", err)
	}
	if after, err := os.ReadFile(filepath.Join(o.Out, ManifestFile)); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the refused sweep rewrote %s (%v)", ManifestFile, err)
	}
}
