// Package task is the one registry of the tasks nvdp trains, evaluates and
// audits. Every GLUE task is a text task, built on packages glue and train;
// spoken language identification is a speech task, built on packages lid
// and speech. Each is one implementation of [Task], looked up by name with
// [Lookup] or from a model directory with [Open], by the CLI and by package
// sweep. Nothing outside this package asks which modality a task is: what
// differs between tasks is a method of Task or a field of its Info.
//
// Adding a GLUE task is one entry of glue's task table, with its files,
// labels, metrics, lengths and the paper's clipping constants. Adding a
// modality is one implementation of Task in a file of this package,
// registered in modalities; see docs/architecture.md, "Add a modality".
package task

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/train"
)

// Modality is the kind of input a task's encoder reads.
type Modality string

// The modalities.
const (
	Text   Modality = "text"   // GLUE: a Transformer text encoder over WordPiece / BPE tokens
	Speech Modality = "speech" // spoken language identification: a Wav2Vec2 encoder over 16 kHz audio
)

// Data is the data of a task beyond [model.Options]: the speech task's
// corpus, and the length every utterance is cropped or padded to, as in
// speech.Options' DataDir and MaxSeconds. The text tasks read
// [model.Options]' GlueDir and Vocab and ignore it. Its JSON keys are the
// option names errors use.
type Data struct {
	DataDir    string  `json:"data_dir"`
	MaxSeconds float64 `json:"max_seconds"`
}

// Given reports whether the option of JSON key name was set explicitly, as
// by a flag given on a command line: [option.Given]. Options not given take
// the task's defaults. A nil Given means none was given.
type Given = option.Given

// EvalOptions configure Evaluator.Evaluate of a loaded model: what an
// evaluation may change of the model's own settings. Split, Seed, Limit,
// NoPost and SkipBadRows are always used. Out, GlueDir, DataDir, BatchSize
// and MaxSeqLen are used only where Given reports them; otherwise the model's
// are.
type EvalOptions struct {
	Split       string // dev, test (text: train too)
	Seed        uint64 // of the release's sampling at evaluation
	Limit       int    // first K examples (0: all)
	NoPost      bool   // do not write the posterior file
	SkipBadRows bool   // text: skip malformed TSV rows
	Out         string // key out; "": the model directory
	GlueDir     string // key glue_dir (text)
	DataDir     string // key data_dir (speech: the corpus)
	BatchSize   int    // key batch_size
	MaxSeqLen   int    // key max_seq_len (text)
	Given       Given
	// Device runs the evaluation on this GPU (nil: the CPU); a task that
	// has no device twin refuses it (Info.DeviceErr).
	Device *cuda.Device
}

// Info describes a task: what stays the same from one of its runs to the
// next, as hugot's PipelineMetadata does for a pipeline. [Task.Info]
// gives it, the caller's to keep (Lambda a copy).
type Info struct {
	// Name is the task's canonical name (`--task`, report.json's "task",
	// the posterior files' "task" metadata).
	Name     string
	Modality Modality
	// Examples is the plural noun of the task's examples ("texts",
	// "utterances"), in audit labels.
	Examples string
	// UtilitySplit is the split report.json's utility is measured on.
	UtilitySplit string
	// UsesData reports whether the task reads [Data] (the text tasks read
	// their files from model.Options).
	UsesData bool
	// DeviceErr is nil when the task trains and evaluates on a GPU (its
	// encoder has a dnn twin), else an error saying why it cannot.
	DeviceErr error
	// Lambda is the default lambda_G = lambda_D of each variant, by its
	// name (nvib.ModelNVDPClipped, ...): the value a run that names none
	// resolves to.
	Lambda map[string]float64
}

// variants are the variants a task's Info.Lambda has a default for.
var variants = []string{nvib.ModelBaseline, nvib.ModelNVDP, nvib.ModelNVDPClipped, nvib.ModelGaussian}

// lambdas is Info.Lambda of a task whose default lambda of variant v is
// of(v).
func lambdas(of func(variant string) float64) map[string]float64 {
	m := make(map[string]float64, len(variants))
	for _, v := range variants {
		m[v] = of(v)
	}
	return m
}

// Task is one task: its description, the defaults of its options, its
// training, its model and its part of the pipeline. Implementations are
// stateless values; errors about options are [*option.Error] naming them
// by JSON key.
//
// A task's chance level, metrics and posteriors are what its [Evaluator]
// gives ([train.EvalResult]).
type Task interface {
	// Info describes the task.
	Info() Info
	// Apply gives o the task's defaults for the options not given and
	// refuses options that do not apply to the task.
	Apply(o *model.Options, given Given) error
	// Prepare checks a training run of o with d once, before any work,
	// and returns it ready to train into o.Out (train.Prepare, or the
	// task's own): a new run's options resolved and validated, its files
	// checked and o.Out free of a run, checked last (train.ErrRunExists
	// says that the rest is valid); a resumed run's read from o.Out. It
	// writes nothing. [RunPrepared] runs the pipeline of what it
	// returns without checking the options again.
	Prepare(o model.Options, d *Data) (Trainer, error)
	// Load loads the model of m (its weights and files) for evaluation.
	// Errors are the model directory's.
	Load(m *ModelDir) (Evaluator, error)
	// pipeline is the task's part of train.RunPipeline with data d.
	pipeline(d *Data) train.PipelineTask
}

// RunPipeline runs `nvdp run` for task t with data d, writing report.json.
// It runs [train.RunPipeline] on the task's part: [train.TextPipeline] for
// the GLUE tasks, with utility on dev, and speech.Pipeline for the speech
// task, with utility on test. That checks every option before any work, then
// trains unless po.SkipTrain, evaluates, audits and certifies.
func RunPipeline(ctx context.Context, t Task, po train.PipelineOptions, d *Data, report progress.Func) (*train.Report, error) {
	return train.RunPipeline(ctx, t.pipeline(d), po, report)
}

// RunPrepared runs `nvdp run` as [RunPipeline] does, training with tr, the
// run of po.Train that [Task.Prepare] checked (with its data): the pipeline
// checks the rest of po and reads its data before any work, but not the
// training options again. po.Train must be tr's run (its Out and Resume;
// else an error before any work) and po.SkipTrain false.
func RunPrepared(ctx context.Context, tr Trainer, po train.PipelineOptions, report progress.Func) (*train.Report, error) {
	return train.RunPipeline(ctx, tr.pipeline(), po, report)
}

// Trainer is a training run of a task that [Task.Prepare] checked.
type Trainer interface {
	// Train trains the model on the GPU dev (nil: the CPU; a task without
	// one has refused it, Info.DeviceErr), with the noise drawn on the host
	// when hostNoise is set (model.RunTime). report receives the progress.
	Train(ctx context.Context, dev *cuda.Device, hostNoise bool, report progress.Func) (*train.Result, error)
	// pipeline is the task's part of train.RunPipeline, training this run.
	pipeline() train.PipelineTask
}

// Evaluator is a loaded model of a task; see Task.Load.
type Evaluator interface {
	// Evaluate runs the model on eo.Split: metrics, predictions, the
	// posterior file and the certified guarantee of its release
	// (train.EvalResult). Errors about eo are *option.Error.
	Evaluate(ctx context.Context, eo EvalOptions) (*train.EvalResult, error)
}

// modalities are the implementations of Task, one per modality; a model
// directory is the first whose options file it holds (Open).
var modalities = []modality{speechModality{}, textModality{}}

// modality is what one implementation of Task provides besides the tasks
// themselves: its tasks by name and the reading of its model directories.
type modality interface {
	names() []string
	lookup(name string) (Task, bool)
	optionsFile() string
	open(dir string) (*ModelDir, error)
}

// Names are the names of every task, text tasks first, sorted within a
// modality.
func Names() []string {
	var out []string
	for i := len(modalities) - 1; i >= 0; i-- {
		out = append(out, modalities[i].names()...)
	}
	return out
}

// Lookup returns the task of name, compared case-insensitively, with the GLUE
// spellings SST-2 and sts-b accepted as by glue.LookupTask. Its error is an
// [*option.Error] of option "task" listing the tasks.
func Lookup(name string) (Task, error) {
	for _, m := range modalities {
		if t, ok := m.lookup(name); ok {
			return t, nil
		}
	}
	return nil, option.Errorf("task", name, "unknown task (want one of %s)", strings.Join(Names(), ", "))
}

// ExamplesOf returns the noun of the examples of the task named name, as in a
// posterior file's "task" metadata: [Info].Examples, or "texts" for a name
// that no task has, as for posteriors written elsewhere.
func ExamplesOf(name string) string {
	if t, err := Lookup(name); err == nil {
		return t.Info().Examples
	}
	return textExamples
}

// ModelDir is a model directory's task and the options it was trained with.
type ModelDir struct {
	Dir  string
	Task Task
	// Options are the saved training options; Data the task's data
	// (zero for the text tasks).
	Options *model.Options
	Data    Data
	// File is the options file they were read from.
	File string
}

// ClipSet returns the clip set of the model's release and its configuration.
// The set is [nvib.Config.ClipSet] of its nvdp_config.json for
// N = max_seq_len + 1 components, with P its latent width. For the speech
// task N = F + 1 frames, with max_seq_len holding F.
//
// It returns an error for a model without an NVIB posterior, such as the
// baseline, which has nothing to certify; an unreadable configuration; or N
// or P below 1.
func (m *ModelDir) ClipSet() (privacy.ClipSet, *nvib.Config, error) {
	cfg, err := nvib.LoadConfig(m.Dir)
	if err != nil {
		return privacy.ClipSet{}, nil, fmt.Errorf("model %s: %w", m.Dir, err)
	}
	set, ok := cfg.ClipSet(m.Options.MaxSeqLen + 1)
	if !ok {
		return privacy.ClipSet{}, nil, fmt.Errorf("model %s: a %s model has no NVIB posterior: nothing to certify", m.Dir, cfg.Model)
	}
	if m.Options.MaxSeqLen < 1 || cfg.Latent() < 1 {
		return privacy.ClipSet{}, nil, fmt.Errorf("model %s: max_seq_len %d / latent width %d: cannot tell N and P", m.Dir, m.Options.MaxSeqLen, cfg.Latent())
	}
	return set, &cfg, nil
}

// ResumeDifferences returns the options of the run in o.Out whose saved
// values differ from o's and d's, which a resume of it is asked for, by
// JSON key ([model.Differences], and [option.Differences] of the task's
// Data), and the options file they were read from. A directory whose
// options cannot be read gives none, for the run to report (no run to
// resume, a damaged file).
func ResumeDifferences(o *model.Options, d *Data) ([]option.Difference, string) {
	saved, err := Open(o.Out)
	if err != nil {
		return nil, ""
	}
	diffs := model.Differences(saved.Options, o)
	if saved.Task.Info().UsesData {
		diffs = append(diffs, option.Differences(&saved.Data, d)...)
	}
	return diffs, saved.File
}

// Open reads the task and saved options of the model directory dir (the
// options file of one modality: speech_options.json, train_options.json).
// Errors name the directory or the file.
func Open(dir string) (*ModelDir, error) {
	for _, m := range modalities {
		if fsutil.IsFile(filepath.Join(dir, m.optionsFile())) {
			return m.open(dir)
		}
	}
	files := make([]string, len(modalities))
	for i, m := range modalities {
		files[i] = m.optionsFile()
	}
	slices.Reverse(files)
	return nil, fmt.Errorf("model %s: no %s: not a model directory (written by nvdp train)", dir, strings.Join(files, " or "))
}
