package attack

import (
	"fmt"

	"github.com/nvdp-project/nvdp/internal/memlimit"
	"github.com/nvdp-project/nvdp/release"
)

// learnedNeed is what a learned attack holds at once, for checkMemory.
type learnedNeed struct {
	// rows are the public rows the attacker keeps per release (Invert: the
	// public texts' attacked positions; Attribute: the public texts).
	rows int
	// dims is the widest feature row (max(P, H)); classes the classifier's
	// output (an upper bound).
	dims, classes int
	// mlp is whether an MLP is trained.
	mlp bool
}

// checkMemory refuses, before anything is released, a learned attack that
// cannot fit in memory (memlimit.Need; it was a Go out-of-memory crash):
//
//   - a batch of the releaser's texts x ReleasesPerText releases x (N P +
//     N) float32, within release.MaxBatchBytes as `nvdp embed`'s batches;
//   - the kept rows, rows x ReleasesPerText x P float32 and an int label
//     each, within the machine's memory;
//   - the MLP's weights, gradients and AdamW's two moments, 4 x (dims x
//     Hidden + Hidden x classes) float32, and a batch's activations,
//     within the machine's memory.
//
// Errors: *option.Error for releases_per_text or mlp_hidden.
func (o LearnedOptions) checkMemory(t *Target, n learnedNeed) error {
	info := t.rel.Model()
	N, P, bs := info.N, info.P, t.rel.BatchSize()
	k := o.ReleasesPerText
	if err := (memlimit.Need{What: fmt.Sprintf("a batch of %d texts x %d releases x (N P + N = %d float32)", bs, k, N*P+N),
		Bytes: float64(bs) * float64(k) * memlimit.Floats(N*P+N), Limit: release.MaxBatchBytes, Of: "a batch may hold",
		Option: "releases_per_text", Value: k}).Check(); err != nil {
		return err
	}
	if err := (memlimit.Need{What: fmt.Sprintf("the attacker's %d public rows x %d releases x (P = %d float32 + a label)", n.rows, k, P),
		Bytes: float64(n.rows) * float64(k) * (memlimit.Floats(P) + 8), Limit: memlimit.Total(), Of: memlimit.OfMachine,
		Option: "releases_per_text", Value: k}).Check(); err != nil {
		return err
	}
	if !n.mlp {
		return nil
	}
	h := o.Hidden
	params := float64(n.dims)*float64(h) + float64(h)*float64(n.classes)
	return memlimit.Need{What: fmt.Sprintf("the MLP attacker of %d inputs x %d hidden x %d classes (weights, gradients, AdamW's moments)", n.dims, h, n.classes),
		Bytes: 4*memlimit.Floats(1)*params + 3*memlimit.Floats(o.BatchSize, h), Limit: memlimit.Total(), Of: memlimit.OfMachine,
		Option: "mlp_hidden", Value: h, Lower: []string{"mlp_hidden"}}.Check()
}

// scoreBytes is what Distinguish holds per release at once: its score
// (float64), its entry in the ROC's sorted copy (16 bytes) and its ROC
// point (40 bytes).
const scoreBytes = 8 + 16 + 40

// checkScoresMemory refuses releases whose 2 x releases scores and ROC
// cannot fit in the machine's memory (memlimit.Need; it was a Go
// out-of-memory crash). Error: *option.Error for releases.
func checkScoresMemory(releases int) error {
	return memlimit.Need{What: fmt.Sprintf("the scores and ROC of 2 x %d draws (%d bytes each)", releases, scoreBytes),
		Bytes: 2 * float64(releases) * scoreBytes, Limit: memlimit.Total(), Of: memlimit.OfMachine,
		Option: "releases", Value: releases}.Check()
}
