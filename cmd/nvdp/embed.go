package main

import (
	"log/slog"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
	"github.com/spf13/cobra"
)

// embedFlags are the flags of `nvdp embed`, bound to release.EmbedFileOptions.
type embedFlags struct {
	o                   release.EmbedFileOptions
	noProgress, jsonOut bool
	dev                 deviceFlags
}

func newEmbedCmd() *cobra.Command {
	f := &embedFlags{}
	cmd := &cobra.Command{
		Use:   "embed --model DIR --input FILE|- [--column NAME | --field NAME] --out FILE",
		Short: "Release privatised embeddings of texts: the sample of each text's clipped posterior, with its certified guarantee",
		Long: `Release the embeddings of texts under a trained NVDP-Clipped or gaussian model: for each text a
sample of its clipped posterior, Z [N, P] and the Dirichlet weights pi [N], never the text. A
model without a finite certified guarantee, or certifying more than --max-epsilon per release, is
refused. --input holds one text per line (--column NAME: a TSV column; --field NAME: JSON lines);
--out (safetensors, or jsonl) is replaced only when complete and holds the certified guarantee.
docs/serving.md, "nvdp embed": the formats, the checks, --seed and the memory bound.`,
		Example: `  nvdp embed --model runs/sst2-clipped --input texts.txt --out texts.safetensors
  nvdp embed --model runs/sst2-clipped --input dev.tsv --column sentence --out dev.jsonl --releases-per-text 3
  cat docs.jsonl | nvdp embed --model runs/sst2-clipped --input - --field text --out docs.safetensors`,
		RunE: func(cmd *cobra.Command, args []string) error { return runEmbed(cmd, f) },
	}
	fs, o := cmd.Flags(), &f.o
	fs.StringVar(&o.Model, "model", "", "model directory written by nvdp train or nvdp run (nvdp-clipped or gaussian; required)")
	fs.StringVar(&o.Input, "input", "", "input file, or - for stdin: one text per line unless --column or --field (required)")
	fs.StringVar(&o.Column, "column", "", "read the column NAME of a tab-separated input with a header")
	fs.StringVar(&o.Field, "field", "", "read the string field NAME of a JSON-lines input")
	fs.StringVar(&o.Out, "out", "", "output file, replaced when complete (required)")
	fs.StringVar((*string)(&o.Format), "format", "", "safetensors | jsonl (default: jsonl when --out ends in .jsonl, else safetensors)")
	fs.IntVar(&o.ReleasesPerText, "releases-per-text", 1, "independent releases of each text (their certified costs add up)")
	fs.Float64Var(&o.MaxEpsilon, "max-epsilon", privacy.DefaultMaxEpsilon, "refuse a model certifying more than this epsilon per release at --delta (inf: any)")
	fs.IntVar(&o.BatchSize, "batch-size", 0, "texts read, released and written at a time, and of one forward pass (default: the model's eval batch size)")
	allowUnprovedFlag(fs, &o.Release)
	f.dev.bind(fs)
	fs.Uint64Var(&o.Seed, "seed", 0, "seed the noise (tests and demos only: the output is marked not for release)")
	fs.Float64Var(&o.Delta, "delta", privacy.DefaultDelta, "delta of the guarantees' (epsilon, delta) conversion")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the output's metadata as JSON on stdout")
	for _, name := range []string{"model", "input", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// runEmbed checks the flags (release.EmbedFileOptions.Validate, before the
// device is opened), then releases the input (release.EmbedFile) and
// prints the output's metadata.
func runEmbed(cmd *cobra.Command, f *embedFlags) error {
	o := f.o
	o.Given, o.Stdin = givenFlags(cmd), cmd.InOrStdin()
	if err := o.Validate(); err != nil {
		return flagError(err)
	}
	if err := f.dev.check(); err != nil {
		return err
	}
	d, err := f.dev.open()
	if err != nil {
		return err
	}
	defer cuda.CloseLogged(d)
	o.Release.Device = d
	if o.Given.Has("seed") {
		slog.Warn("--seed: the noise is reproducible from the seed; the output is marked not for release", "seed", o.Seed)
	}
	ctx, cancel := signalContext(cmd, "finishing the current batch, then removing the partial output")
	defer cancel()
	md, err := release.EmbedFile(ctx, o, newProgress(cmd, f.noProgress))
	if err != nil {
		return flagError(err)
	}
	if f.jsonOut {
		return printJSON(cmd.OutOrStdout(), md)
	}
	return md.WriteText(cmd.OutOrStdout(), o.Out)
}
