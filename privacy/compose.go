package privacy

import (
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/jsonfloat"
)

// Composition is the accountant of many releases of several mechanisms:
// given how many releases of each were made, it returns the (epsilon, delta)
// guarantee of them all, as Opacus's accountants do with get_privacy_spent.
// It holds no state: the counts are the caller's, and the ledgers of package
// serve store them.
//
// Every mechanism is described on one order grid, Orders, and the guarantee
// is given at one Delta. Two accountants compose:
//
//   - [AccountantGaussian] is exact. While every mechanism with releases is
//     exactly a Gaussian mechanism, with Mechanism.Mu > 0, n_i releases of
//     mu_i-GDP mechanisms compose into one of mu = sqrt(sum_i n_i mu_i^2),
//     by Dong, Roth and Su 2022, Cor. 3.3. Its epsilon at Delta is known in
//     closed form; see [GaussianMechanismEpsilon].
//   - [AccountantRDP] applies otherwise. The RDP curves add up, sum_i n_i
//     RD_i at each order, and the sum is converted to epsilon at Delta by the
//     minimum over the orders, see [BestEpsilon]. It is valid for every
//     mechanism but not tight.
//
// The sums run over the counts in the order given, so that the same counts in
// the same order give the same float64 every time: callers pass them in a
// fixed order, as serve does by curve ID.
type Composition struct {
	Orders []float64 // the Renyi orders of every Mechanism.RD, each > 1
	Delta  float64   // the delta of the guarantee, in (0, 1)
}

// Mechanism is one release of a mechanism as a Composition counts it.
type Mechanism struct {
	// RD is its RDP bound of one release at each of Composition.Orders
	// (nats; +Inf allowed).
	RD []float64
	// Mu > 0 says the release is exactly a Gaussian mechanism of this mu
	// (sensitivity / sigma; RD is then order mu^2 / 2); 0: an RDP bound only.
	Mu float64
}

// Count is the releases made of one mechanism.
type Count struct {
	Mechanism
	Releases uint64
}

// Spent is the guarantee of the releases composed, as
// [Composition.Epsilon] returns it.
type Spent struct {
	Epsilon float64 // at Composition.Delta; +Inf when unbounded
	// Order is the order of the RDP conversion (NaN for the exact
	// Gaussian composition, and when the epsilon is +Inf at every order).
	Order      float64
	Accountant string // AccountantGaussian or AccountantRDP
}

// MaxReleases is where [Composition.RemainingReleases] stops counting. More
// releases than this fit only when a mechanism's curve is 0 or the budget is
// +Inf, which it reports as +Inf.
const MaxReleases = 1 << 52

// Check checks the composition: Delta in (0, 1), checked by [CheckDelta],
// and at least one order, each > 1. Its errors are an [*option.Error] for
// delta, and an error naming the order.
func (c Composition) Check() error {
	if err := CheckDelta(c.Delta); err != nil {
		return err
	}
	if len(c.Orders) == 0 {
		return fmt.Errorf("composition: no Renyi order")
	}
	for _, o := range c.Orders {
		if !(o > 1) {
			return fmt.Errorf("composition: Renyi order %v: want > 1", o)
		}
	}
	return nil
}

// Epsilon returns the guarantee at c.Delta of counts composed. It is exact,
// [AccountantGaussian], while every mechanism with releases is Gaussian and
// one has releases. Otherwise it is the RDP sum converted, [AccountantRDP],
// which also covers no releases at all, with epsilon 0.
//
// It returns an error when c is invalid, see [Composition.Check], or a
// mechanism's RD does not have one bound per order.
func (c Composition) Epsilon(counts []Count) (Spent, error) {
	if err := c.check(counts); err != nil {
		return Spent{}, err
	}
	return c.spent(counts, -1, 0), nil
}

// RemainingReleases returns the largest m >= 0 such that counts with m more
// releases of counts[next] stay within budget, an epsilon at c.Delta. It
// returns +Inf when MaxReleases more do, and 0 when counts exceed the budget
// already. counts[next] may have no releases yet, as for the first release
// of a mechanism.
//
// The releases after the m more are composed as [Composition.Epsilon]
// composes them: exactly while every mechanism with releases would be
// Gaussian, and otherwise by the RDP sum. Epsilon does not decrease with m,
// so the search is exponential, then binary: each order's bound grows, and
// so does their minimum; mu grows; and an RDP mechanism added moves an exact
// composition to the RDP sum, which is at least the exact epsilon.
//
// Its errors are those of Epsilon, and next out of range.
func (c Composition) RemainingReleases(counts []Count, next int, budget float64) (float64, error) {
	if err := c.check(counts); err != nil {
		return 0, err
	}
	if next < 0 || next >= len(counts) {
		return 0, fmt.Errorf("composition: mechanism %d of %d", next, len(counts))
	}
	fits := func(m float64) bool { return c.spent(counts, next, m).Epsilon <= budget }
	if !fits(0) {
		return 0, nil
	}
	if fits(MaxReleases) {
		return math.Inf(1), nil
	}
	lo, hi := 0.0, 1.0 // fits(lo), and hi is searched for !fits(hi)
	for fits(hi) {
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1 {
		mid := math.Floor((lo + hi) / 2)
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// check checks c and that every mechanism has one bound per order.
func (c Composition) check(counts []Count) error {
	if err := c.Check(); err != nil {
		return err
	}
	for i, n := range counts {
		if len(n.RD) != len(c.Orders) {
			return fmt.Errorf("composition: mechanism %d has %d RDP bounds for %d orders", i, len(n.RD), len(c.Orders))
		}
	}
	return nil
}

// spent is the guarantee of counts with m more releases of counts[extra]
// (extra -1: none). The exact composition sums (mu_i sqrt(n_i))^2, so
// that one mechanism gives mu_1 sqrt(n) bit for bit as a Guarantee's mu of
// n releases; the RDP sum is the sum over the mechanisms with releases of
// n_i RD_i, then m RD_extra added.
func (c Composition) spent(counts []Count, extra int, m float64) Spent {
	releases := func(i int) float64 {
		n := float64(counts[i].Releases)
		if i == extra {
			n += m
		}
		return n
	}
	if mu, ok := gaussianMu(counts, releases); ok {
		return Spent{Epsilon: gaussianEpsilon(mu, c.Delta), Order: math.NaN(), Accountant: AccountantGaussian}
	}
	rd := make([]float64, len(c.Orders))
	for _, n := range counts {
		if n.Releases == 0 {
			continue
		}
		k := float64(n.Releases)
		for i, v := range n.RD {
			rd[i] += k * v
		}
	}
	if extra >= 0 && m > 0 {
		for i, v := range counts[extra].RD {
			rd[i] += m * v
		}
	}
	eps, order := rdpEpsilon(c.Orders, rd, c.Delta)
	return Spent{Epsilon: eps, Order: order, Accountant: AccountantRDP}
}

// gaussianMu is sqrt(sum_i (mu_i sqrt(n_i))^2) over the mechanisms with
// n_i = releases(i) > 0, in order; ok is false when one of them is not
// Gaussian or none has releases.
func gaussianMu(counts []Count, releases func(int) float64) (mu float64, ok bool) {
	var sum float64
	for i, n := range counts {
		k := releases(i)
		if k == 0 {
			continue
		}
		if n.Mu <= 0 {
			return 0, false
		}
		x := n.Mu * math.Sqrt(k)
		sum += x * x
		ok = true
	}
	return math.Sqrt(sum), ok
}

// gaussianEpsilon is GaussianMechanismEpsilon(mu, delta), +Inf for an
// infinite mu; mu and delta were checked, so a failure is a programmer
// error.
func gaussianEpsilon(mu, delta float64) float64 {
	if math.IsInf(mu, 1) {
		return math.Inf(1)
	}
	eps, err := GaussianMechanismEpsilon(mu, delta)
	if err != nil {
		panic(fmt.Sprintf("privacy: composed gaussian mu: %v", err))
	}
	return eps
}

// rdpEpsilon is BestEpsilon of the curve rd over orders at delta; the
// orders and delta were checked, so a failure is a programmer error.
func rdpEpsilon(orders, rd []float64, delta float64) (eps, order float64) {
	curve := make([]OrderRD, len(rd))
	for i, v := range rd {
		curve[i] = OrderRD{Order: orders[i], RD: jsonfloat.Float(v)}
	}
	eps, order, err := BestEpsilon(curve, delta)
	if err != nil {
		panic(fmt.Sprintf("privacy: composed curve: %v", err))
	}
	return eps, order
}
