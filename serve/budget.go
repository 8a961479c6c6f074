package serve

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

// The budget arithmetic of every ledger, in one place: the bbolt file
// (Ledger) and PostgreSQL (PGLedger) both compose and convert with it, so
// that the same counts give the same balance, bit for bit, in either.

// The accountants of a curve, stored with every curve (PostgreSQL:
// curves.accountant and curves.gaussian_mu; the file: the curve record's
// "accountant" and "gaussian_mu", absent in files of before them):
//
//   - Accountant ("rdp-sum"): an RDP curve, composed by summing the curves
//     per order (releases x bound) and converting the sum to epsilon at the
//     ledger's delta by the minimum over orders (privacy.BestEpsilon);
//   - AccountantGaussian ("gaussian-mu"): the curve of a release that is
//     exactly a Gaussian mechanism (privacy.Guarantee.Accountant is
//     privacy.AccountantGaussian), stored with its mu of one release
//     (Curve.Mu) beside its RDP curve order mu^2 / 2.
//
// An account composes exactly (exactEpsilon) while every curve it was
// charged under is Gaussian, else by the RDP sum; docs/serving.md, "Exact
// composition of Gaussian releases".
//
// CurveFormat is the newest version of a curve's record: 1 holds an RDP
// curve, 2 adds the Gaussian mu. A curve is written in the oldest format
// that holds it (an RDP curve in format 1, its record as before, so that the
// nvdp of before still reads a file of RDP curves only). A ledger refuses a
// curve of another accountant or a newer format instead of charging under
// arithmetic it does not know.
const (
	Accountant         = "rdp-sum"
	AccountantGaussian = "gaussian-mu"
	CurveFormat        = 2
)

// gaussianRDPTolerance bounds the relative difference between a Gaussian
// curve's RDP bounds and order mu^2 / 2 (privacy certifies them within
// 1e-12): beyond it the curve's mu and bounds disagree, and the curve is
// refused.
const gaussianRDPTolerance = 1e-6

// composition is the order grid and delta that every curve of a ledger
// shares (set by the first curve registered).
type composition struct {
	orders []float64
	delta  float64
}

// newCurve is the curve g certifies for one release, as a ledger registers
// it (Model unset), with its orders, accountant and format: a Gaussian curve
// (its mu of one release g.GaussianMu / sqrt(g.Releases), and its RDP
// curve) when g's epsilon is exact (privacy.AccountantGaussian) with a mu >
// 0, else an RDP curve. Errors: a Gaussian guarantee whose mu and curve
// disagree (checkGaussian).
func newCurve(g *privacy.Guarantee) (c *Curve, orders []float64, accountant string, format int, err error) {
	orders = make([]float64, len(g.Curve))
	rd := make([]float64, len(g.Curve))
	for i, p := range g.Curve {
		orders[i], rd[i] = p.Order, float64(p.RD)
	}
	c = &Curve{RD: rd, Delta: g.Delta}
	accountant, format = Accountant, 1
	if mu := float64(g.GaussianMu); g.Accountant == privacy.AccountantGaussian && mu > 0 && g.Releases >= 1 {
		c.Mu = mu / math.Sqrt(float64(g.Releases))
		if err := checkGaussian(orders, rd, c.Mu); err != nil {
			return nil, nil, "", 0, fmt.Errorf("model guarantee: %w", err)
		}
		accountant, format = AccountantGaussian, CurveFormat
	}
	c.ID = curveIDOf(orders, rd, c.Mu)
	return c, orders, accountant, format, nil
}

// curveIDOf is the ID of a curve: curveID of its orders and bounds for an
// RDP curve (mu 0), gaussianCurveID (which covers mu too) for a Gaussian one.
func curveIDOf(orders, rd []float64, mu float64) string {
	if mu != 0 {
		return gaussianCurveID(orders, rd, mu)
	}
	return curveID(orders, rd)
}

// checkGaussian checks a Gaussian curve's mu (finite, > 0) against its RDP
// bounds: each finite bound is order mu^2 / 2 within gaussianRDPTolerance.
func checkGaussian(orders, rd []float64, mu float64) error {
	if !(mu > 0) || math.IsInf(mu, 1) {
		return fmt.Errorf("gaussian mu %v: want a finite value > 0", mu)
	}
	for i, v := range rd {
		want := orders[i] * mu * mu / 2
		if !math.IsInf(v, 1) && !(math.Abs(v-want) <= gaussianRDPTolerance*want) {
			return fmt.Errorf("gaussian mu %v does not match the RDP bound %v at order %v (want order mu^2/2 = %v)", mu, v, orders[i], want)
		}
	}
	return nil
}

// composed is an account's charges as the composition reads them: the
// curves charged (count > 0) in ID order with their counts, the RDP sum
// over them, and the releases in all.
type composed struct {
	ids      []string
	counts   []uint64
	curves   []*Curve
	rd       []float64 // at each order, the sum over curves of releases x bound
	releases uint64
}

// compose reads the account charged counts releases by curve ID: its RDP
// curve is, at each order, the sum over curves of releases x bound, the
// curves taken in ID order so that the sum is the same float64 every time.
// curve resolves an ID; its error (a curve the ledger does not hold or
// cannot read) is returned.
func (c composition) compose(counts map[string]uint64, curve func(id string) (*Curve, error)) (composed, error) {
	var s composed
	for id, n := range counts {
		s.releases += n
		if n > 0 {
			s.ids = append(s.ids, id)
		}
	}
	slices.Sort(s.ids)
	s.rd = make([]float64, len(c.orders))
	for _, id := range s.ids {
		cv, err := curve(id)
		if err != nil {
			return composed{}, err
		}
		if len(cv.RD) != len(s.rd) {
			return composed{}, fmt.Errorf("curve %s has %d orders, the ledger %d", id, len(cv.RD), len(s.rd))
		}
		n := float64(counts[id])
		for i, v := range cv.RD {
			s.rd[i] += n * v
		}
		s.counts, s.curves = append(s.counts, counts[id]), append(s.curves, cv)
	}
	return s, nil
}

// gaussianMu is the mu of the account's releases when every curve charged
// is Gaussian (and one is): sqrt(sum_i (mu_i sqrt(n_i))^2), the curves in
// ID order, with m more releases of curve extra (m > 0) added to its count.
// mu_i-GDP mechanisms compose into a sqrt(sum mu_i^2)-GDP one (Dong, Roth &
// Su 2022, Cor. 3.3), n_i releases of one into mu_i sqrt(n_i); the terms
// are squares of mu_i sqrt(n_i) so that one curve gives mu_1 sqrt(n) bit
// for bit, as privacy.Guarantee's mu of n releases. ok is false for an
// account with nothing charged or an RDP curve among its curves.
func (s composed) gaussianMu(extra *Curve, m uint64) (mu float64, ok bool) {
	curves, counts := s.curves, s.counts
	if extra != nil && m > 0 {
		i, found := slices.BinarySearch(s.ids, extra.ID)
		curves, counts = slices.Clone(curves), slices.Clone(counts)
		if found {
			counts[i] += m
		} else {
			curves, counts = slices.Insert(curves, i, extra), slices.Insert(counts, i, m)
		}
	}
	if len(curves) == 0 {
		return 0, false
	}
	var sum float64
	for i, cv := range curves {
		if cv.Mu <= 0 {
			return 0, false
		}
		x := cv.Mu * math.Sqrt(float64(counts[i]))
		sum += x * x
	}
	return math.Sqrt(sum), true
}

// spentEpsilon is the epsilon at the ledger's delta of the account s, the
// order that gives it (NaN for an exact composition) and the accountant
// (privacy.AccountantGaussian or privacy.AccountantRDP).
func (c composition) spentEpsilon(s composed) (eps, order float64, accountant string) {
	if mu, ok := s.gaussianMu(nil, 0); ok {
		return c.exactEpsilon(mu), math.NaN(), privacy.AccountantGaussian
	}
	eps, order = c.epsilon(s.rd)
	return eps, order, privacy.AccountantRDP
}

// exactEpsilon is the epsilon at the ledger's delta of releases that
// compose into a Gaussian mechanism of mu (privacy.GaussianMechanismEpsilon:
// Balle & Wang 2018, Thm 8, the (epsilon, delta) curve of mu-GDP); +Inf
// for an infinite mu.
func (c composition) exactEpsilon(mu float64) float64 {
	if math.IsInf(mu, 1) {
		return math.Inf(1)
	}
	eps, err := privacy.GaussianMechanismEpsilon(mu, c.delta)
	if err != nil {
		panic(fmt.Sprintf("serve: composed gaussian mu: %v", err))
	}
	return eps
}

// epsilon converts a composed curve to epsilon at the ledger's delta and
// the order that gives it (privacy.BestEpsilon). Curves were checked when
// registered or read, so a failure is a programmer error.
func (c composition) epsilon(rd []float64) (eps, order float64) {
	curve := make([]privacy.OrderRD, len(rd))
	for i, v := range rd {
		curve[i] = privacy.OrderRD{Order: c.orders[i], RD: jsonfloat.Float(v)}
	}
	eps, order, err := privacy.BestEpsilon(curve, c.delta)
	if err != nil {
		panic(fmt.Sprintf("serve: composed curve: %v", err))
	}
	return eps, order
}

// maxReleases is where remainingReleases stops counting: more releases than
// this fit only when the curve is 0 (or the budget +Inf), which is reported
// as +Inf.
const maxReleases = 1 << 52

// balance is the balance of account id, charged counts releases by curve
// ID (resolved by lookup), against budget (epsilon at delta), for releases
// of curve. Its accountant is the one of its spent epsilon; for an account
// with nothing charged, the one its first release of curve would be
// composed by.
func (c composition) balance(id string, counts map[string]uint64, lookup func(string) (*Curve, error), curve *Curve, budget float64) (Balance, error) {
	s, err := c.compose(counts, lookup)
	if err != nil {
		return Balance{}, err
	}
	eps, _, acct := c.spentEpsilon(s)
	if len(s.ids) == 0 {
		acct = privacy.AccountantRDP
		if curve.Mu > 0 {
			acct = privacy.AccountantGaussian
		}
	}
	return Balance{
		Account: id, Releases: s.releases, Delta: curve.Delta, Accountant: acct,
		SpentEpsilon: jsonfloat.Float(eps), BudgetEpsilon: jsonfloat.Float(budget),
		RemainingEpsilon:  jsonfloat.Float(math.Max(0, budget-eps)),
		RemainingReleases: jsonfloat.Float(c.remainingReleases(s, curve, budget)),
	}, nil
}

// charge is the one rule of a charge, for every ledger: releases more of
// curve fit the account id charged counts (by curve ID, resolved by lookup)
// when the balance's RemainingReleases holds them (Balance.Check). Then
// they are added to counts and the balance after them returned; else counts
// are unchanged and the error is a *BudgetError with the balance.
func (c composition) charge(id string, counts map[string]uint64, lookup func(string) (*Curve, error), curve *Curve, releases int, budget float64) (Balance, error) {
	bal, err := c.balance(id, counts, lookup, curve, budget)
	if err != nil {
		return Balance{}, err
	}
	if err := bal.Check(releases); err != nil {
		return bal, err
	}
	counts[curve.ID] += uint64(releases)
	return c.balance(id, counts, lookup, curve, budget)
}

// Check returns a *BudgetError when releases more releases of the
// balance's curve do not fit its budget (RemainingReleases), else nil.
func (b Balance) Check(releases int) error {
	if float64(b.RemainingReleases) < float64(releases) {
		return &BudgetError{Requested: releases, Balance: b}
	}
	return nil
}

// remainingReleases is the largest m >= 0 such that the account s after m
// more releases of curve stays within budget (epsilon at the ledger's
// delta), +Inf when maxReleases do. The account after them is composed by
// the rule of spentEpsilon: exactly while it would hold Gaussian curves
// only, else by the RDP sum (spent + m curve at each order). Epsilon is
// non-decreasing in m (each order's bound grows, and so does their minimum;
// mu grows; an RDP curve added moves an exact account to the RDP sum, which
// is at least the exact epsilon), so the search is exponential then binary.
func (c composition) remainingReleases(s composed, curve *Curve, budget float64) float64 {
	fits := func(m float64) bool {
		if m == 0 {
			eps, _, _ := c.spentEpsilon(s)
			return eps <= budget
		}
		if mu, ok := s.gaussianMu(curve, uint64(m)); ok {
			return c.exactEpsilon(mu) <= budget
		}
		rd := make([]float64, len(s.rd))
		for i := range rd {
			rd[i] = s.rd[i] + m*curve.RD[i]
		}
		eps, _ := c.epsilon(rd)
		return eps <= budget
	}
	if !fits(0) {
		return 0
	}
	if fits(maxReleases) {
		return math.Inf(1)
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
	return lo
}

// account is the Account view of an account charged counts releases by
// curve over requests requests, last at updated.
func (c composition) account(id string, counts map[string]uint64, requests uint64, updated time.Time, curve func(string) (*Curve, error)) (Account, error) {
	a := Account{ID: id, ReleasesByCurve: counts, Requests: requests, Delta: c.delta, Updated: updated,
		SpentEpsilon: 0, SpentOrder: jsonfloat.Float(math.NaN()), Accountant: privacy.AccountantRDP}
	for _, n := range counts {
		a.Releases += n
	}
	if a.Delta > 0 {
		s, err := c.compose(counts, curve)
		if err != nil {
			return Account{}, fmt.Errorf("account %q: %w", id, err)
		}
		eps, order, acct := c.spentEpsilon(s)
		a.SpentEpsilon, a.SpentOrder, a.Accountant = jsonfloat.Float(eps), jsonfloat.Float(order), acct
	}
	return a, nil
}

// checkCurve checks a curve read from a ledger against the ledger's grid:
// its accountant and format are known, its orders and delta are the
// ledger's, a Gaussian curve's mu agrees with its bounds (checkGaussian)
// and an RDP curve has none, and its ID is the hash of its orders and
// bounds, and of its mu for a Gaussian curve (so that a changed bound or mu
// is found, not charged under).
func (c composition) checkCurve(id, accountant string, format int, orders, rd []float64, delta, mu float64) error {
	switch {
	case accountant == Accountant && format >= 1 && format <= CurveFormat:
		if mu != 0 {
			return fmt.Errorf("curve %s: an RDP curve (%s) with a gaussian mu %v", id, accountant, mu)
		}
	case accountant == AccountantGaussian && format >= 2 && format <= CurveFormat:
	default:
		return fmt.Errorf("curve %s: accountant %q format %d, this server knows %q format 1..%d and %q format 2..%d: it was written by a newer nvdp", id, accountant, format, Accountant, CurveFormat, AccountantGaussian, CurveFormat)
	}
	switch {
	case !slices.Equal(orders, c.orders) || len(rd) != len(c.orders):
		return fmt.Errorf("curve %s: orders differ from the ledger's", id)
	case delta != c.delta:
		return fmt.Errorf("curve %s: delta %g differs from the ledger's %g", id, delta, c.delta)
	}
	if accountant == AccountantGaussian {
		if err := checkGaussian(orders, rd, mu); err != nil {
			return fmt.Errorf("curve %s: %w", id, err)
		}
	}
	if want := curveIDOf(orders, rd, mu); want != id {
		return fmt.Errorf("curve %s: its orders and bounds hash to %s", id, want)
	}
	return nil
}
