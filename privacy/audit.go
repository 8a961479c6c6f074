package privacy

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
)

// DefaultBDPOrders is the default grid of accountant moment orders l (Renyi
// order l+1). It includes 1.1, the paper's accountant order, and 0.1, whose
// Renyi order 1.1 is the one clipping is derived for.
var DefaultBDPOrders = []float64{0.05, 0.1, 0.5, 1.1, 2}

// DefaultConfidence is the accountant's confidence 1 - 1e-16 (float64
// 0.9999999999999999; tail 1.11e-16), as the reference (ref §7.2).
const DefaultConfidence float64 = 1 - 1e-16

// Options configure Audit. Zero values take the documented defaults.
type Options struct {
	Mode       Mode              // default ModePrincipled
	Order      float64           // Renyi order lambda > 1 of the RD bound; default 1.1
	Delta      float64           // BDP delta_mu; default 1e-5
	Confidence float64           // Student-t confidence; default DefaultConfidence
	BDPOrders  []float64         // principled: moment orders l > 0; default DefaultBDPOrders
	UseMask    bool              // principled: drop padding components (see BoundOptions.UseMask)
	Direction  GaussianDirection // principled: Gaussian term direction; default DirectionStandard
	Pairs      int               // principled: audit K uniformly sampled ordered pairs (0 = all)
	Seed       uint64            // seed of the pair sample
	BatchSize  int               // reference: batch size; default 16
	Q          float64           // reference: sampling ratio of the accountant; default BatchSize/M
	Workers    int               // default runtime.GOMAXPROCS(0)
	Progress   io.Writer         // progress bar destination (nil: none)
	// MaxStoredPairs caps the finite bound values kept for quantiles and the
	// histogram (float32 each); above it a deterministic hash-based subsample
	// of the pairs is kept (Report.QuantilesFrom says how many). Default 1<<26.
	MaxStoredPairs int
	ListInvalid    int // how many undefined pairs to list; default 10
}

// Validate checks o for an audit of m posteriors as Audit does before any
// work (on a copy: the zero fields' defaults are not written into o), so
// that a caller can check the options before producing the posteriors.
func (o Options) Validate(m int) error { return o.defaults(m) }

func (o *Options) defaults(m int) error {
	if o.Mode == "" {
		o.Mode = ModePrincipled
	}
	if o.Mode != ModePrincipled && o.Mode != ModeReference {
		return fmt.Errorf("--mode %q: want principled or reference", o.Mode)
	}
	if o.Order == 0 {
		o.Order = 1.1
	}
	if err := checkOrder(o.Order); err != nil {
		return fmt.Errorf("--order: %w", err)
	}
	if o.Delta == 0 {
		o.Delta = 1e-5
	}
	if !(o.Delta > 0 && o.Delta < 1) {
		return fmt.Errorf("--delta %v: must be in (0, 1)", o.Delta)
	}
	if o.Confidence == 0 {
		o.Confidence = DefaultConfidence
	}
	if !(o.Confidence > 0.5 && o.Confidence < 1) {
		return fmt.Errorf("--confidence %v: must be in (0.5, 1)", o.Confidence)
	}
	if !(o.Delta > 1-o.Confidence) {
		return fmt.Errorf("--delta %v must exceed the failure probability 1 - confidence = %v", o.Delta, 1-o.Confidence)
	}
	if o.BDPOrders == nil {
		o.BDPOrders = DefaultBDPOrders
	}
	if len(o.BDPOrders) == 0 {
		return fmt.Errorf("--bdp-orders: empty")
	}
	for _, l := range o.BDPOrders {
		if !(l > 0) || math.IsInf(l, 0) {
			return fmt.Errorf("--bdp-orders: moment order %v must be finite and > 0", l)
		}
	}
	if o.Mode == ModeReference && (o.UseMask || o.Pairs > 0 || o.Direction != "") {
		return fmt.Errorf("reference mode reproduces the released code: --mask, --pairs and --gaussian-direction apply to principled mode only")
	}
	if o.Direction == "" && o.Mode != ModeReference {
		o.Direction = DirectionStandard
	}
	if o.Mode != ModeReference && o.Direction != DirectionPaper && o.Direction != DirectionStandard {
		return fmt.Errorf("--gaussian-direction %q: want paper or standard", o.Direction)
	}
	if o.Pairs < 0 {
		return fmt.Errorf("--pairs %d: must be >= 0", o.Pairs)
	}
	if o.BatchSize == 0 {
		o.BatchSize = 16
	}
	if o.BatchSize < 2 {
		return fmt.Errorf("--batch-size %d: must be >= 2", o.BatchSize)
	}
	if o.Q == 0 && o.Mode == ModeReference {
		o.Q = float64(o.BatchSize) / float64(m)
	}
	if o.Mode == ModeReference && !(o.Q > 0 && o.Q <= 1) {
		return fmt.Errorf("--q %v: must be in (0, 1]", o.Q)
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MaxStoredPairs <= 0 {
		o.MaxStoredPairs = 1 << 26
	}
	if o.ListInvalid <= 0 {
		o.ListInvalid = 10
	}
	return nil
}

// JSONFloat is a float64 that encodes NaN and +-Inf as JSON null.
type JSONFloat float64

func (f JSONFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// InvalidPair is an ordered pair (q, q') whose bound is undefined (+Inf).
type InvalidPair struct {
	Q      int    `json:"q"`
	QPrime int    `json:"q_prime"`
	Reason string `json:"reason"`
}

// BDPOrder is the accountant at one moment order l (Renyi order l+1).
type BDPOrder struct {
	Order        float64   `json:"order"`       // moment order l
	RenyiOrder   float64   `json:"renyi_order"` // l + 1
	Finite       bool      `json:"finite"`      // every pair's bound finite at l+1
	InfPairs     int64     `json:"inf_pairs"`   // ordered pairs with an undefined bound at l+1
	Cost         JSONFloat `json:"cost"`        // worst individual: max_x c_x(l)
	WorstExample int       `json:"worst_example"`
	Epsilon      JSONFloat `json:"epsilon"`        // (cost - ln(delta - gamma)) / l
	CostPooled   JSONFloat `json:"cost_pooled"`    // all pairs pooled
	EpsPooled    JSONFloat `json:"epsilon_pooled"` // (cost_pooled - ln(delta - gamma)) / l
}

// Report is the audit result; with --json it is printed as one JSON object.
// RD values are in nats. Fields that do not apply to a mode are omitted.
type Report struct {
	Mode              Mode                 `json:"mode"`
	Order             float64              `json:"order"`
	Delta             float64              `json:"delta"`
	Confidence        float64              `json:"confidence"`
	Examples          int                  `json:"examples"`
	Components        int                  `json:"components"`
	Dims              int                  `json:"dims"`
	Mask              bool                 `json:"mask"`
	GaussianDirection GaussianDirection    `json:"gaussian_direction,omitempty"`
	Pairs             int64                `json:"pairs"` // ordered pairs audited (reference: within-batch unordered pairs)
	Sampled           bool                 `json:"sampled"`
	Seed              uint64               `json:"seed,omitempty"`
	InvalidPairs      int64                `json:"invalid_pairs"`
	InvalidExamples   []InvalidPair        `json:"invalid_examples,omitempty"`
	FinitePairs       int64                `json:"finite_pairs"`
	RDMax             JSONFloat            `json:"rd_max"`  // over finite pairs (reference: z-filtered)
	RDMean            JSONFloat            `json:"rd_mean"` // over finite pairs (reference: mean of batch means)
	Argmax            []int                `json:"argmax,omitempty"`
	RDMin             *JSONFloat           `json:"rd_min,omitempty"`
	Quantiles         map[string]JSONFloat `json:"quantiles,omitempty"`
	QuantilesFrom     int                  `json:"quantiles_from,omitempty"`
	Histogram         *Histogram           `json:"histogram,omitempty"`
	BDPEpsilon        JSONFloat            `json:"bdp_epsilon"`
	BDPEpsilonPooled  *JSONFloat           `json:"bdp_epsilon_pooled,omitempty"`
	BDPOrder          *JSONFloat           `json:"bdp_order,omitempty"`
	BDPWorstExample   *int                 `json:"bdp_worst_example,omitempty"`
	BDPOrders         []BDPOrder           `json:"bdp_orders,omitempty"`
	// Reference mode.
	BatchSize        int        `json:"batch_size,omitempty"`
	Q                float64    `json:"q,omitempty"`
	Batches          int        `json:"batches,omitempty"`
	SkippedBatches   []int      `json:"skipped_batches,omitempty"`
	RDMaxUnfiltered  *JSONFloat `json:"rd_max_unfiltered,omitempty"`
	RDMeanUnfiltered *JSONFloat `json:"rd_mean_unfiltered,omitempty"`
	AccountantCost   *JSONFloat `json:"accountant_cost,omitempty"`

	Notes    []string          `json:"notes,omitempty"`
	Seconds  float64           `json:"seconds"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func jf(v float64) *JSONFloat { f := JSONFloat(v); return &f }

// Audit computes the privacy report of p. Principled mode: the Eq. rdp bound
// over all ordered pairs (or a sample) and the BDP accountant over a grid of
// orders; reference mode: the released code's batch-wise RD and accountant.
// Errors: invalid options (order <= 1, ...), invalid posteriors, cancellation.
func Audit(ctx context.Context, p *Posteriors, opt Options) (*Report, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := opt.defaults(p.M); err != nil {
		return nil, err
	}
	start := time.Now()
	var r *Report
	var err error
	if opt.Mode == ModeReference {
		r, err = auditReference(ctx, p, opt)
	} else {
		r, err = auditPrincipled(ctx, p, opt)
	}
	if err != nil {
		return nil, err
	}
	r.Seconds = time.Since(start).Seconds()
	r.Metadata = p.Metadata
	return r, nil
}

type workerAcc struct {
	finite, invalid int64
	sum             float64
	max             float64
	argA, argB      int
	invalidList     []InvalidPair
	values          []float32
	indiv           []logAcc // [kb][M][2]: D(x||x') over x', D(x'||x) over x'
	pooled          []logAcc // [kb]
	infPairs        []int64  // [kb]
}

func auditPrincipled(ctx context.Context, p *Posteriors, opt Options) (*Report, error) {
	M := p.M
	if M < 2 {
		return nil, fmt.Errorf("principled audit needs at least 2 examples, have %d", M)
	}
	// Renyi orders evaluated: the audit order first, then l+1 for each BDP order.
	orders := []float64{opt.Order}
	bdpIdx := make([]int, len(opt.BDPOrders))
	for k, l := range opt.BDPOrders {
		bdpIdx[k] = -1
		for i, o := range orders {
			if math.Abs(o-(l+1)) < 1e-12 {
				bdpIdx[k] = i
			}
		}
		if bdpIdx[k] < 0 {
			bdpIdx[k] = len(orders)
			orders = append(orders, l+1)
		}
	}
	e := newEngine(p, orders, BoundOptions{UseMask: opt.UseMask, Direction: opt.Direction})
	KB := len(opt.BDPOrders)
	totalOrdered := int64(M) * int64(M-1)
	if opt.Pairs > 0 {
		totalOrdered = int64(opt.Pairs)
	}
	stride := uint64(1)
	if totalOrdered > int64(opt.MaxStoredPairs) {
		stride = uint64((totalOrdered + int64(opt.MaxStoredPairs) - 1) / int64(opt.MaxStoredPairs))
	}
	accs := make([]*workerAcc, opt.Workers)
	newAcc := func() *workerAcc {
		return &workerAcc{max: math.Inf(-1), argA: -1, argB: -1,
			indiv: make([]logAcc, KB*M*2), pooled: make([]logAcc, KB), infPairs: make([]int64, KB)}
	}
	// handle one unordered pair a < b; dirs bit 1: (a,b) audited, bit 2: (b,a) audited.
	handle := func(w *workerAcc, a, b int, v []float64, dirs int) {
		for d := range 2 {
			if dirs&(1<<d) == 0 {
				continue
			}
			q, qp := a, b
			if d == 1 {
				q, qp = b, a
			}
			x := v[d]
			if math.IsInf(x, 1) {
				w.invalid++
				if len(w.invalidList) < opt.ListInvalid {
					w.invalidList = append(w.invalidList, InvalidPair{Q: q, QPrime: qp})
				}
			} else {
				w.finite++
				w.sum += x
				if x > w.max || (x == w.max && (q < w.argA || (q == w.argA && qp < w.argB))) {
					w.max, w.argA, w.argB = x, q, qp
				}
				if stride == 1 || pairHash(q, qp)%stride == 0 {
					w.values = append(w.values, float32(x))
				}
			}
			for k, l := range opt.BDPOrders {
				D := v[2*bdpIdx[k]+d]
				if math.IsInf(D, 1) {
					w.infPairs[k]++
				}
				w.indiv[(k*M+q)*2+0].add(l * D)
				w.indiv[(k*M+qp)*2+1].add(l * D)
			}
		}
		for k, l := range opt.BDPOrders {
			w.pooled[k].add(l * math.Max(v[2*bdpIdx[k]], v[2*bdpIdx[k]+1]))
		}
	}
	var bar *progressbar.ProgressBar
	var progress func(int)
	if opt.Progress != nil {
		total := int64(M) * int64(M-1) / 2
		if opt.Pairs > 0 {
			total = int64(opt.Pairs)
		}
		bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(opt.Progress),
			progressbar.OptionSetDescription("audit pairs"), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionShowIts(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(opt.Progress) }))
		progress = func(n int) { bar.Add(n) }
	}
	var err error
	if opt.Pairs == 0 {
		err = e.run(ctx, opt.Workers, func(wi int) pairSink {
			w := newAcc()
			accs[wi] = w
			return func(a, b int, v []float64) { handle(w, a, b, v, 3) }
		}, progress)
	} else {
		err = samplePairs(ctx, e, opt, func(wi int) *workerAcc { w := newAcc(); accs[wi] = w; return w }, handle, progress)
	}
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return nil, err
	}
	// Merge.
	tot := newAcc()
	for _, w := range accs {
		if w == nil {
			continue
		}
		tot.finite += w.finite
		tot.invalid += w.invalid
		tot.sum += w.sum
		if w.max > tot.max || (w.max == tot.max && w.argA >= 0 && (tot.argA < 0 || w.argA < tot.argA || (w.argA == tot.argA && w.argB < tot.argB))) {
			tot.max, tot.argA, tot.argB = w.max, w.argA, w.argB
		}
		tot.invalidList = append(tot.invalidList, w.invalidList...)
		tot.values = append(tot.values, w.values...)
		for i := range w.indiv {
			tot.indiv[i].merge(w.indiv[i])
		}
		for k := range w.pooled {
			tot.pooled[k].merge(w.pooled[k])
			tot.infPairs[k] += w.infPairs[k]
		}
		*w = workerAcc{}
	}
	r := &Report{Mode: ModePrincipled, Order: opt.Order, Delta: opt.Delta, Confidence: opt.Confidence,
		Examples: M, Components: p.N, Dims: p.P, Mask: opt.UseMask, GaussianDirection: opt.Direction,
		Pairs: tot.finite + tot.invalid, Sampled: opt.Pairs > 0, InvalidPairs: tot.invalid, FinitePairs: tot.finite,
		RDMax: JSONFloat(math.Inf(1)), RDMean: JSONFloat(math.NaN())}
	if r.Sampled {
		r.Seed = opt.Seed
		r.Notes = append(r.Notes, fmt.Sprintf("audited a uniform sample of %d ordered pairs (with replacement, seed %d) out of %d; rd_max is the sample maximum, not the maximum over all pairs",
			opt.Pairs, opt.Seed, int64(M)*int64(M-1)))
	}
	slices.SortFunc(tot.invalidList, func(x, y InvalidPair) int {
		if x.Q != y.Q {
			return x.Q - y.Q
		}
		return x.QPrime - y.QPrime
	})
	tot.invalidList = slices.Compact(tot.invalidList)
	if len(tot.invalidList) > opt.ListInvalid {
		tot.invalidList = tot.invalidList[:opt.ListInvalid]
	}
	for i := range tot.invalidList {
		ip := &tot.invalidList[i]
		t, _ := PairBoundWith(opt.Order, p.View(ip.Q), p.View(ip.QPrime), BoundOptions{UseMask: opt.UseMask, Direction: opt.Direction})
		ip.Reason = t.Undefined
	}
	r.InvalidExamples = tot.invalidList
	if tot.invalid > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d of %d ordered pairs have an undefined bound (+Inf); rd_max, rd_mean and the quantiles are over the %d finite pairs only",
			tot.invalid, r.Pairs, tot.finite))
	}
	if tot.finite > 0 {
		r.RDMax = JSONFloat(tot.max)
		r.Argmax = []int{tot.argA, tot.argB}
		r.RDMean = JSONFloat(tot.sum / float64(tot.finite))
		sortFloat32(tot.values)
		r.RDMin = jf(float64(tot.values[0]))
		r.Quantiles = map[string]JSONFloat{}
		for _, q := range []struct {
			k string
			v float64
		}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}} {
			r.Quantiles[q.k] = JSONFloat(quantile(tot.values, q.v))
		}
		r.QuantilesFrom = len(tot.values)
		h := histogram(tot.values, 20)
		r.Histogram = &h
		if stride > 1 {
			r.Notes = append(r.Notes, fmt.Sprintf("quantiles and histogram from a hash-based subsample of %d finite pairs (1 in %d); rd_max, rd_mean exact", len(tot.values), stride))
		}
	}
	// BDP accountant.
	tail := 1 - opt.Confidence
	lnDG := math.Log(opt.Delta - tail)
	best, bestPooled := math.Inf(1), math.Inf(1)
	bestOrder, bestWorst := math.NaN(), -1
	var finiteOrders []string
	for k, l := range opt.BDPOrders {
		bo := BDPOrder{Order: l, RenyiOrder: l + 1, InfPairs: tot.infPairs[k], WorstExample: -1,
			Cost: JSONFloat(math.Inf(1)), Epsilon: JSONFloat(math.Inf(1)), CostPooled: JSONFloat(math.Inf(1)), EpsPooled: JSONFloat(math.Inf(1))}
		bo.Finite = tot.infPairs[k] == 0
		worst := math.Inf(-1)
		enough := false
		for x := range M {
			for d := range 2 {
				a := &tot.indiv[(k*M+x)*2+d]
				if a.n+b2i(a.inf) < 3 {
					continue // sampled mode: too few partners for a t bound
				}
				c, err := a.ucb(tail)
				if err != nil {
					return nil, err
				}
				enough = true
				if c > worst {
					worst, bo.WorstExample = c, x
				}
			}
		}
		if enough {
			bo.Cost = JSONFloat(worst)
			bo.Epsilon = JSONFloat((worst - lnDG) / l)
		}
		if pa := &tot.pooled[k]; pa.n+b2i(pa.inf) >= 3 {
			c, err := pa.ucb(tail)
			if err != nil {
				return nil, err
			}
			bo.CostPooled = JSONFloat(c)
			bo.EpsPooled = JSONFloat((c - lnDG) / l)
		}
		if v := float64(bo.Epsilon); v < best {
			best, bestOrder, bestWorst = v, l, bo.WorstExample
		}
		bestPooled = math.Min(bestPooled, float64(bo.EpsPooled))
		if bo.Finite {
			finiteOrders = append(finiteOrders, strconv.FormatFloat(l, 'g', -1, 64))
		}
		r.BDPOrders = append(r.BDPOrders, bo)
	}
	r.BDPEpsilon = JSONFloat(best)
	r.BDPEpsilonPooled = jf(bestPooled)
	r.BDPOrder = jf(bestOrder)
	r.BDPWorstExample = &bestWorst
	if len(finiteOrders) < len(opt.BDPOrders) {
		r.Notes = append(r.Notes, fmt.Sprintf("BDP moment orders with every pair finite: %v of %v; an order with an infinite pair has infinite cost",
			finiteOrders, opt.BDPOrders))
	}
	if M < 4 {
		r.Notes = append(r.Notes, "fewer than 4 examples: no per-example Student-t bound (needs 3 partners)")
	}
	return r, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pairHash is a fixed (seedless) hash of an ordered pair for subsampling.
func pairHash(a, b int) uint64 {
	x := uint64(a)*0x9E3779B97F4A7C15 ^ uint64(b)*0xC2B2AE3D27D4EB4F
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	return x
}

// samplePairs audits opt.Pairs ordered pairs (q != q') drawn uniformly with
// replacement from a PCG stream seeded with opt.Seed.
func samplePairs(ctx context.Context, e *engine, opt Options, newAcc func(int) *workerAcc,
	handle func(*workerAcc, int, int, []float64, int), progress func(int)) error {
	rng := rand.New(rand.NewPCG(opt.Seed, 0x6e766470))
	M := e.M
	pairs := make([][2]int, opt.Pairs)
	for i := range pairs {
		a := rng.IntN(M)
		b := rng.IntN(M - 1)
		if b >= a {
			b++
		}
		pairs[i] = [2]int{a, b}
	}
	done := make(chan error, opt.Workers)
	chunk := (len(pairs) + opt.Workers - 1) / opt.Workers
	var mu = make(chan struct{}, 1)
	for wi := range opt.Workers {
		w := newAcc(wi)
		lo, hi := min(wi*chunk, len(pairs)), min((wi+1)*chunk, len(pairs))
		go func() {
			var buf tileBuf
			for i, pr := range pairs[lo:hi] {
				if i%64 == 0 && ctx.Err() != nil {
					done <- ctx.Err()
					return
				}
				a, b, dirs := pr[0], pr[1], 1
				if a > b {
					a, b, dirs = b, a, 2
				}
				e.tile(&buf, a, a+1, b, b+1, func(a, b int, v []float64) { handle(w, a, b, v, dirs) })
				if progress != nil && (i+1)%64 == 0 {
					mu <- struct{}{}
					progress(64)
					<-mu
				}
			}
			done <- nil
		}()
	}
	var err error
	for range opt.Workers {
		if e := <-done; e != nil {
			err = e
		}
	}
	return err
}
