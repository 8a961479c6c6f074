package audit

import (
	"context"
	"math"
	"runtime"
	"sync"

	"github.com/nvdp-project/nvdp/privacy"
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
// (gaussLanes, gausslanes.go: AVX2 where the CPU has it, the same bits in
// pure Go elsewhere) computes, for both directions at once, sum_j d_j^2 / r_j
// and prod_j r_j, where r = (1-lambda) s2_b + lambda s2_a and
// r~ = s2_a + s2_b - r is the radicand of the reverse direction: one division
// per dimension (d^2/(r r~) multiplied by r~ and r) and no logarithm: the
// products of the radicands are carried, as a mantissa and a binary
// exponent, over the components of the pair, and their logarithm is taken
// once per pair, order and direction. Any radicand outside [2^-100, 2^100)
// (including <= 0, i.e. undefined) sends the component to the
// straightforward per-dimension path (gaussSafe), which decides validity
// exactly.
type engine struct {
	M, N, P int
	orders  []float64
	opt     privacy.BoundOptions
	// mu, s2 are float64 mu and sigma^2 = exp(logvar) of every component
	// [M*N*P]; nil in low-memory mode, where each tile computes them for its
	// own examples from p (tileBuf.fill): the same float64 values, so the
	// same numbers, without 2x the file in memory.
	mu, s2 []float64
	p      *privacy.Posteriors
	low    bool
	ls     []float64 // [M*N]
	oc     []orderConst
	// s2lo, s2hi bound sigma^2 over the P dimensions of each component
	// [M*N] (with room for the rounding of exp): radicandsInRange decides
	// from them, per pair of components, that the kernel needs no check.
	s2lo, s2hi []float64
	alpha      []float64 // [M*N]
	lgA        []float64 // [M*N]
	keep       []bool    // [M*N]
	tot, lgT   []float64 // [M]
}

func newEngine(p *privacy.Posteriors, orders []float64, opt privacy.BoundOptions) *engine {
	return newEngineMem(p, orders, opt, false)
}

// newEngineMem is newEngine, in low-memory mode when low is set (the
// float64 copies of mu and sigma^2 are made per tile, not for the file).
func newEngineMem(p *privacy.Posteriors, orders []float64, opt privacy.BoundOptions, low bool) *engine {
	e := &engine{M: p.M, N: p.N, P: p.P, orders: orders, opt: opt, p: p, low: low}
	if !low {
		n := p.M * p.N * p.P
		e.mu = make([]float64, n)
		e.s2 = make([]float64, n)
		convert(e.mu, e.s2, p.Mu, p.Logvar)
	}
	mn := p.M * p.N
	e.ls = make([]float64, mn)
	e.s2lo, e.s2hi = make([]float64, mn), make([]float64, mn)
	e.alpha = make([]float64, mn)
	e.lgA = make([]float64, mn)
	e.keep = make([]bool, mn)
	e.tot = make([]float64, p.M)
	e.lgT = make([]float64, p.M)
	for c := range mn {
		var s float64
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, v := range p.Logvar[c*p.P : (c+1)*p.P] {
			s += float64(v)
			lo, hi = min(lo, v), max(hi, v)
		}
		e.ls[c] = 0.5 * s
		// math.Exp is within 1 ulp: exp of any logvar in [lo, hi] is
		// within these.
		e.s2lo[c] = math.Exp(float64(lo)) * (1 - 0x1p-50)
		e.s2hi[c] = math.Exp(float64(hi)) * (1 + 0x1p-50)
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
	for _, lam := range orders {
		e.oc = append(e.oc, orderConst{lam: lam, lm1: lam - 1, inv: 1 / (lam - 1), c: lam / (lam - 1), half: lam / 2})
	}
	return e
}

// orderConst holds what the pair loop uses of a Renyi order lam:
// lam - 1, 1/(lam - 1), c = lam/(lam - 1) and lam/2.
type orderConst struct{ lam, lm1, inv, c, half float64 }

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
	lg, gm []logAccum // products of the radicands, of Gamma(g) (gaussLanes, lnGammaTerm)
	// low-memory mode: the tile's examples' float64 mu and sigma^2 and each
	// pair's rows in them
	mu, s2 []float64
	la, lb []int
	// aBlock is the block [a0, a1) whose conversion heads mu and s2 ({0, 0}:
	// none; a block is never empty).
	aBlock [2]int
}

// convert writes float64 mu and sigma^2 = exp(logvar) of float32 mu and
// logvar into dst (the one conversion both modes use).
func convert(mu, s2 []float64, srcMu, srcLogvar []float32) {
	for k := range srcMu {
		mu[k] = float64(srcMu[k])
		s2[k] = math.Exp(float64(srcLogvar[k]))
	}
}

// fill converts the components of the examples [a0, a1) (unless the
// previous tile of this buffer had them too) and, when it is another block,
// [b0, b1) into buf.mu and buf.s2 and sets buf.la, buf.lb to each pair's
// rows there.
func (e *engine) fill(buf *tileBuf, a0, a1, b0, b1 int) {
	np := e.N * e.P
	same := a0 == b0 && a1 == b1
	rows := a1 - a0
	if !same {
		rows += b1 - b0
	}
	if cap(buf.mu) < rows*np {
		buf.mu, buf.s2 = make([]float64, 2*tileSize*np), make([]float64, 2*tileSize*np)
		buf.aBlock = [2]int{}
	}
	buf.mu, buf.s2 = buf.mu[:rows*np], buf.s2[:rows*np]
	p := e.p
	// A worker's consecutive tiles mostly share their first block (tiles
	// are listed block row by block row): it stays converted.
	if buf.aBlock != [2]int{a0, a1} {
		convert(buf.mu[:(a1-a0)*np], buf.s2[:(a1-a0)*np], p.Mu[a0*np:a1*np], p.Logvar[a0*np:a1*np])
		buf.aBlock = [2]int{a0, a1}
	}
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
		buf.lg = make([]logAccum, np*w)
		buf.gm = make([]logAccum, np*w)
	}
	acc, lg, gms := buf.acc[:np*w], buf.lg[:np*w], buf.gm[:np*w]
	clear(acc)
	for k := range lg {
		lg[k].reset()
		gms[k].reset()
	}
	N, P := e.N, e.P
	std := e.opt.Direction != privacy.DirectionPaper
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
			v, l, gm := acc[p*w:(p+1)*w], lg[p*w:(p+1)*w], gms[p*w:(p+1)*w]
			for k := range e.orders {
				if math.IsInf(v[2*k], 1) && math.IsInf(v[2*k+1], 1) {
					continue
				}
				o := &e.oc[k]
				lam := o.lam
				// Component i's terms for q=a, q'=b (v[2k]) and the reverse
				// (v[2k+1]): Dirichlet lnGamma(g)/(lam-1) + lnGamma(alpha_b)
				// - c lnGamma(alpha_a), c = lam/(lam-1); Gaussian, paper
				// direction, lam/2 sum d^2/r1 - sum ln r1/(2(lam-1))
				// - ls_b + c ls_a with r1 = (1-lam) s2_b + lam s2_a (the
				// reverse has r2; the standard direction exchanges the two
				// Gaussian terms). The sums of ln r go to l (one logarithm
				// per pair, in the final loop) on the fast path, into the
				// terms on the safe one.
				tab := e.lgA[cb] - o.c*e.lgA[ca]
				tba := e.lgA[ca] - o.c*e.lgA[cb]
				if std {
					tab += o.c*e.ls[cb] - e.ls[ca]
					tba += o.c*e.ls[ca] - e.ls[cb]
				} else {
					tab += o.c*e.ls[ca] - e.ls[cb]
					tba += o.c*e.ls[cb] - e.ls[ca]
				}
				dab, dba := math.Inf(1), math.Inf(1)
				if al > 0 && bl > 0 {
					if g := lam*al - o.lm1*bl; g > 0 {
						dab = lnGammaTerm(g, &gm[2*k], o.inv)
					}
					if g := lam*bl - o.lm1*al; g > 0 {
						dba = lnGammaTerm(g, &gm[2*k+1], o.inv)
					}
				}
				inRange := radicandsInRange(lam, e.s2lo[ca], e.s2hi[ca], e.s2lo[cb], e.s2hi[cb])
				var gab, gba float64
				if g, ok := gaussLanes(lam, ma, mb, sa, sb, inRange); ok {
					gab, gba = o.half*g.q1, o.half*g.q2
					if std {
						l[2*k].mul(g.m2, g.e2)
						l[2*k+1].mul(g.m1, g.e1)
					} else {
						l[2*k].mul(g.m1, g.e1)
						l[2*k+1].mul(g.m2, g.e2)
					}
				} else {
					q1, q2, l1, l2, bad1, bad2 := gaussSafe(lam, ma, mb, sa, sb)
					gab = o.half*q1 - 0.5*o.inv*l1
					gba = o.half*q2 - 0.5*o.inv*l2
					if bad1 {
						gab = math.Inf(1)
					}
					if bad2 {
						gba = math.Inf(1)
					}
				}
				if std {
					gab, gba = gba, gab
				}
				v[2*k] += dab + gab + tab
				v[2*k+1] += dba + gba + tba
			}
		}
	}
	for p := range np {
		a, b := buf.pa[p], buf.pb[p]
		v, l, gm := acc[p*w:(p+1)*w], lg[p*w:(p+1)*w], gms[p*w:(p+1)*w]
		for k, lam := range e.orders {
			// The logarithms of the products: the fast path's Gaussian
			// terms and the Dirichlet component terms; then the Dirichlet
			// totals.
			inv := e.oc[k].inv
			for d, x := range [2]int{a, b} {
				s := v[2*k+d] - 0.5*inv*l[2*k+d].log() + inv*gm[2*k+d].log()
				v[2*k+d] = e.finish(lam, x, a+b-x, s)
			}
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

// gaussSafe returns the sums of gaussLanes, q1, q2 and l1 = sum ln r1,
// l2 = sum ln r2, with a logarithm per dimension and exact validity
// (bad1/bad2: some radicand <= 0 in that direction): the path of the
// components whose radicands leave gaussLanes' range. Validity is decided
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
