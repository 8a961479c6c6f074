package release

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/memlimit"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
)

// EmbedOptions configure [Embed]. [DefaultEmbedOptions] gives a releaser's.
type EmbedOptions struct {
	Out    string `json:"out"`    // the output file, replaced atomically when complete (required)
	Format Format `json:"format"` // FormatSafetensors or FormatJSONL
	// ReleasesPerText is k >= 1, the number of independent releases of each text; their certified
	// costs compose.
	ReleasesPerText int `json:"releases_per_text"`
	// BatchSize is the number of texts read, released and written per step, at least 1. With
	// MaxLineBytes it bounds the memory, whatever the input's length.
	BatchSize int `json:"batch_size"`
	// MaxEpsilon is the largest certified epsilon per release, at the model's delta, that Embed
	// releases under; it must be positive, and +Inf allows any. A model certifying more is refused
	// before anything is released, by [privacy.CheckMaxEpsilon]. The default is
	// [privacy.DefaultMaxEpsilon].
	MaxEpsilon float64 `json:"max_epsilon"`
}

// DefaultEmbedOptions returns the options of r: safetensors, one release per text, r's batch size
// and [privacy.DefaultMaxEpsilon]. Out is left to the caller.
func DefaultEmbedOptions(r *Releaser) EmbedOptions {
	return EmbedOptions{Format: FormatSafetensors, ReleasesPerText: 1, BatchSize: r.BatchSize(), MaxEpsilon: privacy.DefaultMaxEpsilon}
}

// Validate checks o before any work. Embed calls it, and a program may call it before loading the
// model. Its errors are [*option.Error] values naming the option by its JSON key.
func (o EmbedOptions) Validate() error {
	switch {
	case o.Out == "":
		return option.Errorf("out", nil, "required: the output file")
	case !o.Format.Valid():
		return option.Errorf("format", string(o.Format), "want %s or %s", FormatSafetensors, FormatJSONL)
	case o.ReleasesPerText < 1:
		return option.Errorf("releases_per_text", o.ReleasesPerText, "must be >= 1")
	case o.BatchSize < 1:
		return option.Errorf("batch_size", o.BatchSize, "must be >= 1")
	case !(o.MaxEpsilon > 0):
		return option.Errorf("max_epsilon", o.MaxEpsilon, "must be > 0 (inf: any epsilon)")
	}
	if st, err := os.Stat(filepath.Dir(o.Out)); err != nil || !st.IsDir() {
		return option.Errorf("out", o.Out, "its directory %s does not exist", filepath.Dir(o.Out))
	}
	if st, err := os.Stat(o.Out); err == nil && st.IsDir() {
		return option.Errorf("out", o.Out, "is a directory")
	}
	return nil
}

// MaxBatchBytes bounds the releases of one batch in memory, BatchSize x ReleasesPerText x (N P + N)
// float32 values, as [EmbedOptions.CheckMemory] checks.
const MaxBatchBytes = 1 << 30

// CheckMemory checks, before anything is allocated, that a batch of o's releases of a model of N
// components of P dimensions fits [MaxBatchBytes]. It returns an [*option.Error] for
// releases_per_text, or for batch_size when one release per text is already too much.
func (o EmbedOptions) CheckMemory(n, p int) error {
	per := memlimit.Floats(n*p + n) // bytes of one release
	key, value := "releases_per_text", any(o.ReleasesPerText)
	if float64(o.BatchSize)*per > MaxBatchBytes {
		key, value = "batch_size", o.BatchSize
	}
	return memlimit.Need{What: fmt.Sprintf("a batch of %d texts x %d releases x (N P + N = %d float32)", o.BatchSize, o.ReleasesPerText, n*p+n),
		Bytes: float64(o.BatchSize) * float64(o.ReleasesPerText) * per, Limit: MaxBatchBytes, Of: "a batch may hold",
		Option: key, Value: value, Lower: []string{"releases_per_text", "batch_size"}}.Check()
}

// ProgressStage names Embed's progress events, whose unit is "texts". The total is not known while
// streaming, and the last event has Total = Done.
const ProgressStage = "embed"

// Embed releases every text of in under r, ReleasesPerText times each with noise from src, and
// writes them to o.Out in o.Format, [FormatSafetensors] or [FormatJSONL], with their Metadata, which
// it returns. A batch's releases must fit [MaxBatchBytes], as [EmbedOptions.CheckMemory] checks
// before anything is read or allocated.
//
// Embed streams: a batch of o.BatchSize texts is read, released and written before the next is
// read, so memory does not grow with the input. report receives a ProgressStage event per batch
// written; nil discards them.
//
// The options, the input's header or first line and its first batch are checked before the file is
// created, and an input without texts is an error. The output is a temporary file beside o.Out,
// renamed over it only when complete. On any error, such as a bad line or a cancelled ctx, the file
// is removed and o.Out is left as it was.
//
// A process killed while writing, by SIGKILL or a power loss, leaves its hidden temporary files
// beside o.Out, named "." + name + ".tmp" + digits. Embed removes those of o.Out when it starts,
// with atomicfile.RemoveStaleOf, and logs it; two processes must therefore not write one output at
// once.
func Embed(ctx context.Context, r *Releaser, in *TextReader, src *Source, o EmbedOptions, report progress.Func) (*Metadata, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, fmt.Errorf("embed: no noise source")
	}
	if err := privacy.CheckMaxEpsilon(r.Guarantee(), o.MaxEpsilon); err != nil {
		return nil, &option.Error{Option: "max_epsilon", Value: o.MaxEpsilon, Reason: err.Error()}
	}
	if err := o.CheckMemory(r.Shape()); err != nil {
		return nil, err
	}
	if stale, err := atomicfile.RemoveStaleOf(o.Out); err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	} else if len(stale) > 0 {
		slog.Warn("embed: removed the temporary files of an interrupted write of the output", "out", o.Out, "files", stale)
	}
	batch, err := readBatch(in, o.BatchSize)
	if err != nil {
		return nil, err
	}
	if len(batch) == 0 {
		return nil, fmt.Errorf("%s: no texts", in.Name())
	}
	perText, err := r.GuaranteeOf(o.ReleasesPerText)
	if err != nil {
		return nil, err
	}
	md := NewMetadata(r.Model(), r.Guarantee(), perText, o.Format, o.ReleasesPerText, src.Seeded())
	err = atomicfile.WriteFile(o.Out, func(f *os.File) error {
		w, err := newOutputWriter(o.Format, f, o.Out, md)
		if err != nil {
			return err
		}
		defer w.close()
		for len(batch) > 0 {
			es, err := r.ReleaseRepeated(ctx, batch, o.ReleasesPerText, src)
			if err != nil {
				return fmt.Errorf("%s: texts %d..%d: %w", in.Name(), md.Texts, md.Texts+int64(len(batch))-1, err)
			}
			if err := w.write(es); err != nil {
				return err
			}
			md.Texts += int64(len(batch))
			report.Report(progress.Event{Stage: ProgressStage, Unit: "texts", Done: md.Texts, Loss: math.NaN()})
			if batch, err = readBatch(in, o.BatchSize); err != nil {
				return err
			}
		}
		md.Releases = md.Texts * int64(o.ReleasesPerText)
		return w.finish(md)
	})
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	report.Report(progress.Event{Stage: ProgressStage, Unit: "texts", Done: md.Texts, Total: md.Texts, Loss: math.NaN()})
	return md, nil
}

// readBatch reads up to n texts (fewer at the end of the input).
func readBatch(in *TextReader, n int) ([]string, error) {
	var texts []string
	for len(texts) < n {
		t, _, err := in.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		texts = append(texts, t)
	}
	return texts, nil
}

// SafetensorsLayout is [Metadata].Layout of [FormatSafetensors], which the release service's binary
// response (package serve) shares with one release per text; jsonlLayout is that of [FormatJSONL].
const (
	SafetensorsLayout = "z [texts, releases_per_text, N, P] float32: the released samples Z; pi [texts, releases_per_text, N] float32: their Dirichlet weights; row i is the i-th text of the input"
	jsonlLayout       = "first line: this metadata; then one JSON object per text, in input order: index (0-based), embeddings [releases_per_text][N][P] (Z), weights [releases_per_text][N] (pi); float32 values"
)

// layout is Metadata.Layout of a format.
func layout(f Format) string {
	if f == FormatJSONL {
		return jsonlLayout
	}
	return SafetensorsLayout
}
