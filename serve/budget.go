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

// Accountant names the composition a curve is charged under, stored with
// every curve (PostgreSQL: curves.accountant; the file: the curve record's
// "accountant", absent in files of before it): RDP curves of one order grid
// summed per order (releases x bound), converted to epsilon at the ledger's
// delta by the minimum over orders (privacy.BestEpsilon). CurveFormat is the
// version of a curve's record. A ledger refuses a curve of another
// accountant or a newer format instead of charging under arithmetic it does
// not know.
const (
	Accountant  = "rdp-sum"
	CurveFormat = 1
)

// composition is the order grid and delta that every curve of a ledger
// shares (set by the first curve registered).
type composition struct {
	orders []float64
	delta  float64
}

// spent is the composed RDP curve of an account that was charged counts
// releases by curve ID: at each order, the sum over curves of releases x
// bound, the curves taken in ID order so that the sum is the same float64
// every time. curve resolves an ID; its error (a curve the ledger does not
// hold or cannot read) is returned.
func (c composition) spent(counts map[string]uint64, curve func(id string) (*Curve, error)) ([]float64, error) {
	ids := make([]string, 0, len(counts))
	for id, n := range counts {
		if n > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	sum := make([]float64, len(c.orders))
	for _, id := range ids {
		cv, err := curve(id)
		if err != nil {
			return nil, err
		}
		if len(cv.RD) != len(sum) {
			return nil, fmt.Errorf("curve %s has %d orders, the ledger %d", id, len(cv.RD), len(sum))
		}
		n := float64(counts[id])
		for i, v := range cv.RD {
			sum[i] += n * v
		}
	}
	return sum, nil
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

// balance is the balance of account id, charged releases in all, whose
// composed curve is spent, against budget (epsilon at delta), for releases
// of curve.
func (c composition) balance(id string, releases uint64, spent []float64, curve *Curve, budget float64) Balance {
	eps, _ := c.epsilon(spent)
	return Balance{
		Account: id, Releases: releases, Delta: curve.Delta,
		SpentEpsilon: jsonfloat.Float(eps), BudgetEpsilon: jsonfloat.Float(budget),
		RemainingEpsilon:  jsonfloat.Float(math.Max(0, budget-eps)),
		RemainingReleases: jsonfloat.Float(c.remainingReleases(spent, curve.RD, budget)),
	}
}

// remainingReleases is the largest m >= 0 such that spent + m curve stays
// within budget (epsilon at the ledger's delta), +Inf when maxReleases do.
// Epsilon is non-decreasing in m (each order's bound grows, and so does
// their minimum), so the search is exponential then binary.
func (c composition) remainingReleases(spent, curve []float64, budget float64) float64 {
	fits := func(m float64) bool {
		rd := make([]float64, len(spent))
		for i := range rd {
			rd[i] = spent[i]
			if m > 0 {
				rd[i] += m * curve[i]
			}
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
		SpentEpsilon: 0, SpentOrder: jsonfloat.Float(math.NaN())}
	for _, n := range counts {
		a.Releases += n
	}
	if a.Delta > 0 {
		spent, err := c.spent(counts, curve)
		if err != nil {
			return Account{}, fmt.Errorf("account %q: %w", id, err)
		}
		eps, order := c.epsilon(spent)
		a.SpentEpsilon, a.SpentOrder = jsonfloat.Float(eps), jsonfloat.Float(order)
	}
	return a, nil
}

// checkCurve checks a curve read from a ledger against the ledger's grid:
// its accountant and format are known, its orders and delta are the
// ledger's, and its ID is the hash of its orders and bounds (so that a
// changed bound is found, not charged under).
func (c composition) checkCurve(id, accountant string, format int, orders, rd []float64, delta float64) error {
	switch {
	case accountant != Accountant || format < 1 || format > CurveFormat:
		return fmt.Errorf("curve %s: accountant %q format %d, this server knows %q format 1..%d: it was written by a newer nvdp", id, accountant, format, Accountant, CurveFormat)
	case !slices.Equal(orders, c.orders) || len(rd) != len(c.orders):
		return fmt.Errorf("curve %s: orders differ from the ledger's", id)
	case delta != c.delta:
		return fmt.Errorf("curve %s: delta %g differs from the ledger's %g", id, delta, c.delta)
	case curveID(orders, rd) != id:
		return fmt.Errorf("curve %s: its orders and bounds hash to %s", id, curveID(orders, rd))
	}
	return nil
}
