package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/ledger/pgledger"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// loadReleaser loads the model of `nvdp serve --model DIR`. Tests set a
// fake.
var loadReleaser = serve.Load

// serveFlags are the flags of `nvdp serve`, bound to serve.DefaultOptions
// and pgledger.DefaultOptions.
type serveFlags struct {
	addr string
	cfg  serve.Config
	rel  release.Options
	dev  deviceFlags
	o    serve.Options
	po   pgledger.Options
}

func newServeCmd() *cobra.Command {
	f := &serveFlags{o: serve.DefaultOptions(), po: pgledger.DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "serve --model DIR --ledger FILE|postgres://...|env:VAR [--addr 127.0.0.1:8080] [--keys FILE | --keys-in-ledger] [--budget-epsilon E]",
		Short: "Serve privatised embeddings over HTTP, charging each release to a per-key privacy budget in a durable ledger",
		Long: `Serve the model in DIR over HTTP: POST /v1/embed {"texts": [...]} returns one release per text
with its certified guarantee, each charged to the caller's key in the --ledger (a file, or a
PostgreSQL database shared by replicas, made once with 'nvdp serve ledger init') before the
response is written; a request past the key's budget is refused (429). Keys: --keys FILE ('nvdp
serve keygen') or --keys-in-ledger ('nvdp serve keys'). SIGUSR1 backs a file ledger up; SIGTERM
drains and exits. docs/serving.md, "nvdp serve": the API, keys, the ledgers, backups, limits and
the threat model.`,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.cfg.Model, "model", "", "model directory written by 'nvdp train' or 'nvdp run' (required)")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	fs.StringVar(&f.cfg.Ledger, "ledger", "", "privacy ledger: a file (bbolt), or a PostgreSQL database postgres://... | postgresql://... | env:VAR (the URL in the environment variable VAR); create it once with 'nvdp serve ledger init' (required)")
	fs.StringVar(&f.cfg.Keys, "keys", "", "keys file of \"ID SHA256-HEX [BUDGET]\" lines, read again on SIGHUP (default: no keys, one shared account)")
	fs.BoolVar(&f.cfg.KeysInLedger, "keys-in-ledger", false, "authenticate against the keys of the PostgreSQL ledger ('nvdp serve keys'), instead of a keys file")
	allowUnprovedFlag(fs, &f.rel)
	f.dev.bind(fs)
	// the options' flags: each the option's JSON key with dashes, as flagError names it
	o, po := &f.o, &f.po
	budgetVar(fs, &o.BudgetEpsilon, "budget-epsilon", "privacy budget of each key without its own, in epsilon at the model's delta (inf: no limit; 0 refuses every release; default: none, so every key needs its own; required without --keys)")
	fs.Float64Var(&o.MaxEpsilon, "max-epsilon", o.MaxEpsilon, "refuse to start with a model certifying more than this epsilon per release at its delta (inf: any model; docs/privacy.md \"A guarantee by default\")")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "largest request body (413 beyond)")
	fs.IntVar(&o.MaxTexts, "max-texts", o.MaxTexts, "most texts in one request")
	fs.IntVar(&o.MaxTextBytes, "max-text-bytes", o.MaxTextBytes, "longest text, in bytes of UTF-8")
	fs.IntVar(&o.MaxConcurrent, "max-concurrent", o.MaxConcurrent, "releases run at once (default GOMAXPROCS)")
	fs.IntVar(&o.MaxQueue, "max-queue", o.MaxQueue, "requests that may wait for a release slot; beyond them 429 (0: no queue)")
	fs.IntVar(&o.BatchTexts, "batch-texts", o.BatchTexts, "most texts of requests released in one forward pass (1: each request alone; docs/serving.md \"Batching\")")
	fs.DurationVar(&o.BatchWindow, "batch-window", o.BatchWindow, "how long a batch waits for requests on their way (0: only those already waiting)")
	fs.IntVar(&o.BLASThreads, "blas-threads", o.BLASThreads, "threads of each BLAS call of a forward pass (0: OpenBLAS's own, OPENBLAS_NUM_THREADS or the cores; docs/serving.md \"Batching\")")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "bound on one embed request, queueing included (503 beyond, nothing charged)")
	fs.DurationVar(&o.ReadTimeout, "read-timeout", o.ReadTimeout, "bound on reading a request")
	fs.DurationVar(&o.WriteTimeout, "write-timeout", o.WriteTimeout, "bound on a request from its headers to the end of its response (above --request-timeout)")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", o.IdleTimeout, "bound on an idle keep-alive connection")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long SIGTERM waits for requests in flight")
	fs.StringVar(&o.BackupDir, "backup-dir", o.BackupDir, "directory of the ledger's backups, written on SIGUSR1 and every --backup-every (default: the ledger's directory)")
	fs.DurationVar(&o.BackupEvery, "backup-every", o.BackupEvery, "also back the ledger up at this interval (0: only on SIGUSR1; at least 1m)")
	fs.IntVar(&o.BackupKeep, "backup-keep", o.BackupKeep, "keep this many of the ledger's newest backups in --backup-dir, removing older ones (0: keep all)")
	fs.BoolVar(&o.AllowUnauthenticated, "allow-unauthenticated", false, "serve without keys on an address beyond loopback (anyone who reaches it spends the shared budget)")
	fs.DurationVar(&o.LedgerCommitWindow, "ledger-commit-window", o.LedgerCommitWindow, "how long the ledger's group commit waits for more charges while they arrive faster than commits end (0: only those already waiting; a lone charge never waits; docs/serving.md \"The ledger's commit window\")")
	fs.IntVar(&po.MaxConns, "ledger-max-conns", po.MaxConns, "PostgreSQL ledger: most connections to the database")
	fs.DurationVar(&po.Timeout, "ledger-timeout", po.Timeout, "PostgreSQL ledger: bound on every query, lock waits included (503 beyond, nothing released)")
	fs.IntVar(&po.MaxWaitingCharges, "ledger-max-waiting", po.MaxWaitingCharges, "PostgreSQL ledger: most charges waiting for a transaction (503 ledger_busy beyond)")
	fs.StringVar(&po.Replica, "replica", "", "this server's name in the PostgreSQL ledger's charges (default: host name/process ID)")
	cmd.AddCommand(newKeygenCmd(), newLedgerCmd(), newKeysCmd())
	return cmd
}

// run checks every input, then opens the ledger and serves until a signal.
func (f *serveFlags) run(cmd *cobra.Command) error {
	if err := f.dev.check(); err != nil {
		return err
	}
	if err := pgledger.CheckAt(f.cfg.Ledger, f.po); err != nil {
		return flagError(err)
	}
	cfg := f.cfg
	cfg.LedgerHoldsKeys = pgledger.IsPostgres(cfg.Ledger)
	keys, err := cfg.Check(f.o)
	if err != nil {
		return flagError(err)
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	defer ln.Close()
	if err := f.o.CheckListener(ln.Addr(), keys != nil || cfg.KeysInLedger); err != nil {
		return flagError(err)
	}
	if f.o.BLASThreads > 0 {
		nn.SetBLASThreads(f.o.BLASThreads)
	}
	d, err := f.dev.open()
	if err != nil {
		return err
	}
	defer cuda.CloseLogged(d) // after the releaser's Close, deferred below
	ro := f.rel
	ro.Device = d
	rel, err := loadReleaser(cfg.Model, ro)
	if err != nil {
		return fmt.Errorf("--model: %w", unprovedHint(err))
	}
	if c, ok := rel.(io.Closer); ok {
		defer c.Close()
	}
	lg, err := pgledger.OpenAt(cfg.Ledger, f.po, false)
	if err != nil {
		return fmt.Errorf("--ledger: %w", ledgerHint(err, cfg.Ledger))
	}
	srv, err := cfg.New(rel, lg, keys, f.o, slog.Default())
	if err != nil {
		lg.Close()
		return flagError(err)
	}
	ctx, cancel := signalContext(cmd, "draining the requests in flight")
	defer cancel()
	stopSignals := adminSignals(srv, cfg.Keys)
	defer stopSignals()
	serr := srv.Serve(ctx, ln)
	if err := lg.Close(); err != nil && serr == nil {
		serr = err
	}
	return serr
}

func newKeygenCmd() *cobra.Command {
	var keysPath, id string
	budget := option.Auto()
	cmd := &cobra.Command{
		Use:   "keygen --keys FILE --id NAME [--budget-epsilon E]",
		Short: "Make an API key: print it once, append its SHA-256 to the keys file",
		Long: `Make a 256-bit API key, print it on stdout once (it is stored nowhere: give it to its holder now),
and append "ID SHA256-HEX [BUDGET]" to the keys file (mode 0600). The ID names the key's account;
a new key under an old ID needs the old line removed first (the account stays in the ledger).
docs/serving.md, "Keys".`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := serve.NewFileKey(keysPath, id, budget)
			if err != nil {
				return flagError(err)
			}
			slog.Info("key added", "id", id, "keys", keysPath)
			fmt.Fprintln(cmd.OutOrStdout(), key)
			return nil
		},
	}
	cmd.Flags().StringVar(&keysPath, "keys", "", "keys file to append to (required)")
	cmd.Flags().StringVar(&id, "id", "", "the key's ID: its account (required; letters, digits, . _ -)")
	budgetVar(cmd.Flags(), &budget, "budget-epsilon", "the key's own budget in epsilon at the model's delta (inf: no limit; default none: the server's --budget-epsilon)")
	return cmd
}

// allowUnprovedFlag binds release.Options.AllowUnproved (embed, serve).
func allowUnprovedFlag(fs *pflag.FlagSet, o *release.Options) {
	fs.BoolVar(&o.AllowUnproved, "allow-unproved-release", false, "release a model whose noise scale or pseudo-counts depend on the input with the floating-point sampler, whose bits no certificate covers (the metadata and /v1/info say so; docs/privacy.md \"Floating-point safety\")")
}

// unprovedHint names the flag that accepts an unproved release in the
// error of a model whose noise is not fixed (privacy.ErrNotFixedNoise).
func unprovedHint(err error) error {
	if errors.Is(err, privacy.ErrNotFixedNoise) {
		return fmt.Errorf("%w (--allow-unproved-release)", err)
	}
	return err
}
