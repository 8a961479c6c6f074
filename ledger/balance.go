package ledger

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

// The budget arithmetic of every ledger, in one place: the bbolt file
// (File) and PostgreSQL (pgledger.Ledger) both compose and convert with it, so
// that the same counts give the same balance, bit for bit, in either.

// CurveFormat is the newest version of a curve's record: 1 holds an RDP
// curve, 2 adds the Gaussian mu. A curve is written in the oldest format
// that holds it. A ledger refuses a curve of another accountant or a newer
// format instead of charging under arithmetic it does not know.
//
// The accountant of a curve is stored with every curve under privacy's
// names, the ones a certificate and a balance carry. PostgreSQL stores it
// in curves.accountant and curves.gaussian_mu. The file stores it in the
// curve record's "accountant" and "gaussian_mu", which files written before
// them lack. The accountants are:
//
//   - [privacy.AccountantRDP], "rdp": an RDP curve, composed by summing the
//     curves per order, releases times bound, and converting the sum to
//     epsilon at the ledger's delta by the minimum over orders;
//   - [privacy.AccountantGaussian], "analytic-gaussian": the curve of a
//     release that is exactly a Gaussian mechanism, whose [privacy.Guarantee]
//     has that Accountant. It is stored with its mu of one release,
//     [Curve.Mu], beside its RDP curve, order mu^2 / 2.
//
// The composition itself is privacy's [privacy.Composition]: a ledger
// stores counts per curve, and the accountant turns them into epsilon.
// An account composes exactly while every curve it was charged under is
// Gaussian, else by the RDP sum; docs/serving.md, "Exact composition of
// Gaussian releases".
//
// Ledgers written before the names were one set stored "rdp-sum" and
// "gaussian-mu", as legacyAccountant reads them. A ledger opened for
// charging rewrites them with migrateAccountants, as schema version 3 of
// PostgreSQL does, and every ledger reads them as privacy's.
const CurveFormat = 2

// legacyAccountant maps the accountant names ledgers stored before they
// were privacy's to privacy's.
var legacyAccountant = map[string]string{
	"rdp-sum":     privacy.AccountantRDP,
	"gaussian-mu": privacy.AccountantGaussian,
}

// accountantName is the accountant stored as name, in privacy's names (a
// legacy name translated; "" with format 0, a record of before accountants,
// is an RDP curve of format 1).
func accountantName(name string, format int) (string, int) {
	if name == "" && format == 0 {
		return privacy.AccountantRDP, 1
	}
	if n, ok := legacyAccountant[name]; ok {
		return n, format
	}
	return name, format
}

// gaussianIDTag is the text a Gaussian curve's ID hashes after its bounds
// (gaussianCurveID): the accountant's name when the ID was defined, frozen,
// since every stored Gaussian curve's ID depends on it.
const gaussianIDTag = "gaussian-mu"

// gaussianRDPTolerance bounds the relative difference between a Gaussian
// curve's RDP bounds and order mu^2 / 2 (privacy certifies them within
// 1e-12): beyond it the curve's mu and bounds disagree, and the curve is
// refused.
const gaussianRDPTolerance = 1e-6

// Grid is the order grid and delta that every curve of a ledger shares,
// set by the first curve registered.
type Grid struct {
	Orders []float64
	Delta  float64
	// Memo, when not nil, holds the balances computed lately, so that
	// the same account, curve and budget are not composed again (nil:
	// every balance is computed).
	Memo *Memo
}

// memoSize is how many balances a Memo holds: enough for the balances a
// charge and the requests waiting for it ask for (below).
const memoSize = 256

// Memo holds the last memoSize balances a ledger computed, by their
// inputs. A charge asks for three balances of the same account: the
// server's check before its forward pass, the balance before the charge
// and the one after it. The first two are mostly the balance after the
// account's last charge, so they are read from the memo rather than
// composed again by the accountant: a request's three balances took 115
// us with an infinite budget and 1.6 ms with a budget a million releases
// away, 40 us and 0.54 ms with a memo (BenchmarkChargeMemo).
//
// A balance is a function of its inputs alone, so a memo's answer is the
// same, bit for bit, as the accountant's (TestMemoSameBalances). A Memo is
// safe for concurrent use; its zero value is empty. Use one memo per
// ledger: the key holds the grid's delta and number of orders, not the
// orders, which a ledger never changes once set.
type Memo struct {
	mu   sync.Mutex
	bal  map[string]Balance
	keys [memoSize]string // ring of the keys held, the oldest at next
	next int
}

// get returns the balance held for key.
func (m *Memo) get(key string) (Balance, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.bal[key]
	return b, ok
}

// put holds b for key, in place of the oldest balance when full.
func (m *Memo) put(key string, b Balance) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bal == nil {
		m.bal = make(map[string]Balance, memoSize)
	}
	if _, ok := m.bal[key]; ok {
		return
	}
	delete(m.bal, m.keys[m.next])
	m.bal[key], m.keys[m.next] = b, key
	m.next = (m.next + 1) % memoSize
}

// memoKey is the key of the balance of the account s against budget for
// curve: the grid's delta and size, the account's counts by curve ID, the
// curve's ID and delta, and the budget. A curve is known by its ID, the
// hash of its orders, bounds and mu (NewCurve), which a ledger checks for
// every curve it holds (CheckCurve).
func (c Grid) memoKey(s charges, curve *Curve, budget float64) string {
	b := make([]byte, 0, 32+len(curve.ID)+len(s.ids)*(len(curve.ID)+9))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.Delta))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(c.Orders)))
	for i, id := range s.ids {
		b = append(append(b, id...), 0)
		b = binary.LittleEndian.AppendUint64(b, s.counts[i].Releases)
	}
	b = append(append(b, curve.ID...), 0)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(curve.Delta))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(budget))
	return string(b)
}

// NewCurve returns the curve g certifies for one release, as a ledger
// registers it, with its orders, accountant and format. Model is left unset.
//
// The curve is a Gaussian curve when g's epsilon is exact
// ([privacy.AccountantGaussian]) with a mu > 0: its mu of one release is
// g.GaussianMu / sqrt(g.Releases), beside its RDP curve. Else it is an RDP
// curve.
//
// Errors: a Gaussian guarantee whose mu and curve disagree, as checkGaussian
// finds.
func NewCurve(g *privacy.Guarantee) (c *Curve, orders []float64, accountant string, format int, err error) {
	orders = make([]float64, len(g.Curve))
	rd := make([]float64, len(g.Curve))
	for i, p := range g.Curve {
		orders[i], rd[i] = p.Order, float64(p.RD)
	}
	c = &Curve{RD: rd, Delta: g.Delta}
	accountant, format = privacy.AccountantRDP, 1
	if mu := float64(g.GaussianMu); g.Accountant == privacy.AccountantGaussian && mu > 0 && g.Releases >= 1 {
		c.Mu = mu / math.Sqrt(float64(g.Releases))
		if err := checkGaussian(orders, rd, c.Mu); err != nil {
			return nil, nil, "", 0, fmt.Errorf("model guarantee: %w", err)
		}
		accountant, format = privacy.AccountantGaussian, CurveFormat
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

// privacy is the accountant of the Grid (privacy.Composition).
func (c Grid) privacy() privacy.Composition {
	return privacy.Composition{Orders: c.Orders, Delta: c.Delta}
}

// mechanism is a curve as the accountant counts it.
func mechanism(cv *Curve) privacy.Mechanism { return privacy.Mechanism{RD: cv.RD, Mu: cv.Mu} }

// charges is an account's counts as the accountant takes them: the curves
// charged (count > 0) in ID order, so that the sums are the same float64
// every time, and the releases in all.
type charges struct {
	ids      []string
	counts   []privacy.Count
	releases uint64
}

// charges reads the account charged counts releases by curve ID; curve
// resolves an ID, and its error (a curve the ledger does not hold or cannot
// read) is returned.
func (c Grid) charges(counts map[string]uint64, curve func(id string) (*Curve, error)) (charges, error) {
	var s charges
	for id, n := range counts {
		s.releases += n
		if n > 0 {
			s.ids = append(s.ids, id)
		}
	}
	slices.Sort(s.ids)
	for _, id := range s.ids {
		cv, err := curve(id)
		if err != nil {
			return charges{}, err
		}
		if len(cv.RD) != len(c.Orders) {
			return charges{}, fmt.Errorf("curve %s has %d orders, the ledger %d", id, len(cv.RD), len(c.Orders))
		}
		s.counts = append(s.counts, privacy.Count{Mechanism: mechanism(cv), Releases: counts[id]})
	}
	return s, nil
}

// spent is the guarantee of the account s at the ledger's delta
// (privacy.Composition.Epsilon). Curves were checked when registered or
// read, so a failure is a programmer error.
func (c Grid) spent(s charges) privacy.Spent {
	sp, err := c.privacy().Epsilon(s.counts)
	if err != nil {
		panic(fmt.Sprintf("ledger: composed curves: %v", err))
	}
	return sp
}

// remainingReleases is how many more releases of curve the account s
// affords within budget (privacy.Composition.RemainingReleases: +Inf
// beyond privacy.MaxReleases).
func (c Grid) remainingReleases(s charges, curve *Curve, budget float64) float64 {
	counts := s.counts
	i, found := slices.BinarySearch(s.ids, curve.ID)
	if !found {
		counts = slices.Insert(slices.Clone(counts), i, privacy.Count{Mechanism: mechanism(curve)})
	}
	m, err := c.privacy().RemainingReleases(counts, i, budget)
	if err != nil {
		panic(fmt.Sprintf("ledger: composed curves: %v", err))
	}
	return m
}

// Balance returns the balance of account id against budget, epsilon at
// delta, for releases of curve. counts holds the releases charged by curve
// ID, resolved by lookup. Its accountant is the one of its spent epsilon; for an
// account with nothing charged, the one its first release of curve would be
// composed by.
func (c Grid) Balance(id string, counts map[string]uint64, lookup func(string) (*Curve, error), curve *Curve, budget float64) (Balance, error) {
	s, err := c.charges(counts, lookup)
	if err != nil {
		return Balance{}, err
	}
	if c.Memo == nil {
		return c.balance(id, s, curve, budget), nil
	}
	key := c.memoKey(s, curve, budget)
	if b, ok := c.Memo.get(key); ok {
		b.Account = id
		return b, nil
	}
	b := c.balance(id, s, curve, budget)
	c.Memo.put(key, b)
	return b, nil
}

// balance is Balance of the account s, composed by the accountant.
func (c Grid) balance(id string, s charges, curve *Curve, budget float64) Balance {
	sp := c.spent(s)
	if len(s.ids) == 0 {
		sp.Accountant = privacy.AccountantRDP
		if curve.Mu > 0 {
			sp.Accountant = privacy.AccountantGaussian
		}
	}
	return Balance{
		Account: id, Releases: s.releases, Delta: curve.Delta, Accountant: sp.Accountant,
		SpentEpsilon: jsonfloat.Float(sp.Epsilon), BudgetEpsilon: jsonfloat.Float(budget),
		RemainingEpsilon:  jsonfloat.Float(math.Max(0, budget-sp.Epsilon)),
		RemainingReleases: jsonfloat.Float(c.remainingReleases(s, curve, budget)),
	}
}

// Charge is the one rule of a charge, for every ledger: releases more of
// curve fit the account id when the balance's RemainingReleases holds them,
// as [Balance.Check] decides. counts holds the account's releases charged by
// curve ID, resolved by lookup. When they fit they are added to counts and
// the balance after them returned; else counts is unchanged and the error is a
// [*BudgetError] with the balance.
func (c Grid) Charge(id string, counts map[string]uint64, lookup func(string) (*Curve, error), curve *Curve, releases int, budget float64) (Balance, error) {
	bal, err := c.Balance(id, counts, lookup, curve, budget)
	if err != nil {
		return Balance{}, err
	}
	if err := bal.Check(releases); err != nil {
		return bal, err
	}
	counts[curve.ID] += uint64(releases)
	return c.Balance(id, counts, lookup, curve, budget)
}

// Check returns a [*BudgetError] when releases more releases of the
// balance's curve do not fit its budget, by RemainingReleases, else nil.
func (b Balance) Check(releases int) error {
	if float64(b.RemainingReleases) < float64(releases) {
		return &BudgetError{Requested: releases, Balance: b}
	}
	return nil
}

// Account returns the [Account] view of account id: counts holds its
// releases by curve ID, resolved by curve, charged over requests requests,
// the last at updated.
func (c Grid) Account(id string, counts map[string]uint64, requests uint64, updated time.Time, curve func(string) (*Curve, error)) (Account, error) {
	a := Account{ID: id, ReleasesByCurve: counts, Requests: requests, Delta: c.Delta, Updated: updated,
		SpentEpsilon: 0, SpentOrder: jsonfloat.Float(math.NaN()), Accountant: privacy.AccountantRDP}
	for _, n := range counts {
		a.Releases += n
	}
	if a.Delta > 0 {
		s, err := c.charges(counts, curve)
		if err != nil {
			return Account{}, fmt.Errorf("account %q: %w", id, err)
		}
		sp := c.spent(s)
		a.SpentEpsilon, a.SpentOrder, a.Accountant = jsonfloat.Float(sp.Epsilon), jsonfloat.Float(sp.Order), sp.Accountant
	}
	return a, nil
}

// epsilonOfOne is the guarantee of one release of cv at the ledger's delta:
// exact for a Gaussian curve (privacy.GaussianMechanismEpsilon, order NaN),
// else the RDP conversion and its order.
func (c Grid) epsilonOfOne(cv *Curve) (eps, order float64) {
	if cv.Mu > 0 {
		eps, err := privacy.GaussianMechanismEpsilon(cv.Mu, c.Delta)
		if err != nil {
			panic(fmt.Sprintf("ledger: gaussian curve: %v", err))
		}
		return eps, math.NaN()
	}
	sp, err := c.privacy().Epsilon([]privacy.Count{{Mechanism: privacy.Mechanism{RD: cv.RD}, Releases: 1}})
	if err != nil {
		panic(fmt.Sprintf("ledger: curve: %v", err))
	}
	return sp.Epsilon, sp.Order
}

// CheckCurve checks a curve read from a ledger against the ledger's grid.
// Its accountant and format must be known, its orders and delta the
// ledger's, and a Gaussian curve's mu must agree with its bounds, as
// checkGaussian finds, while an RDP curve has none. Its ID must be the hash
// of its orders and bounds, and of its mu for a Gaussian curve, so that a
// changed bound or mu is found, not charged under.
func (c Grid) CheckCurve(id, accountant string, format int, orders, rd []float64, delta, mu float64) error {
	accountant, format = accountantName(accountant, format)
	switch {
	case accountant == privacy.AccountantRDP && format >= 1 && format <= CurveFormat:
		if mu != 0 {
			return fmt.Errorf("curve %s: an RDP curve (%s) with a gaussian mu %v", id, accountant, mu)
		}
	case accountant == privacy.AccountantGaussian && format >= 2 && format <= CurveFormat:
	default:
		return fmt.Errorf("curve %s: accountant %q format %d, this server knows %q format 1..%d and %q format 2..%d: it was written by a newer nvdp", id, accountant, format, privacy.AccountantRDP, CurveFormat, privacy.AccountantGaussian, CurveFormat)
	}
	switch {
	case !slices.Equal(orders, c.Orders) || len(rd) != len(c.Orders):
		return fmt.Errorf("curve %s: orders differ from the ledger's", id)
	case delta != c.Delta:
		return fmt.Errorf("curve %s: delta %g differs from the ledger's %g", id, delta, c.Delta)
	}
	if accountant == privacy.AccountantGaussian {
		if err := checkGaussian(orders, rd, mu); err != nil {
			return fmt.Errorf("curve %s: %w", id, err)
		}
	}
	if want := curveIDOf(orders, rd, mu); want != id {
		return fmt.Errorf("curve %s: its orders and bounds hash to %s", id, want)
	}
	return nil
}
