package bench

import (
	"strings"
	"testing"
)

// TestWriteText: the lines `nvdp bench` prints, the device line only on a
// GPU.
func TestWriteText(t *testing.T) {
	r := Result{Config: "bert-tiny", Backend: "openblas", TrainStepSeconds: 0.12345, InferStepSeconds: 0.04321, TokensPerSecond: 33178.6, PeakRSSMB: 211.4}
	o := Options{Batch: 32, Seq: 128}
	for _, tc := range []struct {
		device string
		want   string
	}{
		{"", "config bert-tiny, backend openblas, batch 32, seq 128\ntrain step  0.1235 s  (33179 tokens/s)\ninfer step  0.0432 s\npeak RSS    211 MiB\n"},
		{"H100", "config bert-tiny, backend openblas, batch 32, seq 128\ndevice      H100\ntrain step  0.1235 s  (33179 tokens/s)\ninfer step  0.0432 s\npeak RSS    211 MiB\n"},
	} {
		r.Device = tc.device
		var b strings.Builder
		if err := r.WriteText(&b, o); err != nil || b.String() != tc.want {
			t.Errorf("device %q: %v\n%q\nwant\n%q", tc.device, err, b.String(), tc.want)
		}
	}
}
