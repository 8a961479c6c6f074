package mlm

import (
	"bytes"
	"testing"
)

// TestResultWriteText: how the run ended, the held-out loss and accuracy
// (before -> after when the initial evaluation ran) and the model directory.
func TestResultWriteText(t *testing.T) {
	final := Metric{Loss: 2.5, MaskedAcc: 0.25, MaskedTokens: 100}
	for _, c := range []struct {
		name string
		r    Result
		want string
	}{
		{"finished, initial evaluation", Result{Out: "m", Config: "tiny", Steps: 10, Epochs: 1.5, ElapsedS: 3, Backend: "cpu",
			InitialHeldOut: &Metric{Loss: 9, MaskedAcc: 0.01}, FinalHeldOut: final},
			"pretrain tiny: finished after 10 steps (1.50 epochs, 3 s, backend cpu)\n" +
				"held-out MLM loss 9.0000 -> 2.5000, masked-token accuracy 0.0100 -> 0.2500 (100 masked tokens)\n" +
				"model in m (use --encoder hf:m)\n"},
		{"stopped", Result{Out: "m", Config: "tiny", Steps: 4, StoppedEarly: true, Backend: "cpu", FinalHeldOut: final},
			"pretrain tiny: stopped (resume with --resume) after 4 steps (0.00 epochs, 0 s, backend cpu)\n" +
				"held-out MLM loss 2.5000, masked-token accuracy 0.2500 (100 masked tokens)\n" +
				"model in m (use --encoder hf:m)\n"},
	} {
		var b bytes.Buffer
		c.r.WriteText(&b)
		if b.String() != c.want {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, b.String(), c.want)
		}
	}
}
