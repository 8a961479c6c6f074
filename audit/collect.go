package audit

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/DataDog/sketches-go/ddsketch"

	"github.com/nvdp-project/nvdp/privacy"
)

// Collection: the principled audit's pass over the ordered pairs. The engine
// evaluates Eq. rdp for a pair in both directions at every Renyi order the
// audit needs (its own and l+1 for each BDP moment order l); each worker
// accumulates what the summary (rdStats) and the accountant (bdpStats) need,
// and the workers' statistics are merged in worker order.

// sampleStream is the PCG stream of the pair sample ("nvdp" in ASCII).
const sampleStream = 0x6e766470

// sampleBlock is how many sampled pairs a worker audits between progress
// reports and cancellation checks.
const sampleBlock = 64

// Directions of an unordered pair a < b: bit 0 audits (q, q') = (a, b),
// bit 1 audits (b, a).
const (
	forward  = 1 << 0
	backward = 1 << 1
	both     = forward | backward
)

// collector evaluates the audited ordered pairs of p with the engine.
type collector struct {
	p   *privacy.Posteriors
	opt Options // resolved
	e   *engine
	// bdpIdx[k] is the index in e.orders of the Renyi order l+1 of BDP
	// moment order opt.BDPOrders[k]; e.orders[0] is opt.Order; -1 for an
	// order not evaluated (skip[k] says why).
	bdpIdx []int
	skip   []string // nil: every order evaluated
	// lo, hi: the rows audited, the ordered pairs (q, q') with q in [lo,
	// hi) (a shard; the whole file: 0, M). The BDP sums of the rows'
	// examples are complete (both directions of each of their pairs), the
	// pooled BDP takes each unordered pair {a < b} in the rows of a.
	lo, hi int
	// part: a shard's statistics (a sketch of the finite bounds and a
	// histogram on fixed edges instead of the values kept); nil otherwise.
	part *partSpec
	// stride: one finite bound in stride is kept for the order statistics
	// (0: none).
	stride uint64
}

// newCollector sets up the engine at the audit's order and at l+1 for each
// BDP moment order l not skipped (skip[k] != "", skip may be nil): every
// order in one pass over the pairs.
func newCollector(p *privacy.Posteriors, opt Options, skip []string) *collector {
	orders := []float64{opt.Order}
	c := &collector{p: p, opt: opt, bdpIdx: make([]int, len(opt.BDPOrders)), skip: skip, hi: p.M}
	for k, l := range opt.BDPOrders {
		c.bdpIdx[k] = -1
		if c.skipped(k) {
			continue
		}
		for i, o := range orders {
			if sameOrder(o, l+1) {
				c.bdpIdx[k] = i
			}
		}
		if c.bdpIdx[k] < 0 {
			c.bdpIdx[k] = len(orders)
			orders = append(orders, l+1)
		}
	}
	c.e = newEngineMem(p, orders, privacy.BoundOptions{UseMask: opt.UseMask, Direction: opt.Direction}, opt.LowMemory)
	if keep := int64(opt.MaxStoredPairs); keep > 0 {
		c.stride = uint64((c.audited() + keep - 1) / keep)
		c.stride = max(c.stride, 1)
	}
	return c
}

// skipped says whether BDP moment order k is not evaluated on the data.
func (c *collector) skipped(k int) bool { return c.skip != nil && c.skip[k] != "" }

// sameOrder says whether two Renyi orders are one (l+1 of a moment order
// against the audit's order, to 1e-12).
func sameOrder(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// ordered is the number of ordered pairs of the file, M(M-1).
func (c *collector) ordered() int64 { return orderedPairs(c.p.M) }

// audited is the number of ordered pairs the audit evaluates.
func (c *collector) audited() int64 {
	if c.opt.Pairs > 0 {
		return int64(c.opt.Pairs)
	}
	return int64(c.hi-c.lo) * int64(c.p.M-1)
}

// inRows says whether example x is in the audited rows.
func (c *collector) inRows(x int) bool { return x >= c.lo && x < c.hi }

// kept says whether the finite bound of the ordered pair (q, q') goes to the
// order statistics: every one when they fit (stride 1); else one pair in
// stride, chosen by a fixed hash of the pair over all pairs (the workers
// meet the pairs in no fixed order) and by the draw's index in a sample.
func (c *collector) kept(q, qp int, sample int64) bool {
	switch {
	case c.stride == 0:
		return false
	case c.stride == 1:
		return true
	case sample >= 0:
		return uint64(sample)%c.stride == 0
	}
	return pairHash(q, qp)%c.stride == 0
}

// pairHash is a fixed (seedless) hash of an ordered pair for subsampling.
func pairHash(a, b int) uint64 {
	x := uint64(a)*0x9E3779B97F4A7C15 ^ uint64(b)*0xC2B2AE3D27D4EB4F
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	return x
}

// pairStats is what one worker (and, merged, the audit) keeps of its pairs.
type pairStats struct {
	rd  rdStats
	bdp bdpStats
}

// rdStats are the statistics of the bounds at the audit's order.
type rdStats struct {
	finite, invalid int64
	sum             float64 // of the finite bounds
	max             float64 // -Inf before the first finite bound
	argA, argB      int     // the pair attaining max (smallest (q, q') among ties); -1 before
	invalidList     []InvalidPair
	values          []float64 // the finite bounds kept (collector.kept)
	// A shard's (collector.part): the smallest finite bound, a sketch of
	// them all and their histogram on fixed edges; nil/unused otherwise.
	min        float64
	sketch     *ddsketch.DDSketch
	unsketched int64
	hist       *Histogram
}

// bdpStats accumulate the accountant's ln-values per moment order k.
type bdpStats struct {
	indiv    []logAcc // [K][M][2]: l D(x||x') over x' (0) and l D(x'||x) over x' (1)
	pooled   []logAcc // [K]: l max(D(a||b), D(b||a)) over the unordered pairs
	infPairs []int64  // [K]: ordered pairs whose bound at l+1 is +Inf
}

func (c *collector) newStats() *pairStats {
	k := len(c.opt.BDPOrders)
	st := &pairStats{rd: rdStats{max: math.Inf(-1), argA: -1, argB: -1},
		bdp: bdpStats{indiv: make([]logAcc, k*c.p.M*2), pooled: make([]logAcc, k), infPairs: make([]int64, k)}}
	if c.part != nil {
		st.rd.min = math.Inf(1)
		st.rd.sketch = c.part.newSketch()
		st.rd.hist = newFixedHistogram(c.part.edges)
	}
	return st
}

// add records the unordered pair a < b in the directions dirs: v[2k] is
// D(a||b) and v[2k+1] D(b||a) at e.orders[k] (+Inf where undefined).
// sample is the index of the draw in a pair sample, -1 over all pairs.
func (c *collector) add(w *pairStats, a, b int, v []float64, dirs int, sample int64) {
	M := c.p.M
	for d := range 2 {
		if dirs&(1<<d) == 0 {
			continue
		}
		q, qp := a, b
		if d == 1 {
			q, qp = b, a
		}
		row := c.inRows(q)
		if row {
			w.rd.add(q, qp, v[d], c.opt.ListInvalid, c.kept(q, qp, sample))
		}
		for k, l := range c.opt.BDPOrders {
			if c.bdpIdx[k] < 0 {
				continue
			}
			D := v[2*c.bdpIdx[k]+d]
			if row && math.IsInf(D, 1) {
				w.bdp.infPairs[k]++
			}
			w.bdp.indiv[(k*M+q)*2+0].add(l * D)
			w.bdp.indiv[(k*M+qp)*2+1].add(l * D)
		}
	}
	if !c.inRows(a) {
		return
	}
	for k, l := range c.opt.BDPOrders {
		if c.bdpIdx[k] < 0 {
			continue
		}
		w.bdp.pooled[k].add(l * math.Max(v[2*c.bdpIdx[k]], v[2*c.bdpIdx[k]+1]))
	}
}

// add records the bound x of the ordered pair (q, q'): +Inf is an undefined
// pair (the first `list` are listed), a finite one enters the sum, the
// maximum and, when keep, the order statistics.
func (s *rdStats) add(q, qp int, x float64, list int, keep bool) {
	if math.IsInf(x, 1) {
		s.invalid++
		if len(s.invalidList) < list {
			s.invalidList = append(s.invalidList, InvalidPair{Q: q, QPrime: qp})
		}
		return
	}
	s.finite++
	s.sum += x
	if x > s.max || (x == s.max && (q < s.argA || (q == s.argA && qp < s.argB))) {
		s.max, s.argA, s.argB = x, q, qp
	}
	if keep {
		s.values = append(s.values, x)
	}
	if s.sketch != nil {
		s.min = math.Min(s.min, x)
		if s.sketch.Add(x) != nil {
			s.unsketched++ // beyond the sketch's range
		}
		s.hist.add(x)
	}
}

func (s *rdStats) merge(o *rdStats) {
	s.finite += o.finite
	s.invalid += o.invalid
	s.sum += o.sum
	if o.max > s.max || (o.max == s.max && o.argA >= 0 && (s.argA < 0 || o.argA < s.argA || (o.argA == s.argA && o.argB < s.argB))) {
		s.max, s.argA, s.argB = o.max, o.argA, o.argB
	}
	s.invalidList = append(s.invalidList, o.invalidList...)
	s.values = append(s.values, o.values...)
	if o.sketch != nil {
		s.min = math.Min(s.min, o.min)
		_ = s.sketch.MergeWith(o.sketch) // same mapping (partSpec.newSketch)
		s.unsketched += o.unsketched
		s.hist.merge(o.hist)
	}
}

func (s *bdpStats) merge(o *bdpStats) {
	for i := range o.indiv {
		s.indiv[i].merge(o.indiv[i])
	}
	for k := range o.pooled {
		s.pooled[k].merge(o.pooled[k])
		s.infPairs[k] += o.infPairs[k]
	}
}

// collect audits every ordered pair (opt.Pairs = 0) or a sample of them and
// returns the workers' statistics merged in worker order (their memory is
// released as they are merged). Errors: cancellation.
func (c *collector) collect(ctx context.Context) (*pairStats, error) {
	workers := make([]*pairStats, c.opt.Workers)
	done := c.progress()
	var err error
	if c.opt.Pairs == 0 {
		var tileDone func(int)
		if done != nil {
			tileDone = func(n int) { done(int64(n)) }
		}
		err = c.e.run(ctx, c.opt.Workers, c.e.tiles(c.lo, c.hi), func(wi int) pairSink {
			w := c.newStats()
			workers[wi] = w
			return func(a, b int, v []float64) { c.add(w, a, b, v, both, -1) }
		}, tileDone)
	} else {
		err = c.sample(ctx, workers, done)
	}
	if err != nil {
		return nil, err
	}
	tot := c.newStats()
	for i, w := range workers {
		if w == nil {
			continue
		}
		tot.rd.merge(&w.rd)
		tot.bdp.merge(&w.bdp)
		workers[i] = nil
	}
	return tot, nil
}

// progress returns the function that adds n audited ordered pairs and
// reports the count so far through opt.Progress (nil without one). Callers
// serialise it.
func (c *collector) progress() func(n int64) {
	if c.opt.Progress == nil {
		return nil
	}
	report := c.opt.Progress.Counter("audit", "pairs", c.audited())
	var done int64
	return func(n int64) {
		done += n
		report(done)
	}
}

// draw is one ordered pair (q, q'), q != q', uniform over the M(M-1).
func (c *collector) draw(rng *rand.Rand) (q, qp int) {
	q = rng.IntN(c.p.M)
	qp = rng.IntN(c.p.M - 1)
	if qp >= q {
		qp++
	}
	return q, qp
}

// sample audits opt.Pairs ordered pairs drawn uniformly with replacement
// from a PCG stream seeded with opt.Seed. Worker w audits draws [w chunk,
// (w+1) chunk) in order, the statistics it keeps therefore depend only on
// the seed and the number of workers. The sample is drawn as it is audited:
// a first pass over the draws (without auditing) copies the generator at
// each worker's first draw, so memory is O(workers) whatever opt.Pairs.
// done (may be nil) gets the pairs audited, serialised.
func (c *collector) sample(ctx context.Context, workers []*pairStats, done func(int64)) error {
	K, W := int64(c.opt.Pairs), int64(len(workers))
	chunk := (K + W - 1) / W
	src := rand.NewPCG(c.opt.Seed, sampleStream)
	rng := rand.New(src)
	starts := make([]rand.PCG, W)
	for w := range W {
		starts[w] = *src
		for i := w * chunk; i < min((w+1)*chunk, K); i++ {
			if i%(1<<16) == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			c.draw(rng)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range W {
		st := c.newStats()
		workers[w] = st
		lo, hi := min(w*chunk, K), min((w+1)*chunk, K)
		wg.Go(func() {
			rng := rand.New(&starts[w])
			var buf tileBuf
			last := lo
			for i := lo; i < hi; i++ {
				if (i-lo)%sampleBlock == 0 && ctx.Err() != nil {
					return
				}
				a, b := c.draw(rng)
				dirs := forward
				if a > b {
					a, b, dirs = b, a, backward
				}
				c.e.tile(&buf, a, a+1, b, b+1, func(a, b int, v []float64) { c.add(st, a, b, v, dirs, i) })
				if done != nil && ((i+1-lo)%sampleBlock == 0 || i+1 == hi) {
					mu.Lock()
					done(i + 1 - last)
					mu.Unlock()
					last = i + 1
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}
