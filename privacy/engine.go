package privacy

import (
	"context"
	"math"
	"runtime"
	"sync"
)

// engine evaluates Eq. rdp for every unordered pair {a, b} in both directions
// and at several Renyi orders in one pass over the data.
//
// Per-example precomputation (O(M N P) memory, float64):
//   - s2 = sigma^2 = exp(logvar), mu as float64;
//   - ls[x,i] = sum_j ln sigma_{x,ij} = 0.5 sum_j logvar_{x,ij} (no logarithm needed);
//   - lnGamma(alpha_{x,i}), alpha_0 and lnGamma(alpha_0) per example.
//
// Per pair and component only lnGamma(lambda a_i - (lambda-1) a'_i) (both
// directions) and the P-dimensional Gaussian sums remain. The Gaussian kernel
// computes, for both directions at once, sum_j d_j^2 / r_j and sum_j ln r_j,
// where r = (1-lambda) s2_b + lambda s2_a and r~ = s2_a + s2_b - r is the radicand
// of the reverse direction: one division per dimension (d^2/(r r~) multiplied by
// r~ and r) and no logarithm in the inner loop: the logs of the radicands are
// summed as a product with its binary exponent peeled off every 8 factors,
// one math.Log per pair, component and direction. Any radicand outside
// [2^-100, 2^100) (including <= 0, i.e. undefined) sends the component to the
// straightforward per-dimension path, which decides validity exactly.
type engine struct {
	M, N, P int
	orders  []float64
	opt     BoundOptions
	// mu, s2 are float64 mu and sigma^2 = exp(logvar) of every component
	// [M*N*P]; nil in low-memory mode, where each tile computes them for its
	// own examples from p (tileBuf.fill): the same float64 values, so the
	// same numbers, without 2x the file in memory.
	mu, s2   []float64
	p        *Posteriors
	low      bool
	ls       []float64 // [M*N]
	alpha    []float64 // [M*N]
	lgA      []float64 // [M*N]
	keep     []bool    // [M*N]
	tot, lgT []float64 // [M]
}

func newEngine(p *Posteriors, orders []float64, opt BoundOptions) *engine {
	return newEngineMem(p, orders, opt, false)
}

// newEngineMem is newEngine, in low-memory mode when low is set (the
// float64 copies of mu and sigma^2 are made per tile, not for the file).
func newEngineMem(p *Posteriors, orders []float64, opt BoundOptions, low bool) *engine {
	e := &engine{M: p.M, N: p.N, P: p.P, orders: orders, opt: opt, p: p, low: low}
	if !low {
		n := p.M * p.N * p.P
		e.mu = make([]float64, n)
		e.s2 = make([]float64, n)
		convert(e.mu, e.s2, p.Mu, p.Logvar)
	}
	mn := p.M * p.N
	e.ls = make([]float64, mn)
	e.alpha = make([]float64, mn)
	e.lgA = make([]float64, mn)
	e.keep = make([]bool, mn)
	e.tot = make([]float64, p.M)
	e.lgT = make([]float64, p.M)
	for c := range mn {
		var s float64
		for _, v := range p.Logvar[c*p.P : (c+1)*p.P] {
			s += float64(v)
		}
		e.ls[c] = 0.5 * s
		e.alpha[c] = float64(p.Alpha[c])
		e.lgA[c] = lgamma(e.alpha[c])
		e.keep[c] = !opt.UseMask || p.AttentionMask == nil || p.AttentionMask[c] == 1
		if e.keep[c] {
			e.tot[c/p.N] += e.alpha[c]
		}
	}
	for x := range p.M {
		e.lgT[x] = lgamma(e.tot[x])
	}
	return e
}

// pairValues holds, for one unordered pair (a < b), D(a||b) at v[2k] and
// D(b||a) at v[2k+1] for order k; +Inf where the bound is undefined.
type pairSink func(a, b int, v []float64)

const tileSize = 16

// tileRange is a block of unordered pairs (a, b), a in [a0, a1), b in
// [b0, b1), a < b; ordered is how many of each pair's two directions the
// caller audits (progress).
type tileRange struct{ a0, a1, b0, b1, ordered int }

// tiles lists the tiles of every unordered pair with at least one example
// in the rows [lo, hi): those inside the rows (I-major, J >= I: for the
// whole file, lo = 0 and hi = M, exactly the tiles in the order the audit
// always used), then those with a partner below lo and above hi, whose
// ordered pairs (q, q') with q in the rows are one direction of two.
func (e *engine) tiles(lo, hi int) []tileRange {
	chunks := func(lo, hi int) [][2]int {
		var c [][2]int
		for x := lo; x < hi; x += tileSize {
			c = append(c, [2]int{x, min(x+tileSize, hi)})
		}
		return c
	}
	rows := chunks(lo, hi)
	var t []tileRange
	for i, a := range rows {
		for _, b := range rows[i:] {
			t = append(t, tileRange{a[0], a[1], b[0], b[1], 2})
		}
	}
	for _, a := range chunks(0, lo) {
		for _, b := range rows {
			t = append(t, tileRange{a[0], a[1], b[0], b[1], 1})
		}
	}
	for _, a := range rows {
		for _, b := range chunks(hi, e.M) {
			t = append(t, tileRange{a[0], a[1], b[0], b[1], 1})
		}
	}
	return t
}

// run evaluates the pairs of tiles with the given number of workers, tile t
// by worker t mod workers.
// newSink is called once per worker (with its index); progress (may be nil)
// gets the number of ordered pairs done (tileRange.ordered) after each tile.
func (e *engine) run(ctx context.Context, workers int, tiles []tileRange, newSink func(w int) pairSink, progress func(pairs int)) error {
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range workers {
		sink := newSink(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf tileBuf
			// Worker w takes tiles w, w+workers, ... in order: each worker's
			// sums then add the same values in the same order on every run,
			// and the workers' statistics are merged in worker order, so a
			// report depends on the number of workers but not on how they
			// were scheduled (the tiles are of one size: no balancing lost
			// beyond the last round).
			for t := w; ; t += workers {
				if t >= len(tiles) || ctx.Err() != nil {
					return
				}
				tr := tiles[t]
				n := e.tile(&buf, tr.a0, tr.a1, tr.b0, tr.b1, sink)
				if progress != nil {
					mu.Lock()
					progress(n * tr.ordered)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

type tileBuf struct {
	pa, pb []int
	acc    []float64
	// low-memory mode: the tile's examples' float64 mu and sigma^2 and each
	// pair's rows in them
	mu, s2 []float64
	la, lb []int
}

// convert writes float64 mu and sigma^2 = exp(logvar) of float32 mu and
// logvar into dst (the one conversion both modes use).
func convert(mu, s2 []float64, srcMu, srcLogvar []float32) {
	for k := range srcMu {
		mu[k] = float64(srcMu[k])
		s2[k] = math.Exp(float64(srcLogvar[k]))
	}
}

// fill converts the components of the examples [a0, a1) and, when it is
// another block, [b0, b1) into buf.mu and buf.s2 and sets buf.la, buf.lb to
// each pair's rows there.
func (e *engine) fill(buf *tileBuf, a0, a1, b0, b1 int) {
	np := e.N * e.P
	same := a0 == b0 && a1 == b1
	rows := a1 - a0
	if !same {
		rows += b1 - b0
	}
	if cap(buf.mu) < rows*np {
		buf.mu, buf.s2 = make([]float64, rows*np), make([]float64, rows*np)
	}
	buf.mu, buf.s2 = buf.mu[:rows*np], buf.s2[:rows*np]
	p := e.p
	convert(buf.mu[:(a1-a0)*np], buf.s2[:(a1-a0)*np], p.Mu[a0*np:a1*np], p.Logvar[a0*np:a1*np])
	if !same {
		off := (a1 - a0) * np
		convert(buf.mu[off:], buf.s2[off:], p.Mu[b0*np:b1*np], p.Logvar[b0*np:b1*np])
	}
	buf.la, buf.lb = buf.la[:0], buf.lb[:0]
	for k, a := range buf.pa {
		b := buf.pb[k]
		buf.la = append(buf.la, a-a0)
		if same {
			buf.lb = append(buf.lb, b-a0)
		} else {
			buf.lb = append(buf.lb, a1-a0+b-b0)
		}
	}
}

// tile evaluates pairs a in [a0,a1), b in [b0,b1), a < b; returns the number of pairs.
func (e *engine) tile(buf *tileBuf, a0, a1, b0, b1 int, sink pairSink) int {
	buf.pa, buf.pb = buf.pa[:0], buf.pb[:0]
	for a := a0; a < a1; a++ {
		for b := max(b0, a+1); b < b1; b++ {
			buf.pa = append(buf.pa, a)
			buf.pb = append(buf.pb, b)
		}
	}
	np, K := len(buf.pa), len(e.orders)
	w := 2 * K
	if cap(buf.acc) < np*w {
		buf.acc = make([]float64, np*w)
	}
	acc := buf.acc[:np*w]
	clear(acc)
	N, P := e.N, e.P
	std := e.opt.Direction != DirectionPaper
	mu, s2, ia, ib := e.mu, e.s2, buf.pa, buf.pb // rows of each pair's examples in mu and s2
	if e.low {
		e.fill(buf, a0, a1, b0, b1)
		mu, s2, ia, ib = buf.mu, buf.s2, buf.la, buf.lb
	}
	for i := range N {
		for p := range np {
			a, b := buf.pa[p], buf.pb[p]
			ca, cb := a*N+i, b*N+i
			if !e.keep[ca] || !e.keep[cb] {
				continue
			}
			ra, rb := ia[p]*N+i, ib[p]*N+i
			ma, mb := mu[ra*P:(ra+1)*P], mu[rb*P:(rb+1)*P]
			sa, sb := s2[ra*P:(ra+1)*P], s2[rb*P:(rb+1)*P]
			al, bl := e.alpha[ca], e.alpha[cb]
			v := acc[p*w : (p+1)*w]
			for k, lam := range e.orders {
				if math.IsInf(v[2*k], 1) && math.IsInf(v[2*k+1], 1) {
					continue
				}
				// Dirichlet component terms, both directions.
				c := lam / (lam - 1)
				dab, dba := math.Inf(1), math.Inf(1)
				if al > 0 && bl > 0 {
					if g := lam*al - (lam-1)*bl; g > 0 {
						dab = lgamma(g)/(lam-1) + e.lgA[cb] - c*e.lgA[ca]
					}
					if g := lam*bl - (lam-1)*al; g > 0 {
						dba = lgamma(g)/(lam-1) + e.lgA[ca] - c*e.lgA[cb]
					}
				}
				q1, q2, l1, l2, ok := gaussFast(lam, ma, mb, sa, sb)
				bad1, bad2 := false, false
				if !ok {
					q1, q2, l1, l2, bad1, bad2 = gaussSafe(lam, ma, mb, sa, sb)
				}
				// Paper direction, q=a, q'=b: radicand r1 = (1-lam) s2_b + lam s2_a.
				gab := lam/2*q1 + (0.5*l1-(1-lam)*e.ls[cb]-lam*e.ls[ca])/(1-lam)
				gba := lam/2*q2 + (0.5*l2-(1-lam)*e.ls[ca]-lam*e.ls[cb])/(1-lam)
				if bad1 {
					gab = math.Inf(1)
				}
				if bad2 {
					gba = math.Inf(1)
				}
				if std {
					gab, gba = gba, gab
				}
				v[2*k] += dab + gab
				v[2*k+1] += dba + gba
			}
		}
	}
	for p := range np {
		a, b := buf.pa[p], buf.pb[p]
		v := acc[p*w : (p+1)*w]
		for k, lam := range e.orders {
			v[2*k] = e.finish(lam, a, b, v[2*k])
			v[2*k+1] = e.finish(lam, b, a, v[2*k+1])
		}
		sink(a, b, v)
	}
	return np
}

// finish adds the Dirichlet total term of direction (q, q') to the component sums s.
func (e *engine) finish(lam float64, q, qp int, s float64) float64 {
	a0, b0 := e.tot[q], e.tot[qp]
	g := lam*a0 - (lam-1)*b0
	if !(a0 > 0) || !(b0 > 0) || !(g > 0) || math.IsInf(s, 1) {
		return math.Inf(1)
	}
	s -= lgamma(g)/(lam-1) + e.lgT[qp] - lam/(lam-1)*e.lgT[q]
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return math.Inf(1)
	}
	return s
}

const (
	rLoBits   = uint64(0x39b0000000000000) // 2^-100
	rSpanBits = uint64(0x4630000000000000) - rLoBits
	mantMask  = uint64(1)<<52 - 1
	oneExp    = uint64(1023) << 52
)

// gaussFast returns q1 = sum d^2/r1, q2 = sum d^2/r2, l1 = sum ln r1,
// l2 = sum ln r2 with r1 = (1-lam) sb + lam sa, r2 = sa + sb - r1; ok = false if
// any radicand is outside [2^-100, 2^100) (the caller then uses gaussSafe).
func gaussFast(lam float64, ma, mb, sa, sb []float64) (q1, q2, l1, l2 float64, ok bool) {
	n := len(ma)
	mb, sa, sb = mb[:n], sa[:n], sb[:n]
	p1, p2 := 1.0, 1.0
	e1, e2 := 0, 0
	var q1b, q2b float64 // second accumulators: shorter dependency chains
	for len(ma) > 0 {
		k := min(8, len(ma))
		a, b, x8, y8 := ma[:k], mb[:k], sa[:k], sb[:k]
		ma, mb, sa, sb = ma[k:], mb[k:], sa[k:], sb[k:]
		j := 0
		for ; j+1 < len(a); j += 2 {
			d, dd := a[j]-b[j], a[j+1]-b[j+1]
			x, y, xx, yy := x8[j], y8[j], x8[j+1], y8[j+1]
			r1, rr1 := y+lam*(x-y), yy+lam*(xx-yy)
			r2, rr2 := x+y-r1, xx+yy-rr1
			if math.Float64bits(r1)-rLoBits >= rSpanBits || math.Float64bits(r2)-rLoBits >= rSpanBits ||
				math.Float64bits(rr1)-rLoBits >= rSpanBits || math.Float64bits(rr2)-rLoBits >= rSpanBits {
				return 0, 0, 0, 0, false
			}
			t, tt := d*d/(r1*r2), dd*dd/(rr1*rr2)
			q1 += t * r2
			q2 += t * r1
			q1b += tt * rr2
			q2b += tt * rr1
			p1 *= r1 * rr1
			p2 *= r2 * rr2
		}
		if j < len(a) {
			d := a[j] - b[j]
			x, y := x8[j], y8[j]
			r1 := y + lam*(x-y)
			r2 := x + y - r1
			if math.Float64bits(r1)-rLoBits >= rSpanBits || math.Float64bits(r2)-rLoBits >= rSpanBits {
				return 0, 0, 0, 0, false
			}
			t := d * d / (r1 * r2)
			q1 += t * r2
			q2 += t * r1
			p1 *= r1
			p2 *= r2
		}
		b1, b2 := math.Float64bits(p1), math.Float64bits(p2)
		e1 += int(b1>>52) - 1023
		e2 += int(b2>>52) - 1023
		p1 = math.Float64frombits(b1&mantMask | oneExp)
		p2 = math.Float64frombits(b2&mantMask | oneExp)
	}
	l1 = math.Log(p1) + float64(e1)*math.Ln2
	l2 = math.Log(p2) + float64(e2)*math.Ln2
	return q1 + q1b, q2 + q2b, l1, l2, true
}

// gaussSafe is gaussFast with a logarithm per dimension and exact validity
// (bad1/bad2: some radicand <= 0 in that direction). Validity is decided
// first, without a logarithm: the sums of a direction that is undefined are
// not computed (left 0), so an order whose bound is +Inf costs one sweep of
// comparisons (the Renyi orders above the clip set's, audited in the
// default BDP grid, are mostly so).
func gaussSafe(lam float64, ma, mb, sa, sb []float64) (q1, q2, l1, l2 float64, bad1, bad2 bool) {
	sa, sb = sa[:len(ma)], sb[:len(ma)]
	for j := range sa {
		x, y := sa[j], sb[j]
		bad1 = bad1 || !((1-lam)*y+lam*x > 0)
		bad2 = bad2 || !((1-lam)*x+lam*y > 0)
		if bad1 && bad2 {
			return 0, 0, 0, 0, true, true
		}
	}
	for j := range ma {
		d := ma[j] - mb[j]
		x, y := sa[j], sb[j]
		if r1 := (1-lam)*y + lam*x; !bad1 {
			q1 += d * d / r1
			l1 += math.Log(r1)
		}
		if r2 := (1-lam)*x + lam*y; !bad2 {
			q2 += d * d / r2
			l2 += math.Log(r2)
		}
	}
	return
}
