package model

import (
	"fmt"
	"log/slog"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/tokenize"
)

// Encoded is a tokenised split: one encoding per example with its target.
type Encoded struct {
	Task    *glue.Task
	Split   string
	Encs    []tokenize.Encoding
	Targets []float64 // class index or STS-B score
	Indices []int     // GLUE example index (submission key)
	PadID   int
	// Labelled is false for test splits.
	Labelled bool
	// Truncated counts the examples cut to max-seq-len.
	Truncated int
}

// LoadSplit reads one split of task from glueDir (glue.Load) and checks
// that it has examples: a header without rows, or rows all skipped, is an
// error naming the file before any work depends on it. Skipped malformed
// rows are logged.
func LoadSplit(glueDir string, task *glue.Task, split string, o glue.LoadOptions) (*glue.Dataset, error) {
	ds, err := glue.Load(glueDir, task, split, o)
	if err != nil {
		return nil, err
	}
	if ds.Skipped > 0 {
		slog.Warn("skipped malformed rows", "file", ds.Path, "rows", ds.Skipped, "first", ds.SkipErrors)
	}
	if err := checkExamples(ds); err != nil {
		return nil, err
	}
	return ds, nil
}

// checkExamples rejects a split without examples.
func checkExamples(d *glue.Dataset) error {
	if len(d.Examples) == 0 {
		return fmt.Errorf("%s: no examples (a header without rows, or every row skipped)", d.Path)
	}
	return nil
}

// Encode tokenises every example of d, a sentence or a pair, with
// longest-first truncation to maxLen tokens including the specials.
//
// It returns an error for a split without examples, or an example that does
// not tokenise, naming its file:line.
func Encode(tok tokenize.Tokenizer, d *glue.Dataset, maxLen int) (*Encoded, error) {
	if err := checkExamples(d); err != nil {
		return nil, err
	}
	e := &Encoded{Task: d.Task, Split: d.Split, PadID: tok.PadID(), Labelled: d.Labelled,
		Encs: make([]tokenize.Encoding, len(d.Examples)), Targets: d.Targets(), Indices: d.Indices()}
	for i, ex := range d.Examples {
		enc, err := tok.Encode(ex.TextA, ex.TextB, 0)
		if err == nil && enc.Len() > maxLen {
			e.Truncated++
			enc, err = tok.Encode(ex.TextA, ex.TextB, maxLen)
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: tokenize: %w", d.Path, ex.Line, err)
		}
		if enc.Len() == 0 {
			return nil, fmt.Errorf("%s:%d: empty encoding", d.Path, ex.Line)
		}
		e.Encs[i] = enc
	}
	return e, nil
}

// Len is the number of examples.
func (e *Encoded) Len() int { return len(e.Encs) }

// Batch stacks the examples idx into a model input and returns their labels,
// or nil labels for unlabelled splits. The input is padded to fixedLen when it
// is > 0, and when it is 0 to the longest sequence of the batch, which is
// dynamic padding.
func (e *Encoded) Batch(idx []int, fixedLen int) (encoder.Input, *nvib.Labels) {
	encs := make([]tokenize.Encoding, len(idx))
	for k, i := range idx {
		encs[k] = e.Encs[i]
	}
	b := tokenize.Pad(encs, e.PadID, fixedLen)
	in := encoder.Input{B: b.B, S: b.S, IDs: make([]int32, len(b.IDs)), TypeIDs: make([]int32, len(b.IDs)), Mask: make([]float32, len(b.IDs))}
	for k := range b.IDs {
		in.IDs[k] = int32(b.IDs[k])
		in.TypeIDs[k] = int32(b.TypeIDs[k])
		in.Mask[k] = float32(b.AttentionMask[k])
	}
	if !e.Labelled {
		return in, nil
	}
	lab := &nvib.Labels{}
	if e.Task.IsRegression {
		lab.Value = make([]float32, len(idx))
		for k, i := range idx {
			lab.Value[k] = float32(e.Targets[i])
		}
	} else {
		lab.Class = make([]int, len(idx))
		for k, i := range idx {
			lab.Class[k] = int(e.Targets[i])
		}
	}
	return in, lab
}

// Batches splits the examples in order into batches of size bs >= 1, the
// last of which may be shorter. Each is padded to fixedLen when it is > 0,
// and dynamically when it is 0.
//
// A batch size < 1 panics, as a programmer error: options are validated
// before.
func (e *Encoded) Batches(bs, fixedLen int) ([]encoder.Input, []*nvib.Labels) {
	if bs < 1 {
		panic(fmt.Sprintf("model: Encoded.Batches: batch size %d < 1", bs))
	}
	var ins []encoder.Input
	var labs []*nvib.Labels
	for lo := 0; lo < e.Len(); lo += bs {
		hi := min(lo+bs, e.Len())
		idx := make([]int, hi-lo)
		for k := range idx {
			idx[k] = lo + k
		}
		in, lab := e.Batch(idx, fixedLen)
		ins = append(ins, in)
		labs = append(labs, lab)
	}
	return ins, labs
}

// EvalPadLen returns the length a model's evaluation batches are padded to.
//
// For a model whose release has all N = S+1 components, as principled NVDP
// has (see [nvib.Model.PadsReleased]), it is maxSeqLen, a fixed length. Its
// predictions are then computed from the release that the posterior file and
// the audit describe, with N = max-seq-len + 1. Its outputs depend on the
// number of padding components, and a dynamically padded release would be
// another release, whose N reveals the batch's longest length.
//
// Otherwise it is 0, dynamic padding to the longest sequence of each batch:
// the baseline's and reference mode's predictions do not depend on the
// padding. Training batches stay dynamic; see docs/model.md, "Padding
// components", and docs/training.md.
func EvalPadLen(m *nvib.Model, maxSeqLen int) int {
	if m.PadsReleased() {
		return maxSeqLen
	}
	return 0
}
