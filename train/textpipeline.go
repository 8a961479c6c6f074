package train

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/loop"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
)

// TextPipeline is the GLUE tasks' part of RunPipeline: utility on dev,
// the audit of AuditSplit's posteriors (dev by default), the device of
// PipelineOptions.Train.Device for the evaluation and the audit.
func TextPipeline() PipelineTask { return &textPipeline{} }

// PreparedTextPipeline returns the GLUE tasks' part of RunPipeline, as
// [TextPipeline] does, training c, the run of
// PipelineOptions.Train that [Prepare] checked: Plan checks the rest of the
// pipeline's options and reads its data, but not the training options
// again. Unless PipelineOptions.SkipTrain, they must be c's (its Out and
// Resume).
func PreparedTextPipeline(c model.Checked) PipelineTask {
	return &textPipeline{checked: c, prepared: true}
}

// textPipeline is one run of a GLUE task's pipeline: the options as given
// and what Plan read.
type textPipeline struct {
	po       PipelineOptions // normalised by Plan; Train as given
	checked  model.Checked   // the run's options, checked once by Plan or Prepare
	prepared bool            // checked by Prepare before Plan
	glueDir  string
	dev      *glue.Dataset // the utility split, dev (DevLimit rows)
	audit    *glue.Dataset // the audited split when it is not dev whole (AuditLimit rows), else nil
}

// Plan checks every option of po and reads what the pipeline needs before
// it trains or writes anything: the training options (resolved, validated,
// their files checked; with SkipTrain or Resume the options saved in
// Train.Out), the non-private baseline, the utility and audit splits (each
// with examples) and the audit options for that many posteriors.
func (t *textPipeline) Plan(po *PipelineOptions) (*Plan, error) {
	if po.AuditSplit == "" {
		po.AuditSplit = "dev"
	}
	if po.AuditSplit != "dev" && po.AuditSplit != "test" {
		return nil, option.Errorf("audit_split", po.AuditSplit, "want dev or test")
	}
	if po.AuditLimit < 0 {
		return nil, option.Errorf("audit_limit", po.AuditLimit, "must be >= 0 (0: all)")
	}
	t.po = *po
	pl := &Plan{Train: po.Train, Examples: "texts", Device: po.Train.Device}
	o := &pl.Train
	var err error
	if c := t.checked.Options(); t.prepared && !po.SkipTrain && (c.Out != o.Out || c.Resume != o.Resume) {
		return nil, fmt.Errorf("train: the prepared run (out %s, resume %v) is not the pipeline's (out %s, resume %v)", c.Out, c.Resume, o.Out, o.Resume)
	}
	if po.SkipTrain || o.Resume {
		err = t.planSaved(o)
	} else {
		err = t.planNew(o)
	}
	if err != nil {
		return nil, err
	}
	pl.Dir = o.Out
	task, err := glue.LookupTask(o.Task)
	if err != nil {
		return nil, err
	}
	if po.Baseline != "" {
		if pl.Baseline, err = LoadBaseline(po.Baseline, task.Name); err != nil {
			return nil, err
		}
	}
	return pl, t.readSplits(task, o)
}

// planNew resolves and validates the options of a new run once
// (model.Check) and checks their files, unless Prepare did.
func (t *textPipeline) planNew(o *model.Options) error {
	if t.prepared {
		*o = t.checked.Options()
		t.glueDir = o.GlueDir
		return nil
	}
	c, err := model.Check(*o)
	if err != nil {
		return err
	}
	t.checked, *o = c, c.Options()
	if err := o.CheckFiles(); err != nil {
		return err
	}
	t.glueDir = o.GlueDir
	return nil
}

// planSaved replaces o by the options saved in o.Out (SkipTrain or Resume;
// o's directory, resume flag and GLUE directory when given are kept). With
// SkipTrain a task given must be the model's. A resumed training's options
// are checked once here (model.Resume), and its checkpoint must exist.
func (t *textPipeline) planSaved(o *model.Options) error {
	if o.Out == "" {
		return option.Errorf("out", nil, "required: the model directory")
	}
	saved, err := t.loadSaved(*o)
	if err != nil {
		return err
	}
	if t.po.SkipTrain && o.Task != "" {
		want, err := glue.LookupTask(o.Task)
		if err != nil {
			return option.Errorf("task", o.Task, "%v", err)
		}
		if have, err := glue.LookupTask(saved.Task); err != nil || have.Name != want.Name {
			return fmt.Errorf("model %s was trained on task %q, not %q: evaluate it on its own task", o.Out, saved.Task, o.Task)
		}
	}
	t.glueDir = o.GlueDir
	if t.glueDir == "" {
		t.glueDir = saved.GlueDir
	}
	resume, out := o.Resume, o.Out
	*o = *saved
	o.Resume, o.Out = resume, out // the directory may have moved since
	if st, err := os.Stat(t.glueDir); err != nil || !st.IsDir() {
		return option.Errorf("glue_dir", t.glueDir, "not a directory")
	}
	return nil
}

// loadSaved reads the options saved in o.Out: those of a resumed
// training checked once (model.Resume, kept for Train; its checkpoint must
// exist; or those Prepare checked), or, with SkipTrain, those of the model
// (model.LoadOptions).
func (t *textPipeline) loadSaved(o model.Options) (*model.Options, error) {
	if t.po.SkipTrain {
		return model.LoadOptions(o.Out)
	}
	if t.prepared {
		saved := t.checked.Options()
		return &saved, nil
	}
	c, err := model.Resume(o)
	if err != nil {
		return nil, err
	}
	if err := loop.Check(filepath.Join(o.Out, CheckpointFile), true); err != nil {
		return nil, err
	}
	t.checked = c
	saved := c.Options()
	return &saved, nil
}

// readSplits reads the utility split (dev) and, when the audit is not of
// dev whole, the audited split, and checks the audit's options for the
// posteriors it will have.
func (t *textPipeline) readSplits(task *glue.Task, o *model.Options) error {
	po := &t.po
	lo := glue.LoadOptions{SkipBadRows: o.SkipBadRows, Limit: o.DevLimit}
	var err error
	if t.dev, err = model.LoadSplit(t.glueDir, task, "dev", lo); err != nil {
		return err
	}
	audited := t.dev
	if po.AuditSplit != "dev" || po.AuditLimit > 0 {
		lo.Limit = po.AuditLimit
		if t.audit, err = model.LoadSplit(t.glueDir, task, po.AuditSplit, lo); err != nil {
			return err
		}
		audited = t.audit
	}
	if o.Variant != nvib.ModelBaseline {
		if err := po.Audit.ValidateFor(len(audited.Examples)); err != nil {
			return fmt.Errorf("audit of %d %s posteriors: %w", len(audited.Examples), po.AuditSplit, err)
		}
	}
	return nil
}

// Train is RunChecked of the options Plan checked: a new run's, with the
// dev split Plan read, or a resumed one's (the saved options with
// StopAfterSteps and the run-time choices), which reads dev as it was
// trained with.
func (t *textPipeline) Train(ctx context.Context, _ *Plan, report progress.Func) (*Result, error) {
	if t.po.Train.Resume {
		return runChecked(ctx, t.checked, nil, report)
	}
	return runChecked(ctx, t.checked, t.dev, report) // dev as Plan read it, not read again
}

// Load loads the model directory (model.Load) with the evaluation options
// of the pipeline: dev as read by Plan, the evaluation seed, the device.
func (t *textPipeline) Load(p *Plan) (PipelineModel, error) {
	b, err := model.Load(p.Dir)
	if err != nil {
		return nil, err
	}
	eo := DefaultEvalOptions(b)
	eo.GlueDir, eo.Seed, eo.Data, eo.NoPost, eo.Device = t.glueDir, t.po.EvalSeed, t.dev, t.audit != nil, t.po.Train.Device
	return &textPipelineModel{t: t, b: b, eo: eo}, nil
}

// textPipelineModel is a GLUE model loaded for the pipeline.
type textPipelineModel struct {
	t  *textPipeline
	b  *model.TextModel
	eo EvalOptions // of the utility split, dev
}

func (m *textPipelineModel) Evaluate(context.Context) (*EvalResult, error) {
	return Evaluate(m.b, m.eo)
}
func (m *textPipelineModel) Config() nvib.Config { return m.b.Model.Cfg }
func (m *textPipelineModel) Releases() bool      { return m.b.Model.Releases() }

// Audited is dev's posteriors of the utility evaluation, or those of the
// audited split read by Plan: a part of dev exported alone
// (ExportPosteriors, the utility being the whole dev split's), or the test
// split evaluated whole (eval_test.json, the submission file, its
// posteriors).
func (m *textPipelineModel) Audited(_ context.Context, util *EvalResult) (*privacy.Posteriors, string, error) {
	if m.t.audit == nil {
		return util.Release, util.Posteriors, nil
	}
	eo := m.eo
	eo.Split, eo.Data, eo.NoPost = m.t.po.AuditSplit, m.t.audit, false
	if eo.Split == "dev" {
		return ExportPosteriors(m.b, eo)
	}
	r, err := Evaluate(m.b, eo)
	if err != nil {
		return nil, "", err
	}
	return r.Release, r.Posteriors, nil
}

// Report is the report of the model on dev: its saved options, its clip
// constants or its gaussian release's radius and noise; lambda 0 for the
// variants without KL terms.
func (m *textPipelineModel) Report(dev *EvalResult) *Report {
	saved, mcfg := m.b.Options, m.b.Model.Cfg
	rep := &Report{Task: dev.Task, Variant: saved.Variant, Mode: saved.Mode, Encoder: saved.Encoder, Lambda: saved.Lambda,
		Seed: saved.Seed, Backend: backendName(m.t.po.Train.Device), Utility: dev.Metrics, UtilitySplit: "dev"}
	switch saved.Variant {
	case nvib.ModelNVDPClipped:
		rep.CMu, rep.CAlphaMin, rep.CAlphaMax, rep.LogvarMargin = mcfg.Clip.CMu, mcfg.Clip.CAlphaMin, mcfg.Clip.CAlphaMax, mcfg.Clip.LogvarMargin
	case nvib.ModelGaussian:
		rep.Lambda, rep.CMu, rep.Sigma = 0, mcfg.Clip.CMu, math.Sqrt(mcfg.Prior.Var) // no KL terms
	case nvib.ModelBaseline:
		rep.Lambda = 0
		rep.Note = "baseline: no NVIB posterior, nothing to audit"
	}
	return rep
}
