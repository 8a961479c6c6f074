package train

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestPipelineInMemory: the pipeline audits the posteriors it holds in
// memory, and they are the file's float32s: the audit of the posterior file
// read back gives the same report. With an audit limit on dev, the audited
// part gets its posterior file and the utility (report.json and
// eval_dev.json alike) is the whole dev split's: eval_dev.json is not
// overwritten by the audited part's evaluation.
func TestPipelineInMemory(t *testing.T) {
	glueDir, vocab := synthGlue(t, 32, 12)
	o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "run"))
	o.Epochs = 1
	po := DefaultPipelineOptions()
	po.Train, po.AuditLimit, po.Audit.Order = o, 5, 1.5
	ao := po.Audit
	rep, err := RunPipeline(context.Background(), TextPipeline(), po, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Privacy
	if p == nil || p.Examples != 5 || p.Split != "dev" || p.Posteriors != filepath.Join(o.Out, PosteriorsFile("dev")) || p.AuditEngine != AuditEngineCPU || p.AuditFallback != "" {
		t.Fatalf("privacy summary %+v", p)
	}
	post, err := privacy.ReadPosteriors(p.Posteriors)
	if err != nil {
		t.Fatal(err)
	}
	again, err := audit.Audit(context.Background(), post, ao)
	if err != nil {
		t.Fatal(err)
	}
	again.Seconds, p.Full.Seconds = 0, 0
	if !reflect.DeepEqual(again, p.Full) {
		t.Errorf("audit of the file differs from the in-memory audit:\nfile   %+v\nmemory %+v", again, p.Full)
	}
	ev := readJSON(t, filepath.Join(o.Out, "eval_dev.json"))
	if ev["examples"] != 12.0 || ev["metrics"].(map[string]any)["accuracy"] != rep.Utility["accuracy"] {
		t.Errorf("eval_dev.json: %d examples, metrics %v; want the whole dev split's (12, %v)", int(ev["examples"].(float64)), ev["metrics"], rep.Utility)
	}
}

// TestEvaluateRelease: Evaluate returns the posteriors it wrote, equal to
// the file's (values, mask and metadata); SplitPosteriors computes the same
// values in memory.
func TestEvaluateRelease(t *testing.T) {
	glueDir, vocab := synthGlue(t, 16, 8)
	o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "m"))
	o.Epochs = 1
	if _, err := Run(context.Background(), o, nil); err != nil {
		t.Fatal(err)
	}
	b, err := model.Load(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Evaluate(b, DefaultEvalOptions(b))
	if err != nil {
		t.Fatal(err)
	}
	file, err := privacy.ReadPosteriors(r.Posteriors)
	if err != nil {
		t.Fatal(err)
	}
	if r.Release == nil || !reflect.DeepEqual(r.Release, file) || r.Components != 17 || r.Model != o.Out {
		t.Errorf("release %+v, file %+v (components %d, model %q)", r.Release, file, r.Components, r.Model)
	}
	// SplitPosteriors computes the same posteriors in memory.
	mem, err := SplitPosteriors(b, "dev", "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(mem.Mu, file.Mu) || !reflect.DeepEqual(mem.Logvar, file.Logvar) || !reflect.DeepEqual(mem.Alpha, file.Alpha) {
		t.Errorf("SplitPosteriors differs from the file of Evaluate")
	}
}

// TestPipelineChecksFirst: every option of the pipeline and its data are
// checked before training: a bad audit option, a missing or empty split, a
// missing GLUE directory fail at once, with no model directory written.
func TestPipelineChecksFirst(t *testing.T) {
	glueDir, vocab := synthGlue(t, 16, 8)
	if err := os.Remove(filepath.Join(glueDir, "SST-2", "test.tsv")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(po *PipelineOptions)
		want string
	}{
		{"negative pairs", func(po *PipelineOptions) { po.Audit.Pairs = -5 }, "pairs -5"},
		{"audit order", func(po *PipelineOptions) { po.Audit.Order = 0.5 }, "order"},
		{"reference audit of too few texts", func(po *PipelineOptions) { po.Audit.Mode = privacy.ModeReference }, "audit of 8 dev posteriors"},
		{"missing audit split", func(po *PipelineOptions) { po.AuditSplit = "test" }, "test.tsv does not exist"},
		{"unknown audit split", func(po *PipelineOptions) { po.AuditSplit = "train" }, `audit_split "train"`},
		{"negative audit limit", func(po *PipelineOptions) { po.AuditLimit = -1 }, "audit_limit -1"},
		{"missing glue dir", func(po *PipelineOptions) { po.Train.GlueDir = "/nonexistent" }, `glue_dir "/nonexistent": not a directory`},
		{"epochs 0", func(po *PipelineOptions) { po.Train.Epochs = 0 }, "epochs 0"},
		{"missing baseline", func(po *PipelineOptions) { po.Baseline = "/nonexistent/b.json" }, "baseline"},
		{"skip-train without a model", func(po *PipelineOptions) { po.SkipTrain = true }, model.OptionsFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			po := DefaultPipelineOptions()
			po.Train = synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "run"))
			tc.mod(&po)
			_, err := RunPipeline(context.Background(), TextPipeline(), po, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if _, err := os.Stat(po.Train.Out); !os.IsNotExist(err) {
				t.Errorf("%s written before the error (%v)", po.Train.Out, err)
			}
		})
	}
	// a dev split without rows
	empty := filepath.Join(t.TempDir(), "glue")
	if err := os.MkdirAll(filepath.Join(empty, "SST-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"train.tsv": "sentence\tlabel\ngood\t1\n", "dev.tsv": "sentence\tlabel\n"} {
		if err := os.WriteFile(filepath.Join(empty, "SST-2", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	po := DefaultPipelineOptions()
	po.Train = synthOptions(t, empty, vocab, filepath.Join(t.TempDir(), "run"))
	if _, err := RunPipeline(context.Background(), TextPipeline(), po, nil); err == nil || !strings.Contains(err.Error(), "dev.tsv: no data rows") {
		t.Fatalf("header-only dev: %v", err)
	}
	if _, err := os.Stat(po.Train.Out); !os.IsNotExist(err) {
		t.Errorf("header-only dev: %s written (%v)", po.Train.Out, err)
	}
}

// TestReportCalibration: the pipeline's report carries the model's
// calibration record for the run's summary (not in report.json): the
// training's own after a calibrating run, equal to certificate.json, the
// model directory's when the training is skipped, none without a target.
func TestReportCalibration(t *testing.T) {
	glueDir, vocab := synthGlue(t, 16, 8)
	o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "run"))
	o.Epochs, o.TargetEpsilon, o.HandSetClipping = 1, 16, false
	rep, err := RunPipeline(context.Background(), TextPipeline(), PipelineOptions{Train: o, Audit: audit.DefaultOptions()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	file, err := model.LoadCalibration(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	same := func(name string, c *model.Calibration) {
		t.Helper()
		a, _ := json.Marshal(c)
		b, _ := json.Marshal(file)
		if c == nil || string(a) != string(b) {
			t.Errorf("%s: report's calibration (%d bytes of JSON, nil %v) is not certificate.json's (%d bytes)", name, len(a), c == nil, len(b))
		}
	}
	same("trained", rep.Calibration)
	if b, _ := json.Marshal(rep); strings.Contains(string(b), "logvar_floor") {
		t.Errorf("report.json holds the calibration record: %s", b)
	}
	skip := model.Options{RunTime: model.RunTime{Out: o.Out}}
	rep, err = RunPipeline(context.Background(), TextPipeline(), PipelineOptions{Train: skip, SkipTrain: true, Audit: audit.DefaultOptions()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	same("skipped training", rep.Calibration)
	none := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "none"))
	none.Epochs = 1
	if rep, err = RunPipeline(context.Background(), TextPipeline(), PipelineOptions{Train: none, Audit: audit.DefaultOptions()}, nil); err != nil || rep.Calibration != nil {
		t.Errorf("no target: calibration %+v, %v", rep.Calibration, err)
	}
}

// TestPipelineResume: a pipeline stopped by StopAfterSteps and resumed
// (its saved options checked once by Plan, model.Resume) gives the report
// of the same run uninterrupted: training steps, best metric, utility and
// audit; a resume of a directory without a checkpoint fails in Plan.
func TestPipelineResume(t *testing.T) {
	glueDir, vocab := synthGlue(t, 16, 8)
	run := func(out string, stop int, resume bool) (*Report, error) {
		o := synthOptions(t, glueDir, vocab, out)
		o.Epochs, o.StopAfterSteps, o.Resume = 2, stop, resume
		if resume {
			o = model.Options{RunTime: model.RunTime{Out: out, Resume: true}}
		}
		return RunPipeline(context.Background(), TextPipeline(), PipelineOptions{Train: o, Audit: audit.DefaultOptions()}, nil)
	}
	whole, err := run(filepath.Join(t.TempDir(), "whole"), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "stopped")
	if _, err := run(out, 3, false); err == nil || !strings.Contains(err.Error(), "training stopped after 3 steps") {
		t.Fatalf("stopped pipeline: %v", err)
	}
	resumed, err := run(out, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	a, b := *whole, *resumed
	if a.Training.Steps != b.Training.Steps || a.Training.BestMetric != b.Training.BestMetric || !reflect.DeepEqual(a.Utility, b.Utility) ||
		a.Privacy.RDMax != b.Privacy.RDMax || a.Privacy.RDMean == nil || b.Privacy.RDMean == nil || *a.Privacy.RDMean != *b.Privacy.RDMean {
		t.Errorf("resumed pipeline: steps %d best %v utility %v rd_max %v rd_mean %v; uninterrupted %d %v %v %v %v", b.Training.Steps, b.Training.BestMetric,
			b.Utility, b.Privacy.RDMax, b.Privacy.RDMean, a.Training.Steps, a.Training.BestMetric, a.Utility, a.Privacy.RDMax, a.Privacy.RDMean)
	}
	if _, err := run(t.TempDir(), 0, true); err == nil || !strings.Contains(err.Error(), "train_options.json") {
		t.Errorf("resume without a run: %v, want the missing train_options.json", err)
	}
}
