package audit

import (
	"fmt"
	"math"
	"strconv"

	"github.com/nvdp-project/nvdp/jsonfloat"
)

// accountant writes the Bayesian DP accountant (Triastcyn & Faltings 2020,
// Theorem 2; docs/privacy.md, "Bayesian DP") into r from the ln-values the
// collection accumulated. For each moment order l:
//
//   - worst individual: c(l) = max over examples x and both directions of
//     the Student-t upper confidence bound (logAcc.ucb) on ln E_x'[exp(l
//     D_{l+1})] over the x' audited with x: +Inf when one bound is, else
//     estimated from at least 3 of them;
//   - pooled: the same bound over l max(D(a||b), D(b||a)) of every audited
//     unordered pair;
//   - eps_mu(l) = (c(l) - ln(delta - gamma)) / l, gamma = 1 - confidence.
//
// bdp_epsilon and bdp_epsilon_pooled are the minima over l (bdp_order,
// bdp_worst_example: where); +Inf when every order has an infinite pair,
// absent when no order could be estimated. Errors: the Student-t quantile.
func accountant(r *Report, s *bdpStats, c *collector) error {
	return accountantOf(r, s, c.opt, c.p.M, c.skip)
}

// accountantOf is accountant for M examples audited with the resolved
// options opt and the orders skip says were skipped (nil: none).
func accountantOf(r *Report, s *bdpStats, opt Options, M int, skip []string) error {
	skipped := func(k int) bool { return skip != nil && skip[k] != "" }
	tail := 1 - opt.Confidence
	lnDG := math.Log(opt.Delta - tail)
	best, bestPooled := math.Inf(1), math.Inf(1)
	bestOrder, bestWorst := math.NaN(), -1
	estimated, pooled := false, false
	var finiteOrders, skippedOrders []string
	for k, l := range opt.BDPOrders {
		bo := BDPOrder{Order: l, RenyiOrder: l + 1, InfPairs: s.infPairs[k], WorstExample: -1, Finite: s.infPairs[k] == 0}
		if skipped(k) {
			inf := jsonfloat.New(math.Inf(1))
			bo.Finite, bo.Skipped, bo.Cost, bo.Epsilon, bo.CostPooled, bo.EpsPooled = false, skip[k], inf, inf, inf, inf
			if !estimated {
				best, bestOrder, bestWorst = math.Inf(1), math.NaN(), -1
			}
			estimated, pooled = true, true
			skippedOrders = append(skippedOrders, strconv.FormatFloat(l, 'g', -1, 64))
			r.BDPOrders = append(r.BDPOrders, bo)
			continue
		}
		cost, worst, ok, err := worstIndividual(s.indiv[k*M*2:(k+1)*M*2], tail)
		if err != nil {
			return err
		}
		if ok {
			eps := (cost - lnDG) / l
			bo.Cost, bo.Epsilon, bo.WorstExample = jsonfloat.New(cost), jsonfloat.New(eps), worst
			if !estimated || eps < best {
				best, bestOrder, bestWorst = eps, l, worst
				if math.IsInf(eps, 1) {
					bestOrder, bestWorst = math.NaN(), -1
				}
			}
			estimated = true
		}
		if pa := &s.pooled[k]; pa.estimable() {
			cp, err := pa.ucb(tail)
			if err != nil {
				return err
			}
			bo.CostPooled, bo.EpsPooled = jsonfloat.New(cp), jsonfloat.New((cp-lnDG)/l)
			bestPooled, pooled = math.Min(bestPooled, float64(*bo.EpsPooled)), true
		}
		if bo.Finite {
			finiteOrders = append(finiteOrders, strconv.FormatFloat(l, 'g', -1, 64))
		}
		r.BDPOrders = append(r.BDPOrders, bo)
	}
	if estimated {
		r.BDPEpsilon, r.BDPOrder, r.BDPWorstExample = jsonfloat.New(best), jsonfloat.New(bestOrder), &bestWorst
	}
	if pooled {
		r.BDPEpsilonPooled = jsonfloat.New(bestPooled)
	}
	if len(finiteOrders) < len(opt.BDPOrders) {
		r.Notes = append(r.Notes, fmt.Sprintf("BDP moment orders with every pair finite: %v of %v; an order with an infinite pair has infinite cost",
			finiteOrders, opt.BDPOrders))
	}
	if len(skippedOrders) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("BDP moment orders %v not evaluated on the data: the certified bound of the clip set is +Inf at their Renyi order (bdp_orders[].skipped); their cost is +Inf", skippedOrders))
	}
	if M < 4 {
		r.Notes = append(r.Notes, "fewer than 4 examples: no per-example Student-t bound (needs 3 partners)")
	}
	return nil
}

// worstIndividual is max over examples x and both directions d of the
// upper confidence bound of acc[2x+d] (over the estimable ones: an
// infinite bound, or at least 3 partners), the example attaining it (the
// first among ties) and whether any was estimable.
func worstIndividual(acc []logAcc, tail float64) (cost float64, worst int, ok bool, err error) {
	cost, worst = math.Inf(-1), -1
	for i := range acc {
		a := &acc[i]
		if !a.estimable() {
			continue // sampled mode: too few partners for a t bound
		}
		c, err := a.ucb(tail)
		if err != nil {
			return 0, 0, false, err
		}
		ok = true
		if c > cost {
			cost, worst = c, i/2
		}
	}
	return cost, worst, ok, nil
}
