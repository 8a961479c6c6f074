package serve

import (
	"net"
	"os"
	"runtime"
	"time"

	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
)

// Options are the limits and budgets of a Server. Start from DefaultOptions:
// every field holds the value it says, an explicit 0 included. A 0 is never
// replaced by a default; where 0 is meaningless, Validate rejects it. Errors
// are [*option.Error] values naming the option by its JSON key.
type Options struct {
	// BudgetEpsilon is the privacy budget, in epsilon at the model's delta,
	// of every key whose line in the keys file gives none, and of the one
	// shared account when there is no keys file. Auto (NaN): no default, so
	// every key must give its own budget. +Inf: no limit (charges are still
	// recorded). 0 refuses every release.
	BudgetEpsilon float64 `json:"budget_epsilon"`
	// MaxEpsilon is the largest certified epsilon per release (at the
	// model's delta) the server serves: New refuses a model certifying more
	// (privacy.CheckMaxEpsilon, the check nvdp embed makes; docs/privacy.md
	// "A guarantee by default"). Default privacy.DefaultMaxEpsilon; +Inf
	// serves any model.
	MaxEpsilon float64 `json:"max_epsilon"`
	// Limits are the request limits (body, texts, concurrency, queue).
	Limits
	// Batching is how requests share forward passes.
	Batching
	// RequestTimeout bounds the handling of one POST /v1/embed, waiting in
	// the queue included (503 when it expires, nothing released or charged).
	RequestTimeout time.Duration `json:"request_timeout"`
	// ReadTimeout bounds reading a whole request, headers and body
	// (http.Server.ReadTimeout and ReadHeaderTimeout).
	ReadTimeout time.Duration `json:"read_timeout"`
	// WriteTimeout bounds a request from the end of its headers to the end
	// of the response (http.Server.WriteTimeout); above RequestTimeout.
	WriteTimeout time.Duration `json:"write_timeout"`
	// IdleTimeout bounds an idle keep-alive connection.
	IdleTimeout time.Duration `json:"idle_timeout"`
	// ShutdownTimeout is how long a shutdown waits for the requests in
	// flight to finish before it closes their connections.
	ShutdownTimeout time.Duration `json:"shutdown_timeout"`
	// BackupDir is the directory of the ledger's backups (Server.Backup;
	// "": the ledger's own directory). It must exist.
	BackupDir string `json:"backup_dir"`
	// BackupEvery takes a backup at this interval while serving (0: only
	// when asked, Server.Backup); at least MinBackupEvery.
	BackupEvery time.Duration `json:"backup_every"`
	// BackupKeep is how many of the ledger's backups BackupDir keeps: after
	// each backup the oldest beyond it are removed (default
	// DefaultBackupKeep; 0: all are kept, which only an explicit 0 asks).
	BackupKeep int `json:"backup_keep"`
	// LedgerCommitWindow is how long the ledger's group commit waits for
	// more charges once its queue is empty, while charges arrive faster
	// than commits end (its previous commit held more than one), so that
	// they share one commit and its fsync, >= 0 (ledger.Batcher.SetWindow;
	// docs/serving.md, "The ledger's commit window"). 0: a commit takes only
	// the charges already waiting. A charge that comes alone never waits.
	LedgerCommitWindow time.Duration `json:"ledger_commit_window"`
	// AllowUnauthenticated lets a server without keys listen beyond
	// loopback (CheckListener); it then logs a warning at start.
	AllowUnauthenticated bool `json:"allow_unauthenticated"`
}

// MinBackupEvery is the shortest interval of periodic backups,
// Options.BackupEvery.
//
// Each backup copies the whole ledger in one read transaction and fsyncs
// it, and bbolt cannot reuse the pages freed while a read transaction is
// open, so backups back to back keep the disk and the file growing for
// copies of almost the same state: 1 ns wrote 16,073 backups, 528 MB, in
// 20 s. A minute bounds that to 1,440 a day. An operator who needs fresher
// copies than a minute needs a replicated database such as PostgreSQL, not
// backups.
const MinBackupEvery = time.Minute

// DefaultBackupKeep is how many backups a server keeps unless
// Options.BackupKeep says otherwise: a day of hourly backups. Keeping all by
// default filled the disk under a short interval.
const DefaultBackupKeep = 24

// Limits bound the requests a Server takes, as GET /v1/info shows them.
type Limits struct {
	// MaxBodyBytes bounds the request body of POST /v1/embed (413 beyond).
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// MaxTexts bounds the texts of one request (400 beyond).
	MaxTexts int `json:"max_texts"`
	// MaxTextBytes bounds each text, in bytes of UTF-8 (400 beyond).
	MaxTextBytes int `json:"max_text_bytes"`
	// MaxConcurrent is how many releases run at once.
	MaxConcurrent int `json:"max_concurrent"`
	// MaxQueue is how many admitted requests may wait for a release slot
	// beyond MaxConcurrent; a request beyond the queue is refused at once
	// with 429. 0: no queue.
	MaxQueue int `json:"max_queue"`
}

// Batching says how requests that arrive together share a forward pass, by
// dynamic batching; docs/serving.md, "Batching".
type Batching struct {
	// BatchTexts is the most texts of one forward pass, >= 1: requests
	// join a batch while their texts fit (a request is never split; one of
	// more texts runs alone). 1: every request alone.
	BatchTexts int `json:"batch_texts"`
	// BatchWindow is how long a batch waits for more requests while others
	// are admitted and not yet in a batch, >= 0. 0: a batch takes only the
	// requests already waiting. A request that finds no other admitted
	// never waits.
	BatchWindow time.Duration `json:"batch_window"`
	// BLASThreads is the threads of each BLAS call of a forward pass, for
	// the whole process (nn.SetBLASThreads), >= 0; 0: the BLAS library's
	// own (OpenBLAS: OPENBLAS_NUM_THREADS, else the cores). A service runs
	// MaxConcurrent forward passes at once, so DefaultBLASThreads is 1: with
	// more, OpenBLAS's idle threads spin on the cores the other requests
	// need (docs/performance.md, "Where a release's time goes").
	BLASThreads int `json:"blas_threads"`
}

// DefaultBatchTexts, DefaultBatchWindow and DefaultBLASThreads are the
// defaults of [Batching]. 32 texts is the batch at which the engine's
// throughput per text levels off on the main job's model;
// docs/performance.md, "Batching". 2 ms is a fraction of one release's
// time. One BLAS thread runs per forward pass.
const (
	DefaultBatchTexts  = 32
	DefaultBatchWindow = 2 * time.Millisecond
	DefaultBLASThreads = 1
)

// DefaultOptions returns the defaults. There is no default budget:
// BudgetEpsilon is Auto, and each key gives its own. Models certify at most
// privacy.DefaultMaxEpsilon per release. Bodies are at most 1 MiB, with 64
// texts of at most 16 KiB each. GOMAXPROCS batches are released at once,
// with 64 more requests queued, and batches of up to DefaultBatchTexts texts
// are gathered for up to DefaultBatchWindow. A request gets 30 s, 10 s to
// read it and 60 s to write it; a connection 120 s idle; shutdown 30 s to
// drain. Backups are made only when asked, into the ledger's directory, and
// the DefaultBackupKeep newest kept. The ledger's commits wait up to
// ledger.DefaultCommitWindow for more charges under load.
func DefaultOptions() Options {
	return Options{
		BudgetEpsilon: option.Auto(),
		MaxEpsilon:    privacy.DefaultMaxEpsilon,
		Limits: Limits{
			MaxBodyBytes:  1 << 20,
			MaxTexts:      64,
			MaxTextBytes:  16 << 10,
			MaxConcurrent: runtime.GOMAXPROCS(0),
			MaxQueue:      64,
		},
		Batching:           Batching{BatchTexts: DefaultBatchTexts, BatchWindow: DefaultBatchWindow, BLASThreads: DefaultBLASThreads},
		RequestTimeout:     30 * time.Second,
		ReadTimeout:        10 * time.Second,
		WriteTimeout:       60 * time.Second,
		IdleTimeout:        120 * time.Second,
		ShutdownTimeout:    30 * time.Second,
		BackupKeep:         DefaultBackupKeep,
		LedgerCommitWindow: ledger.DefaultCommitWindow,
	}
}

// Validate checks every option: the budget is Auto, +Inf or a number >= 0;
// the sizes, counts and timeouts are > 0, except MaxQueue and BackupKeep,
// which are >= 0, and BackupEvery, which is 0 or at least MinBackupEvery;
// WriteTimeout is above RequestTimeout, so that a response finished in time
// can be written. It reads no file: New checks BackupDir.
//
// Errors: an [*option.Error] naming the option by its JSON key.
func (o Options) Validate() error {
	if !option.IsAuto(o.BudgetEpsilon) && !(o.BudgetEpsilon >= 0) {
		return option.Errorf("budget_epsilon", o.BudgetEpsilon, "must be >= 0 (epsilon at the model's delta; +Inf for no limit)")
	}
	if !(o.MaxEpsilon > 0) {
		return option.Errorf("max_epsilon", o.MaxEpsilon, "must be > 0 (epsilon per release at the model's delta; +Inf serves any model)")
	}
	positive := []struct {
		key string
		v   int64
	}{
		{"max_body_bytes", o.MaxBodyBytes},
		{"max_texts", int64(o.MaxTexts)},
		{"max_text_bytes", int64(o.MaxTextBytes)},
		{"max_concurrent", int64(o.MaxConcurrent)},
		{"batch_texts", int64(o.BatchTexts)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return option.Errorf(p.key, p.v, "must be > 0")
		}
	}
	if o.BatchWindow < 0 {
		return option.Errorf("batch_window", o.BatchWindow, "must be >= 0 (0: a batch takes only the requests already waiting)")
	}
	if o.LedgerCommitWindow < 0 {
		return option.Errorf("ledger_commit_window", o.LedgerCommitWindow, "must be >= 0 (0: a commit takes only the charges already waiting)")
	}
	if o.BLASThreads < 0 {
		return option.Errorf("blas_threads", o.BLASThreads, "must be >= 0 (0: the BLAS library's own thread count)")
	}
	if o.MaxQueue < 0 {
		return option.Errorf("max_queue", o.MaxQueue, "must be >= 0 (0: no queue)")
	}
	if o.BackupEvery < 0 || o.BackupEvery > 0 && o.BackupEvery < MinBackupEvery {
		return option.Errorf("backup_every", o.BackupEvery, "must be 0 (a backup only when asked) or at least %v (each backup copies the whole ledger)", MinBackupEvery)
	}
	if o.BackupKeep < 0 {
		return option.Errorf("backup_keep", o.BackupKeep, "must be >= 0 (0: keep every backup)")
	}
	timeouts := []struct {
		key string
		v   time.Duration
	}{
		{"request_timeout", o.RequestTimeout},
		{"read_timeout", o.ReadTimeout},
		{"write_timeout", o.WriteTimeout},
		{"idle_timeout", o.IdleTimeout},
		{"shutdown_timeout", o.ShutdownTimeout},
	}
	for _, t := range timeouts {
		if t.v <= 0 {
			return option.Errorf(t.key, t.v, "must be > 0")
		}
	}
	if o.WriteTimeout <= o.RequestTimeout {
		return option.Errorf("write_timeout", o.WriteTimeout, "must be above the request timeout (%v), or a response finished in time could not be written", o.RequestTimeout)
	}
	return nil
}

// CheckFiles checks the files the options name: BackupDir, when given, is
// a directory. Errors: *option.Error for backup_dir.
func (o Options) CheckFiles() error {
	if o.BackupDir != "" {
		if st, err := os.Stat(o.BackupDir); err != nil || !st.IsDir() {
			return option.Errorf("backup_dir", o.BackupDir, "not a directory")
		}
	}
	return nil
}

// Budgets returns the budget of every account, in epsilon at the model's
// delta: each key's own, else BudgetEpsilon. With nil keys it returns the
// budget of the one SharedAccount, BudgetEpsilon. Errors: an
// [*option.Error] for budget_epsilon when an account is left without a
// budget.
func (o Options) Budgets(keys *Keys) (map[string]float64, error) {
	if keys == nil {
		if option.IsAuto(o.BudgetEpsilon) {
			return nil, option.Errorf("budget_epsilon", nil, "required without a keys file (the budget of the one shared account)")
		}
		return map[string]float64{SharedAccount: o.BudgetEpsilon}, nil
	}
	out := map[string]float64{}
	for _, k := range keys.All() {
		b := k.Budget
		if option.IsAuto(b) {
			b = o.BudgetEpsilon
		}
		if option.IsAuto(b) {
			return nil, option.Errorf("budget_epsilon", nil, "keys %s:%d: key %q has no budget of its own, and there is no default", keys.File(), k.Line, k.ID)
		}
		out[k.ID] = b
	}
	return out, nil
}

// CheckListener refuses to serve without keys on an address beyond
// loopback: every request would be charged to the one shared account,
// whoever sends it, so anyone who can reach the address spends its budget.
// authenticated says whether the server has keys, from a keys file or a key
// store. Errors: an [*option.Error] for allow_unauthenticated, unless o
// allows it.
func (o Options) CheckListener(addr net.Addr, authenticated bool) error {
	if authenticated || o.AllowUnauthenticated || isLoopback(addr) {
		return nil
	}
	return option.Errorf("allow_unauthenticated", false, "listening on %s, beyond loopback, without keys: anyone who reaches it is served and spends the one shared budget; give keys, listen on 127.0.0.1, or allow it explicitly", addr)
}

// isLoopback reports whether addr is a TCP address on a loopback IP (a
// unix socket counts as local).
func isLoopback(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
