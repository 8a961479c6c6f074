package train

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/nvib"
)

// TestProgressLogLines: without a progress bar, training logs a progress
// line every ProgressLogEvery (here every step) with the step, the total,
// the mean loss since the last line, the rate and the ETA; with a bar it logs
// none.
func TestProgressLogLines(t *testing.T) {
	glueDir, vocab := synthGlue(t, 64, 16)
	defer func(d time.Duration, l *slog.Logger) { ProgressLogEvery = d; slog.SetDefault(l) }(ProgressLogEvery, slog.Default())
	ProgressLogEvery = 0
	for _, tc := range []struct {
		name  string
		bar   bool
		lines int
	}{{"no bar", false, 8}, {"bar", true, 0}} {
		var buf bytes.Buffer
		slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
		o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "run"))
		o.Variant, o.Epochs, o.BatchSize = nvib.ModelBaseline, 2, 16
		o.ScratchConfig = tinyConfig(t, 32, 1, 32)
		var w io.Writer // the progress bar's destination, or none
		if tc.bar {
			w = &bytes.Buffer{}
		}
		if _, err := Run(context.Background(), o, w); err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`msg=progress epoch=(\d) step=(\d+) of=8 loss=([0-9.]+) steps_per_s=[0-9.e+]+ eta=\S+`)
		m := re.FindAllStringSubmatch(buf.String(), -1)
		if len(m) != tc.lines {
			t.Fatalf("%s: %d progress lines, want %d:\n%s", tc.name, len(m), tc.lines, buf.String())
		}
		for i, l := range m {
			if step, _ := strconv.Atoi(l[2]); step != i+1 {
				t.Errorf("%s: line %d has step %d", tc.name, i, step)
			}
			if loss, _ := strconv.ParseFloat(l[3], 64); !(loss > 0 && loss < 10) {
				t.Errorf("%s: line %d loss %v", tc.name, i, loss)
			}
		}
	}
}
