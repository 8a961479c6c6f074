package progress

import (
	"math"
	"testing"
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
