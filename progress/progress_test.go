package progress

import (
	"bytes"
	"log/slog"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNilFuncDiscards(t *testing.T) {
	var f Func
	f.Report(Event{Stage: "x"}) // must not panic
	f.Counter("x", "steps", 3)(1)
}

func TestCounter(t *testing.T) {
	var got []Event
	f := Func(func(e Event) { got = append(got, e) })
	c := f.Counter("audit", "pairs", 10)
	c(4)
	c(10)
	if len(got) != 2 || got[0].Done != 4 || got[1].Done != 10 || got[1].Total != 10 ||
		got[0].Stage != "audit" || got[0].Unit != "pairs" || got[0].HasLoss() {
		t.Fatalf("events %+v", got)
	}
	if !(Event{Loss: 0}).HasLoss() || (Event{Loss: math.NaN()}).HasLoss() {
		t.Fatal("HasLoss")
	}
}

// TestLog: with no bar, a line per interval (here every event after
// the first) with done, total, the mean loss since the previous line, the
// rate and the ETA, and a line when the stage ends; no loss for stages
// without one.
func TestLog(t *testing.T) {
	var buf bytes.Buffer
	f := Log(slog.New(slog.NewTextHandler(&buf, nil)), 0)
	for i := int64(0); i <= 4; i++ {
		time.Sleep(time.Millisecond)
		f(Event{Stage: "train", Unit: "steps", Done: i, Total: 4, Loss: float64(i)})
	}
	f.Counter("audit", "pairs", 10)(0)
	f.Counter("audit", "pairs", 10)(10)
	out := buf.String()
	re := regexp.MustCompile(`msg=progress stage=train done=(\d) of=4 unit=steps loss=([0-9.]+) per_s=[0-9.e+]+ eta=\S+`)
	m := re.FindAllStringSubmatch(out, -1)
	if len(m) != 4 {
		t.Fatalf("%d train lines, want 4:\n%s", len(m), out)
	}
	for i, l := range m {
		if l[1] != string(rune('1'+i)) || l[2] != string(rune('1'+i)) {
			t.Errorf("line %d: done %s loss %s", i, l[1], l[2])
		}
	}
	if !strings.Contains(out, "stage=audit done=10 of=10 unit=pairs") || strings.Contains(out, "stage=audit done=10 of=10 unit=pairs loss") {
		t.Fatalf("audit end line missing or with a loss:\n%s", out)
	}
}

// TestLogInterval: within the interval, only the end of a stage is logged.
func TestLogInterval(t *testing.T) {
	var buf bytes.Buffer
	f := Log(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	for i := int64(0); i <= 100; i++ {
		f(Event{Stage: "train", Unit: "steps", Done: i, Total: 100, Loss: math.NaN()})
	}
	if n := strings.Count(buf.String(), "msg=progress"); n != 1 || !strings.Contains(buf.String(), "done=100 of=100") {
		t.Fatalf("%d lines:\n%s", n, buf.String())
	}
}
