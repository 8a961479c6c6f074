package audit

import (
	"fmt"
	"slices"
	"time"

	"github.com/nvdp-project/nvdp/privacy"
)

// PairAudit is the principled all-pairs audit with the bounds evaluated
// outside this package, as the device engine dnn.AuditAllPairs does. The
// caller evaluates Eq. rdp for every unordered pair a < b at Orders() and
// hands the values to [PairAudit.Add]. [PairAudit.Report] then writes what
// [Audit] writes from the same values, through the same collection, summary
// and accountant, in collect.go, summary.go and accountant.go.
type PairAudit struct {
	c       *collector
	workers []*pairStats
	done    func(int64)
	start   time.Time
}

// NewPairAudit checks opt and p as [Audit] does, with [Options.Validate], the
// posteriors and the certified clip set, and prepares opt.Workers
// accumulators; 0 workers means GOMAXPROCS. It covers every ordered pair in
// principled mode only: the reference mode and a pair sample, Pairs, are
// errors. LowMemory has no effect, since no float64 copy of the file is made
// here.
func NewPairAudit(p *privacy.Posteriors, opt Options) (*PairAudit, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if opt.Mode == privacy.ModeReference || opt.Pairs != 0 {
		return nil, fmt.Errorf("audit options: a pair audit evaluates every ordered pair in principled mode (no reference mode, no pair sample)")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := opt.resolve(p.M); err != nil {
		return nil, err
	}
	skip, err := certifiedSkips(p, opt)
	if err != nil {
		return nil, err
	}
	eo := opt
	eo.LowMemory = true // the engine's per-example sums only: it evaluates no pair here
	c := newCollector(p, eo, skip)
	a := &PairAudit{c: c, workers: make([]*pairStats, opt.Workers), start: start}
	for w := range a.workers {
		a.workers[w] = c.newStats()
	}
	a.done = c.progress()
	return a, nil
}

// Orders returns the Renyi orders that Add's values hold: the audit's order
// first, then l+1 of each BDP moment order not skipped, each once.
func (a *PairAudit) Orders() []float64 { return slices.Clone(a.c.e.orders) }

// BoundOptions are the mask and the Gaussian direction of the bound.
func (a *PairAudit) BoundOptions() privacy.BoundOptions { return a.c.e.opt }

// Workers returns the number of accumulators; Add's w is in [0, Workers()).
func (a *PairAudit) Workers() int { return len(a.workers) }

// Add records the unordered pair x < y in accumulator w. v[2k] is D(x||y)
// and v[2k+1] is D(y||x) at Orders()[k], +Inf where the bound is undefined.
//
// Calls with one w are serialised by the caller; calls with different w may
// run concurrently. The report depends on which pairs went to which
// accumulator, since sums run in another order, as between audits with
// different numbers of workers; it does not depend on when.
func (a *PairAudit) Add(w, x, y int, v []float64) {
	a.c.add(a.workers[w], x, y, v, both, -1)
}

// Done reports n more ordered pairs audited to Options.Progress, when it is
// not nil. Calls are serialised by the caller.
func (a *PairAudit) Done(n int64) {
	if a.done != nil {
		a.done(n)
	}
}

// Report merges the accumulators in order and writes the report as [Audit]
// does: the summary, the accountant, the seconds since [NewPairAudit] and the
// file's metadata. It returns an error when not every ordered pair was added
// exactly once, by count, and the accountant's errors.
func (a *PairAudit) Report() (*Report, error) {
	c, p, opt := a.c, a.c.p, a.c.opt
	st := c.newStats()
	for i, w := range a.workers {
		st.rd.merge(&w.rd)
		st.bdp.merge(&w.bdp)
		a.workers[i] = nil
	}
	if n := st.rd.finite + st.rd.invalid; n != c.ordered() {
		return nil, fmt.Errorf("audit: %d ordered pairs evaluated, the file has %d", n, c.ordered())
	}
	r := &Report{Mode: privacy.ModePrincipled, Order: opt.Order, Delta: opt.Delta, Confidence: opt.Confidence,
		Examples: p.M, Components: p.N, Dims: p.P, Mask: opt.UseMask, GaussianDirection: opt.Direction}
	summarise(r, &st.rd, c, p)
	if err := accountant(r, &st.bdp, c); err != nil {
		return nil, err
	}
	r.Seconds = time.Since(a.start).Seconds()
	r.Metadata = p.Metadata
	return r, nil
}
