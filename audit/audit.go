package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
)

// DefaultBDPOrders is the default grid of accountant moment orders l, each of
// Renyi order l+1. It includes 1.1, the paper's accountant order, and 0.1,
// whose Renyi order 1.1 is the one clipping is derived for.
var DefaultBDPOrders = []float64{0.05, 0.1, 0.5, 1.1, 2}

// defaultConfidence is the accountant's confidence 1 - 1e-16 (float64
// 0.9999999999999999; tail 1.11e-16), as the reference (ref §7.2).
const defaultConfidence float64 = 1 - 1e-16

// Defaults of the audit options (DefaultOptions).
const (
	// defaultRefBatchSize is the released code's batch size (reference mode).
	defaultRefBatchSize = 16
	// DefaultMaxStoredPairs is how many finite bounds the audit keeps for rd_min,
	// the quantiles and the histogram: float64s taking 256 MiB.
	DefaultMaxStoredPairs = 1 << 25
	// defaultListInvalid is how many undefined pairs the report lists.
	defaultListInvalid = 10
)

// Options configure [Audit]. Start from [DefaultOptions]: a numeric option is
// used as given, an explicit 0 included, so a Renyi order, delta or
// confidence of 0 is an error, not a request for the default. Only the
// fields that say so give 0 a meaning of its own.
type Options struct {
	Mode       privacy.Mode              // principled or reference ("" is principled)
	Order      float64                   // Renyi order lambda > 1 of the RD bound (DefaultOrder)
	Delta      float64                   // BDP delta_mu in (0, 1), above 1 - Confidence (DefaultDelta)
	Confidence float64                   // Student-t confidence in (0.5, 1) (DefaultOptions: 1 - 1e-16)
	BDPOrders  []float64                 // principled: moment orders l > 0; nil is DefaultBDPOrders, empty an error
	UseMask    bool                      // principled: drop padding components (see BoundOptions.UseMask)
	Direction  privacy.GaussianDirection // principled: Gaussian term direction ("" is DirectionStandard)
	// Pairs > 0 audits a uniform sample of Pairs ordered pairs (with
	// replacement, seeded by Seed) instead of all M(M-1) (0). The sample is
	// drawn as it is audited: memory does not grow with Pairs. A sample of
	// M(M-1) or more draws is not taken: Audit audits every ordered pair
	// instead, exactly and in less time (CoversAll; the report is the one
	// of Pairs 0 with a note saying so).
	Pairs int
	Seed  uint64 // seed of the pair sample
	// BatchSize is the reference mode's batch size, >= 2 (DefaultOptions: 16, the released code's).
	BatchSize int
	// Q is the reference accountant's sampling ratio in (0, 1]; 0 means not
	// given: BatchSize/M.
	Q float64
	// Workers is the number of goroutines; 0 means runtime.GOMAXPROCS(0).
	Workers int
	// Progress receives the pairs audited (Stage "audit", Unit "pairs", the
	// ordered pairs done of all audited); nil reports nothing.
	Progress progress.Func `json:"-"`
	// MaxStoredPairs caps the finite bounds kept for rd_min, the quantiles
	// and the histogram (DefaultMaxStoredPairs; 0 keeps none: no order
	// statistics). Above it a deterministic subsample of the pairs is kept
	// (Report.QuantilesFrom says how many, a note says which).
	MaxStoredPairs int
	// ListInvalid is how many undefined pairs Report.InvalidExamples lists
	// (DefaultOptions: 10; 0 lists none).
	ListInvalid int
	// Certified is the clip set the posteriors were released under (nil:
	// none known; principled mode only). A BDP moment order l whose Renyi
	// order l+1 is not the audit's Order and at which the certified bound
	// Certify(*Certified, l+1, Direction) is +Inf is then not evaluated on
	// the data: the report gives it the certified cost +Inf (BDPOrder.Skipped
	// says why), which is what the data give whenever one audited pair is
	// undefined there, and never less than the estimate. Errors: a set that
	// is invalid or whose components and dims are not the file's N and P.
	Certified *privacy.ClipSet `json:"-"`
	// LowMemory computes each tile's float64 mu and sigma^2 from the
	// posteriors' float32 values as the tile needs them, instead of holding
	// float64 copies of every component (2x the posterior file): with a
	// memory-mapped file (MapPosteriors) an audit then needs memory for the
	// pairs' statistics only, so files larger than RAM can be audited.
	// Identical numbers; more time (every tile converts its 16 + 16
	// examples: docs/performance.md). Principled mode.
	LowMemory bool
}

// DefaultOptions returns the audit's defaults: principled mode at
// DefaultOrder in the standard direction, DefaultDelta, confidence 1 - 1e-16,
// DefaultBDPOrders, every ordered pair, all CPUs; the reference mode's batch
// size 16 and q = batch size / M.
func DefaultOptions() Options {
	return Options{Mode: privacy.ModePrincipled, Order: privacy.DefaultOrder, Delta: privacy.DefaultDelta, Confidence: defaultConfidence,
		BDPOrders: slices.Clone(DefaultBDPOrders), Seed: 1, BatchSize: defaultRefBatchSize,
		MaxStoredPairs: DefaultMaxStoredPairs, ListInvalid: defaultListInvalid}
}

// Validate checks the options that do not depend on the posteriors. Callers
// validate before any long work; [Audit] checks them too, with the reference
// mode's q against the file.
//
// An error about an option is an [*option.Error] naming it, so that a program
// names its own flag for it. The options are mode, order, delta, confidence,
// bdp_orders, mask, pairs, gaussian_direction, batch_size, q, workers,
// max_stored_pairs and list_invalid. The reason uses the library's terms,
// such as Renyi order or delta_mu. An invalid certified clip set is an error
// about the clip set, wrapping [privacy.ClipSet.Validate]'s.
func (o Options) Validate() error {
	if err := o.validateAccountant(); err != nil {
		return err
	}
	if err := o.validateMode(); err != nil {
		return err
	}
	for _, c := range []struct {
		name, reason string
		v            int
	}{{"pairs", "must be >= 0 (0: every ordered pair)", o.Pairs}, {"workers", "must be >= 0 (0: GOMAXPROCS)", o.Workers},
		{"max_stored_pairs", "must be >= 0", o.MaxStoredPairs}, {"list_invalid", "must be >= 0", o.ListInvalid}} {
		if c.v < 0 {
			return option.Errorf(c.name, c.v, "%s", c.reason)
		}
	}
	return nil
}

// CheckGiven checks what [Options.Validate] cannot see in the values: a q
// of 0 given explicitly (given reports the options given), where 0 stands
// for "not given", q = BatchSize/M. The error is an [*option.Error] naming
// q.
func (o Options) CheckGiven(given option.Given) error {
	if given.Has("q") && o.Q == 0 {
		return option.MentionErrorf([]string{"q"}, "q", 0, "the sampling ratio must be in (0, 1]; leave q out for batch size / M")
	}
	return nil
}

// validateAccountant checks the bound's order and the BDP accountant's
// options.
func (o Options) validateAccountant() error {
	if o.Mode != "" && o.Mode != privacy.ModePrincipled && o.Mode != privacy.ModeReference {
		return option.Errorf("mode", string(o.Mode), "want %s or %s", privacy.ModePrincipled, privacy.ModeReference)
	}
	if err := privacy.CheckOrder(o.Order); err != nil {
		return option.Errorf("order", o.Order, "the Renyi order lambda must be finite and > 1")
	}
	if err := privacy.CheckDelta(o.Delta); err != nil {
		return err
	}
	if !(o.Confidence > 0.5 && o.Confidence < 1) {
		return option.Errorf("confidence", o.Confidence, "must be in (0.5, 1)")
	}
	if !(o.Delta > 1-o.Confidence) {
		return option.MentionErrorf([]string{"confidence"}, "delta", o.Delta,
			"delta_mu must exceed the accountant's failure probability 1 - confidence = %v", 1-o.Confidence)
	}
	if o.BDPOrders != nil && len(o.BDPOrders) == 0 {
		return option.Errorf("bdp_orders", nil, "no BDP moment order")
	}
	for _, l := range o.BDPOrders {
		if !(l > 0) || math.IsInf(l, 0) {
			return option.Errorf("bdp_orders", l, "every BDP moment order l must be finite and > 0")
		}
	}
	return nil
}

// validateMode checks the options that belong to one mode: the reference
// mode's batches and sampling ratio, the principled mode's mask, pair
// sample, Gaussian direction and certified clip set.
func (o Options) validateMode() error {
	if o.Mode == privacy.ModeReference {
		for _, c := range []struct {
			name string
			set  bool
		}{{"mask", o.UseMask}, {"pairs", o.Pairs != 0}, {"gaussian_direction", o.Direction != ""}} {
			if c.set {
				return option.Errorf(c.name, nil,
					"applies to principled mode only (the reference mode reproduces the released code: the mask, a pair sample and the Gaussian direction apply to principled mode only)")
			}
		}
		if o.BatchSize < 2 {
			return option.Errorf("batch_size", o.BatchSize, "reference mode: must be >= 2")
		}
		if o.Q != 0 && !(o.Q > 0 && o.Q <= 1) {
			return option.Errorf("q", o.Q, "reference mode: the sampling ratio must be in (0, 1]")
		}
		if o.Certified != nil {
			return errors.New("audit options: reference mode reproduces the released code: skipping the orders a clip set certifies +Inf applies to principled mode only")
		}
		return nil
	}
	if o.Direction != "" && o.Direction != privacy.DirectionPaper && o.Direction != privacy.DirectionStandard {
		return option.Errorf("gaussian_direction", string(o.Direction), "want %s or %s", privacy.DirectionStandard, privacy.DirectionPaper)
	}
	if o.Certified != nil {
		if err := o.Certified.Validate(); err != nil {
			return fmt.Errorf("audit options: certified clip set: %w", err)
		}
	}
	return nil
}

// CoversAll reports whether the pair sample of o, with Pairs > 0 in
// principled mode, has at least the m(m-1) ordered pairs of m examples. If so
// [Audit] audits every pair instead. A sample with replacement of that size
// still misses pairs, about 1/e or 37% of them at m(m-1) draws, and can
// under-report rd_max, while auditing every pair is exact and costs no more
// evaluations.
func (o Options) CoversAll(m int) bool {
	return o.Mode != privacy.ModeReference && o.Pairs > 0 && m >= 2 && int64(o.Pairs) >= orderedPairs(m)
}

// AuditedPairs returns the number of ordered pairs a principled audit of m
// examples evaluates: Pairs, or all m(m-1) when Pairs is 0 or covers them,
// see [Options.CoversAll].
func (o Options) AuditedPairs(m int) int64 {
	if o.Pairs > 0 && !o.CoversAll(m) {
		return int64(o.Pairs)
	}
	return orderedPairs(m)
}

// orderedPairs is m(m-1), the ordered pairs of m examples.
func orderedPairs(m int) int64 { return int64(m) * int64(m-1) }

// ValidateFor checks o for an audit of m posteriors, as [Audit] does before
// any work, so that a caller can check the options before it produces the
// posteriors. It works on a copy and does not change o.
func (o Options) ValidateFor(m int) error { return o.resolve(m) }

// resolve validates o for m examples and fills what "not given" stands
// for: the principled mode and standard direction for "", DefaultBDPOrders
// for nil, q = BatchSize/m, GOMAXPROCS workers.
func (o *Options) resolve(m int) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if m < 2 {
		return fmt.Errorf("audit: %d example(s): the audit needs at least 2 examples (a pair)", m)
	}
	if o.Mode == "" {
		o.Mode = privacy.ModePrincipled
	}
	if o.BDPOrders == nil {
		o.BDPOrders = slices.Clone(DefaultBDPOrders)
	}
	if o.Mode == privacy.ModeReference {
		if o.Q == 0 {
			o.Q = float64(o.BatchSize) / float64(m)
			if o.Q > 1 {
				return fmt.Errorf("audit options: reference mode: sampling ratio q = batch size / M = %d/%d > 1: the file has fewer examples than one batch; use a batch size <= %d or give q",
					o.BatchSize, m, m)
			}
		}
	} else if o.Direction == "" {
		o.Direction = privacy.DirectionStandard
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return nil
}

// InvalidPair is an ordered pair (q, q') whose bound is undefined, that is
// +Inf.
type InvalidPair struct {
	Q      int    `json:"q"`
	QPrime int    `json:"q_prime"`
	Reason string `json:"reason"`
}

// BDPOrder is the accountant at one moment order l, of Renyi order l+1.
//
// Costs and epsilons are +Inf when a pair's bound is infinite at l+1. They
// are nil, and absent in JSON, when not computed: Cost and Epsilon when some
// example has fewer than 3 partners, and the pooled ones when there are fewer
// than 3 pairs.
type BDPOrder struct {
	Order      float64 `json:"order"`       // moment order l
	RenyiOrder float64 `json:"renyi_order"` // l + 1
	// Skipped says why the order was not evaluated on the data (the
	// certified bound is +Inf at l+1, Options.Certified); its costs and
	// epsilons are then +Inf and InfPairs is 0 (not counted).
	Skipped      string           `json:"skipped,omitempty"`
	Finite       bool             `json:"finite"`         // every pair's bound finite at l+1
	InfPairs     int64            `json:"inf_pairs"`      // ordered pairs with an undefined bound at l+1
	Cost         *jsonfloat.Float `json:"cost,omitempty"` // worst individual: max_x c_x(l)
	WorstExample int              `json:"worst_example"`
	Epsilon      *jsonfloat.Float `json:"epsilon,omitempty"`        // (cost - ln(delta - gamma)) / l
	CostPooled   *jsonfloat.Float `json:"cost_pooled,omitempty"`    // all pairs pooled
	EpsPooled    *jsonfloat.Float `json:"epsilon_pooled,omitempty"` // (cost_pooled - ln(delta - gamma)) / l
}

// Report is the audit result; with --json it is printed as one JSON object.
// RD values are in nats. Fields that do not apply to a mode are omitted.
//
// Non-finite numbers are jsonfloat strings, "Infinity" or "NaN", and a number
// that was not computed is absent, a nil pointer. [Report.UnmarshalJSON] also
// reads reports written before, which hold null for every non-finite number.
type Report struct {
	Mode              privacy.Mode              `json:"mode"`
	Order             float64                   `json:"order"`
	Delta             float64                   `json:"delta"`
	Confidence        float64                   `json:"confidence"`
	Examples          int                       `json:"examples"`
	Components        int                       `json:"components"`
	Dims              int                       `json:"dims"`
	Mask              bool                      `json:"mask"`
	GaussianDirection privacy.GaussianDirection `json:"gaussian_direction,omitempty"`
	Pairs             int64                     `json:"pairs"` // ordered pairs audited (reference: within-batch unordered pairs)
	Sampled           bool                      `json:"sampled"`
	Seed              uint64                    `json:"seed,omitempty"`
	InvalidPairs      int64                     `json:"invalid_pairs"`
	InvalidExamples   []InvalidPair             `json:"invalid_examples,omitempty"`
	FinitePairs       int64                     `json:"finite_pairs"`
	// RDMax is the maximum over the finite pairs, +Inf when no pair is
	// finite (reference: z-filtered; NaN when the released code's is).
	RDMax jsonfloat.Float `json:"rd_max"`
	// RDMean is the mean over the finite pairs (reference: mean of batch
	// means); nil when no pair is finite.
	RDMean *jsonfloat.Float `json:"rd_mean,omitempty"`
	Argmax []int            `json:"argmax,omitempty"`
	// RDMin, Quantiles (p50, p90, p99) and Histogram are over the finite
	// bounds kept (QuantilesFrom of them, Options.MaxStoredPairs).
	RDMin         *jsonfloat.Float           `json:"rd_min,omitempty"`
	Quantiles     map[string]jsonfloat.Float `json:"quantiles,omitempty"`
	QuantilesFrom int                        `json:"quantiles_from,omitempty"`
	// QuantileAccuracy is the relative accuracy of Quantiles when they come
	// from a sketch (a merged sharded audit, SketchRelativeAccuracy); nil
	// when they are exact over the bounds kept.
	QuantileAccuracy *float64 `json:"quantile_relative_accuracy,omitempty"`
	// Shards is the number of shards a merged report comes from (Merge); 0
	// for a one-process audit.
	Shards    int        `json:"shards,omitempty"`
	Histogram *Histogram `json:"histogram,omitempty"`
	// BDPEpsilon is the accountant's estimate minimised over the moment
	// orders: +Inf when every order has an infinite pair, nil when no order
	// was computed (too few partners; reference: no batch of 3 pairs).
	BDPEpsilon       *jsonfloat.Float `json:"bdp_epsilon,omitempty"`
	BDPEpsilonPooled *jsonfloat.Float `json:"bdp_epsilon_pooled,omitempty"`
	BDPOrder         *jsonfloat.Float `json:"bdp_order,omitempty"` // minimising l; NaN when every order is +Inf
	BDPWorstExample  *int             `json:"bdp_worst_example,omitempty"`
	BDPOrders        []BDPOrder       `json:"bdp_orders,omitempty"`
	// Reference mode.
	BatchSize        int              `json:"batch_size,omitempty"`
	Q                float64          `json:"q,omitempty"`
	Batches          int              `json:"batches,omitempty"`
	SkippedBatches   []int            `json:"skipped_batches,omitempty"`
	RDMaxUnfiltered  *jsonfloat.Float `json:"rd_max_unfiltered,omitempty"`
	RDMeanUnfiltered *jsonfloat.Float `json:"rd_mean_unfiltered,omitempty"`
	AccountantCost   *jsonfloat.Float `json:"accountant_cost,omitempty"`

	Notes    []string          `json:"notes,omitempty"`
	Seconds  float64           `json:"seconds"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Audit computes the privacy report of p.
//
// In principled mode it computes the Eq. rdp bound over all ordered pairs, or
// a sample of them, and the BDP accountant over a grid of orders. A sample of
// Options.Pairs that covers every pair, see [Options.CoversAll], is not
// drawn: every pair is audited, as with Pairs 0, and a note and a log line
// say so. In reference mode it computes the released code's batch-wise RD
// and accountant.
//
// It returns an error for invalid options, see [Options.Validate], including
// a reference q above 1; fewer than 2 examples; invalid posteriors; and
// cancellation.
func Audit(ctx context.Context, p *privacy.Posteriors, opt Options) (*Report, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := opt.resolve(p.M); err != nil {
		return nil, err
	}
	start := time.Now()
	covered := 0 // a pair sample that covers every ordered pair: audit them all
	if opt.CoversAll(p.M) {
		covered, opt.Pairs = opt.Pairs, 0
		slog.Info("audit: the pair sample is not smaller than the file's ordered pairs: auditing every ordered pair exactly instead (no sample)",
			"sample", covered, "ordered_pairs", orderedPairs(p.M), "examples", p.M)
	}
	var r *Report
	var err error
	if opt.Mode == privacy.ModeReference {
		r, err = auditReference(ctx, p, opt)
	} else {
		r, err = auditPrincipled(ctx, p, opt)
	}
	if err != nil {
		return nil, err
	}
	if covered > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("a sample of %d ordered pairs was asked for, not fewer than the file's %d(%d-1) = %d: every ordered pair audited exactly instead (no sample; rd_max is the maximum over all pairs)",
			covered, p.M, p.M, orderedPairs(p.M)))
	}
	r.Seconds = time.Since(start).Seconds()
	r.Metadata = p.Metadata
	return r, nil
}

// auditPrincipled evaluates Eq. rdp over the ordered pairs (collect), then
// writes the pair statistics (summarise) and the BDP accountant
// (accountant) into the report.
func auditPrincipled(ctx context.Context, p *privacy.Posteriors, opt Options) (*Report, error) {
	skip, err := certifiedSkips(p, opt)
	if err != nil {
		return nil, err
	}
	c := newCollector(p, opt, skip)
	st, err := c.collect(ctx)
	if err != nil {
		return nil, err
	}
	r := &Report{Mode: privacy.ModePrincipled, Order: opt.Order, Delta: opt.Delta, Confidence: opt.Confidence,
		Examples: p.M, Components: p.N, Dims: p.P, Mask: opt.UseMask, GaussianDirection: opt.Direction,
		Sampled: opt.Pairs > 0}
	if r.Sampled {
		r.Seed = opt.Seed
		r.Notes = append(r.Notes, fmt.Sprintf("audited a uniform sample of %d ordered pairs (with replacement, seed %d) out of %d; rd_max is the sample maximum, not the maximum over all pairs",
			opt.Pairs, opt.Seed, c.ordered()))
	}
	summarise(r, &st.rd, c, p)
	if err := accountant(r, &st.bdp, c); err != nil {
		return nil, err
	}
	return r, nil
}

// certifiedSkips returns, per BDP moment order of opt, why it is not
// evaluated on the data ("" : evaluated): its Renyi order l+1 differs from
// opt.Order and the certified bound of opt.Certified is +Inf there. Nil
// without a clip set. Errors: a set whose shape is not p's, Certify.
func certifiedSkips(p *privacy.Posteriors, opt Options) ([]string, error) {
	set := opt.Certified
	if set == nil {
		return nil, nil
	}
	if set.Components != p.N || set.Dims != p.P {
		return nil, fmt.Errorf("audit options: certified clip set of %d components x %d dims, the posteriors have N = %d, P = %d",
			set.Components, set.Dims, p.N, p.P)
	}
	skip := make([]string, len(opt.BDPOrders))
	for k, l := range opt.BDPOrders {
		if sameOrder(l+1, opt.Order) {
			continue
		}
		cert, err := privacy.Certify(*set, l+1, opt.Direction)
		if err != nil {
			return nil, fmt.Errorf("audit: certified bound at Renyi order %v: %w", l+1, err)
		}
		if !cert.Finite {
			skip[k] = fmt.Sprintf("certified bound +Inf at Renyi order %v (finite below %v): %s", l+1, set.MaxOrder(), cert.Reason)
		}
	}
	return skip, nil
}
