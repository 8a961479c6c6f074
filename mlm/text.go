package mlm

import (
	"fmt"
	"io"
)

// WriteText writes the summary of r as `nvdp pretrain` prints it: how the
// run ended, the held-out MLM loss and masked-token accuracy (before and
// after when the initial evaluation ran) and the model directory.
func (r *Result) WriteText(w io.Writer) {
	status := "finished"
	if r.StoppedEarly {
		status = "stopped (resume with --resume)"
	}
	fmt.Fprintf(w, "pretrain %s: %s after %d steps (%.2f epochs, %.0f s, backend %s)\n", r.Config, status, r.Steps, r.Epochs, r.ElapsedS, r.Backend)
	if r.InitialHeldOut != nil {
		fmt.Fprintf(w, "held-out MLM loss %.4f -> %.4f, masked-token accuracy %.4f -> %.4f (%d masked tokens)\n",
			r.InitialHeldOut.Loss, r.FinalHeldOut.Loss, r.InitialHeldOut.MaskedAcc, r.FinalHeldOut.MaskedAcc, r.FinalHeldOut.MaskedTokens)
	} else {
		fmt.Fprintf(w, "held-out MLM loss %.4f, masked-token accuracy %.4f (%d masked tokens)\n",
			r.FinalHeldOut.Loss, r.FinalHeldOut.MaskedAcc, r.FinalHeldOut.MaskedTokens)
	}
	fmt.Fprintf(w, "model in %s (use --encoder hf:%s)\n", r.Out, r.Out)
}
