package pgtest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// query returns SELECT 40 + 2 on the database at dsn.
func query(t *testing.T, dsn string) (int, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT 40 + 2").Scan(&n)
	return n, err
}

// TestCluster: a new cluster serves a new database over its socket, runs
// as a user other than root, refuses connections while stopped, serves
// again after a restart, and leaves nothing behind.
func TestCluster(t *testing.T) {
	c := New(t, Options{})
	if os.Geteuid() == 0 && c.User == "" {
		t.Fatal("running as root, the server was not given another user")
	}
	dsn := c.NewDatabase(t)
	if n, err := query(t, dsn); err != nil || n != 42 {
		t.Fatalf("query: %d, %v", n, err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := query(t, dsn); err == nil {
		t.Fatal("a stopped cluster answered")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if n, err := query(t, dsn); err != nil || n != 42 {
		t.Fatalf("query after the restart: %d, %v", n, err)
	}
	dir := c.Dir
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s left behind: %v", dir, err)
	}
}

// TestShared: the shared cluster is one cluster; databases are separate.
func TestShared(t *testing.T) {
	a, b := Shared(t), Shared(t)
	if a != b {
		t.Fatal("two shared clusters")
	}
	d1, d2 := a.NewDatabase(t), a.NewDatabase(t)
	if d1 == d2 {
		t.Fatal("the same database twice")
	}
	if n, err := query(t, d2); err != nil || n != 42 {
		t.Fatalf("query: %d, %v", n, err)
	}
}

// recorder is a testing.TB that records how a test ended.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Fatal(args ...any)            { r.fatal = fmt.Sprint(args...) }
func (r *recorder) Skip(args ...any)             { r.skip = fmt.Sprint(args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.fatal = fmt.Sprintf(f, args...) }

// TestMissingFailsInCI: a missing PostgreSQL skips the tests, except with
// CI=true, where it fails them.
func TestMissingFailsInCI(t *testing.T) {
	for _, tc := range []struct {
		ci         string
		fail, skip bool
	}{{"", false, true}, {"false", false, true}, {"true", true, false}} {
		t.Setenv("CI", tc.ci)
		r := &recorder{TB: t}
		missing(r, "pgtest: not installed")
		if (r.fatal != "") != tc.fail || (r.skip != "") != tc.skip {
			t.Errorf("CI=%q: fatal %q, skip %q", tc.ci, r.fatal, r.skip)
		}
	}
}
