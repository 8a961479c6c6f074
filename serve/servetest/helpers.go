package servetest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nvdp-project/nvdp/internal/pgtest"
	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/ledger/pgledger"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/serve"
)

// NewLedger creates a new ledger file with [ledger.CreateFile] in a
// temporary directory of tb and returns its path.
func NewLedger(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "ledger.db")
	if _, err := ledger.CreateFile(path); err != nil {
		tb.Fatal(err)
	}
	return path
}

// OpenLedger opens a new ledger made by [NewLedger], closed when the test ends.
func OpenLedger(tb testing.TB) *ledger.File {
	tb.Helper()
	l, err := ledger.OpenFile(NewLedger(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// WaitFor polls cond every 5 ms until it holds, or fails tb after 60 s
// saying what it waited for.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	tb.Fatalf("timed out waiting for %s", what)
}

// Do sends a request to url with the API key in "Authorization: Bearer" and
// the Content-Type, checks the exchange against the service's contract
// api/openapi.yaml with [Contract], and returns the status and the JSON
// object of the response. A key or contentType of "" sends no such header.
// A body that is not a JSON object, as from /metrics, is returned as
// {"raw": text}.
func Do(tb testing.TB, method, url, key, contentType, body string) (int, map[string]any) {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	Contract(tb, req, []byte(body), resp, b)
	var out map[string]any
	if json.Unmarshal(b, &out) != nil || out == nil {
		out = map[string]any{"raw": string(b)}
	}
	return resp.StatusCode, out
}

// NewPGLedger creates a PostgreSQL ledger with [pgledger.Create] in a new
// database of the test binary's shared throwaway cluster, pgtest.Shared,
// and returns its URL; it skips tb when PostgreSQL is not installed.
func NewPGLedger(tb testing.TB) string {
	tb.Helper()
	return InitPGLedger(tb, pgtest.Shared(tb))
}

// InitPGLedger creates a PostgreSQL ledger in a new database of c and
// returns its URL.
func InitPGLedger(tb testing.TB, c *pgtest.Cluster) string {
	tb.Helper()
	dsn := c.NewDatabase(tb)
	if _, _, err := pgledger.Create(dsn, 30*time.Second); err != nil {
		tb.Fatal(err)
	}
	return dsn
}

// OpenPGLedger opens the PostgreSQL ledger at dsn with o, closed when the
// test ends.
func OpenPGLedger(tb testing.TB, dsn string, o pgledger.Options) *pgledger.Ledger {
	tb.Helper()
	l, err := pgledger.Open(dsn, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// ExecSQL runs sql with args on the database at dsn, failing tb on an error.
func ExecSQL(tb testing.TB, dsn, sql string, args ...any) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// NoInsertDSN returns the URL of the PostgreSQL ledger at dsn, a database of the shared cluster
// as [NewPGLedger] makes, for a role that may do everything but insert charges: every charge fails
// with SQLSTATE 42501, a permanent error. The role is dropped when tb ends.
func NoInsertDSN(tb testing.TB, dsn string) string {
	tb.Helper()
	ExecSQL(tb, dsn, `CREATE ROLE nvdp_noinsert LOGIN`)
	tb.Cleanup(func() {
		ExecSQL(tb, dsn, `DROP OWNED BY nvdp_noinsert`)
		ExecSQL(tb, dsn, `DROP ROLE nvdp_noinsert`)
	})
	ExecSQL(tb, dsn, `GRANT USAGE ON SCHEMA nvdp TO nvdp_noinsert`)
	ExecSQL(tb, dsn, `GRANT ALL ON ALL TABLES IN SCHEMA nvdp TO nvdp_noinsert`)
	ExecSQL(tb, dsn, `GRANT ALL ON ALL SEQUENCES IN SCHEMA nvdp TO nvdp_noinsert`)
	ExecSQL(tb, dsn, `REVOKE INSERT ON nvdp.charges FROM nvdp_noinsert`)
	return strings.Replace(dsn, "postgres://postgres@", "postgres://nvdp_noinsert@", 1)
}

// BadKeyFiles writes into dir the keys files that a server refuses or that
// leave a key without a budget, and returns their paths. bad has a line
// whose hash is not hex; noBudget holds the key alice without a budget;
// open holds alice with budget 1 and is writable by group and others.
func BadKeyFiles(tb testing.TB, dir string) (bad, noBudget, open string) {
	tb.Helper()
	bad = filepath.Join(dir, "bad-keys.txt")
	if err := os.WriteFile(bad, []byte("alice nothex\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	noBudget = filepath.Join(dir, "keys.txt")
	if err := serve.AppendKey(noBudget, "alice", "k", option.Auto()); err != nil {
		tb.Fatal(err)
	}
	open = filepath.Join(dir, "open-keys.txt")
	if err := serve.AppendKey(open, "alice", "k", 1); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(open, 0o666); err != nil {
		tb.Fatal(err)
	}
	return bad, noBudget, open
}
