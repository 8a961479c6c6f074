package task

import (
	"context"
	"maps"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/train"
)

// textExamples is the noun of a text task's examples.
const textExamples = "texts"

// textModality is the GLUE tasks: a text encoder trained and evaluated by
// package train on glue's TSV files; a task is an entry of glue's table.
type textModality struct{}

func (textModality) names() []string     { return glue.TaskNames() }
func (textModality) optionsFile() string { return model.OptionsFile }

func (textModality) lookup(name string) (Task, bool) {
	g, err := glue.LookupTask(name)
	if err != nil {
		return nil, false
	}
	return textTask{g}, true
}

func (textModality) open(dir string) (*ModelDir, error) {
	o, err := model.LoadOptions(dir)
	if err != nil {
		return nil, err
	}
	t, err := Lookup(o.Task)
	if err != nil {
		return nil, err
	}
	return &ModelDir{Dir: dir, Task: t, Options: o, File: model.OptionsFile}, nil
}

// textTask is one GLUE task.
type textTask struct{ g *glue.Task }

// Info: utility on dev, a GPU twin, model.DefaultOptions' lambda whatever
// the variant.
func (t textTask) Info() Info {
	return Info{Name: t.g.Name, Modality: Text, Examples: textExamples, UtilitySplit: "dev", Lambda: maps.Clone(textLambdas)}
}

// textLambdas is the text tasks' Info.Lambda.
var textLambdas = lambdas(func(string) float64 { return model.DefaultOptions().Lambda })

// Apply: model.DefaultOptions are the text tasks' defaults; every option
// applies.
func (textTask) Apply(*model.Options, Given) error { return nil }

// Prepare checks the run once (train.Prepare).
func (textTask) Prepare(o model.Options, _ *Data) (Trainer, error) {
	c, err := train.Prepare(o)
	if err != nil {
		return nil, err
	}
	return textTrainer{c}, nil
}

// textTrainer is a text task's run, checked once.
type textTrainer struct{ c model.Checked }

// pipeline is train.PreparedTextPipeline of the checked options.
func (t textTrainer) pipeline() train.PipelineTask { return train.PreparedTextPipeline(t.c) }

// Train runs train.RunChecked on the device.
func (t textTrainer) Train(ctx context.Context, dev *cuda.Device, hostNoise bool, report progress.Func) (*train.Result, error) {
	c, err := t.c.OnDevice(dev, hostNoise)
	if err != nil {
		return nil, err
	}
	return train.RunChecked(ctx, c, report)
}

func (textTask) pipeline(*Data) train.PipelineTask { return train.TextPipeline() }

// Load loads the model directory (model.Load).
func (textTask) Load(m *ModelDir) (Evaluator, error) {
	b, err := model.Load(m.Dir)
	if err != nil {
		return nil, err
	}
	return textModel{b}, nil
}

// textModel is a loaded text model.
type textModel struct{ b *model.TextModel }

// Evaluate runs train.Evaluate with the model's evaluation options
// (train.DefaultEvalOptions) changed by eo.
func (t textModel) Evaluate(_ context.Context, eo EvalOptions) (*train.EvalResult, error) {
	o := train.DefaultEvalOptions(t.b)
	o.Split, o.Seed, o.Limit, o.NoPost, o.SkipBadRows, o.Device = eo.Split, eo.Seed, eo.Limit, eo.NoPost, eo.SkipBadRows, eo.Device
	for _, s := range []struct {
		name string
		set  func()
	}{
		{"out", func() { o.Out = eo.Out }},
		{"glue_dir", func() { o.GlueDir = eo.GlueDir }},
		{"batch_size", func() { o.BatchSize = eo.BatchSize }},
		{"max_seq_len", func() { o.MaxSeqLen = eo.MaxSeqLen }},
	} {
		if eo.Given.Has(s.name) {
			s.set()
		}
	}
	return train.Evaluate(t.b, o)
}
