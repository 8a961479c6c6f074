package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
	"github.com/spf13/cobra"
)

// embedFlags are the flags of `nvdp embed`.
type embedFlags struct {
	model, input, column, field, out, format string
	releasesPerText, batchSize               int
	seed                                     uint64
	delta, maxEpsilon                        float64
	noProgress, jsonOut                      bool
	rel                                      release.Options
	dev                                      deviceFlags
}

func newEmbedCmd() *cobra.Command {
	f := &embedFlags{}
	cmd := &cobra.Command{
		Use:   "embed --model DIR --input FILE|- [--column NAME | --field NAME] --out FILE",
		Short: "Release privatised embeddings of texts: the sample of each text's clipped posterior, with its certified guarantee",
		Long: `Release the embeddings of texts under a trained NVDP-Clipped or gaussian model: for each text a
sample of its clipped posterior, Z [N, P] and the Dirichlet weights pi [N], never the text. Models
without a finite certified guarantee (baseline, unclipped nvdp, reference mode) are refused, and so
is one certifying more than --max-epsilon per release (default 8).

The input (a file, or - for stdin) holds one text per line, or with --column NAME a TSV file with a
header, or with --field NAME JSON lines. It is streamed, --batch-size texts at a time. The output
(--format safetensors, or jsonl when --out ends in .jsonl) replaces --out only when complete, and
holds the metadata: the model, the certified guarantee of one release and the total cost per text
of its --releases-per-text releases. The release is exact (docs/privacy.md, "Floating-point
safety"); --seed is for tests only (the output is marked "not for release"). docs/serving.md,
"nvdp embed", has the formats, the checks and the memory bound.`,
		Example: `  nvdp embed --model runs/sst2-clipped --input texts.txt --out texts.safetensors
  nvdp embed --model runs/sst2-clipped --input dev.tsv --column sentence --out dev.jsonl --releases-per-text 3
  cat docs.jsonl | nvdp embed --model runs/sst2-clipped --input - --field text --out docs.safetensors`,
		RunE: func(cmd *cobra.Command, args []string) error { return runEmbed(cmd, f) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.model, "model", "", "model directory written by nvdp train or nvdp run (nvdp-clipped or gaussian; required)")
	fs.StringVar(&f.input, "input", "", "input file, or - for stdin: one text per line unless --column or --field (required)")
	fs.StringVar(&f.column, "column", "", "read the column NAME of a tab-separated input with a header")
	fs.StringVar(&f.field, "field", "", "read the string field NAME of a JSON-lines input")
	fs.StringVar(&f.out, "out", "", "output file, replaced when complete (required)")
	fs.StringVar(&f.format, "format", "", "safetensors | jsonl (default: jsonl when --out ends in .jsonl, else safetensors)")
	fs.IntVar(&f.releasesPerText, "releases-per-text", 1, "independent releases of each text (their certified costs add up)")
	fs.Float64Var(&f.maxEpsilon, "max-epsilon", privacy.DefaultMaxEpsilon, "refuse a model certifying more than this epsilon per release at --delta (inf: any)")
	fs.IntVar(&f.batchSize, "batch-size", 0, "texts read, released and written at a time, and of one forward pass (default: the model's eval batch size)")
	allowUnprovedFlag(fs, &f.rel)
	f.dev.bind(fs)
	fs.Uint64Var(&f.seed, "seed", 0, "seed the noise (tests and demos only: the output is marked not for release)")
	fs.Float64Var(&f.delta, "delta", privacy.DefaultDelta, "delta of the guarantees' (epsilon, delta) conversion")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the output's metadata as JSON on stdout")
	for _, name := range []string{"model", "input", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// check validates the flags that need no file.
func (f *embedFlags) check(cmd *cobra.Command) error {
	fs := cmd.Flags()
	switch {
	case fs.Changed("column") && fs.Changed("field"):
		return errors.New("--column and --field: give one (a TSV column or a JSON-lines field), or neither for plain lines")
	case fs.Changed("column") && f.column == "":
		return errors.New(`--column "": want a column name`)
	case fs.Changed("field") && f.field == "":
		return errors.New(`--field "": want a field name`)
	case f.input != "-" && fsutil.SameFile(f.input, f.out):
		return fmt.Errorf("--out %s is the input file", f.out)
	case privacy.CheckDelta(f.delta) != nil:
		return flagError(privacy.CheckDelta(f.delta))
	}
	return f.dev.check()
}

func runEmbed(cmd *cobra.Command, f *embedFlags) error {
	if err := f.check(cmd); err != nil {
		return err
	}
	o := release.EmbedOptions{Out: f.out, Format: release.FormatOf(f.out), ReleasesPerText: f.releasesPerText, BatchSize: f.batchSize, MaxEpsilon: f.maxEpsilon}
	if cmd.Flags().Changed("format") {
		o.Format = release.Format(f.format)
	}
	batchGiven := cmd.Flags().Changed("batch-size")
	if !batchGiven {
		o.BatchSize = 1 // the model's, once it is loaded
	}
	if err := o.Validate(); err != nil { // before the model is loaded
		return flagError(err)
	}
	d, err := f.dev.open()
	if err != nil {
		return err
	}
	defer closeDevice(d)
	rel := f.rel
	rel.Device = d
	r, err := release.Load(f.model, rel)
	if err != nil {
		return fmt.Errorf("--model: %w", unprovedHint(err))
	}
	defer func() {
		if err := r.Close(); err != nil {
			slog.Warn("closing the model", "err", err)
		}
	}()
	if err := r.SetDelta(f.delta); err != nil {
		return fmt.Errorf("--delta: %w", err)
	}
	if !batchGiven {
		o.BatchSize = r.BatchSize()
	} else if err := r.SetBatchSize(o.BatchSize); err != nil {
		return err // Validate checked it
	}
	var src *release.Source
	if cmd.Flags().Changed("seed") {
		src = release.NewSeededSource(f.seed)
		slog.Warn("--seed: the noise is reproducible from the seed; the output is marked not for release", "seed", f.seed)
	} else if src, err = release.NewSource(); err != nil {
		return err
	}
	defer src.Close()
	in, err := release.OpenInput(f.input, cmd.InOrStdin(), f.column, f.field)
	if err != nil {
		return fmt.Errorf("--input: %w", err)
	}
	defer in.Close()
	ctx, cancel := signalContext(cmd, "finishing the current batch, then removing the partial output")
	defer cancel()
	md, err := release.Embed(ctx, r, in, src, o, newProgress(cmd, f.noProgress))
	if err != nil {
		return flagError(err)
	}
	if f.jsonOut {
		return printJSON(cmd.OutOrStdout(), md)
	}
	return md.WriteText(cmd.OutOrStdout(), f.out)
}
