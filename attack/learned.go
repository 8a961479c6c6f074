package attack

import (
	"context"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/tokenize"
)

// LearnedInputs are what a learned attack, [Invert] or [Attribute], reads:
// the model under attack, its corpus and the attacker's vocabulary.
type LearnedInputs struct {
	// Model is the model directory ([LoadTarget]).
	Model string `json:"model"`
	// Corpus chooses the texts; an empty GlueDir is the one the model was
	// trained with.
	Corpus CorpusOptions `json:"corpus"`
	// Vocab is the attacker's tokenizer file or directory ("": the
	// model's); it must be the model's vocabulary ([Target.CheckVocabulary]).
	Vocab string `json:"vocab,omitempty"`
}

// loadLearned loads the target and the corpus of in, and checks in.Vocab
// against the model's vocabulary. Where an input is at fault, the error is
// an [*option.Error] naming it: model, vocab, or those of [LoadCorpus].
func loadLearned(in LearnedInputs) (*Target, *Corpus, error) {
	t, err := LoadTarget(in.Model)
	if err != nil {
		return nil, nil, option.Errorf("model", nil, "%v", err)
	}
	o := in.Corpus
	if o.GlueDir == "" {
		o.GlueDir = t.GlueDir()
	}
	c, err := LoadCorpus(t.Task(), o)
	if err != nil {
		return nil, nil, err
	}
	if in.Vocab != "" {
		tok, err := tokenize.Load(in.Vocab)
		if err != nil {
			return nil, nil, option.Errorf("vocab", nil, "%v", err)
		}
		if err := t.CheckVocabulary(tok); err != nil {
			return nil, nil, option.Errorf("vocab", option.Show(in.Vocab), "is not the model's vocabulary: %v", err)
		}
	}
	return t, c, nil
}

// RunInvert runs [Invert] on the inputs in with o, progress to report.
// It checks o before any file is read, then loads the model and the corpus
// (an empty GlueDir is the model's) and checks in.Vocab against the model's
// vocabulary. Where an input or option is at fault, the error is an
// [*option.Error] naming it: model, vocab, or one of [CorpusOptions] or o.
func RunInvert(ctx context.Context, in LearnedInputs, o InvertOptions, report progress.Func) (*InvertReport, error) {
	return runLearned(in, o.Validate, func(t *Target, c *Corpus) (*InvertReport, error) { return Invert(ctx, t, c, o, report) })
}

// RunAttribute runs [Attribute] on the inputs in with o, progress to
// report, loading and checking them as [RunInvert] does.
func RunAttribute(ctx context.Context, in LearnedInputs, o AttributeOptions, report progress.Func) (*AttributeReport, error) {
	return runLearned(in, o.Validate, func(t *Target, c *Corpus) (*AttributeReport, error) { return Attribute(ctx, t, c, o, report) })
}

// runLearned validates a learned attack's options, before any file is
// read, loads its inputs and runs it.
func runLearned[R any](in LearnedInputs, validate func() error, run func(*Target, *Corpus) (R, error)) (R, error) {
	var zero R
	if err := validate(); err != nil {
		return zero, err
	}
	t, c, err := loadLearned(in)
	if err != nil {
		return zero, err
	}
	return run(t, c)
}
