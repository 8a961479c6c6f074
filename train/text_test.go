package train

import (
	"bytes"
	"strings"
	"testing"
)

// TestEvalResultWriteText: the metrics sorted by name, the files, and the
// posteriors line only when a file was written.
func TestEvalResultWriteText(t *testing.T) {
	r := &EvalResult{Task: "sst2", Split: "validation", Variant: "nvdp", Examples: 872,
		Metrics: Metrics{"f1": 0.5, "accuracy": 0.25}, Predictions: "p.tsv"}
	want := "sst2 validation (nvdp): 872 examples\n  accuracy               0.2500\n  f1                     0.5000\npredictions: p.tsv\n"
	for _, c := range []struct {
		posteriors, tail string
	}{{"", ""}, {"q.safetensors", "posteriors:  q.safetensors (65 components)\n"}} {
		r.Posteriors, r.Components = c.posteriors, 65
		var b bytes.Buffer
		r.WriteText(&b)
		if b.String() != want+c.tail {
			t.Errorf("posteriors %q: got\n%s\nwant\n%s", c.posteriors, b.String(), want+c.tail)
		}
		if strings.Contains(b.String(), "certified") {
			t.Errorf("no certificate, yet: %s", b.String())
		}
	}
}
