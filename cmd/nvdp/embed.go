package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

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
		Long: `Release the embeddings of texts under a trained NVDP-Clipped or gaussian model: for each text the
sample of its clipped posterior, Z [N, P] and the Dirichlet weights pi [N] (all N = max-seq-len + 1
components, padding included; a gaussian model's weights are the constant 1/N), never the text,
its tokens or the posterior's parameters. The baseline, unclipped nvdp and reference-mode models
are refused: they have no finite certified guarantee.

The input (a file, or - for stdin) holds one text per line, or with --column NAME a
tab-separated file with a header whose column NAME is the text, or with --field NAME JSON lines
whose string field NAME is the text. It is streamed: --batch-size texts are read, released and
written at a time, so memory does not grow with the input. The output is written to a temporary
file beside --out and renamed over it only when complete; a bad line (named in the error) or
Ctrl-C leaves no output.

--format safetensors (the default, unless --out ends in .jsonl) writes tensors z [texts, k, N, P]
and pi [texts, k, N] (float32) with the metadata in the file's header; jsonl writes the metadata
as the first line, then {"index": i, "embeddings": [k x [N x [P]]], "weights": [k x [N]]} per
text. The metadata holds the model, the certified guarantee of one release (RDP curve, epsilon
at --delta, best order; 'nvdp certify --model'), the counts, and the total cost per text of its
k = --releases-per-text releases (RDP adds up: k times the curve; a fixed-noise release is a
Gaussian mechanism, certified exactly: k releases are one with mu sqrt(k)). A model certifying
more than --max-epsilon per release is refused (default 8: docs/privacy.md, "A guarantee by
default").

The release is exact (docs/privacy.md, "Floating-point safety"): every value of z is G (m + n)
on the lattice G = 2^k the metadata states, m the clipped mean rounded toward the clip ball's
centre and n Karney's exact normal rounded to the lattice, drawn ahead of the texts by workers
keyed from crypto/rand; the released bits are a sample of the mechanism the certificate is
proved for. A model whose noise scale or pseudo-counts depend on the input is refused
(the floating-point sampler would reveal them) unless --allow-unproved-release, and its
metadata then says the release is not exact. --device cuda computes the posteriors (the encoder
and the NVIB layer) on a GPU; the noise is the host's exact sampler on every device, and the
metadata's model.device says where the posteriors were computed. --seed S is for tests only:
the output is then marked "not for release". docs/serving.md.`,
		Example: `  nvdp embed --model runs/sst2-clipped --input texts.txt --out texts.safetensors
  nvdp embed --model runs/sst2-clipped --input dev.tsv --column sentence --out dev.jsonl --releases-per-text 3
  cat docs.jsonl | nvdp embed --model runs/sst2-clipped --input - --field text --out docs.safetensors`,
		Args: cobra.NoArgs,
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
	_ = cmd.MarkFlagRequired("model")
	_ = cmd.MarkFlagRequired("input")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func init() { rootCmd.AddCommand(newEmbedCmd()) }

// format is the output format: --format, or inferred from --out.
func (f *embedFlags) outputFormat(cmd *cobra.Command) release.Format {
	if cmd.Flags().Changed("format") {
		return release.Format(f.format)
	}
	if strings.EqualFold(filepath.Ext(f.out), ".jsonl") {
		return release.FormatJSONL
	}
	return release.FormatSafetensors
}

// openInput opens --input (stdin for -) and its reader, checking the header or first line.
func (f *embedFlags) openInput(cmd *cobra.Command) (*release.TextReader, io.Closer, error) {
	var r io.Reader
	var c io.Closer = io.NopCloser(nil)
	name := f.input
	if f.input == "-" {
		r, name = cmd.InOrStdin(), "stdin"
	} else {
		file, err := os.Open(f.input)
		if err != nil {
			return nil, nil, fmt.Errorf("--input: %w", err)
		}
		r, c = file, file
	}
	tr, err := release.NewTextReader(r, name, f.column, f.field)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("--input: %w", err)
	}
	return tr, c, nil
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
	if err := f.dev.check(); err != nil {
		return err
	}
	return nil
}

func runEmbed(cmd *cobra.Command, f *embedFlags) error {
	if err := f.check(cmd); err != nil {
		return err
	}
	// the options are checked before the model is loaded; an unset batch size is the model's
	o := release.EmbedOptions{Out: f.out, Format: f.outputFormat(cmd), ReleasesPerText: f.releasesPerText, BatchSize: f.batchSize, MaxEpsilon: f.maxEpsilon}
	batchGiven := cmd.Flags().Changed("batch-size")
	if !batchGiven {
		o.BatchSize = 1
	}
	if err := o.Validate(); err != nil {
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
	in, closer, err := f.openInput(cmd)
	if err != nil {
		return err
	}
	defer closer.Close()
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
