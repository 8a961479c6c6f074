package serve

import (
	"sync/atomic"
)

// limiter bounds the releases that run at once (slots) and the requests
// admitted in all, running or queued for a slot (slots + queue). A request
// beyond that is refused at once: a server under overload answers 429
// quickly instead of letting latency and memory grow.
type limiter struct {
	slots    chan struct{}
	admitted atomic.Int64
	max      int64
}

func newLimiter(slots, queue int) *limiter {
	return &limiter{slots: make(chan struct{}, slots), max: int64(slots + queue)}
}

// admit reserves a place for a request (running or queued); false: the
// queue is full. A request admitted calls leave once done.
func (l *limiter) admit() bool {
	if l.admitted.Add(1) > l.max {
		l.admitted.Add(-1)
		return false
	}
	return true
}

func (l *limiter) leave() { l.admitted.Add(-1) }

// running and waiting are the batches holding a release slot (package
// batcher) and the requests admitted beyond them (for the metrics).
func (l *limiter) running() int { return len(l.slots) }

func (l *limiter) waiting() int {
	w := int(l.admitted.Load()) - len(l.slots)
	return max(w, 0)
}
