package task

import (
	"context"
	"errors"
	"maps"
	"strings"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/speech"
	"github.com/nvdp-project/nvdp/train"
)

// speechModality is spoken language identification, the one speech task
// (package speech: a Wav2Vec2 encoder on a corpus in CommonLanguage's
// layout, every utterance cropped or padded to Data.MaxSeconds).
type speechModality struct{}

func (speechModality) names() []string     { return []string{speech.TaskName} }
func (speechModality) optionsFile() string { return speech.OptionsFile }

func (speechModality) lookup(name string) (Task, bool) {
	return speechTask{}, strings.EqualFold(strings.TrimSpace(name), speech.TaskName)
}

func (speechModality) open(dir string) (*ModelDir, error) {
	o, err := speech.LoadOptions(dir)
	if err != nil {
		return nil, err
	}
	return &ModelDir{Dir: dir, Task: speechTask{}, Options: &o.Train, Data: Data{DataDir: o.DataDir, MaxSeconds: o.MaxSeconds},
		File: speech.OptionsFile}, nil
}

// speechTask is `--task lid`.
type speechTask struct{}

// Info: utility on test, no GPU twin, the paper's lambda by variant
// (speech.PaperLambda), the corpus in Data.
func (speechTask) Info() Info {
	return Info{Name: speech.TaskName, Modality: Speech, Examples: speech.Examples, UtilitySplit: speech.UtilitySplit,
		UsesData: true, DeviceErr: errNoSpeechDevice, Lambda: maps.Clone(speechLambdas)}
}

// errNoSpeechDevice is the speech task's Info.DeviceErr.
var errNoSpeechDevice = errors.New("the speech encoder (Wav2Vec2) has no GPU twin yet")

// speechLambdas is the speech task's Info.Lambda.
var speechLambdas = lambdas(speech.PaperLambda)

// Apply gives o the speech task's defaults for the options not given
// (encoder speech.DefaultEncoder, lambda by variant, warm-up
// speech.PaperWarmupRatio) and clears the text tasks' files. max_seq_len
// does not apply: the frames follow from Data.MaxSeconds.
func (speechTask) Apply(o *model.Options, given Given) error {
	if given.Has("max_seq_len") {
		return option.MentionErrorf([]string{"task", "max_seconds"}, "max_seq_len", nil,
			"the text tasks' length: for task %s, max_seconds fixes the frames", speech.TaskName)
	}
	o.Task = speech.TaskName // as Lookup found it: "LID" is lid
	def := speech.DefaultOptions().Train
	if !given.Has("encoder") {
		o.Encoder = def.Encoder
	}
	if !given.Has("lambda") {
		o.Lambda = def.Lambda
	}
	if !given.Has("warmup_ratio") {
		o.WarmupRatio = def.WarmupRatio
	}
	o.GlueDir, o.Vocab = "", ""
	return nil
}

// speechOptions are the speech options of o with d.
func speechOptions(o model.Options, d *Data) speech.Options {
	so := speech.Options{Train: o}
	if d != nil {
		so.DataDir, so.MaxSeconds = d.DataDir, d.MaxSeconds
	}
	return so
}

// Prepare checks the run once (speech.Prepare).
func (speechTask) Prepare(o model.Options, d *Data) (Trainer, error) {
	p, err := speech.Prepare(speechOptions(o, d))
	if err != nil {
		return nil, err
	}
	return speechTrainer{p}, nil
}

// speechTrainer is a speech run, checked once.
type speechTrainer struct{ p speech.Prepared }

// pipeline is the speech task's part of the pipeline, training the
// prepared run (speech.Prepared.Pipeline).
func (t speechTrainer) pipeline() train.PipelineTask { return t.p.Pipeline() }

// Train runs the speech training (speech.Prepared.Run) on the CPU, the
// only device of the speech encoder.
func (t speechTrainer) Train(ctx context.Context, dev *cuda.Device, _ bool, report progress.Func) (*train.Result, error) {
	if dev != nil {
		return nil, option.Errorf("device", nil, "%v", errNoSpeechDevice)
	}
	return t.p.Run(ctx, report)
}

// pipeline is speech.Pipeline on the corpus of d.
func (speechTask) pipeline(d *Data) train.PipelineTask {
	var data Data
	if d != nil {
		data = *d
	}
	return speech.Pipeline(data.DataDir, data.MaxSeconds)
}

// Load loads the speech model directory (speech.LoadModel).
func (speechTask) Load(m *ModelDir) (Evaluator, error) {
	sm, o, err := speech.LoadModel(m.Dir)
	if err != nil {
		return nil, err
	}
	return speechModel{dir: m.Dir, m: sm, o: o}, nil
}

// speechModel is a loaded speech model with its options.
type speechModel struct {
	dir string
	m   *speech.Model
	o   *speech.Options
}

// Evaluate runs speech.Evaluate on the model's corpus (eo.DataDir when
// given) at its eval batch size unless given. glue_dir, max_seq_len and
// skip_bad_rows do not apply.
func (s speechModel) Evaluate(ctx context.Context, eo EvalOptions) (*train.EvalResult, error) {
	for _, name := range []string{"glue_dir", "max_seq_len", "skip_bad_rows"} {
		if eo.Given.Has(name) {
			return nil, option.Errorf(name, nil, "does not apply to a speech model (%s)", s.dir)
		}
	}
	if eo.Device != nil {
		return nil, option.Errorf("device", nil, "%v", errNoSpeechDevice)
	}
	o := *s.o
	if eo.Given.Has("data_dir") {
		o.DataDir = eo.DataDir
	}
	se := speech.EvalOptions{Split: eo.Split, Limit: eo.Limit, BatchSize: o.Train.EvalBatchSize, Seed: eo.Seed, NoPost: eo.NoPost}
	if eo.Given.Has("out") {
		se.Out = eo.Out
	}
	if eo.Given.Has("batch_size") {
		se.BatchSize = eo.BatchSize
	}
	return speech.Evaluate(ctx, s.dir, s.m, &o, se)
}
