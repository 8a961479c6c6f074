package ledger

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxCommitBatch bounds the charges a Batcher hands to one commit.
const MaxCommitBatch = 256

// DefaultCommitWindow is the commit window a ledger's Batcher starts with
// ([Batcher.SetWindow]): 2 ms, a fraction of a release's time under load.
// On the 2-core machine of docs/performance.md ("The ledger's commit
// window") it cut the fsyncs of a release at 32 clients by a quarter.
const DefaultCommitWindow = 2 * time.Millisecond

// ChargeRequest is one charge waiting for a ledger's committer: what to
// charge, and once settled its answer in Balance and Err.
type ChargeRequest struct {
	Account  string
	Curve    *Curve
	Releases int
	Budget   float64
	// Balance and Err are the answer, set by the commit before Done.
	Balance Balance
	Err     error
	done    chan struct{}
}

// Done answers the request: Submit returns its Balance and Err.
func (r *ChargeRequest) Done() { close(r.done) }

// Batcher is the group commit of a ledger. Charges submitted while a commit
// is running queue, and each committer takes up to MaxCommitBatch of those
// waiting and hands them to the ledger's commit in one batch, which answers
// each with [ChargeRequest.Done]. The file ledger runs one committer whose
// queue blocks when full; PostgreSQL runs several, and refuses a charge at
// once with [ErrBusy] when its queue is full.
//
// Under load a committer also waits up to its commit window for more
// charges once the queue is empty (PostgreSQL's commit_delay does the same
// for its WAL flushes): when the committer's previous commit held more than
// one charge, charges are arriving while commits run, and the next few
// share the commit's fsync instead of paying for their own. A charge that
// comes alone (the previous commit held one) never waits.
type Batcher struct {
	reqs   chan *ChargeRequest
	block  bool
	commit func([]*ChargeRequest)
	window atomic.Int64         // the commit window, in ns (SetWindow)
	sizes  prometheus.Histogram // the charges of each commit (CommitSizes)
	// mu guards closed and is held (read) while a charge is sent to reqs,
	// so that Close closes reqs only after the last send.
	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup
}

// NewBatcher starts committers goroutines that hand batches to commit, with
// a queue of queue charges. block says whether Submit waits for room in a
// full queue; else it refuses with [ErrBusy].
func NewBatcher(committers, queue int, block bool, commit func([]*ChargeRequest)) *Batcher {
	b := &Batcher{reqs: make(chan *ChargeRequest, queue), block: block, commit: commit,
		sizes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nvdp_ledger_charge_batch_size", Help: "Charges committed in one transaction of the ledger (its group commit).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		})}
	b.window.Store(int64(DefaultCommitWindow))
	for range committers {
		b.wg.Add(1)
		go b.run()
	}
	return b
}

// Submit queues a charge of releases of curve to account against budget and
// returns its answer once a commit settled it. releases is at least 1.
// Errors: [ErrClosed], [ErrBusy] from a full queue that does not block, and
// the commit's.
func (b *Batcher) Submit(account string, curve *Curve, releases int, budget float64) (Balance, error) {
	if releases < 1 {
		panic(fmt.Sprintf("ledger: Charge of %d releases", releases))
	}
	r := &ChargeRequest{Account: account, Curve: curve, Releases: releases, Budget: budget, done: make(chan struct{})}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return Balance{}, ErrClosed
	}
	if b.block {
		b.reqs <- r
	} else {
		select {
		case b.reqs <- r:
		default:
			b.mu.RUnlock()
			return Balance{}, fmt.Errorf("%w (%d)", ErrBusy, cap(b.reqs))
		}
	}
	b.mu.RUnlock()
	<-r.done
	return r.Balance, r.Err
}

// Go runs f, a commit's work outside a committer such as charges it set
// apart, and Close waits for it.
func (b *Batcher) Go(f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
}

// SetWindow sets the commit window, >= 0 (0: a commit takes only the charges
// already queued); it applies from each committer's next commit. It panics
// for a negative window, a programmer's error.
func (b *Batcher) SetWindow(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("ledger: commit window %v", d))
	}
	b.window.Store(int64(d))
}

// Window is the commit window (SetWindow).
func (b *Batcher) Window() time.Duration { return time.Duration(b.window.Load()) }

// CommitSizes is the histogram of the charges each commit held,
// nvdp_ledger_charge_batch_size, for a ledger's metrics.
func (b *Batcher) CommitSizes() prometheus.Histogram { return b.sizes }

// Waiting is the number of charges queued.
func (b *Batcher) Waiting() int { return len(b.reqs) }

// Close stops taking charges and waits until those submitted are settled.
func (b *Batcher) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	close(b.reqs)
	b.mu.Unlock()
	b.wg.Wait()
}

// run is a committer: it takes the charges waiting and commits them.
func (b *Batcher) run() {
	defer b.wg.Done()
	last := 0 // the charges of this committer's previous commit
	for first := range b.reqs {
		batch := b.gather([]*ChargeRequest{first}, nil)
		if w := b.Window(); w > 0 && last > 1 && len(batch) < MaxCommitBatch {
			t := time.NewTimer(w)
			batch = b.gather(batch, t.C)
			t.Stop()
		}
		last = len(batch)
		b.sizes.Observe(float64(last))
		b.commit(batch)
	}
}

// gather appends charges to batch, up to MaxCommitBatch: those queued when
// until is nil, else those that come before until fires.
func (b *Batcher) gather(batch []*ChargeRequest, until <-chan time.Time) []*ChargeRequest {
	for len(batch) < MaxCommitBatch {
		var r *ChargeRequest
		ok := false
		if until == nil {
			select {
			case r, ok = <-b.reqs:
			default:
				return batch
			}
		} else {
			select {
			case r, ok = <-b.reqs:
			case <-until:
				return batch
			}
		}
		if !ok { // closed
			return batch
		}
		batch = append(batch, r)
	}
	return batch
}
