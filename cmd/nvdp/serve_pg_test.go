package main

import (
	"context"
	"encoding/json"
	"fmt"
	nvledger "github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/ledger/pgledger"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/internal/loadgen"
	"github.com/nvdp-project/nvdp/internal/pgtest"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// pgService is a PostgreSQL ledger made by `nvdp serve ledger init` through
// env:NVDP_LEDGER_DSN (set for the test and its helper processes), a key
// made by `nvdp serve keys add` with a budget, and replicas of `nvdp serve
// --keys-in-ledger` on it.
type pgService struct {
	key      string
	replicas []*serveProcess
}

// ledgerLoc is the --ledger of the PostgreSQL tests: the URL from the
// environment, as a Kubernetes Secret gives it.
const ledgerLoc = "env:NVDP_LEDGER_DSN"

// newPGService creates the ledger in a new database of cluster, adds the
// key "load" with budget (a number or "inf") and starts n replicas on the
// fake model (latency 2 ms).
func newPGService(t *testing.T, cluster *pgtest.Cluster, budget string, n int) *pgService {
	t.Helper()
	t.Setenv("NVDP_LEDGER_DSN", cluster.NewDatabase(t))
	out, stderr, code := runHelper(t, "serve", "ledger", "init", "--ledger", ledgerLoc)
	var info nvledger.Info
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.SchemaVersion != pgledger.SchemaVersion || len(info.LedgerID) != 32 {
		t.Fatalf("ledger init: exit %d %s\n%s", code, out, stderr)
	}
	out, stderr, code = runHelper(t, "serve", "keys", "add", "--ledger", ledgerLoc, "--id", "load", "--budget-epsilon", budget, "--label", "test=pg")
	s := &pgService{key: strings.TrimSpace(out)}
	if code != 0 || !strings.HasPrefix(s.key, serve.KeyPrefix) {
		t.Fatalf("keys add: exit %d %q\n%s", code, out, stderr)
	}
	for i := range n {
		s.replicas = append(s.replicas, startServe(t, ledgerLoc, "", 2*time.Millisecond, "--keys-in-ledger", "--replica", fmt.Sprintf("r%d", i)))
	}
	return s
}

func (s *pgService) urls() []string {
	var u []string
	for _, p := range s.replicas {
		u = append(u, p.url)
	}
	return u
}

// released sums nvdp_releases_total over the replicas that answer.
func (s *pgService) released(t *testing.T) float64 {
	var n float64
	for _, p := range s.replicas {
		if p.cmd.ProcessState != nil {
			continue
		}
		_, m := servetest.Do(t, "GET", p.url+"/metrics", "", "", "")
		n += loadgen.MetricValue(strings.NewReader(fmt.Sprint(m["raw"])), "nvdp_releases_total")
	}
	return n
}

// ledgerReleases is what `nvdp serve ledger` says the key "load" was
// charged, and the replicas its charges name (`nvdp serve ledger history`).
func ledgerReleases(t *testing.T) (uint64, map[string]int) {
	t.Helper()
	out, stderr, code := runHelper(t, "serve", "ledger", "--ledger", ledgerLoc)
	var accts []nvledger.Account
	if code != 0 || json.Unmarshal([]byte(out), &accts) != nil || len(accts) != 1 || accts[0].ID != "load" {
		t.Fatalf("nvdp serve ledger: exit %d %s\n%s", code, out, stderr)
	}
	out, stderr, code = runHelper(t, "serve", "ledger", "history", "--ledger", ledgerLoc, "--account", "load", "--limit", "10000")
	var h nvledger.History
	if code != 0 || json.Unmarshal([]byte(out), &h) != nil {
		t.Fatalf("nvdp serve ledger history: exit %d\n%s", code, stderr)
	}
	replicas := map[string]int{}
	var sum uint64
	for _, c := range h.Charges {
		replicas[c.Replica] += c.Releases
		sum += uint64(c.Releases)
		if c.Curve == "" || c.Model == "" || h.Curves[c.Curve].Accountant != privacy.AccountantRDP || h.Models[c.Model] == nil {
			t.Fatalf("charge %+v without its curve and model", c)
		}
	}
	if sum != accts[0].Releases || h.Before != 0 {
		t.Fatalf("history holds %d releases, the account %d", sum, accts[0].Releases)
	}
	return accts[0].Releases, replicas
}

// budgetOf is a budget (epsilon, as a flag) of exactly k releases of the
// fake model's curve (fakeLoader: rho 0.001).
func budgetOf(t *testing.T, k int) string {
	g := servetest.GaussianGuarantee(0.001)
	eps := func(m float64) float64 {
		var c []privacy.OrderRD
		for _, p := range g.Curve {
			c = append(c, privacy.OrderRD{Order: p.Order, RD: p.RD * jsonfloat.Float(m)})
		}
		e, _, err := privacy.BestEpsilon(c, g.Delta)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	b := eps(float64(k)) * (1 + 1e-12)
	if eps(float64(k+1)) <= b {
		t.Fatalf("set-up: %d releases fit", k+1)
	}
	return strconv.FormatFloat(b, 'g', -1, 64)
}

// TestServePGReplicasExactBudget: three `nvdp serve` processes on one
// PostgreSQL ledger, one key whose budget holds exactly 120 releases, 24
// concurrent clients spread over the replicas sending 240 requests of one
// text: exactly 120 are answered 200 and the other 120 refused with 429
// (no other error), the ledger holds exactly the 120 releases received,
// and its history names charges of every replica.
func TestServePGReplicasExactBudget(t *testing.T) {
	const k = 120
	s := newPGService(t, pgtest.Shared(t), budgetOf(t, k), 3)
	res, err := loadgen.Run(context.Background(), loadgen.Config{URLs: s.urls(), Key: s.key, Concurrency: 24, Requests: 2 * k,
		Texts: loadgen.SyntheticTexts(50), TextsPerRequest: 1, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests: %d answered, %d releases, errors %v", res.Requests, res.OK, res.Releases, res.Errors)
	if res.Releases != k || res.OK != k || res.Errors["HTTP 429 budget_exceeded"] != k || res.ErrorCount() != k {
		t.Fatalf("clients received %d releases (%d answered), errors %v: want exactly %d and %d refusals", res.Releases, res.OK, res.Errors, k, k)
	}
	charged, replicas := ledgerReleases(t)
	if charged != k {
		t.Fatalf("the ledger holds %d releases, the clients received %d", charged, k)
	}
	if len(replicas) != 3 {
		t.Errorf("charges by replica %v: want all three", replicas)
	}
}

// TestServePGReplicaKilled: under load from 24 clients over three replicas,
// one replica is killed with SIGKILL; the two others keep serving, the
// clients of the dead one get only transport errors, and the ledger holds
// at least every release received, at most the dead replica's requests in
// flight (its 8 clients' single texts) more.
func TestServePGReplicaKilled(t *testing.T) {
	s := newPGService(t, pgtest.Shared(t), "inf", 3)
	results := make(chan loadgen.Result, 1)
	go func() {
		r, err := loadgen.Run(context.Background(), loadgen.Config{URLs: s.urls(), Key: s.key, Concurrency: 24, Duration: 4 * time.Second,
			Texts: loadgen.SyntheticTexts(50), TextsPerRequest: 1, Timeout: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		results <- r
	}()
	servetest.WaitFor(t, "100 releases", func() bool { return s.released(t) >= 100 })
	dead := s.replicas[0]
	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dead.cmd.Wait()
	atKill := s.released(t)
	res := <-results
	after := s.released(t)
	t.Logf("clients: %d requests, %d answered, %d releases; survivors released %v after the kill; errors %v", res.Requests, res.OK, res.Releases, after-atKill, res.Errors)
	if after-atKill < 50 {
		t.Errorf("the survivors released %v after the kill", after-atKill)
	}
	for kind := range res.Errors {
		if !strings.HasPrefix(kind, "transport: ") {
			t.Errorf("error %q: only the dead replica's clients may fail, by transport", kind)
		}
	}
	charged, _ := ledgerReleases(t)
	t.Logf("ledger: %d releases charged", charged)
	if int64(charged) < res.Releases || int64(charged) > res.Releases+8 {
		t.Fatalf("the ledger holds %d releases, the clients received %d: want between %d and %d", charged, res.Releases, res.Releases, res.Releases+8)
	}
}

// TestServePGRestartUnderLoad: PostgreSQL is stopped and started again under
// load from 24 clients over three replicas: meanwhile the replicas answer
// 503 ledger_unavailable (JSON) and /readyz 503 while /healthz stays 200;
// afterwards they serve again without a restart of their own; no request
// fails otherwise, and the ledger holds at least every release received,
// at most the requests in flight (24) more.
func TestServePGRestartUnderLoad(t *testing.T) {
	cluster := pgtest.New(t, pgtest.Options{})
	s := newPGService(t, cluster, "inf", 3)
	results := make(chan loadgen.Result, 1)
	go func() {
		r, err := loadgen.Run(context.Background(), loadgen.Config{URLs: s.urls(), Key: s.key, Concurrency: 24, Duration: 6 * time.Second,
			Texts: loadgen.SyntheticTexts(50), TextsPerRequest: 1, Timeout: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		results <- r
	}()
	servetest.WaitFor(t, "100 releases", func() bool { return s.released(t) >= 100 })
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	p := s.replicas[1]
	servetest.WaitFor(t, "/readyz to fail", func() bool { code, _ := p.get(t, "/readyz", ""); return code == 503 })
	if code, _ := p.get(t, "/healthz", ""); code != 200 {
		t.Errorf("/healthz with the database down: %d", code)
	}
	time.Sleep(300 * time.Millisecond)
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	atStart := s.released(t)
	servetest.WaitFor(t, "releases after the restart", func() bool { return s.released(t) >= atStart+50 })
	res := <-results
	t.Logf("clients: %d requests, %d answered, %d releases, errors %v", res.Requests, res.OK, res.Releases, res.Errors)
	if res.Errors["HTTP 503 ledger_unavailable"] == 0 {
		t.Error("no request saw the database down")
	}
	for kind := range res.Errors {
		if kind != "HTTP 503 ledger_unavailable" && kind != "HTTP 503 ledger_busy" {
			t.Errorf("error %q: want only 503 ledger_unavailable or ledger_busy while the database is down", kind)
		}
	}
	charged, _ := ledgerReleases(t)
	t.Logf("ledger: %d releases charged", charged)
	if int64(charged) < res.Releases || int64(charged) > res.Releases+24 {
		t.Fatalf("the ledger holds %d releases, the clients received %d: want between %d and %d", charged, res.Releases, res.Releases, res.Releases+24)
	}
	if code, _ := p.get(t, "/readyz", ""); code != 200 {
		t.Errorf("/readyz after the restart: %d", code)
	}
}

// TestServeKeysCommands: `nvdp serve keys` adds (printing the key once),
// lists (no hash), re-budgets, rotates (a new key for the same account) and
// revokes the keys of a PostgreSQL ledger, and refuses a file ledger and a
// key without a budget; a PostgreSQL ledger has no nvdp backup.
func TestServeKeysCommands(t *testing.T) {
	s := newPGService(t, pgtest.Shared(t), "10", 1)
	p := s.replicas[0]
	if code, _ := p.embedOne(t, s.key); code != 200 {
		t.Fatalf("the added key: %d", code)
	}
	run := func(args ...string) (string, string) {
		t.Helper()
		out, stderr, code := runHelper(t, append([]string{"serve", "keys"}, args...)...)
		if code != 0 {
			t.Fatalf("keys %v: exit %d\n%s", args, code, stderr)
		}
		return out, stderr
	}
	out, _ := run("list", "--ledger", ledgerLoc)
	var keys []pgledger.KeyInfo
	if json.Unmarshal([]byte(out), &keys) != nil || len(keys) != 1 || keys[0].ID != "load" || keys[0].Budget != 10 || keys[0].Labels["test"] != "pg" {
		t.Fatalf("list: %s", out)
	}
	if strings.Contains(out, "hash") {
		t.Errorf("list shows a hash: %s", out)
	}
	run("budget", "--ledger", ledgerLoc, "--id", "load", "--budget-epsilon", "0")
	if code, ec := p.embedOne(t, s.key); code != 429 || ec != "budget_exceeded" {
		t.Errorf("after a budget of 0: %d %s", code, ec)
	}
	run("budget", "--ledger", ledgerLoc, "--id", "load", "--budget-epsilon", "inf")
	out, _ = run("rotate", "--ledger", ledgerLoc, "--id", "load")
	rotated := strings.TrimSpace(out)
	if code, _ := p.embedOne(t, s.key); code != 401 {
		t.Errorf("the old key after rotate: %d", code)
	}
	if code, _ := p.embedOne(t, rotated); code != 200 {
		t.Errorf("the new key: %d", code)
	}
	run("revoke", "--ledger", ledgerLoc, "--id", "load")
	if code, _ := p.embedOne(t, rotated); code != 401 {
		t.Errorf("the revoked key: %d", code)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "add", "--ledger", filepath.Join(t.TempDir(), "l.db"), "--id", "x", "--budget-epsilon", "1"}, "keys live in a PostgreSQL ledger"},
		{[]string{"keys", "add", "--ledger", ledgerLoc, "--id", "x"}, "--budget-epsilon: required: a key of the database has its own budget"},
		{[]string{"keys", "add", "--ledger", ledgerLoc, "--id", "load", "--budget-epsilon", "1"}, `key "load": key revoked: its ID is never reused`},
		{[]string{"keys", "rotate", "--ledger", ledgerLoc, "--id", "load"}, `key "load": key revoked`},
		{[]string{"keys", "revoke", "--ledger", ledgerLoc, "--id", "load"}, `key "load": key revoked`},
		{[]string{"keys", "revoke", "--ledger", ledgerLoc, "--id", "nobody"}, "no such key"},
		{[]string{"keys", "add", "--ledger", ledgerLoc, "--id", "y", "--budget-epsilon", "1", "--label", "team=caf\xe9"}, `--label: label "team=caf\xe9": invalid UTF-8`},
		{[]string{"ledger", "backup", "--ledger", ledgerLoc}, "a PostgreSQL ledger is backed up and restored by the database"},
	} {
		_, stderr, code := runHelper(t, append([]string{"serve"}, tc.args...)...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d\n%s\nwant %q", tc.args, code, stderr, tc.want)
		}
	}
}
