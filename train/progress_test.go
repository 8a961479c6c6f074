package train

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/progress"
)

// TestProgressEvents: training reports one event per step through the
// progress.Func (stage "train", unit "steps", done/total, the step's loss, the
// epoch in the detail), starting with the position of the session (a resumed
// run starts at its checkpoint's step, without a loss); it logs no progress
// lines itself (cmd/nvdp's newProgress turns events into a bar or log lines).
func TestProgressEvents(t *testing.T) {
	glueDir, vocab := synthGlue(t, 64, 16)
	defer slog.SetDefault(slog.Default())
	var logs bytes.Buffer
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "run"))
	o.Variant, o.Epochs, o.BatchSize = nvib.ModelBaseline, 2, 16
	o.ScratchConfig = tinyConfig(t, 32, 1, 32)
	o.StopAfterSteps = 3
	var events []progress.Event
	record := func(e progress.Event) { events = append(events, e) }
	if _, err := Run(context.Background(), o, record); err != nil {
		t.Fatal(err)
	}
	first := len(events)
	if _, err := Run(context.Background(), model.Options{RunTime: model.RunTime{Out: o.Out, Resume: true}}, record); err != nil {
		t.Fatal(err)
	}
	// session 1: start at 0, steps 1-3; session 2: start at 3, steps 4-8
	want := []int64{0, 1, 2, 3, 3, 4, 5, 6, 7, 8}
	if len(events) != len(want) || first != 4 {
		t.Fatalf("%d events (%d in the first session), want %d (4): %+v", len(events), first, len(want), events)
	}
	for i, e := range events {
		start := i == 0 || i == first
		epoch := 1 + (int(e.Done)-1)/4
		if start {
			epoch = 1 + int(e.Done)/4
		}
		if e.Stage != "train" || e.Unit != "steps" || e.Total != 8 || e.Done != want[i] ||
			!strings.HasPrefix(e.Detail, fmt.Sprintf("epoch %d/2", epoch)) {
			t.Errorf("event %d: %+v, want stage train, unit steps, done %d of 8, detail epoch %d/2", i, e, want[i], epoch)
		}
		switch {
		case start && e.HasLoss():
			t.Errorf("event %d (start of a session) has loss %v", i, e.Loss)
		case !start && !(e.Loss > 0 && e.Loss < 10):
			t.Errorf("event %d: loss %v", i, e.Loss)
		case !start && !strings.Contains(e.Detail, " task "):
			t.Errorf("event %d: detail %q has no task loss", i, e.Detail)
		}
	}
	if strings.Contains(logs.String(), "msg=progress") {
		t.Errorf("training logged progress lines itself:\n%s", logs.String())
	}
}
