package serve

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
	bolt "go.etcd.io/bbolt"
)

// LedgerFormat is the format of a ledger file, stored in its meta bucket.
const LedgerFormat = "nvdp-ledger/1"

// Buckets and meta keys of a ledger file (docs/serving.md, "The ledger").
var (
	bucketMeta     = []byte("meta")
	bucketCurves   = []byte("curves")
	bucketAccounts = []byte("accounts")
	metaFormat     = []byte("format")
	metaOrders     = []byte("orders")
	metaDelta      = []byte("delta")
)

// maxCommitBatch bounds the charges committed in one transaction.
const maxCommitBatch = 256

// lockTimeout is how long OpenLedger waits for another process's lock.
const lockTimeout = time.Second

// Ledger is the durable privacy ledger of a server: per account (a key ID),
// the releases charged to it under each model's certified RDP curve. The
// spent privacy of an account is the sum over its releases of their curves
// at each Renyi order (RDP composes additively), converted to epsilon at the
// ledger's delta with privacy.BestEpsilon.
//
// It is a bbolt file (go.etcd.io/bbolt: pure Go, one file, copy-on-write
// B+tree whose every committed transaction is fsync'd; a crash leaves the
// last committed state). Charge returns only after its transaction is
// committed, so a server that writes a response after Charge never lets a
// release out that the file does not hold. Concurrent charges are grouped
// into one transaction (group commit: while one commit is on the disk the
// next charges queue), each still checked against its budget in order.
//
// A Ledger is safe for concurrent use. One process at a time opens a file
// (bbolt's lock).
type Ledger struct {
	path string
	db   *bolt.DB

	// mu guards orders, delta and curves; it is never held across I/O.
	mu     sync.RWMutex
	orders []float64
	delta  float64
	curves map[string]*Curve

	regMu sync.Mutex // serialises RegisterCurve

	// sendMu guards closed and is held (read) while a charge is sent to
	// reqs, so that Close closes reqs only after the last send.
	sendMu sync.RWMutex
	closed bool
	reqs   chan *chargeReq
	done   chan struct{}
}

// Curve is a model's certified RDP curve of one release, registered in a
// ledger: ID is the hex of the first 16 bytes of the SHA-256 of its orders
// and bounds (the same curve gets the same ID in every ledger).
type Curve struct {
	ID    string
	RD    []float64 // nats per release at each of the ledger's orders (+Inf allowed)
	Delta float64
}

// curveRecord is a curve's value in the curves bucket.
type curveRecord struct {
	Orders     []float64         `json:"orders"`
	RD         []jsonfloat.Float `json:"rd"`
	Delta      float64           `json:"delta"`
	Model      json.RawMessage   `json:"model,omitempty"`
	Registered time.Time         `json:"registered"`
}

// accountRecord is an account's value in the accounts bucket.
type accountRecord struct {
	// Releases counts the releases charged under each curve (by ID).
	Releases map[string]uint64 `json:"releases"`
	Requests uint64            `json:"requests"`
	Updated  time.Time         `json:"updated"`
}

// Account is the state of one account in a ledger.
type Account struct {
	ID string `json:"account"`
	// Releases is the count of releases charged, in all and per curve ID.
	Releases        uint64            `json:"releases"`
	ReleasesByCurve map[string]uint64 `json:"releases_by_curve"`
	Requests        uint64            `json:"requests"`
	// SpentEpsilon is the composed curve's epsilon at Delta, SpentOrder the
	// order that gives it (NaN when nothing is spent or all is infinite).
	SpentEpsilon jsonfloat.Float `json:"spent_epsilon"`
	SpentOrder   jsonfloat.Float `json:"spent_order"`
	Delta        float64         `json:"delta"`
	Updated      time.Time       `json:"updated"`
}

// Balance is an account's budget after (or, refused, instead of) a charge.
type Balance struct {
	Account  string `json:"account"`
	Releases uint64 `json:"releases"` // releases charged to the account so far
	// SpentEpsilon is the account's composed curve at Delta.
	SpentEpsilon  jsonfloat.Float `json:"spent_epsilon"`
	BudgetEpsilon jsonfloat.Float `json:"budget_epsilon"`
	// RemainingEpsilon is BudgetEpsilon - SpentEpsilon, at least 0: a
	// summary only, epsilons do not add up (RemainingReleases is exact).
	RemainingEpsilon jsonfloat.Float `json:"remaining_epsilon"`
	// RemainingReleases is how many more releases of the model's curve the
	// budget allows (+Inf: no limit).
	RemainingReleases jsonfloat.Float `json:"remaining_releases"`
	Delta             float64         `json:"delta"`
}

// BudgetError is a charge refused because the account's composed curve
// would exceed its budget; nothing was charged.
type BudgetError struct {
	Requested int // releases asked for
	Balance       // the account's balance, unchanged
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("account %q: %d releases would exceed the budget of epsilon %v at delta %g (spent %v; %v releases remain)",
		e.Account, e.Requested, float64(e.BudgetEpsilon), e.Delta, float64(e.SpentEpsilon), float64(e.RemainingReleases))
}

// ErrLedgerClosed is the error of a charge on a closed ledger.
var ErrLedgerClosed = errors.New("ledger closed")

// OpenLedger opens the ledger file at path, creating it (mode 0600) when
// missing. Errors: the file is open in another process (after 1 s), is not
// a bbolt file, or is a bbolt file of another format.
func OpenLedger(path string) (*Ledger, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("ledger %s: open in another process (its lock held for %v)", path, lockTimeout)
		}
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	l := &Ledger{path: path, db: db, curves: map[string]*Curve{}, reqs: make(chan *chargeReq, maxCommitBatch), done: make(chan struct{})}
	if err := db.Update(l.init); err != nil {
		db.Close()
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	go l.commit()
	return l, nil
}

// init creates the buckets of a new ledger and reads the meta and curves of
// an existing one.
func (l *Ledger) init(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		if tx.Bucket(bucketCurves) != nil || tx.Bucket(bucketAccounts) != nil {
			return fmt.Errorf("not an nvdp ledger (buckets without %q)", bucketMeta)
		}
		var err error
		if meta, err = tx.CreateBucket(bucketMeta); err != nil {
			return err
		}
		if err := meta.Put(metaFormat, []byte(LedgerFormat)); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketCurves); err != nil {
			return err
		}
		_, err = tx.CreateBucket(bucketAccounts)
		return err
	}
	if f := string(meta.Get(metaFormat)); f != LedgerFormat {
		return fmt.Errorf("format %q, want %q", f, LedgerFormat)
	}
	if tx.Bucket(bucketCurves) == nil || tx.Bucket(bucketAccounts) == nil {
		return fmt.Errorf("bucket %q or %q missing", bucketCurves, bucketAccounts)
	}
	if o := meta.Get(metaOrders); o != nil {
		if err := json.Unmarshal(o, &l.orders); err != nil {
			return fmt.Errorf("meta orders: %w", err)
		}
		if err := json.Unmarshal(meta.Get(metaDelta), &l.delta); err != nil {
			return fmt.Errorf("meta delta: %w", err)
		}
	}
	return tx.Bucket(bucketCurves).ForEach(func(k, v []byte) error {
		var rec curveRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("curve %s: %w", k, err)
		}
		if !slices.Equal(rec.Orders, l.orders) || len(rec.RD) != len(l.orders) {
			return fmt.Errorf("curve %s: orders differ from the ledger's", k)
		}
		c := &Curve{ID: string(k), Delta: rec.Delta, RD: make([]float64, len(rec.RD))}
		for i, v := range rec.RD {
			c.RD[i] = float64(v)
		}
		l.curves[c.ID] = c
		return nil
	})
}

// Path is the ledger's file.
func (l *Ledger) Path() string { return l.path }

// Orders are the Renyi orders of the ledger's curves (nil before the first
// RegisterCurve).
func (l *Ledger) Orders() []float64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.orders)
}

// Delta is the delta at which the ledger converts curves to epsilon (0
// before the first RegisterCurve).
func (l *Ledger) Delta() float64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.delta
}

// curveID is the ID of a curve (Curve).
func curveID(orders, rd []float64) string {
	h := sha256.New()
	var b [8]byte
	for i := range orders {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(orders[i]))
		h.Write(b[:])
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(rd[i]))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// RegisterCurve records g, the certified guarantee of one release of a
// model (described by model, stored as JSON with the curve), and returns the
// curve that charges are made under. The first curve fixes the ledger's
// orders and delta; every later one must have the same. Registering a curve
// again is a no-op. Errors: g is not the guarantee of one release, its
// orders or delta differ from the ledger's, the write fails.
func (l *Ledger) RegisterCurve(g *privacy.Guarantee, model any) (*Curve, error) {
	if err := checkGuarantee(g); err != nil {
		return nil, err
	}
	orders := make([]float64, len(g.Curve))
	rd := make([]float64, len(g.Curve))
	for i, p := range g.Curve {
		orders[i], rd[i] = p.Order, float64(p.RD)
	}
	l.regMu.Lock()
	defer l.regMu.Unlock()
	l.mu.RLock()
	first, lorders, ldelta := l.orders == nil, l.orders, l.delta
	c := &Curve{ID: curveID(orders, rd), RD: rd, Delta: g.Delta}
	_, known := l.curves[c.ID]
	l.mu.RUnlock()
	if !first && !slices.Equal(orders, lorders) {
		return nil, fmt.Errorf("ledger %s: the model's curve has %d orders %v..%v, the ledger's %d orders %v..%v: one ledger composes curves over one order grid",
			l.path, len(orders), orders[0], orders[len(orders)-1], len(lorders), lorders[0], lorders[len(lorders)-1])
	}
	if !first && g.Delta != ldelta {
		return nil, fmt.Errorf("ledger %s: the model's delta %g differs from the ledger's %g", l.path, g.Delta, ldelta)
	}
	if known {
		return c, nil
	}
	m, err := json.Marshal(model)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: model description: %w", l.path, err)
	}
	rec := curveRecord{Orders: orders, Delta: g.Delta, Model: m, Registered: time.Now().UTC()}
	for _, v := range rd {
		rec.RD = append(rec.RD, jsonfloat.Float(v))
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	err = l.db.Update(func(tx *bolt.Tx) error {
		if first {
			o, _ := json.Marshal(orders)
			d, _ := json.Marshal(g.Delta)
			meta := tx.Bucket(bucketMeta)
			if err := meta.Put(metaOrders, o); err != nil {
				return err
			}
			if err := meta.Put(metaDelta, d); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketCurves).Put([]byte(c.ID), val)
	})
	if err != nil {
		return nil, fmt.Errorf("ledger %s: register curve: %w", l.path, err)
	}
	l.mu.Lock()
	if first {
		l.orders, l.delta = orders, g.Delta
	}
	l.curves[c.ID] = c
	l.mu.Unlock()
	return c, nil
}

// chargeReq is one charge waiting for the committer.
type chargeReq struct {
	account  string
	curve    *Curve
	releases int
	budget   float64
	bal      Balance
	err      error
	done     chan struct{}
}

// Charge adds releases (>= 1) of curve to account if its composed curve
// stays within budget (epsilon at the ledger's delta; +Inf: no limit), and
// returns the balance after the charge once the charge is committed to
// disk (fsync'd). A charge that would exceed the budget is a *BudgetError
// with the unchanged balance, and nothing is charged. Charge does not
// return before its transaction is settled, so that the caller always
// knows whether the charge holds. Errors: as above, ErrLedgerClosed, the
// commit fails (nothing charged).
func (l *Ledger) Charge(account string, curve *Curve, releases int, budget float64) (Balance, error) {
	if releases < 1 {
		panic(fmt.Sprintf("serve: Charge of %d releases", releases))
	}
	r := &chargeReq{account: account, curve: curve, releases: releases, budget: budget, done: make(chan struct{})}
	l.sendMu.RLock()
	if l.closed {
		l.sendMu.RUnlock()
		return Balance{}, ErrLedgerClosed
	}
	l.reqs <- r
	l.sendMu.RUnlock()
	<-r.done
	return r.bal, r.err
}

// commit is the committer goroutine: it takes the charges waiting, applies
// them in order in one transaction and answers each once it is committed.
func (l *Ledger) commit() {
	defer close(l.done)
	for first := range l.reqs {
		batch := []*chargeReq{first}
	drain:
		for len(batch) < maxCommitBatch {
			select {
			case r, ok := <-l.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		now := time.Now().UTC()
		err := l.db.Update(func(tx *bolt.Tx) error {
			for _, r := range batch {
				r.bal, r.err = l.apply(tx, r, now)
			}
			return nil
		})
		for _, r := range batch {
			if err != nil {
				r.bal, r.err = Balance{}, fmt.Errorf("ledger %s: commit: %w", l.path, err)
			}
			close(r.done)
		}
	}
}

// apply charges r inside tx, or refuses it.
func (l *Ledger) apply(tx *bolt.Tx, r *chargeReq, now time.Time) (Balance, error) {
	b := tx.Bucket(bucketAccounts)
	rec, err := decodeAccount(r.account, b.Get([]byte(r.account)))
	if err != nil {
		return Balance{}, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	spent := l.spent(rec)
	bal := l.balance(r.account, rec, spent, r.curve, r.budget)
	if float64(bal.RemainingReleases) < float64(r.releases) {
		return bal, &BudgetError{Requested: r.releases, Balance: bal}
	}
	rec.Releases[r.curve.ID] += uint64(r.releases)
	rec.Requests++
	rec.Updated = now
	val, err := json.Marshal(rec)
	if err != nil {
		return Balance{}, err
	}
	if err := b.Put([]byte(r.account), val); err != nil {
		return Balance{}, fmt.Errorf("ledger %s: account %q: %w", l.path, r.account, err)
	}
	return l.balance(r.account, rec, l.spent(rec), r.curve, r.budget), nil
}

// decodeAccount reads an account's record (nil: a new account).
func decodeAccount(id string, v []byte) (*accountRecord, error) {
	rec := &accountRecord{}
	if v != nil {
		if err := json.Unmarshal(v, rec); err != nil {
			return nil, fmt.Errorf("account %q: %w", id, err)
		}
	}
	if rec.Releases == nil {
		rec.Releases = map[string]uint64{}
	}
	return rec, nil
}

// spent is the composed RDP curve of an account: at each order, the sum
// over curves of releases x bound (curves in ID order, so that the sum is
// the same float64 every time). A curve the ledger does not hold panics:
// init loaded every curve and accounts are charged only under registered
// ones.
func (l *Ledger) spent(rec *accountRecord) []float64 {
	ids := make([]string, 0, len(rec.Releases))
	for id, n := range rec.Releases {
		if n > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	l.mu.RLock()
	defer l.mu.RUnlock()
	sum := make([]float64, len(l.orders))
	for _, id := range ids {
		c, ok := l.curves[id]
		if !ok {
			panic(fmt.Sprintf("serve: ledger %s: account charged under unknown curve %s", l.path, id))
		}
		n := float64(rec.Releases[id])
		for i, v := range c.RD {
			sum[i] += n * v
		}
	}
	return sum
}

// epsilon converts a composed curve to epsilon at the ledger's delta.
func (l *Ledger) epsilon(rd []float64) (eps, order float64) {
	l.mu.RLock()
	orders, delta := l.orders, l.delta
	l.mu.RUnlock()
	curve := make([]privacy.OrderRD, len(rd))
	for i, v := range rd {
		curve[i] = privacy.OrderRD{Order: orders[i], RD: jsonfloat.Float(v)}
	}
	eps, order, err := privacy.BestEpsilon(curve, delta)
	if err != nil {
		panic(fmt.Sprintf("serve: ledger %s: composed curve: %v", l.path, err)) // curves were checked when registered
	}
	return eps, order
}

// maxReleases is where remainingReleases stops counting: more releases than
// this fit only when the curve is 0 (or the budget +Inf), which is reported
// as +Inf.
const maxReleases = 1 << 52

// balance is the balance of an account whose composed curve is spent,
// against budget, for releases of curve.
func (l *Ledger) balance(id string, rec *accountRecord, spent []float64, curve *Curve, budget float64) Balance {
	eps, _ := l.epsilon(spent)
	var n uint64
	for _, v := range rec.Releases {
		n += v
	}
	return Balance{
		Account: id, Releases: n, Delta: curve.Delta,
		SpentEpsilon: jsonfloat.Float(eps), BudgetEpsilon: jsonfloat.Float(budget),
		RemainingEpsilon:  jsonfloat.Float(math.Max(0, budget-eps)),
		RemainingReleases: jsonfloat.Float(l.remainingReleases(spent, curve.RD, budget)),
	}
}

// remainingReleases is the largest m >= 0 such that spent + m curve stays
// within budget (epsilon at the ledger's delta), +Inf when maxReleases do.
// Epsilon is non-decreasing in m (each order's bound grows, and so does
// their minimum), so the search is exponential then binary.
func (l *Ledger) remainingReleases(spent, curve []float64, budget float64) float64 {
	fits := func(m float64) bool {
		rd := make([]float64, len(spent))
		for i := range rd {
			rd[i] = spent[i]
			if m > 0 {
				rd[i] += m * curve[i]
			}
		}
		eps, _ := l.epsilon(rd)
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

// Balance returns the committed balance of account against budget for
// releases of curve, without charging (a charge may still be refused:
// charges of other requests may land first).
func (l *Ledger) Balance(account string, curve *Curve, budget float64) (Balance, error) {
	var bal Balance
	err := l.db.View(func(tx *bolt.Tx) error {
		rec, err := decodeAccount(account, tx.Bucket(bucketAccounts).Get([]byte(account)))
		if err != nil {
			return err
		}
		bal = l.balance(account, rec, l.spent(rec), curve, budget)
		return nil
	})
	if err != nil {
		return Balance{}, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	return bal, nil
}

// Accounts returns every account of the ledger, by ID.
func (l *Ledger) Accounts() ([]Account, error) {
	var out []Account
	err := l.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAccounts).ForEach(func(k, v []byte) error {
			rec, err := decodeAccount(string(k), v)
			if err != nil {
				return err
			}
			out = append(out, l.account(string(k), rec))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	return out, nil
}

// account is the Account view of a record.
func (l *Ledger) account(id string, rec *accountRecord) Account {
	a := Account{ID: id, ReleasesByCurve: rec.Releases, Requests: rec.Requests, Delta: l.Delta(), Updated: rec.Updated,
		SpentEpsilon: 0, SpentOrder: jsonfloat.Float(math.NaN())}
	for _, n := range rec.Releases {
		a.Releases += n
	}
	if a.Delta > 0 {
		eps, order := l.epsilon(l.spent(rec))
		a.SpentEpsilon, a.SpentOrder = jsonfloat.Float(eps), jsonfloat.Float(order)
	}
	return a
}

// Close stops taking charges, waits for those submitted to be settled and
// closes the file.
func (l *Ledger) Close() error {
	l.sendMu.Lock()
	if l.closed {
		l.sendMu.Unlock()
		return nil
	}
	l.closed = true
	close(l.reqs)
	l.sendMu.Unlock()
	<-l.done
	if err := l.db.Close(); err != nil {
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	return nil
}
