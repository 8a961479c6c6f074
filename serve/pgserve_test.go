package serve_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/internal/pgtest"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/ledger/pgledger"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

// The server on a PostgreSQL ledger (the ledger's own tests are
// ledger/pgledger's).

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestPGLedgerDatabaseDown: while PostgreSQL is stopped, charges, balances,
// key lookups and Err fail with the temporary unavailable error within the
// timeout; a server answers /v1/embed and /v1/budget with 503
// ledger_unavailable (nothing released), /readyz 503 and /healthz 200; once
// PostgreSQL is back the same server releases again, with every charge made
// before the outage kept.
func TestPGLedgerDatabaseDown(t *testing.T) {
	cluster := pgtest.New(t, pgtest.Options{})
	dsn := servetest.InitPGLedger(t, cluster)
	o := pgledger.DefaultOptions()
	o.Timeout = time.Second
	l := servetest.OpenPGLedger(t, dsn, o)
	key := mustKey(t)
	if err := l.AddKey("alice", key, 50, map[string]string{"team": "a"}); err != nil {
		t.Fatal(err)
	}
	fake := servetest.NewFake(3, 4, rho)
	so := serve.DefaultOptions()
	srv, err := serve.New(fake, l, l, so, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newTestServer(t, srv)
	embed := func() (int, map[string]any) {
		return servetest.Do(t, "POST", h+"/v1/embed", key, "application/json", `{"texts": ["a", "b"]}`)
	}
	if code, body := embed(); code != 200 {
		t.Fatalf("before: %d %v", code, body)
	}
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	started := fake.Started()
	start := time.Now()
	code, body := embed()
	e, _ := body["error"].(map[string]any)
	if code != 503 || e == nil || e["code"] != "ledger_unavailable" || body["embeddings"] != nil || !strings.Contains(fmt.Sprint(e["message"]), "retry later") {
		t.Fatalf("embed with the database down: %d %v", code, body)
	}
	if fake.Started() != started {
		t.Error("the model ran with the database down")
	}
	if code, _ := servetest.Do(t, "GET", h+"/v1/budget", key, "", ""); code != 503 {
		t.Errorf("budget: %d", code)
	}
	if code, body := servetest.Do(t, "GET", h+"/readyz", "", "", ""); code != 503 || body["error"].(map[string]any)["code"] != "ledger_unavailable" {
		t.Errorf("readyz: %d %v", code, body)
	}
	if code, _ := servetest.Do(t, "GET", h+"/healthz", "", "", ""); code != 200 {
		t.Errorf("healthz: %d", code)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the refusals took %v", d)
	}
	c, _ := l.RegisterCurve(servetest.GaussianGuarantee(rho), "again")
	for _, f := range []func() error{
		func() error { _, err := l.Charge("alice", c, 1, 100); return err },
		func() error { _, err := l.Balance("alice", c, 100); return err },
		func() error { _, err := l.LookupKey(key); return err },
		l.Err,
	} {
		if err := f(); !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("with the database down: %v", err)
		}
	}
	_, m := servetest.Do(t, "GET", h+"/metrics", "", "", "")
	for _, want := range []string{"nvdp_ledger_available 0", `nvdp_ledger_pool_connections{state="max"} 8`, "nvdp_ledger_charges_waiting 0", `nvdp_ledger_errors_total{op="charge"}`} {
		if !strings.Contains(m["raw"].(string), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	servetest.WaitFor(t, "the ledger to answer", func() bool { return l.Err() == nil })
	code, body = embed()
	if code != 200 || num(body["privacy"].(map[string]any)["remaining_releases"]) < 0 {
		t.Fatalf("after the restart: %d %v", code, body)
	}
	if got := num(body["privacy"].(map[string]any)["spent_epsilon"]); math.Abs(got-epsOfReleases(4)) > 1e-9 {
		t.Errorf("spent %v after 4 releases, want %v", got, epsOfReleases(4))
	}
	if code, _ := servetest.Do(t, "GET", h+"/readyz", "", "", ""); code != 200 {
		t.Errorf("readyz after the restart: %d", code)
	}
}

// newTestServer serves srv on a loopback port until the test ends and
// returns its URL.
func newTestServer(t *testing.T, srv *serve.Server) string {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestPGKeys: keys in the database are added, rotated and revoked while a
// server runs, which authenticates each change from the next request; the
// budget is the key's; the listing shows no hash; an ID is never reused.
func TestPGKeys(t *testing.T) {
	l := servetest.OpenPGLedger(t, servetest.NewPGLedger(t), pgledger.DefaultOptions())
	srv, err := serve.New(servetest.NewFake(3, 4, rho), l, l, serve.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newTestServer(t, srv)
	embed := func(key string) int {
		code, _ := servetest.Do(t, "POST", h+"/v1/embed", key, "application/json", `{"texts": ["a"]}`)
		return code
	}
	k1, k2 := mustKey(t), mustKey(t)
	if code := embed(k1); code != 401 {
		t.Fatalf("unknown key: %d", code)
	}
	budget := exactBudget(t, 2)
	if err := l.AddKey("alice", k1, budget, map[string]string{"team": "research"}); err != nil {
		t.Fatal(err)
	}
	if code := embed(k1); code != 200 {
		t.Fatalf("added key: %d", code)
	}
	if err := l.RotateKey("alice", k2); err != nil {
		t.Fatal(err)
	}
	if code := embed(k1); code != 401 {
		t.Errorf("the rotated-out key: %d", code)
	}
	if code := embed(k2); code != 200 {
		t.Errorf("the rotated-in key: %d", code)
	}
	if code := embed(k2); code != 429 {
		t.Errorf("past the key's budget of 2: %d", code)
	}
	if err := l.SetKeyBudget("alice", math.Inf(1)); err != nil {
		t.Fatal(err)
	}
	if code := embed(k2); code != 200 {
		t.Errorf("after raising the budget: %d", code)
	}
	if err := l.RevokeKey("alice"); err != nil {
		t.Fatal(err)
	}
	if code := embed(k2); code != 401 {
		t.Errorf("the revoked key: %d", code)
	}
	for _, tc := range []struct {
		err error
		msg string
	}{
		{l.AddKey("alice", mustKey(t), 1, nil), `key "alice": key revoked: its ID is never reused`},
		{l.AddKey("bob", mustKey(t), 1, map[string]string{"team": "caf\xe9"}), `label "team=caf\xe9": invalid UTF-8`},
		{l.AddKey("bob", mustKey(t), 1, map[string]string{"\xff": "x"}), `invalid UTF-8`},
		{l.AddKey("bob", k2, 1, nil), "the key's hash is another key's"},
		{l.AddKey("bad id", mustKey(t), 1, nil), "key ID \"bad id\""},
		{l.AddKey("carol", mustKey(t), -1, nil), "budget -1: must be >= 0"},
		{l.RotateKey("alice", mustKey(t)), `key "alice": key revoked`},
		{l.RevokeKey("alice"), `key "alice": key revoked`},
		{l.SetKeyBudget("alice", 1), `key "alice": key revoked`},
		{l.RotateKey("nobody", mustKey(t)), "no such key"},
		{l.RevokeKey("nobody"), "no such key"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.msg) {
			t.Errorf("%v, want %q", tc.err, tc.msg)
		}
	}
	keys, err := l.Keys()
	if err != nil || len(keys) != 1 || keys[0].ID != "alice" || keys[0].Revoked == nil || keys[0].Rotated == nil ||
		keys[0].Labels["team"] != "research" || keys[0].Budget != jsonfloat.Float(math.Inf(1)) {
		t.Fatalf("keys %+v %v", keys, err)
	}
	accts, _ := l.Accounts()
	if len(accts) != 1 || accts[0].Releases != 3 {
		t.Errorf("accounts %+v: the revoked key's account stays", accts)
	}
}

// TestPGPermanentErrorsServed: a ledger whose database user may not write
// the charges (SQLSTATE 42501, a permanent error) is answered 500
// ledger_error without Retry-After, and /readyz 503 while its charges
// fail.
func TestPGPermanentErrorsServed(t *testing.T) {
	dsn := servetest.NewPGLedger(t)
	l := servetest.OpenPGLedger(t, servetest.NoInsertDSN(t, dsn), pgledger.DefaultOptions())
	so := serve.DefaultOptions()
	so.BudgetEpsilon = math.Inf(1)
	srv, err := serve.New(servetest.NewFake(3, 4, rho), l, nil, so, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newTestServer(t, srv)
	if code, _ := servetest.Do(t, "GET", h+"/readyz", "", "", ""); code != 200 {
		t.Errorf("readyz before a charge: %d", code)
	}
	resp, err := http.Post(h+"/v1/embed", "application/json", strings.NewReader(`{"texts": ["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 500 || body["error"]["code"] != "ledger_error" || resp.Header.Get("Retry-After") != "" {
		t.Errorf("embed: %d %v, Retry-After %q", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if code, body := servetest.Do(t, "GET", h+"/readyz", "", "", ""); code != 503 || body["error"].(map[string]any)["code"] != "ledger_unavailable" {
		t.Errorf("readyz while charges fail: %d %v", code, body)
	}
}

// exactBudget is a budget that holds exactly k releases of the fake's
// curve (rho), no more.
func exactBudget(t testing.TB, k int) float64 {
	b := epsOfReleases(float64(k)) * (1 + 1e-12)
	if epsOfReleases(float64(k+1)) <= b {
		t.Fatalf("set-up: %d releases fit a budget of %d", k+1, k)
	}
	return b
}
