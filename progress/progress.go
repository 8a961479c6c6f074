// Package progress is the one progress interface of nvdp's long operations
// (training, pretraining, the audit's pairs, downloads, evaluation). A library
// reports what it has done through a Func; only the program (cmd/nvdp)
// decides how to show it: a bar on a terminal, a log line every so often
// otherwise, or nothing. No library draws a bar or writes to a terminal.
package progress

import "math"

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
