// Package progress is the one progress interface of nvdp's long operations
// (training, pretraining, the audit's pairs, downloads, evaluation). A library
// reports what it has done through a Func; only the program (cmd/nvdp)
// decides how to show it: a bar on a terminal, a log line every so often
// otherwise ([Log]), or nothing. No library draws a bar or writes to a terminal.
package progress

import (
	"log/slog"
	"math"
	"sync"
	"time"
)

// Event is one progress report of a long operation.
type Event struct {
	// Stage names the operation ("train", "pretrain", "audit", "eval",
	// "download bert-base-uncased/model.safetensors"); a new Stage starts a new
	// display.
	Stage string
	// Unit is what Done and Total count ("steps", "pairs", "bytes", "examples").
	Unit string
	// Done of Total units are finished; Total <= 0 when unknown. Done is
	// non-decreasing within a Stage; Done == Total ends the Stage.
	Done, Total int64
	// Loss is the training loss of the step just done (NaN when the operation
	// has no loss); Detail is a short free-form status ("epoch 2/10 task 0.41").
	Loss   float64
	Detail string
}

// HasLoss reports whether e carries a loss.
func (e Event) HasLoss() bool { return !math.IsNaN(e.Loss) }

// Func receives progress events; a nil Func discards them. A library may
// call it from several goroutines, and implementations synchronise. It must
// return quickly (it is called once per step or per block of work).
type Func func(Event)

// Report sends e to f unless f is nil.
func (f Func) Report(e Event) {
	if f != nil {
		f(e)
	}
}

// Counter returns a Func-backed reporter for a stage with a fixed unit and
// total and no loss: each call reports done units. Useful for loops that only
// count.
func (f Func) Counter(stage, unit string, total int64) func(done int64) {
	if f == nil {
		return func(int64) {}
	}
	return func(done int64) {
		f(Event{Stage: stage, Unit: unit, Done: done, Total: total, Loss: math.NaN()})
	}
}

// Log returns a Func that logs to l, per stage, a line at most every
// `every` and one when the stage ends (message "progress"): stage, done,
// total, unit, detail, rate per second, ETA and the mean of the losses
// reported since the previous line. The start of a stage is not logged.
// It is the program's display where no bar is drawn.
func Log(l *slog.Logger, every time.Duration) Func {
	type state struct {
		last     time.Time
		lastDone int64
		loss     float64
		n        int
	}
	var mu sync.Mutex
	states := map[string]*state{}
	return func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		s, ok := states[e.Stage]
		if !ok {
			s = &state{last: time.Now(), lastDone: e.Done}
			states[e.Stage] = s
			if e.Total <= 0 || e.Done < e.Total {
				return // the start of a stage is not progress yet
			}
		}
		if e.HasLoss() {
			s.loss += e.Loss
			s.n++
		}
		end := e.Total > 0 && e.Done >= e.Total
		since := time.Since(s.last)
		if since < every && !end {
			return
		}
		attrs := []any{"stage", e.Stage, "done", e.Done}
		if e.Total > 0 {
			attrs = append(attrs, "of", e.Total)
		}
		if e.Unit != "" {
			attrs = append(attrs, "unit", e.Unit)
		}
		if e.Detail != "" {
			attrs = append(attrs, "detail", e.Detail)
		}
		if s.n > 0 {
			attrs = append(attrs, "loss", s.loss/float64(s.n))
		}
		if rate := float64(e.Done-s.lastDone) / since.Seconds(); since > 0 && rate > 0 && !math.IsInf(rate, 0) {
			attrs = append(attrs, "per_s", math.Round(rate*100)/100)
			if e.Total > 0 {
				eta := time.Duration(float64(e.Total-e.Done) / rate * float64(time.Second)).Round(time.Second)
				attrs = append(attrs, "eta", eta.String())
			}
		}
		l.Info("progress", attrs...)
		s.last, s.lastDone, s.loss, s.n = time.Now(), e.Done, 0, 0
		if end {
			delete(states, e.Stage)
		}
	}
}
