package dnn_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

// Tolerances of the device audit against the CPU audit (relative, FP64 on
// both sides; docs/engine.md, "The audit on the device").
//
// The two engines evaluate the same formula in float64 from the same
// float32 posteriors; they differ only in the rounding of exp, log and
// lgamma (Go's math against the C library or CUDA's, a few ulp), in the
// order of the sums (the CPU's four lanes and products of radicands, the
// device's one sequential sum per component) and in FMA contraction on
// the GPU. Eq. rdp is a sum of O(N P) terms of both signs, each up to
// 1/(lambda-1) = 20 times a logarithm or a lnGamma, so a value carries an
// absolute error of about N P 1e-16 times the terms' size: tolPair bounds
// |device - cpu| per ordered pair and order by tolPair (1 + |cpu|): 1e-9,
// five orders of magnitude above what the stand-in gives (2e-14; CUDA's
// lgamma, within a few ulp, and its FMAs add no more than that) and far
// below any mistake of the formula (a wrong term or dimension is O(1)).
// tolReport is the 1e-6 relative (relDiff: absolute below 1
// nat) for the report's numbers (rd_max,
// rd_mean, rd_min, the quantiles, the histogram's edges, the BDP costs and
// epsilons), which are maxima, means and order statistics of the values
// (the BDP figures exponentials of lambda D, so relative errors of the
// values grow by at most lambda |D|).
const (
	// Derivation: double lgamma/digamma (CUDA 4 ulps, 4.4e-16) on arguments <= N ~ 100, cancelling in differences: ~1e-13 absolute (2e-14 seen on the stand-in); FMAs merge roundings; 1e-9 is 1e4x that.
	tolPair = 1e-9
	// Derivation: maxima, means and quantiles of values within tolPair (1e-9), exponentials of lambda D multiplying that by lambda |D| <= 1e3: < 1e-6, the bound.
	tolReport = 1e-6
)

// auditCase is a random posterior file and the options it is audited with.
type auditCase struct {
	name          string
	M, N, P       int
	spread        float64 // std of logvar around -0.5: the wider, the more undefined radicands at high orders
	alphaLo       float64 // alpha uniform in [alphaLo, alphaLo + alphaSpan]: a narrow ratio keeps the Gamma arguments > 0 at high orders
	alphaSpan     float64
	mask, useMask bool
	direction     privacy.GaussianDirection
	order         float64
	bdp           []float64 // nil: the default BDP orders (Renyi 1.05, 1.1, 1.5, 2.1, 3)
	zeroAlpha     bool      // example 2's component 1 has alpha 0: every pair with it undefined
	twins         bool      // examples 3 and 9 identical and far from the rest: ties for rd_max
	rowBlock      int
}

var auditCases = []auditCase{
	{name: "narrow", M: 16, N: 7, P: 12, spread: 0.05, alphaLo: 0.8, alphaSpan: 0.2, order: privacy.DefaultOrder, rowBlock: 5},
	{name: "mask", M: 14, N: 9, P: 8, spread: 0.2, alphaLo: 0.2, alphaSpan: 1, mask: true, useMask: true, order: privacy.DefaultOrder, rowBlock: 4},
	{name: "mask-unused-paper", M: 13, N: 5, P: 4, spread: 0.2, alphaLo: 0.2, alphaSpan: 1, mask: true, direction: privacy.DirectionPaper, order: privacy.DefaultOrder},
	{name: "order-2.5", M: 12, N: 6, P: 16, spread: 0.03, alphaLo: 0.9, alphaSpan: 0.1, order: 2.5, bdp: []float64{0.5, 1.5, 2}, rowBlock: 3},
	{name: "invalid", M: 20, N: 5, P: 6, spread: 0.9, alphaLo: 0.2, alphaSpan: 1, mask: true, useMask: true, order: privacy.DefaultOrder, zeroAlpha: true, rowBlock: 7},
	{name: "ties", M: 15, N: 6, P: 5, spread: 0.1, alphaLo: 0.2, alphaSpan: 1, order: privacy.DefaultOrder, twins: true, rowBlock: 1},
}

// posteriors draws the case's file: mu ~ N(0, 0.5^2), logvar ~ N(-0.5,
// spread^2), alpha uniform in [alphaLo, alphaLo + alphaSpan]; the prior component 0 is the prior
// (mu 0, logvar 0, alpha 1); with mask, each example's last 0 to N-2
// components are padding.
func (c auditCase) posteriors(seed uint64) *privacy.Posteriors {
	rng := rand.New(rand.NewPCG(seed, 29))
	p := privacy.NewPosteriors(c.M, c.N, c.P)
	if c.mask {
		p.AttentionMask = make([]uint8, c.M*c.N)
	}
	for x := range c.M {
		real := c.N - rng.IntN(c.N-1)
		for i := range c.N {
			k := x*c.N + i
			p.Alpha[k] = float32(c.alphaLo + c.alphaSpan*rng.Float64())
			if c.mask && i < real {
				p.AttentionMask[k] = 1
			}
			for j := range c.P {
				if i == 0 {
					continue
				}
				p.Mu[k*c.P+j] = float32(0.5 * rng.NormFloat64())
				p.Logvar[k*c.P+j] = float32(-0.5 + c.spread*rng.NormFloat64())
			}
		}
		p.Alpha[x*c.N] = 1
	}
	if c.zeroAlpha {
		p.Alpha[2*c.N+1] = 0
	}
	if c.twins {
		np := c.N * c.P
		for k := 3 * np; k < 4*np; k++ {
			if k%np >= c.P { // not the prior component
				p.Mu[k] += 2
			}
		}
		copy(p.Mu[9*np:10*np], p.Mu[3*np:4*np])
		copy(p.Logvar[9*np:10*np], p.Logvar[3*np:4*np])
		copy(p.Alpha[9*c.N:10*c.N], p.Alpha[3*c.N:4*c.N])
	}
	p.Metadata["task"] = "test"
	return p
}

func (c auditCase) options() audit.Options {
	opt := audit.DefaultOptions()
	opt.Order, opt.UseMask, opt.Direction = c.order, c.useMask, c.direction
	if c.bdp != nil {
		opt.BDPOrders = c.bdp
	}
	opt.ListInvalid = c.M * (c.M - 1) // every undefined pair listed: the lists compare whole
	opt.Workers = 3
	return opt
}

// relDiff is |got - want| / max(|want|, 1): relative, and absolute in
// nats below 1 nat, where a value of 0 in exact arithmetic (two identical
// examples) is a rounding error of either sign in each engine (0 when
// equal, infinities included).
func relDiff(got, want float64) float64 {
	if got == want || (math.IsNaN(got) && math.IsNaN(want)) {
		return 0
	}
	return math.Abs(got-want) / max(math.Abs(want), 1)
}

// reportDiff compares the device's report with the CPU's: counts, the
// undefined pairs, argmax, the worst examples, BDP orders, notes and the
// file's description exactly, the numbers within tol relative. It returns
// the largest relative difference of the numbers and the mismatches.
func reportDiff(dev, cpu *audit.Report, tol float64) (float64, []string) {
	var bad []string
	var worst float64
	num := func(what string, g, w float64) {
		d := relDiff(g, w)
		worst = max(worst, d)
		if !(d <= tol) {
			bad = append(bad, fmt.Sprintf("%s: device %v, cpu %v (relative %.3g > %g)", what, g, w, d, tol))
		}
	}
	opt := func(what string, g, w *jsonfloat.Float) {
		if (g == nil) != (w == nil) {
			bad = append(bad, fmt.Sprintf("%s: device %v, cpu %v", what, g, w))
			return
		}
		if g != nil {
			num(what, float64(*g), float64(*w))
		}
	}
	same := func(what string, g, w any) {
		if fmt.Sprint(g) != fmt.Sprint(w) {
			bad = append(bad, fmt.Sprintf("%s: device %v, cpu %v", what, g, w))
		}
	}
	same("mode order delta confidence", []any{dev.Mode, dev.Order, dev.Delta, dev.Confidence}, []any{cpu.Mode, cpu.Order, cpu.Delta, cpu.Confidence})
	same("shape mask direction", []any{dev.Examples, dev.Components, dev.Dims, dev.Mask, dev.GaussianDirection}, []any{cpu.Examples, cpu.Components, cpu.Dims, cpu.Mask, cpu.GaussianDirection})
	same("pairs finite invalid sampled", []any{dev.Pairs, dev.FinitePairs, dev.InvalidPairs, dev.Sampled}, []any{cpu.Pairs, cpu.FinitePairs, cpu.InvalidPairs, cpu.Sampled})
	same("invalid examples", dev.InvalidExamples, cpu.InvalidExamples)
	same("argmax", dev.Argmax, cpu.Argmax)
	num("rd_max", float64(dev.RDMax), float64(cpu.RDMax))
	opt("rd_mean", dev.RDMean, cpu.RDMean)
	opt("rd_min", dev.RDMin, cpu.RDMin)
	same("quantile keys, from", []any{len(dev.Quantiles), dev.QuantilesFrom, dev.QuantileAccuracy}, []any{len(cpu.Quantiles), cpu.QuantilesFrom, cpu.QuantileAccuracy})
	for k, w := range cpu.Quantiles {
		num("quantile "+k, float64(dev.Quantiles[k]), float64(w))
	}
	if (dev.Histogram == nil) != (cpu.Histogram == nil) {
		bad = append(bad, "histogram on one side only")
	} else if cpu.Histogram != nil {
		same("histogram counts", []any{dev.Histogram.Counts, dev.Histogram.Below, dev.Histogram.Above}, []any{cpu.Histogram.Counts, cpu.Histogram.Below, cpu.Histogram.Above})
		for i, w := range cpu.Histogram.Edges {
			if i < len(dev.Histogram.Edges) {
				num(fmt.Sprintf("histogram edge %d", i), dev.Histogram.Edges[i], w)
			}
		}
	}
	opt("bdp_epsilon", dev.BDPEpsilon, cpu.BDPEpsilon)
	opt("bdp_epsilon_pooled", dev.BDPEpsilonPooled, cpu.BDPEpsilonPooled)
	opt("bdp_order", dev.BDPOrder, cpu.BDPOrder)
	same("bdp worst example", fmt.Sprint(dev.BDPWorstExample != nil && cpu.BDPWorstExample != nil && *dev.BDPWorstExample == *cpu.BDPWorstExample),
		fmt.Sprint(cpu.BDPWorstExample != nil))
	same("bdp orders", len(dev.BDPOrders), len(cpu.BDPOrders))
	for k, w := range cpu.BDPOrders {
		if k >= len(dev.BDPOrders) {
			break
		}
		g := dev.BDPOrders[k]
		what := fmt.Sprintf("bdp order %g", w.Order)
		same(what, []any{g.Order, g.RenyiOrder, g.Skipped, g.Finite, g.InfPairs, g.WorstExample}, []any{w.Order, w.RenyiOrder, w.Skipped, w.Finite, w.InfPairs, w.WorstExample})
		opt(what+" cost", g.Cost, w.Cost)
		opt(what+" epsilon", g.Epsilon, w.Epsilon)
		opt(what+" cost pooled", g.CostPooled, w.CostPooled)
		opt(what+" epsilon pooled", g.EpsPooled, w.EpsPooled)
	}
	same("notes", dev.Notes, cpu.Notes)
	same("metadata", dev.Metadata, cpu.Metadata)
	return worst, bad
}

// TestAuditAllPairsMatchesCPU: the device's all-pairs audit (on the
// stand-in, or the GPU with NVDP_CUDA_REAL=1) gives the CPU audit's report
// on random posteriors of 12 to 20 examples, 5 to 9 components and 4 to 16
// dimensions: with and without the mask (and a mask the audit ignores), both
// Gaussian directions, the default order 1.1 with the default BDP orders
// (Renyi orders up to 3) and order 2.5, undefined pairs (an alpha of 0,
// radicands <= 0 at the higher orders; every one listed), exact ties for
// rd_max (two identical examples: the smallest (q, q') wins on both), and
// row blocks of 1 to 7 rows and the automatic one. Counts, undefined pairs,
// argmax and worst examples must be equal, the numbers within tolReport.
func TestAuditAllPairsMatchesCPU(t *testing.T) {
	ctx := context.Background()
	onDevice(t, func(e *dnn.Engine) {
		for ci, c := range auditCases {
			p := c.posteriors(uint64(ci + 1))
			opt := c.options()
			t0 := time.Now()
			cpu, err := audit.Audit(ctx, p, opt)
			if err != nil {
				t.Errorf("%s: cpu: %v", c.name, err)
				continue
			}
			tc := time.Since(t0)
			t0 = time.Now()
			dev, err := dnn.AuditAllPairs(ctx, e, p, opt, dnn.AuditOptions{RowBlock: c.rowBlock})
			if err != nil {
				t.Errorf("%s: device: %v", c.name, err)
				continue
			}
			worst, bad := reportDiff(dev, cpu, tolReport)
			for _, b := range bad {
				t.Errorf("%s: %s", c.name, b)
			}
			t.Logf("%s: M %d N %d P %d: %d of %d pairs undefined, rd_max %.6g at %v; largest relative difference %.2g; cpu %v, device (stand-in) %v",
				c.name, c.M, c.N, c.P, cpu.InvalidPairs, cpu.Pairs, float64(cpu.RDMax), cpu.Argmax, worst, tc.Round(time.Microsecond), time.Since(t0).Round(time.Microsecond))
			switch c.name {
			case "invalid":
				// an alpha of 0 makes 2(M-1) pairs undefined at every order
				if cpu.InvalidPairs < int64(2*(c.M-1)) || len(cpu.InvalidExamples) != int(cpu.InvalidPairs) {
					t.Errorf("invalid: %d undefined pairs, %d listed: the case does not test them", cpu.InvalidPairs, len(cpu.InvalidExamples))
				}
			case "ties":
				if len(cpu.Argmax) != 2 || !slices.Contains(cpu.Argmax, 3) || slices.Contains(cpu.Argmax, 9) {
					t.Errorf("ties: argmax %v: want a pair of example 3 (its twin 9 ties)", cpu.Argmax)
				}
			case "narrow", "order-2.5":
				if cpu.InvalidPairs != 0 || !cpu.BDPOrders[len(cpu.BDPOrders)-1].Finite {
					t.Errorf("%s: want every pair finite at every order (%d undefined)", c.name, cpu.InvalidPairs)
				}
			}
		}
	})
}

// TestAuditPairsValues: every value AuditPairs computes, at every order and
// in both directions, is privacy.PairBoundWith's (the CPU's straightforward
// evaluation) within tolPair, +Inf exactly where the CPU's is.
func TestAuditPairsValues(t *testing.T) {
	onDevice(t, func(e *dnn.Engine) {
		for ci, c := range auditCases {
			p := c.posteriors(uint64(ci + 1))
			orders := []float64{c.order, 1.05, 1.5, 2.1, 3}
			bo := privacy.BoundOptions{UseMask: c.useMask, Direction: c.direction}
			var worst float64
			var n, inf int
			rows := 0
			err := dnn.AuditPairs(e, p, orders, bo, c.rowBlock, func(a0, a1 int, vals []float64) error {
				K := len(orders)
				for a := a0; a < a1; a++ {
					rows++
					for b := a + 1; b < p.M; b++ {
						for k, lam := range orders {
							for d, qq := range [2][2]int{{a, b}, {b, a}} {
								want, err := privacy.PairBoundWith(lam, p.View(qq[0]), p.View(qq[1]), bo)
								if err != nil {
									return err
								}
								got := vals[((a-a0)*p.M+b)*2*K+2*k+d]
								n++
								if math.IsInf(want.Total, 1) {
									inf++
								}
								diff := math.Abs(got - want.Total)
								if got == want.Total {
									diff = 0
								}
								worst = max(worst, diff/(1+math.Abs(want.Total)))
								if !(diff <= tolPair*(1+math.Abs(want.Total))) {
									t.Errorf("%s: D(%d||%d) at order %g: device %v, cpu %v (%s)", c.name, qq[0], qq[1], lam, got, want.Total, want.Undefined)
								}
							}
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if rows != p.M-1 {
				t.Errorf("%s: %d rows handed over, want M-1 = %d", c.name, rows, p.M-1)
			}
			t.Logf("%s: %d values (%d +Inf), largest |device - cpu| / (1 + |cpu|) %.2g", c.name, n, inf, worst)
		}
	})
}

// TestAuditAllPairsRefuses: the options the device does not run are errors
// naming them, marked ErrAuditUnsupported (AuditUnsupported says the same
// without a device: the pipeline's fallback to the CPU); an invalid option
// is an error of its own, not a fallback.
func TestAuditAllPairsRefuses(t *testing.T) {
	p := auditCases[0].posteriors(1)
	cases := []struct {
		name        string
		set         func(*audit.Options)
		unsupported bool
	}{
		{"reference", func(o *audit.Options) { o.Mode = privacy.ModeReference }, true},
		{"Pairs", func(o *audit.Options) { o.Pairs = 10 }, true},
		{"LowMemory", func(o *audit.Options) { o.LowMemory = true }, true},
		{"Renyi order", func(o *audit.Options) { o.Order = 1 }, false},
	}
	for _, c := range cases {
		opt := audit.DefaultOptions()
		c.set(&opt)
		if err := dnn.AuditUnsupported(p, opt); (err != nil) != c.unsupported || (err != nil && !errors.Is(err, dnn.ErrAuditUnsupported)) {
			t.Errorf("AuditUnsupported %s: %v, want unsupported %v", c.name, err, c.unsupported)
		}
	}
	// the kernels index mu with int32: 2^31 values or more are the CPU's
	big := &privacy.Posteriors{M: 1 << 16, N: 128, P: 256}
	if err := dnn.AuditUnsupported(big, audit.DefaultOptions()); !errors.Is(err, dnn.ErrAuditUnsupported) || !strings.Contains(err.Error(), "2^31") {
		t.Errorf("AuditUnsupported of 2^31 values: %v", err)
	}
	if err := dnn.AuditUnsupported(p, audit.DefaultOptions()); err != nil {
		t.Errorf("AuditUnsupported of the default options: %v", err)
	}
	onDevice(t, func(e *dnn.Engine) {
		for _, c := range cases {
			opt := audit.DefaultOptions()
			c.set(&opt)
			_, err := dnn.AuditAllPairs(context.Background(), e, p, opt, dnn.AuditOptions{})
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.name)) || errors.Is(err, dnn.ErrAuditUnsupported) != c.unsupported {
				t.Errorf("%s: error %v", c.name, err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := dnn.AuditAllPairs(ctx, e, p, audit.DefaultOptions(), dnn.AuditOptions{}); err != context.Canceled {
			t.Errorf("cancelled: error %v", err)
		}
	})
}
