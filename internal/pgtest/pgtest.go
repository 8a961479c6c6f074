// Package pgtest starts throwaway PostgreSQL clusters for the tests of the
// PostgreSQL ledger (package serve, cmd/nvdp): initdb into a new temporary
// directory, the server on a unix socket in that directory only (no TCP
// port), stopped and removed at the end. PostgreSQL refuses to run as root,
// and CI runs as root: there the cluster runs as the system user postgres
// (Debian's package creates it; else nobody) through runuser or setpriv.
// Tests skip, with one line, only when PostgreSQL's binaries are absent
// (scripts/deps.sh installs Debian's postgresql), and not even then in CI
// (the environment variable CI is "true"): there a missing dependency the
// tests need fails them, so that no suite is hidden by a skip.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a running throwaway cluster.
type Cluster struct {
	// Dir holds the data directory (data/), the server's log (log) and its
	// socket; it is owned by the server's user.
	Dir string
	// User is the operating-system user the server runs as ("": this
	// process's user).
	User string
	bin  string

	mu      sync.Mutex
	stopped bool
}

// Options tune a cluster.
type Options struct {
	// Durable keeps PostgreSQL's fsync and full-page writes (off by
	// default: the tests crash nvdp processes, never the machine, and run
	// faster without them).
	Durable bool
}

// Bin is the directory of PostgreSQL's server binaries (initdb, pg_ctl,
// postgres): on PATH, else the newest /usr/lib/postgresql/*/bin. Error:
// none is installed.
func Bin() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL's initdb and pg_ctl are not installed (apt-get install postgresql; scripts/deps.sh does)")
}

// version is the major version in a /usr/lib/postgresql/N/bin path.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// runAs is the user a root process runs the server as: postgres, else nobody.
func runAs() (string, error) {
	if os.Geteuid() != 0 {
		return "", nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		if _, err := user.Lookup(name); err == nil {
			return name, nil
		}
	}
	return "", errors.New("running as root, and neither the user postgres nor nobody exists to run PostgreSQL as")
}

// command runs a server binary of c as c.User.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, name)
	if c.User == "" {
		return exec.Command(path, args...)
	}
	if runuser, err := exec.LookPath("runuser"); err == nil {
		return exec.Command(runuser, append([]string{"-u", c.User, "--", path}, args...)...)
	}
	u, _ := user.Lookup(c.User)
	return exec.Command("setpriv", append([]string{"--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups", path}, args...)...)
}

// run runs a server binary of c as c.User, with its output in the error.
func (c *Cluster) run(name string, args ...string) error {
	cmd := c.command(name, args...)
	cmd.Dir = c.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// missing ends tb for a dependency that is not installed: a skip, or in CI
// (CI=true) a failure.
func missing(tb testing.TB, msg string) {
	tb.Helper()
	if inCI() {
		tb.Fatal(msg + " (CI=true: a dependency the tests need is a failure there, not a skip)")
		return
	}
	tb.Skip(msg)
}

// inCI reports whether the tests run in CI: the variable CI is "true", as
// GitHub Actions, GitLab CI and most others set it.
func inCI() bool { return os.Getenv("CI") == "true" }

// New starts a new cluster, stopped and removed when tb ends. It skips tb
// (one line) when PostgreSQL is not installed, and fails it in CI.
func New(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	bin, err := Bin()
	if err != nil {
		missing(tb, "pgtest: "+err.Error())
	}
	c, err := start(bin, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Error(err)
		}
	})
	return c
}

// start initialises and starts a cluster in a new temporary directory.
func start(bin string, o Options) (*Cluster, error) {
	as, err := runAs()
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	dir, err := os.MkdirTemp("", "nvdp-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c := &Cluster{Dir: dir, User: as, bin: bin}
	if as != "" {
		u, err := user.Lookup(as)
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	if err := c.run("initdb", "-D", filepath.Join(dir, "data"), "--auth=trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	conf := []string{"listen_addresses = ''", "unix_socket_directories = '" + dir + "'", "port = 5432",
		"max_connections = 200", "shared_buffers = 32MB", "log_min_messages = warning"}
	if !o.Durable {
		conf = append(conf, "fsync = off", "full_page_writes = off", "synchronous_commit = off")
	}
	auto := filepath.Join(dir, "data", "postgresql.auto.conf")
	if err := appendFile(auto, strings.Join(conf, "\n")+"\n"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := c.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

// appendFile appends s to the file at path (written by the server's user,
// readable by it: root may write into it).
func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	return errors.Join(err, f.Close())
}

// Start starts the cluster's server (again, after Stop) and waits until it
// accepts connections.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.run("pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-l", filepath.Join(c.Dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.Dir, "log"))
		return fmt.Errorf("pgtest: %w\nserver log:\n%s", err, log)
	}
	c.stopped = false
	return nil
}

// Stop stops the server (fast shutdown: sessions are ended, transactions in
// flight rolled back), keeping the data directory.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if err := c.run("pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	c.stopped = true
	return nil
}

// Close stops the server and removes its directory.
func (c *Cluster) Close() error {
	err := c.Stop()
	return errors.Join(err, os.RemoveAll(c.Dir))
}

// Log is the server's log so far.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "log"))
	return string(b)
}

// DSN is the connection string of database db as the superuser postgres,
// over the cluster's unix socket.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=5432&sslmode=disable", db, c.Dir)
}

// dbSeq numbers the databases of this process.
var dbSeq atomic.Int64

// NewDatabase creates a new, empty database in the cluster and returns its
// DSN; tb's name is in the database's name.
func (c *Cluster) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%d_%d_%s", os.Getpid(), dbSeq.Add(1), sanitize(tb.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return c.DSN(name)
}

// sanitize keeps the letters and digits of a test name, lower-cased.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// shared is the cluster of Shared, started once per test binary.
var shared struct {
	once sync.Once
	c    *Cluster
	err  error
	skip string
}

// Shared returns the test binary's shared cluster, started at the first
// call (each test makes its own database with NewDatabase); Main stops and
// removes it. It skips tb (one line) when PostgreSQL is not installed, and
// fails it in CI. A
// test that stops or restarts the server uses New instead.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	shared.once.Do(func() {
		bin, err := Bin()
		if err != nil {
			shared.skip = "pgtest: " + err.Error()
			return
		}
		shared.c, shared.err = start(bin, Options{})
	})
	if shared.skip != "" {
		missing(tb, shared.skip)
	}
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.c
}

// Main runs the tests of m and then stops and removes the shared cluster
// (if one was started); a package's TestMain is os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared.c != nil {
		if err := shared.c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}
