package release

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
)

// EmbedFileOptions configure [EmbedFile]: the model, the input, the
// options of [Embed], the delta of the guarantees and the noise. JSON keys
// are the option names errors use.
//
// Format, BatchSize and Seed are used only where Given reports them: by
// default the format follows Out's name ([FormatOf]), the batch size is
// the model's ([Releaser.BatchSize]) and the noise is the operating
// system's ([NewSource]); a given seed draws it from [NewSeededSource],
// whose output is marked not for release.
type EmbedFileOptions struct {
	EmbedOptions
	// Model is the model directory ([Load]), required.
	Model string `json:"model"`
	// Input is the input file, or "-" for Stdin; Column and Field choose a
	// TSV column or a JSON-lines field ([OpenInput]), at most one.
	Input  string    `json:"input"`
	Stdin  io.Reader `json:"-"`
	Column string    `json:"column"`
	Field  string    `json:"field"`
	// Delta is the delta of the guarantees' (epsilon, delta) conversion.
	Delta float64 `json:"delta"`
	// Seed seeds the noise where given (tests and demos only).
	Seed uint64 `json:"seed"`
	// Release loads the model: its device and AllowUnproved.
	Release Options `json:"-"`
	// Given reports which options were given explicitly (nil: none).
	Given option.Given `json:"-"`
}

// resolved returns o with the format resolved from Out unless given, and a
// batch size of 1 in place of the model's, which only the model knows.
func (o EmbedFileOptions) resolved() EmbedFileOptions {
	if !o.Given.Has("format") {
		o.Format = FormatOf(o.Out)
	}
	if !o.Given.Has("batch_size") {
		o.BatchSize = 1
	}
	return o
}

// Validate checks o before any file is read: the input's options and how
// they combine, the output, the delta and [EmbedOptions.Validate].
//
// Errors: a [*option.CombinationError] for column with field, or an out
// that is the input file; an [*option.Error] naming column or field given
// empty, delta ([privacy.CheckDelta]) or those of [EmbedOptions.Validate].
func (o EmbedFileOptions) Validate() error {
	o = o.resolved()
	g := o.Given
	switch {
	case g.Has("column") && g.Has("field"):
		return option.Combination("%s and %s: give one (a TSV column or a JSON-lines field), or neither for plain lines", "column", "field")
	case g.Has("column") && o.Column == "":
		return option.Errorf("column", "", "want a column name")
	case g.Has("field") && o.Field == "":
		return option.Errorf("field", "", "want a field name")
	case o.Input != "-" && fsutil.SameFile(o.Input, o.Out):
		return option.Combination("%s "+option.Escape(o.Out)+" is the input file", "out")
	}
	if err := privacy.CheckDelta(o.Delta); err != nil {
		return err
	}
	return o.EmbedOptions.Validate()
}

// EmbedFile releases the texts of o.Input under the model o.Model into
// o.Out ([Embed]) and returns the output's metadata: it checks o
// ([EmbedFileOptions.Validate]), loads the model with o.Release, sets its
// delta and batch size, opens the noise source and the input, and streams.
// report receives Embed's progress; nil discards it.
//
// Errors: those of Validate; an [*option.Error] naming model (it does not
// load: a model whose noise is not fixed, [privacy.ErrNotFixedNoise], is
// said to need allow_unproved, [Options].AllowUnproved), delta or input
// (it does not open or its header does not read); those of [Embed].
func EmbedFile(ctx context.Context, o EmbedFileOptions, report progress.Func) (*Metadata, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.EmbedOptions = o.resolved().EmbedOptions
	r, err := Load(o.Model, o.Release)
	if errors.Is(err, privacy.ErrNotFixedNoise) {
		return nil, &option.Error{Option: "model", Reason: err.Error() + " (allow_unproved)", Mentions: []string{"allow_unproved"}, Err: err}
	} else if err != nil {
		return nil, option.Wrap("model", err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			slog.Warn("closing the model", "err", err)
		}
	}()
	if err := r.SetDelta(o.Delta); err != nil {
		return nil, option.Wrap("delta", err)
	}
	if !o.Given.Has("batch_size") {
		o.BatchSize = r.BatchSize()
	} else if err := r.SetBatchSize(o.BatchSize); err != nil {
		return nil, err // Validate checked it
	}
	var src *Source
	if o.Given.Has("seed") {
		src = NewSeededSource(o.Seed)
	} else if src, err = NewSource(); err != nil {
		return nil, err
	}
	defer src.Close()
	in, err := OpenInput(o.Input, o.Stdin, o.Column, o.Field)
	if err != nil {
		return nil, option.Wrap("input", err)
	}
	defer in.Close()
	return Embed(ctx, r, in, src, o.EmbedOptions, report)
}
