package release

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestEmbedFileOptionsValidate: the input's options and how they combine,
// the output, the delta and the embed options are checked before any
// file is read, each error naming its options; the format follows the
// output's name and the batch size the model's unless given.
func TestEmbedFileOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(input, []byte("good\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := func() EmbedFileOptions {
		return EmbedFileOptions{EmbedOptions: EmbedOptions{Out: filepath.Join(dir, "out.jsonl"), ReleasesPerText: 1, MaxEpsilon: 8},
			Model: "m", Input: input, Delta: 1e-5}
	}
	for _, tc := range []struct {
		name    string
		mod     func(o *EmbedFileOptions)
		options []string // the error's: one for an *option.Error, more for a combination; nil: valid
	}{
		{"defaults: format from out, the model's batch size", func(o *EmbedFileOptions) {}, nil},
		{"column", func(o *EmbedFileOptions) { o.Column, o.Given = "text", option.GivenNames("column") }, nil},
		{"column and field", func(o *EmbedFileOptions) { o.Column, o.Field, o.Given = "a", "b", option.GivenNames("column", "field") }, []string{"column", "field"}},
		{"empty column", func(o *EmbedFileOptions) { o.Given = option.GivenNames("column") }, []string{"column"}},
		{"empty field", func(o *EmbedFileOptions) { o.Given = option.GivenNames("field") }, []string{"field"}},
		{"out is the input", func(o *EmbedFileOptions) { o.Out = input }, []string{"out"}},
		{"stdin is no file", func(o *EmbedFileOptions) { o.Input, o.Out = "-", filepath.Join(dir, "-") }, nil},
		{"delta", func(o *EmbedFileOptions) { o.Delta = 2 }, []string{"delta"}},
		{"format given empty", func(o *EmbedFileOptions) { o.Given = option.GivenNames("format") }, []string{"format"}},
		{"format given", func(o *EmbedFileOptions) { o.Format, o.Given = FormatSafetensors, option.GivenNames("format") }, nil},
		{"batch size given 0", func(o *EmbedFileOptions) { o.Given = option.GivenNames("batch_size") }, []string{"batch_size"}},
		{"releases per text", func(o *EmbedFileOptions) { o.ReleasesPerText = 0 }, []string{"releases_per_text"}},
	} {
		o := base()
		tc.mod(&o)
		err := o.Validate()
		var oe *option.Error
		var ce *option.CombinationError
		switch {
		case tc.options == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.options == nil:
		case len(tc.options) == 1 && errors.As(err, &oe) && oe.Option == tc.options[0]:
		case errors.As(err, &ce) && slices.Equal(ce.Options, tc.options):
		default:
			t.Errorf("%s: %v (%T), want an error naming %q", tc.name, err, err, tc.options)
		}
	}
	if o := base(); o.resolved().Format != FormatJSONL || o.resolved().BatchSize != 1 {
		t.Errorf("resolved %+v: want jsonl from the name and a batch size of 1", o.resolved().EmbedOptions)
	}
}

// TestEmbedFile: EmbedFile writes what Embed writes with the model's batch
// size and the given seed, in the format of the output's name; without a
// seed the noise is the system's, and the output is for release. A model,
// delta or input that does not load is an *option.Error naming it, the
// cause kept, a model whose noise is not fixed naming allow_unproved.
func TestEmbedFile(t *testing.T) {
	model := tinyModel(t, nvib.ModelNVDPClipped)
	dir := t.TempDir()
	data, _ := manyTexts(5)
	input := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(input, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := EmbedFileOptions{EmbedOptions: EmbedOptions{Out: filepath.Join(dir, "file.jsonl"), ReleasesPerText: 2, MaxEpsilon: math.Inf(1)},
		Model: model, Input: input, Delta: 1e-5, Seed: 7, Given: option.GivenNames("seed")}
	md, err := EmbedFile(ctx, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := load(t, nvib.ModelNVDPClipped)
	want := handSetOptions(r)
	want.Out, want.Format, want.ReleasesPerText = filepath.Join(dir, "embed.jsonl"), FormatJSONL, 2
	if _, err := Embed(ctx, r, NewLineReader(strings.NewReader(data), "in.txt"), NewSeededSource(7), want, nil); err != nil {
		t.Fatal(err)
	}
	_, got := readJSONL(t, o.Out)
	_, exp := readJSONL(t, want.Out)
	if !md.Seeded || md.Texts != 5 || len(got) != len(exp) {
		t.Fatalf("metadata %+v, %d texts, want seeded, 5", md, len(got))
	}
	for i := range exp {
		for j := range exp[i] {
			if !slices.Equal(got[i][j].Z, exp[i][j].Z) || !slices.Equal(got[i][j].Pi, exp[i][j].Pi) {
				t.Fatalf("text %d release %d differs from Embed's", i, j)
			}
		}
	}
	o.Given, o.Out = nil, filepath.Join(dir, "unseeded.safetensors")
	if md, err := EmbedFile(ctx, o, nil); err != nil || md.Seeded {
		t.Errorf("no seed given: %+v, %v: want the system's noise", md, err)
	}
	o.Out = filepath.Join(dir, "bad")
	for _, tc := range []struct {
		name, option string
		mod          func(o *EmbedFileOptions)
		is           error
	}{
		{"no model", "model", func(o *EmbedFileOptions) { o.Model = filepath.Join(dir, "none") }, nil},
		{"varying noise", "model", func(o *EmbedFileOptions) { o.Model = tinyModel(t, varying) }, privacy.ErrNotFixedNoise},
		{"no input", "input", func(o *EmbedFileOptions) { o.Input = filepath.Join(dir, "none.txt") }, os.ErrNotExist},
	} {
		bad := o
		tc.mod(&bad)
		_, err := EmbedFile(ctx, bad, nil)
		var oe *option.Error
		if !errors.As(err, &oe) || oe.Option != tc.option || tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: %v, want an option error naming %s", tc.name, err, tc.option)
		}
		if tc.is == privacy.ErrNotFixedNoise && !slices.Equal(oe.Mentions, []string{"allow_unproved"}) {
			t.Errorf("%s: mentions %q, want allow_unproved", tc.name, oe.Mentions)
		}
	}
	if _, err := os.Stat(o.Out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed EmbedFile wrote %s", o.Out)
	}
}
