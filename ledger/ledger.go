// Package ledger is the privacy ledger of the release service apart from
// its implementations, as database/sql/driver is apart from the drivers:
// the interface a server charges (Ledger), the balance every implementation
// computes from counts per curve (Grid: one refusal rule, composition by
// privacy.Composition), the group commit (Batcher), and the embedded
// implementation, a bbolt file (File) with its backups and restores.
// PostgreSQL's is package ledger/pgledger. docs/serving.md, "The ledger".
package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
)

// Ledger is what a server charges: the durable record, per account named by
// a key ID, of the releases charged under each model's certified RDP curve.
// For a release that is exactly Gaussian it also records its mu, and an
// account of Gaussian releases only composes exactly.
//
// Two implementations share one balance, [Grid]:
//
//   - [*File], a bbolt file that one process opens with [OpenFile]: the
//     embedded default of a service on one machine;
//   - [*pgledger.Ledger], a PostgreSQL database that every replica of a
//     service shares, opened with [pgledger.Open]. Charges are transactions
//     under a row lock on the account, so replicas charging one key can never
//     together pass a budget that only one of them fits in.
//
// Both are created explicitly, by [CreateFile], [pgledger.Create] or `nvdp
// serve ledger init`, and refuse to open what they did not create. Every
// method is safe for concurrent use. docs/serving.md, "The ledger".
type Ledger interface {
	// Name identifies the ledger in logs and errors: the file's path, or the
	// database's host and name (never its password).
	Name() string
	// Format is the ledger's format: FileFormat for the file,
	// pgledger.Format for PostgreSQL (GET /v1/info).
	Format() string
	// RegisterCurve records g, the certified guarantee of one release of a
	// model described by model (JSON), and returns the curve charges are
	// made under (its Model the model's ID). The first curve fixes the
	// ledger's orders and delta; every later one must have the same.
	RegisterCurve(g *privacy.Guarantee, model any) (*Curve, error)
	// Balance is the committed balance of account against budget (epsilon
	// at the ledger's delta; +Inf: no limit) for releases of curve, without
	// charging.
	Balance(account string, curve *Curve, budget float64) (Balance, error)
	// Charge adds releases (>= 1) of curve to account if its composed curve
	// stays within budget, and returns the balance after it once the charge
	// is committed (durable). A charge that would exceed the budget is a
	// *BudgetError and changes nothing. An error that matches
	// ErrUnavailable means the ledger could not charge: nothing may
	// be released.
	Charge(account string, curve *Curve, releases int, budget float64) (Balance, error)
	// Err is nil while the ledger can charge, else why not (matching
	// ErrUnavailable): readiness.
	Err() error
	// Accounts returns every account, by ID.
	Accounts() ([]Account, error)
	// Info describes the ledger: its identity, format and size.
	Info() (Info, error)
	// History returns charges of the ledger's history, newest first
	// (HistoryQuery), with the curves and models they name.
	History(q HistoryQuery) (History, error)
	// Close stops taking charges, waits for those submitted and releases
	// the ledger's file or connections.
	Close() error
}

var _ Ledger = (*File)(nil)

// Curve is a model's certified RDP curve of one release, registered in a
// ledger, with its mu for a release that is exactly a Gaussian mechanism.
//
// ID is the hex of the first 16 bytes of the SHA-256 of its orders and
// bounds, and of its mu for a Gaussian curve, so that the same curve gets
// the same ID in every ledger. Model is the [ModelID] of the model
// description it was registered with, recorded with every charge; it is ""
// for a curve not registered by RegisterCurve.
type Curve struct {
	ID    string
	RD    []float64 // nats per release at each of the ledger's orders (+Inf allowed)
	Delta float64
	// Mu is sensitivity / sigma of one release of a Gaussian curve
	// (AccountantGaussian: RD is order Mu^2 / 2), 0 for an RDP curve.
	Mu    float64
	Model string
}

// ModelID returns the ID of a model's description, its JSON: the hex of the
// first 16 bytes of its SHA-256.
func ModelID(description []byte) string {
	h := sha256.Sum256(description)
	return hex.EncodeToString(h[:16])
}

// HistoryQuery selects charges of a ledger's history, newest first: those
// of Account, or of every account when it is "", with an ID below Before,
// or from the newest when Before is 0, at most Limit. Limit is at least 1.
type HistoryQuery struct {
	Account string
	Before  uint64
	Limit   int
}

// MaxHistoryLimit bounds HistoryQuery.Limit.
const MaxHistoryLimit = 10000

// Check validates q. Errors: an [*option.Error] naming limit.
func (q HistoryQuery) Check() error {
	if q.Limit < 1 || q.Limit > MaxHistoryLimit {
		return option.Errorf("limit", q.Limit, "want 1 to %d charges", MaxHistoryLimit)
	}
	return nil
}

// ChargeRecord is one charge of a ledger's history: when, to which account
// by key ID, how many releases, under which curve and model, and, in
// PostgreSQL, by which replica.
type ChargeRecord struct {
	ID       uint64    `json:"id"` // increasing in commit order (the file) or in ID order (PostgreSQL's sequence)
	Time     time.Time `json:"time"`
	Account  string    `json:"account"`
	Releases int       `json:"releases"`
	Curve    string    `json:"curve"`
	Model    string    `json:"model,omitempty"` // "" in a file's charges of before models were recorded
	Replica  string    `json:"replica,omitempty"`
}

// History is a page of charges with what they were charged under.
type History struct {
	Charges []ChargeRecord `json:"charges"`
	// Curves describes each curve the charges name: the guarantee of one
	// release under it.
	Curves map[string]CurveInfo `json:"curves"`
	// Models holds the description of each model the charges name.
	Models map[string]json.RawMessage `json:"models"`
	// Before is the HistoryQuery.Before of the next (older) page; 0: none.
	Before uint64 `json:"before,omitempty"`
}

// CurveInfo describes a registered curve: its accountant and format, the
// guarantee of one release under it, and its whole curve. The guarantee is
// epsilon at the ledger's delta: exact for a Gaussian curve, whose mu is
// GaussianMu and whose Order is NaN; else the RDP conversion at its best
// order.
type CurveInfo struct {
	Accountant string            `json:"accountant"`
	Format     int               `json:"format"`
	Epsilon    jsonfloat.Float   `json:"epsilon_per_release"`
	Order      jsonfloat.Float   `json:"order"`
	GaussianMu float64           `json:"gaussian_mu,omitempty"`
	Delta      float64           `json:"delta"`
	Orders     []float64         `json:"orders"`
	RD         []jsonfloat.Float `json:"rd"`
	Registered time.Time         `json:"registered"`
}

// CurveInfo describes the curve cv, registered under accountant in format,
// on the grid's orders and delta.
func (c Grid) CurveInfo(cv *Curve, accountant string, format int, registered time.Time) CurveInfo {
	eps, order := c.epsilonOfOne(cv)
	ci := CurveInfo{Accountant: accountant, Format: format, Epsilon: jsonfloat.Float(eps), Order: jsonfloat.Float(order),
		GaussianMu: cv.Mu, Delta: cv.Delta, Orders: c.Orders, Registered: registered}
	for _, v := range cv.RD {
		ci.RD = append(ci.RD, jsonfloat.Float(v))
	}
	return ci
}

// ErrBusy: a charge refused at once because too many were already waiting
// for the ledger, more than [pgledger.Options].MaxWaitingCharges; nothing
// was charged.
var ErrBusy = errors.New("too many charges waiting for the ledger")

// ErrNoBackup: a ledger that is not a file, such as PostgreSQL, is backed up
// by its database, not by the server's [serve.Server.Backup].
var ErrNoBackup = errors.New("this ledger is not backed up by the server")

// CheckGuarantee checks the guarantee of one release of a model, as a
// ledger registers it and a server serves it: one release, a non-empty
// curve of orders > 1 with bounds >= 0, +Inf allowed, and delta in (0, 1).
func CheckGuarantee(g *privacy.Guarantee) error {
	if g == nil {
		return fmt.Errorf("model has no certified guarantee")
	}
	if g.Releases != 1 {
		return fmt.Errorf("model guarantee covers %d releases, want the guarantee of one release", g.Releases)
	}
	if len(g.Curve) == 0 {
		return fmt.Errorf("model guarantee has an empty RDP curve")
	}
	if _, _, err := privacy.BestEpsilon(g.Curve, g.Delta); err != nil {
		return fmt.Errorf("model guarantee: %w", err)
	}
	return nil
}
