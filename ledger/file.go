package ledger

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/ledger/internal/boltcheck"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// FileFormat is the format of a ledger file, stored in its meta bucket.
const FileFormat = "nvdp-ledger/1"

// Buckets and meta keys of a ledger file (docs/serving.md, "The ledger").
var (
	bucketMeta     = []byte("meta")
	bucketCurves   = []byte("curves")
	bucketAccounts = []byte("accounts")
	// The models registered and every charge made, each absent in files of
	// before them (created when such a file is opened for charging).
	bucketModels  = []byte("models")
	bucketCharges = []byte("charges")
	metaFormat    = []byte("format")
	metaOrders    = []byte("orders")
	metaDelta     = []byte("delta")
	// The ledger's identity and history, each optional in files of before
	// they were introduced.
	metaLedgerID = []byte("ledger_id")
	metaCreated  = []byte("created")
	metaBackup   = []byte("backup")
	metaRestores = []byte("restores")
)

// lockTimeout is how long OpenFile waits for another process's lock.
const lockTimeout = time.Second

// File is the durable privacy ledger of a server: per account, named by a
// key ID, the releases charged to it under each model's certified RDP curve,
// and under its Gaussian mu for a release that is exactly a Gaussian
// mechanism.
//
// The spent privacy of an account is composed by its [Grid], which uses
// [privacy.Composition]. While every curve the account was charged under is
// Gaussian the composition is exact: the mus are composed and
// [privacy.GaussianMechanismEpsilon] converts them. Else RDP composes
// additively: the sum over its releases of their curves at each Renyi order
// is converted to epsilon at the ledger's delta with [privacy.BestEpsilon].
//
// A File is a bbolt file, go.etcd.io/bbolt: pure Go, one file, a
// copy-on-write B+tree whose every committed transaction is fsync'd, so that
// a crash leaves the last committed state. Charge returns only after its
// transaction is committed, so a server that writes a response after Charge
// never lets a release out that the file does not hold. Concurrent charges
// are grouped into one transaction by group commit: while one commit is on
// the disk the next charges queue, each still checked against its budget in
// order.
//
// A ledger is never created on the fly; [CreateFile] makes one. A missing,
// empty or corrupt file, or a backup not restored with [Restore], is an
// error at open, so that no loss can silently reset a budget. While it
// serves, a File checks before and after each commit that its path still
// names the file it holds. Once the file is removed, replaced or truncated,
// or a read of it faults, every charge fails with [ErrUnavailable];
// docs/serving.md, "The ledger".
//
// A File is safe for concurrent use. One process at a time opens a file for
// writing, under bbolt's lock; readers opened with [OpenFileReadOnly] share
// it.
type File struct {
	path     string
	readOnly bool
	id       string                // the ledger's ID (meta ledger_id)
	bf       *boltFile             // db and its file, to close both and tell whether path still names the file
	size     atomic.Int64          // bytes the last committed transaction needs: the file may not be shorter
	broken   atomic.Pointer[error] // the first failure while serving: every later charge fails with it

	// mu guards orders, delta and curves; it is never held across I/O.
	mu     sync.RWMutex
	orders []float64
	delta  float64
	curves map[string]*Curve
	memo   Memo // the balances computed lately (Grid.Memo)

	regMu sync.Mutex // serialises RegisterCurve

	batcher *Batcher // the group commit (nil: read-only)

	closeMu sync.Mutex // guards closed
	closed  bool
}

// curveRecord is a curve's value in the curves bucket.
type curveRecord struct {
	Orders     []float64         `json:"orders"`
	RD         []jsonfloat.Float `json:"rd"`
	Delta      float64           `json:"delta"`
	Model      json.RawMessage   `json:"model,omitempty"` // the description of the first model registered with it
	Registered time.Time         `json:"registered"`
	// Accountant and Format (privacy.AccountantRDP or
	// privacy.AccountantGaussian, 1 or CurveFormat) are absent in files of
	// before them: the one accountant there was, format 1. Files of before
	// the names were privacy's hold "rdp-sum" or "gaussian-mu"
	// (legacyAccountant), rewritten when the file is opened for charging. GaussianMu is a Gaussian curve's mu of one
	// release (format 2), absent for an RDP curve.
	Accountant string  `json:"accountant,omitempty"`
	Format     int     `json:"format,omitempty"`
	GaussianMu float64 `json:"gaussian_mu,omitempty"`
}

// modelRecord is a model's value in the models bucket (by ModelID).
type modelRecord struct {
	Description json.RawMessage `json:"description"`
	Curve       string          `json:"curve"`
	Registered  time.Time       `json:"registered"`
}

// chargeRecord is a charge's value in the charges bucket, whose keys are
// the bucket's sequence (8 bytes big-endian): commit order. Sum is its
// checksum as an account record's (accountSum), over its ID and JSON.
type chargeRecord struct {
	Time     time.Time `json:"at"`
	Account  string    `json:"account"`
	Releases int       `json:"releases"`
	Curve    string    `json:"curve"`
	Model    string    `json:"model,omitempty"`
	Sum      string    `json:"sum,omitempty"`
}

// accountRecord is an account's value in the accounts bucket.
type accountRecord struct {
	// Releases counts the releases charged under each curve (by ID).
	Releases map[string]uint64 `json:"releases"`
	Requests uint64            `json:"requests"`
	Updated  time.Time         `json:"updated"`
	// Sum is the record's checksum (accountSum), so that a changed byte in
	// a count is found, not charged against; records written before it
	// have none and get one at their next charge.
	Sum string `json:"sum,omitempty"`
}

// accountSum is the checksum of the record of account id: the hex CRC-32C
// of id, a 0 byte and the record's JSON with Sum empty.
func accountSum(id string, rec *accountRecord) string {
	c := *rec
	c.Sum = ""
	return recordSum(id, &c)
}

// chargeSum is the checksum of the charge record with key id (its 8 bytes),
// as accountSum's.
func chargeSum(id []byte, rec *chargeRecord) string {
	c := *rec
	c.Sum = ""
	return recordSum(string(id), &c)
}

// recordSum is the hex CRC-32C of id, a 0 byte and rec's JSON.
func recordSum(id string, rec any) string {
	b, err := json.Marshal(rec)
	if err != nil {
		panic(fmt.Sprintf("ledger: ledger record: %v", err)) // counts, strings and times always marshal
	}
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// Account is the state of one account in a ledger.
type Account struct {
	ID string `json:"account"`
	// Releases is the count of releases charged, in all and per curve ID.
	Releases        uint64            `json:"releases"`
	ReleasesByCurve map[string]uint64 `json:"releases_by_curve"`
	Requests        uint64            `json:"requests"`
	// SpentEpsilon is the account's composed epsilon at Delta, by
	// Accountant: privacy.AccountantGaussian (exact: every curve charged is
	// Gaussian) or privacy.AccountantRDP (the RDP sum converted; also for an
	// account with nothing charged). SpentOrder is the order that gives the
	// RDP conversion: NaN for an exact composition, when nothing is spent
	// or all is infinite.
	SpentEpsilon jsonfloat.Float `json:"spent_epsilon"`
	SpentOrder   jsonfloat.Float `json:"spent_order"`
	Accountant   string          `json:"accountant"`
	Delta        float64         `json:"delta"`
	Updated      time.Time       `json:"updated"`
}

// Balance is an account's budget after a charge, or instead of it when the
// charge is refused.
type Balance struct {
	Account  string `json:"account"`
	Releases uint64 `json:"releases"` // releases charged to the account so far
	// SpentEpsilon is the account's composed epsilon at Delta, by
	// Accountant: privacy.AccountantGaussian (exact: every curve charged is
	// Gaussian) or privacy.AccountantRDP (the RDP sum converted). For an
	// account with nothing charged, Accountant is the one its first release
	// of the balance's curve would be composed by.
	SpentEpsilon  jsonfloat.Float `json:"spent_epsilon"`
	Accountant    string          `json:"accountant"`
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

// Errors of opening and using a ledger (each wrapped with the file's path;
// match with errors.Is).
var (
	// ErrClosed is the error of a charge on a closed ledger.
	ErrClosed = errors.New("ledger closed")
	// ErrNoLedger: the file does not exist. It also matches fs.ErrNotExist.
	ErrNoLedger = errors.New("no ledger")
	// ErrEmpty: the file exists with 0 bytes, every charge lost.
	ErrEmpty = errors.New("ledger is empty")
	// ErrExists: CreateFile found a file at the path.
	ErrExists = errors.New("ledger exists")
	// ErrUnavailable: the file of a serving ledger was removed,
	// replaced or truncated, or could not be read; no charge succeeds any
	// more, and the server answers 503.
	ErrUnavailable = errors.New("ledger unavailable")
	// ErrReadOnly: a charge or a curve on a ledger opened with
	// OpenFileReadOnly.
	ErrReadOnly = errors.New("ledger opened read-only")
	// errLocked: another process holds the file's lock.
	errLocked = errors.New("open in another process")
)

// OpenFile opens the existing ledger file at path for charging: read and
// write, holding its exclusive lock. Before bbolt maps the file,
// checkLedgerFile checks it, and every record is read once.
//
// Errors: [ErrNoLedger] for a missing file, to be created with [CreateFile];
// [ErrEmpty]; [*CorruptError], to restore a backup; [*BackupFileError] for
// a backup, to be restored with [Restore]; the file open in another process
// after 1 s; a ledger of another format.
func OpenFile(path string) (*File, error) { return openLedgerFile(path, false) }

// OpenFileReadOnly opens the ledger file at path for reading, as Accounts,
// Info and Backup need. It never writes the file, so a read-only file or
// file system will do, and it shares the lock with other readers, so it
// fails while a server holds the file. A backup opens too. Errors: as
// [OpenFile]'s.
func OpenFileReadOnly(path string) (*File, error) { return openLedgerFile(path, true) }

func openLedgerFile(path string, readOnly bool) (*File, error) {
	if err := checkLedgerPath(path); err != nil {
		return nil, err
	}
	bf, err := openBolt(path, readOnly)
	if err != nil {
		return nil, err
	}
	l := &File{path: path, readOnly: readOnly, bf: bf, curves: map[string]*Curve{}}
	load := bf.db.Update
	if readOnly {
		load = bf.db.View
	}
	if err := guard(path, func() error { return load(l.init) }); err != nil {
		bf.close(path)
		return nil, err
	}
	if !readOnly {
		l.batcher = NewBatcher(1, MaxCommitBatch, true, l.settle)
	}
	return l, nil
}

// checkLedgerPath refuses a missing, empty or non-regular ledger file.
func checkLedgerPath(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("ledger %s does not exist: a ledger is created explicitly, never on the fly, so that a lost file cannot reset every budget (%w, %w)", path, ErrNoLedger, fs.ErrNotExist)
	case err != nil:
		return fmt.Errorf("ledger %s: %w", path, err)
	case !st.Mode().IsRegular():
		return fmt.Errorf("ledger %s: not a regular file (%v)", path, st.Mode().Type())
	case st.Size() == 0:
		return fmt.Errorf("ledger %s is empty (0 bytes): every charge it held is lost; restore it from a backup (%w)", path, ErrEmpty)
	}
	return nil
}

// boltFile is a bbolt database opened by openBolt and the file under it.
type boltFile struct {
	db *bolt.DB
	f  *os.File    // the file bbolt opened through openBolt's hook
	st os.FileInfo // its identity as opened (os.SameFile)
}

// openBolt opens the bbolt file at path, never creating it: under the
// file's lock (exclusive for writing, shared for reading), the file is
// checked before bbolt maps it, and bbolt's opening runs under guard.
func openBolt(path string, readOnly bool) (*boltFile, error) {
	bf := &boltFile{}
	opts := &bolt.Options{Timeout: lockTimeout, ReadOnly: readOnly,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag&^os.O_CREATE, perm)
			if err != nil {
				return nil, err
			}
			if err := lockFile(f, !readOnly, lockTimeout); err != nil {
				f.Close()
				return nil, err
			}
			if _, err := checkLedgerFile(f, path); err != nil {
				f.Close()
				return nil, err
			}
			if bf.st, err = f.Stat(); err != nil {
				f.Close()
				return nil, err
			}
			bf.f = f
			return f, nil
		}}
	err := guard(path, func() error {
		var err error
		bf.db, err = bolt.Open(path, 0o600, opts)
		return err
	})
	if err != nil && bf.f != nil { // bbolt panicked with the file open and locked, perhaps mapped
		unlockFile(bf.f)
		bf.f.Close()
	}
	switch {
	case errors.Is(err, bolt.ErrTimeout) || errors.Is(err, errLocked):
		return nil, fmt.Errorf("ledger %s: open in another process (its lock held for %v)", path, lockTimeout)
	case errors.Is(err, ErrCorrupt):
		return nil, err
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
		return nil, &CorruptError{Path: path, Detail: err.Error()}
	case err != nil:
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	return bf, nil
}

// close closes the database under guard (a fault while closing is not a
// crash), then its file, in case bbolt could not (a second close of the
// file does nothing): the lock always goes.
func (bf *boltFile) close(path string) error {
	err := guard(path, bf.db.Close)
	if err != nil {
		unlockFile(bf.f) // bbolt's close failed part way: its map may still hold the file
	}
	if cerr := bf.f.Close(); err == nil && cerr != nil && !errors.Is(cerr, os.ErrClosed) {
		err = cerr
	}
	return err
}

// guard runs fn, which reads the ledger file at path through bbolt's memory
// map, with memory faults turned into panics (debug.SetPanicOnFault: a file
// truncated under the map raises SIGBUS) and any panic into a
// *CorruptError: bbolt panics on structures it cannot read, and a ledger
// that cannot be read must fail closed, not take the server down.
func guard(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Path: path, Detail: fmt.Sprintf("reading it failed: %v", r)}
		}
	}()
	return fn()
}

// guard runs fn under guard; a failure there is the ledger's failure
// (fail): no charge succeeds after it.
func (l *File) guard(fn func() error) error {
	err := guard(l.path, fn)
	if errors.Is(err, ErrCorrupt) {
		return l.fail(err)
	}
	return err
}

// init checks the buckets and meta of a ledger and reads its curves and
// accounts (every record, so that a corrupt one is found now, not by a
// charge); in a writable transaction it gives a ledger of before ledger
// IDs its ID. A backup (its backup mark) opened for writing is refused.
func (l *File) init(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return &CorruptError{Path: l.path, Detail: fmt.Sprintf("not an nvdp ledger: no %q bucket", bucketMeta)}
	}
	if f := string(meta.Get(metaFormat)); f != FileFormat {
		return fmt.Errorf("ledger %s: format %q, want %q", l.path, f, FileFormat)
	}
	if tx.Bucket(bucketCurves) == nil || tx.Bucket(bucketAccounts) == nil {
		return &CorruptError{Path: l.path, Detail: fmt.Sprintf("bucket %q or %q missing", bucketCurves, bucketAccounts)}
	}
	if b := meta.Get(metaBackup); b != nil && tx.Writable() {
		var m BackupMark
		if err := json.Unmarshal(b, &m); err != nil {
			return &CorruptError{Path: l.path, Detail: fmt.Sprintf("meta %s: %v", metaBackup, err)}
		}
		return &BackupFileError{Path: l.path, Mark: m}
	}
	l.id = string(meta.Get(metaLedgerID))
	if l.id == "" && tx.Writable() {
		l.id = NewLedgerID()
		if err := meta.Put(metaLedgerID, []byte(l.id)); err != nil {
			return err
		}
	}
	if tx.Writable() {
		for _, b := range [][]byte{bucketModels, bucketCharges} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
	}
	if err := l.readCurves(tx); err != nil {
		return err
	}
	if tx.Writable() {
		if err := migrateAccountants(tx); err != nil {
			return err
		}
	}
	l.size.Store(tx.Size())
	return tx.Bucket(bucketAccounts).ForEach(func(k, v []byte) error {
		rec, err := decodeAccount(string(k), v)
		if err != nil {
			return &CorruptError{Path: l.path, Detail: err.Error()}
		}
		for id := range rec.Releases {
			if _, ok := l.curves[id]; !ok {
				return &CorruptError{Path: l.path, Detail: fmt.Sprintf("account %q charged under curve %s, which the ledger does not hold", k, id)}
			}
		}
		return nil
	})
}

// migrateAccountants rewrites the curve records whose accountant has a
// legacy name ("rdp-sum", "gaussian-mu") with privacy's name
// (accountantName); every other byte of a record stays. A record of before
// accountants (none recorded) stays as it is.
func migrateAccountants(tx *bolt.Tx) error {
	b := tx.Bucket(bucketCurves)
	updates := map[string][]byte{}
	err := b.ForEach(func(k, v []byte) error {
		var rec curveRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return err
		}
		if _, ok := legacyAccountant[rec.Accountant]; !ok {
			return nil
		}
		rec.Accountant, _ = accountantName(rec.Accountant, rec.Format)
		nv, err := json.Marshal(rec)
		updates[string(k)] = nv
		return err
	})
	if err != nil {
		return err
	}
	for k, v := range updates {
		if err := b.Put([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}

// readCurves reads the ledger's orders, delta and curves.
func (l *File) readCurves(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Path: l.path, Detail: fmt.Sprintf(format, args...)}
	}
	if o := meta.Get(metaOrders); o != nil {
		if err := json.Unmarshal(o, &l.orders); err != nil {
			return corrupt("meta orders: %v", err)
		}
		if err := json.Unmarshal(meta.Get(metaDelta), &l.delta); err != nil {
			return corrupt("meta delta: %v", err)
		}
	}
	return tx.Bucket(bucketCurves).ForEach(func(k, v []byte) error {
		var rec curveRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return corrupt("curve %s: %v", k, err)
		}
		c := &Curve{ID: string(k), Delta: rec.Delta, RD: make([]float64, len(rec.RD)), Mu: rec.GaussianMu}
		for i, v := range rec.RD {
			c.RD[i] = float64(v)
		}
		// The ID is the curve's hash: a changed bound or mu is found.
		if err := l.comp().CheckCurve(c.ID, rec.Accountant, rec.Format, rec.Orders, c.RD, rec.Delta, c.Mu); err != nil {
			return corrupt("%v", err)
		}
		l.curves[c.ID] = c
		return nil
	})
}

// NewLedgerID returns a new ledger's ID: 128 random bits in hex.
func NewLedgerID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("ledger: crypto/rand: %v", err)) // crypto/rand does not fail on supported systems
	}
	return hex.EncodeToString(b)
}

// CreateFile creates a new, empty ledger file at path with mode 0600: the
// one way a ledger comes to be. It never replaces a file: an existing path,
// even an empty file, is [ErrExists], since an emptied ledger is a lost one,
// to be restored, not silently started over. The file is written beside
// path and linked into place, so that path holds a complete ledger or
// nothing.
func CreateFile(path string) (Info, error) {
	if st, err := os.Lstat(path); err == nil {
		return Info{}, fmt.Errorf("ledger %s exists (%d bytes): a ledger is never replaced by a new one; remove it first only if you mean to reset every budget it held (%w)", path, st.Size(), ErrExists)
	}
	created, err := time.Now().UTC().MarshalText()
	if err != nil {
		return Info{}, err
	}
	tmp, err := prepareLedger(path, func(tmp string) error {
		db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: lockTimeout})
		if err != nil {
			return err
		}
		err = db.Update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			for _, kv := range [][2][]byte{{metaFormat, []byte(FileFormat)}, {metaLedgerID, []byte(NewLedgerID())}, {metaCreated, created}} {
				if err := meta.Put(kv[0], kv[1]); err != nil {
					return err
				}
			}
			if _, err := tx.CreateBucket(bucketCurves); err != nil {
				return err
			}
			_, err = tx.CreateBucket(bucketAccounts)
			return err
		})
		return errors.Join(err, db.Close())
	})
	if err == nil {
		err = linkLedger(tmp, path)
	}
	if err != nil {
		return Info{}, fmt.Errorf("create ledger %s: %w", path, err)
	}
	return describe(path)
}

// Path is the ledger's file.
func (l *File) Path() string { return l.path }

// Orders are the Renyi orders of the ledger's curves, nil before the first
// RegisterCurve.
func (l *File) Orders() []float64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.orders)
}

// Delta is the delta at which the ledger converts curves to epsilon, 0
// before the first RegisterCurve.
func (l *File) Delta() float64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.delta
}

// curveID is the ID of an RDP curve (Curve): the SHA-256 of its orders and
// bounds (float64 bits, little-endian, pairwise), its first 16 bytes in hex.
func curveID(orders, rd []float64) string {
	return hex.EncodeToString(curveHash(orders, rd, nil)[:16])
}

// gaussianCurveID is the ID of a Gaussian curve: as curveID's, with
// gaussianIDTag and mu's float64 bits after the pairs (a
// longer message than any RDP curve's of the grid, so the two never
// collide), so that a changed mu is found as a changed bound is.
func gaussianCurveID(orders, rd []float64, mu float64) string {
	return hex.EncodeToString(curveHash(orders, rd, func(h hash.Hash) {
		var b [8]byte
		h.Write([]byte(gaussianIDTag))
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(mu))
		h.Write(b[:])
	})[:16])
}

// curveHash is the SHA-256 of orders and rd, then of what more writes.
func curveHash(orders, rd []float64, more func(hash.Hash)) []byte {
	h := sha256.New()
	var b [8]byte
	for i := range orders {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(orders[i]))
		h.Write(b[:])
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(rd[i]))
		h.Write(b[:])
	}
	if more != nil {
		more(h)
	}
	return h.Sum(nil)
}

// RegisterCurve records g, the certified guarantee of one release of a
// model, and returns the curve that charges are made under.
//
// model describes the model. It is stored as JSON with the curve when the
// curve is new, and in the models bucket under its [ModelID]. The curve is
// a Gaussian curve with its mu when g's epsilon is exact
// ([privacy.AccountantGaussian]), else an RDP curve, as [NewCurve] makes
// it. The first curve fixes the ledger's orders and delta; every later one
// must have the same. Registering a curve and model again is a no-op.
//
// Errors: g is not the guarantee of one release, its mu disagrees with its
// curve, its orders or delta differ from the ledger's, the model does not
// encode as JSON, the write fails.
func (l *File) RegisterCurve(g *privacy.Guarantee, model any) (*Curve, error) {
	if err := CheckGuarantee(g); err != nil {
		return nil, err
	}
	if l.readOnly {
		return nil, fmt.Errorf("ledger %s: register curve: %w", l.path, ErrReadOnly)
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	c, orders, acct, format, err := NewCurve(g)
	if err != nil {
		return nil, err
	}
	m, err := json.Marshal(model)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: model description: %w", l.path, err)
	}
	c.Model = ModelID(m)
	l.regMu.Lock()
	defer l.regMu.Unlock()
	l.mu.RLock()
	first, lorders, ldelta := l.orders == nil, l.orders, l.delta
	_, known := l.curves[c.ID]
	l.mu.RUnlock()
	if err := CheckGrid(orders, g.Delta, first, lorders, ldelta); err != nil {
		return nil, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	now := time.Now().UTC()
	rec := curveRecord{Orders: orders, Delta: g.Delta, Model: m, Registered: now, Accountant: acct, Format: format, GaussianMu: c.Mu}
	for _, v := range c.RD {
		rec.RD = append(rec.RD, jsonfloat.Float(v))
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	mval, err := json.Marshal(modelRecord{Description: m, Curve: c.ID, Registered: now})
	if err != nil {
		return nil, err
	}
	err = l.guard(func() error {
		return l.bf.db.Update(func(tx *bolt.Tx) error {
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
			if !known {
				if err := tx.Bucket(bucketCurves).Put([]byte(c.ID), val); err != nil {
					return err
				}
			}
			models := tx.Bucket(bucketModels)
			if models.Get([]byte(c.Model)) != nil {
				return nil
			}
			return models.Put([]byte(c.Model), mval)
		})
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

// CheckGrid checks a new curve's orders and delta against a ledger's,
// unless first says the ledger has none yet.
func CheckGrid(orders []float64, delta float64, first bool, lorders []float64, ldelta float64) error {
	if !first && !slices.Equal(orders, lorders) {
		return fmt.Errorf("the model's curve has %d orders %v..%v, the ledger's %d orders %v..%v: one ledger composes curves over one order grid",
			len(orders), orders[0], orders[len(orders)-1], len(lorders), lorders[0], lorders[len(lorders)-1])
	}
	if !first && delta != ldelta {
		return fmt.Errorf("the model's delta %g differs from the ledger's %g", delta, ldelta)
	}
	return nil
}

// Charge adds releases of curve to account if its composed curve stays
// within budget, and returns the balance after the charge once the charge is
// committed to disk and fsync'd. releases is at least 1; budget is epsilon
// at the ledger's delta, +Inf for no limit.
//
// A charge that would exceed the budget is a [*BudgetError] with the
// unchanged balance, and nothing is charged. Charges waiting while one
// commits are grouped into one transaction by a [Batcher], each still
// checked against its budget in order. Charge does not return before its
// transaction is settled, so that the caller always knows whether the
// charge holds.
//
// Errors: as above; [ErrClosed]; [ErrReadOnly]; a failed commit, with
// nothing charged; [ErrUnavailable] when the file was removed, replaced or
// truncated before or during the commit, or could not be read. Then the
// charge may sit in a file no one will read, so it counts as not made, and
// no later charge succeeds.
func (l *File) Charge(account string, curve *Curve, releases int, budget float64) (Balance, error) {
	if l.readOnly {
		return Balance{}, fmt.Errorf("ledger %s: charge: %w", l.path, ErrReadOnly)
	}
	if err := l.broken.Load(); err != nil {
		return Balance{}, *err
	}
	return l.batcher.Submit(account, curve, releases, budget)
}

// SetCommitWindow sets how long the ledger's group commit waits for more
// charges under load, >= 0 ([Batcher.SetWindow]; DefaultCommitWindow until
// set). A read-only ledger has no commits: it does nothing.
func (l *File) SetCommitWindow(d time.Duration) {
	if l.batcher != nil {
		l.batcher.SetWindow(d)
	}
}

// Collectors are the ledger's metrics, for a server's registry: the
// charges each commit held (nvdp_ledger_charge_batch_size); none for a
// read-only ledger.
func (l *File) Collectors() []prometheus.Collector {
	if l.batcher == nil {
		return nil
	}
	return []prometheus.Collector{l.batcher.CommitSizes()}
}

// settle commits batch and answers each of its charges (the Batcher's
// commit).
func (l *File) settle(batch []*ChargeRequest) {
	err := l.commitBatch(batch)
	for _, r := range batch {
		if err != nil {
			r.Balance, r.Err = Balance{}, err
		}
		r.Done()
	}
}

// commitBatch applies batch in one transaction, between two checks that the
// ledger's path names the file it holds (Err): the charges count only if
// they were committed to the file that a restarted server will read.
func (l *File) commitBatch(batch []*ChargeRequest) error {
	if err := l.Err(); err != nil {
		return err
	}
	now := time.Now().UTC()
	err := l.guard(func() error {
		return l.bf.db.Update(func(tx *bolt.Tx) error {
			for _, r := range batch {
				r.Balance, r.Err = l.apply(tx, r, now)
			}
			l.size.Store(tx.Size())
			return nil
		})
	})
	switch {
	case errors.Is(err, ErrUnavailable):
		return err
	case err != nil:
		return fmt.Errorf("ledger %s: commit: %w", l.path, err)
	}
	return l.Err()
}

// UnavailableError is the failure of a serving ledger, [ErrUnavailable]:
// its file was removed, replaced or truncated, or reading it failed.
type UnavailableError struct {
	Path   string
	Reason string
	Err    error // the underlying error, if any
}

func (e *UnavailableError) Error() string {
	s := fmt.Sprintf("ledger %s %s: no release is charged or served any more (the charges so far are in the open file: take a backup of it now, then restart on a good ledger)", e.Path, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is [ErrUnavailable], for errors.Is.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Err }

// fail records err as the ledger's failure (the first one stays) and
// returns the failure, an *UnavailableError.
func (l *File) fail(err error) error {
	var ue *UnavailableError
	if !errors.As(err, &ue) {
		ue = &UnavailableError{Path: l.path, Reason: "could not be read", Err: err}
	}
	var e error = ue
	l.broken.CompareAndSwap(nil, &e)
	return *l.broken.Load()
}

// Err checks the ledger now. It returns nil while its path names the file
// it opened, at least as long as its last committed transaction needs.
// Otherwise, or after an earlier failure, it returns the failure, an
// [*UnavailableError] that stays. A server asks it for readiness.
func (l *File) Err() error {
	if err := l.broken.Load(); err != nil {
		return *err
	}
	st, err := os.Stat(l.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return l.fail(&UnavailableError{Path: l.path, Reason: "was removed"})
	case err != nil:
		return l.fail(&UnavailableError{Path: l.path, Reason: "cannot be checked", Err: err})
	case !os.SameFile(st, l.bf.st):
		return l.fail(&UnavailableError{Path: l.path, Reason: "was replaced by another file"})
	case st.Size() < l.size.Load():
		return l.fail(&UnavailableError{Path: l.path, Reason: fmt.Sprintf("was truncated to %d bytes (it needs %d)", st.Size(), l.size.Load())})
	}
	return nil
}

// apply charges r inside tx, or refuses it; a charge is recorded in the
// charges bucket.
func (l *File) apply(tx *bolt.Tx, r *ChargeRequest, now time.Time) (Balance, error) {
	b := tx.Bucket(bucketAccounts)
	rec, err := decodeAccount(r.Account, b.Get([]byte(r.Account)))
	if err != nil {
		return Balance{}, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	bal, err := l.comp().Charge(r.Account, rec.Releases, l.curve, r.Curve, r.Releases, r.Budget)
	if err != nil {
		return bal, err
	}
	rec.Requests++
	rec.Updated = now
	rec.Sum = accountSum(r.Account, rec)
	val, err := json.Marshal(rec)
	if err != nil {
		return Balance{}, err
	}
	if err := b.Put([]byte(r.Account), val); err != nil {
		return Balance{}, fmt.Errorf("ledger %s: account %q: %w", l.path, r.Account, err)
	}
	if err := putCharge(tx, &chargeRecord{Time: now, Account: r.Account, Releases: r.Releases, Curve: r.Curve.ID, Model: r.Curve.Model}); err != nil {
		return Balance{}, fmt.Errorf("ledger %s: account %q: history: %w", l.path, r.Account, err)
	}
	return bal, nil
}

// putCharge appends rec to the charges bucket under its next sequence.
func putCharge(tx *bolt.Tx, rec *chargeRecord) error {
	b := tx.Bucket(bucketCharges)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	rec.Sum = chargeSum(k[:], rec)
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return b.Put(k[:], v)
}

// decodeAccount reads an account's record (nil: a new account) and checks
// its checksum when it has one.
func decodeAccount(id string, v []byte) (*accountRecord, error) {
	rec := &accountRecord{}
	if v != nil {
		if err := json.Unmarshal(v, rec); err != nil {
			return nil, fmt.Errorf("account %q: %w", id, err)
		}
		if rec.Sum != "" && rec.Sum != accountSum(id, rec) {
			return nil, fmt.Errorf("account %q: its record does not match its checksum", id)
		}
	}
	if rec.Releases == nil {
		rec.Releases = map[string]uint64{}
	}
	return rec, nil
}

// comp is the ledger's Grid: its orders and delta.
func (l *File) comp() Grid {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return Grid{Orders: l.orders, Delta: l.delta, Memo: &l.memo}
}

// curve returns the registered curve id (init loaded every curve, and
// accounts are charged only under registered ones).
func (l *File) curve(id string) (*Curve, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	c, ok := l.curves[id]
	if !ok {
		return nil, &CorruptError{Path: l.path, Detail: fmt.Sprintf("an account was charged under curve %s, which the ledger does not hold", id)}
	}
	return c, nil
}

// balance is the balance of the account with record rec against budget
// for releases of curve.
func (l *File) balance(id string, rec *accountRecord, curve *Curve, budget float64) (Balance, error) {
	return l.comp().Balance(id, rec.Releases, l.curve, curve, budget)
}

// Balance returns the committed balance of account against budget for
// releases of curve, without charging. A charge may still be refused:
// charges of other requests may land first.
func (l *File) Balance(account string, curve *Curve, budget float64) (Balance, error) {
	if err := l.broken.Load(); err != nil {
		return Balance{}, *err
	}
	var bal Balance
	err := l.guard(func() error {
		return l.bf.db.View(func(tx *bolt.Tx) error {
			rec, err := decodeAccount(account, tx.Bucket(bucketAccounts).Get([]byte(account)))
			if err != nil {
				return err
			}
			bal, err = l.balance(account, rec, curve, budget)
			return err
		})
	})
	if errors.Is(err, ErrUnavailable) {
		return Balance{}, err
	}
	if err != nil {
		return Balance{}, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	return bal, nil
}

// Accounts returns every account of the ledger, by ID.
func (l *File) Accounts() ([]Account, error) {
	var out []Account
	err := l.guard(func() error {
		return l.bf.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketAccounts).ForEach(func(k, v []byte) error {
				rec, err := decodeAccount(string(k), v)
				if err != nil {
					return err
				}
				a, err := l.comp().Account(string(k), rec.Releases, rec.Requests, rec.Updated, l.curve)
				out = append(out, a)
				return err
			})
		})
	})
	if errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	return out, nil
}

// Close stops taking charges, waits for those submitted to be settled and
// closes the file.
func (l *File) Close() error {
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.batcher != nil {
		l.batcher.Close()
	}
	if err := l.bf.close(l.path); err != nil {
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	return nil
}

// Name is the ledger's file, for [Ledger].
func (l *File) Name() string { return l.path }

// Format is [FileFormat], for [Ledger].
func (l *File) Format() string { return FileFormat }

// History returns the ledger's charges newest first as q selects, with the
// curves and models they name. Each charge record is checked against its
// checksum; a changed one is a [*CorruptError]. Charges made before the
// file recorded them, in ledgers of before the charges bucket, are not in
// it. A query for one account reads every charge newer than the ones it
// returns, since the file has no index by account. Errors: q invalid, an
// [*option.Error].
func (l *File) History(q HistoryQuery) (History, error) {
	if err := q.Check(); err != nil {
		return History{}, err
	}
	h := History{Charges: []ChargeRecord{}, Curves: map[string]CurveInfo{}, Models: map[string]json.RawMessage{}}
	comp := l.comp()
	err := l.guard(func() error {
		return l.bf.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketCharges)
			if b == nil {
				return nil
			}
			c := b.Cursor()
			var k, v []byte
			if q.Before == 0 {
				k, v = c.Last()
			} else {
				var seek [8]byte
				binary.BigEndian.PutUint64(seek[:], q.Before)
				if k, v = c.Seek(seek[:]); k == nil {
					k, v = c.Last()
				} else {
					k, v = c.Prev()
				}
			}
			for ; k != nil; k, v = c.Prev() {
				id := binary.BigEndian.Uint64(k)
				if q.Before != 0 && id >= q.Before {
					continue
				}
				var rec chargeRecord
				if len(k) != 8 || json.Unmarshal(v, &rec) != nil || rec.Sum != chargeSum(k, &rec) {
					return &CorruptError{Path: l.path, Detail: fmt.Sprintf("charge %x: its record does not match its checksum", k)}
				}
				if q.Account != "" && rec.Account != q.Account {
					continue
				}
				if len(h.Charges) == q.Limit {
					h.Before = h.Charges[len(h.Charges)-1].ID
					return nil
				}
				h.Charges = append(h.Charges, ChargeRecord{ID: id, Time: rec.Time, Account: rec.Account, Releases: rec.Releases, Curve: rec.Curve, Model: rec.Model})
			}
			return nil
		})
	})
	if err != nil {
		return History{}, fmt.Errorf("ledger %s: history: %w", l.path, err)
	}
	return h, l.describeHistory(&h, comp)
}

// describeHistory fills h's curves and models from the ledger.
func (l *File) describeHistory(h *History, comp Grid) error {
	return l.guard(func() error {
		return l.bf.db.View(func(tx *bolt.Tx) error {
			for _, c := range h.Charges {
				if _, ok := h.Curves[c.Curve]; !ok {
					var rec curveRecord
					if err := json.Unmarshal(tx.Bucket(bucketCurves).Get([]byte(c.Curve)), &rec); err != nil {
						return fmt.Errorf("ledger %s: curve %s: %w", l.path, c.Curve, err)
					}
					cv, err := l.curve(c.Curve)
					if err != nil {
						return err
					}
					acc, format := accountantName(rec.Accountant, rec.Format)
					h.Curves[c.Curve] = comp.CurveInfo(cv, acc, format, rec.Registered)
				}
				if _, ok := h.Models[c.Model]; !ok && c.Model != "" {
					var rec modelRecord
					if b := tx.Bucket(bucketModels); b != nil && json.Unmarshal(b.Get([]byte(c.Model)), &rec) == nil {
						h.Models[c.Model] = rec.Description
					}
				}
			}
			return nil
		})
	})
}

// CorruptError is a ledger file that fails the structural check or holds
// records nvdp cannot read: it must be restored from a backup.
type CorruptError struct {
	Path   string
	Detail string // what is wrong, where
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("ledger %s is corrupt: restore it from a backup (%s)", e.Path, e.Detail)
}

// Is reports whether target is [ErrCorrupt], for errors.Is.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// ErrCorrupt is what every *CorruptError matches with errors.Is.
var ErrCorrupt = errors.New("ledger is corrupt")

// checkLedgerFile checks the structure of the open ledger file f (named
// path) before bbolt maps it (boltcheck.Check): a *CorruptError when it
// fails.
func checkLedgerFile(f *os.File, path string) (boltcheck.Info, error) {
	st, err := f.Stat()
	if err != nil {
		return boltcheck.Info{}, fmt.Errorf("ledger %s: %w", path, err)
	}
	info, err := boltcheck.Check(f, st.Size())
	if err != nil {
		return boltcheck.Info{}, &CorruptError{Path: path, Detail: err.Error()}
	}
	return info, nil
}
