package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nvdp-project/nvdp/ledger"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fixture is a server on a fake model with keys alice (budget from the
// keys file) and bob (the default budget), its ledger and its logs.
type fixture struct {
	fake       *servetest.Fake
	srv        *serve.Server
	ledger     *ledger.File
	http       *httptest.Server
	logs       *logBuffer
	alice, bob string // the keys
}

const rho = 0.01 // the fake's curve: rd(order) = order rho

func newFixture(t testing.TB, aliceBudget float64, edit func(*serve.Options)) *fixture {
	t.Helper()
	f := &fixture{fake: servetest.NewFake(3, 4, rho), logs: &logBuffer{}}
	f.alice, f.bob = mustKey(t), mustKey(t)
	keysPath := filepath.Join(t.TempDir(), "keys.txt")
	if err := serve.AppendKey(keysPath, "alice", f.alice, aliceBudget); err != nil {
		t.Fatal(err)
	}
	if err := serve.AppendKey(keysPath, "bob", f.bob, option.Auto()); err != nil {
		t.Fatal(err)
	}
	keys, err := serve.ReadKeys(keysPath)
	if err != nil {
		t.Fatal(err)
	}
	f.ledger = servetest.OpenLedger(t)
	o := serve.DefaultOptions()
	o.BudgetEpsilon = 1000
	if edit != nil {
		edit(&o)
	}
	log := slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if f.srv, err = serve.New(f.fake, f.ledger, keys, o, log); err != nil {
		t.Fatal(err)
	}
	f.http = httptest.NewServer(f.srv)
	t.Cleanup(f.http.Close)
	return f
}

func mustKey(t testing.TB) string {
	k, err := serve.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// do sends a request to the fixture's server (servetest.Do).
func (f *fixture) do(t *testing.T, method, path, key, contentType, body string) (int, map[string]any) {
	t.Helper()
	return servetest.Do(t, method, f.http.URL+path, key, contentType, body)
}

func (f *fixture) embed(t *testing.T, key string, texts ...string) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string][]string{"texts": texts})
	return f.do(t, http.MethodPost, "/v1/embed", key, "application/json", string(b))
}

// epsOfReleases is the independent conversion of m releases of the fake's
// curve (ledger_test.go has the same for the internal tests).
func epsOfReleases(m float64) float64 {
	best := math.Inf(1)
	for _, o := range privacy.DefaultOrders {
		best = math.Min(best, m*o*rho+math.Log((o-1)/o)-(math.Log(privacy.DefaultDelta)+math.Log(o))/(o-1))
	}
	return math.Max(0, best)
}

func num(v any) float64 {
	if f, ok := v.(float64); ok {
		return f
	}
	return math.NaN()
}

// TestEmbed: a release has the shape [texts][N][P] and [texts][N], the
// fake's values, and the privacy block of one release with the balance
// after the request's releases (composed additively, converted at delta).
func TestEmbed(t *testing.T) {
	f := newFixture(t, 50, nil)
	code, body := f.embed(t, f.alice, "the first text", "a second one")
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, body)
	}
	embs, weights := body["embeddings"].([]any), body["weights"].([]any)
	if len(embs) != 2 || len(weights) != 2 {
		t.Fatalf("%d embeddings, %d weights", len(embs), len(weights))
	}
	want := servetest.Embed("a second one", 3, 4)
	rows := embs[1].([]any)
	if len(rows) != 3 || len(rows[2].([]any)) != 4 {
		t.Fatalf("embedding shape %d x %d, want 3 x 4", len(rows), len(rows[2].([]any)))
	}
	if got := num(rows[2].([]any)[1]); float32(got) != want.Z[2*4+1] {
		t.Errorf("Z[2][1] = %v, want %v", got, want.Z[9])
	}
	if got := num(weights[1].([]any)[2]); float32(got) != want.Pi[2] {
		t.Errorf("pi[2] = %v, want %v", got, want.Pi[2])
	}
	g := servetest.GaussianGuarantee(rho)
	p := body["privacy"].(map[string]any)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"epsilon", num(p["epsilon"]), epsOfReleases(1)},
		{"order", num(p["order"]), float64(g.BestOrder)},
		{"rd_certified", num(p["rd_certified"]), float64(g.BestOrder) * rho},
		{"delta", num(p["delta"]), 1e-5},
		{"releases", num(p["releases"]), 2},
		{"spent_epsilon", num(p["spent_epsilon"]), epsOfReleases(2)},
		{"budget_epsilon", num(p["budget_epsilon"]), 50},
		{"remaining_epsilon", num(p["remaining_epsilon"]), 50 - epsOfReleases(2)},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want) > 1e-9*math.Max(1, math.Abs(c.want)) {
			t.Errorf("privacy.%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// The releases that fit: the largest m with eps(2 + m) <= 50.
	m := 0.0
	for epsOfReleases(2+m+1) <= 50 {
		m++
	}
	if got := num(p["remaining_releases"]); got != m || p["account"] != "alice" {
		t.Errorf("remaining_releases %v (account %v), want %v", got, p["account"], m)
	}
	if code, body := f.do(t, http.MethodGet, "/v1/budget", f.alice, "", ""); code != 200 || num(body["budget"].(map[string]any)["releases"]) != 2 {
		t.Errorf("GET /v1/budget: %d %v", code, body)
	}
}

// TestBudgetExhaustion: with a budget of exactly 5 releases, a request of 3
// texts when 1 remains is refused whole (429, what remains, nothing
// released: the model is not even run), the last release fits, the next
// is refused; the ledger holds 5.
func TestBudgetExhaustion(t *testing.T) {
	budget := epsOfReleases(5) * (1 + 1e-12)
	if epsOfReleases(6) <= budget {
		t.Fatal("set-up: 6 releases fit")
	}
	f := newFixture(t, budget, nil)
	for i := range 2 {
		if code, body := f.embed(t, f.alice, "a", "b"); code != 200 {
			t.Fatalf("request %d: %d %v", i, code, body)
		}
	}
	started := f.fake.Started()
	code, body := f.embed(t, f.alice, "c", "d", "e")
	e, _ := body["error"].(map[string]any)
	if code != http.StatusTooManyRequests || e == nil || e["code"] != "budget_exceeded" || body["embeddings"] != nil {
		t.Fatalf("over budget: %d %v", code, body)
	}
	b := e["budget"].(map[string]any)
	if num(b["remaining_releases"]) != 1 || num(e["requested_releases"]) != 3 || num(b["releases"]) != 4 ||
		math.Abs(num(b["spent_epsilon"])-epsOfReleases(4)) > 1e-9 || math.Abs(num(b["remaining_epsilon"])-(budget-epsOfReleases(4))) > 1e-9 {
		t.Errorf("refusal body %v", e)
	}
	if msg := e["message"].(string); !strings.Contains(msg, "1 releases remain; nothing was released") {
		t.Errorf("message %q", msg)
	}
	if f.fake.Started() != started {
		t.Error("the model ran for a request refused on its budget")
	}
	if code, body := f.embed(t, f.alice, "f"); code != 200 || num(body["privacy"].(map[string]any)["remaining_releases"]) != 0 {
		t.Fatalf("last release: %d %v", code, body)
	}
	if code, body := f.embed(t, f.alice, "g"); code != http.StatusTooManyRequests || num(body["error"].(map[string]any)["budget"].(map[string]any)["remaining_releases"]) != 0 {
		t.Fatalf("after the budget: %d %v", code, body)
	}
	// bob has the default budget (1000) and his own account.
	if code, body := f.embed(t, f.bob, "h"); code != 200 || body["privacy"].(map[string]any)["account"] != "bob" {
		t.Fatalf("bob: %d %v", code, body)
	}
	accts, _ := f.ledger.Accounts()
	if len(accts) != 2 || accts[0].ID != "alice" || accts[0].Releases != 5 || accts[1].Releases != 1 {
		t.Fatalf("ledger %+v, want alice 5, bob 1", accts)
	}
}

// TestMalformedRequests: every bad request is a clear 4xx JSON error with
// its code, and nothing is released or charged.
func TestMalformedRequests(t *testing.T) {
	f := newFixture(t, 50, func(o *serve.Options) { o.MaxTexts, o.MaxTextBytes, o.MaxBodyBytes = 3, 10, 200 })
	tests := []struct {
		name, method, path, key, ctype, body string
		status                               int
		code, msg                            string
	}{
		{"bad JSON", "POST", "/v1/embed", "alice", "application/json", `{"texts": ["a",}`, 400, "bad_json", "malformed JSON at byte 16"},
		{"truncated", "POST", "/v1/embed", "alice", "", `{"texts": ["a"`, 400, "bad_json", "truncated"},
		{"empty body", "POST", "/v1/embed", "alice", "", ``, 400, "bad_json", "empty body"},
		{"trailing data", "POST", "/v1/embed", "alice", "", `{"texts": ["a"]} {}`, 400, "bad_json", "data after the JSON object"},
		{"texts a string", "POST", "/v1/embed", "alice", "", `{"texts": "a"}`, 400, "wrong_type", `"texts" holds a JSON string, want an array of strings`},
		{"text a number", "POST", "/v1/embed", "alice", "", `{"texts": ["a", 2]}`, 400, "wrong_type", `"texts" holds a JSON number, want a string`},
		{"body an array", "POST", "/v1/embed", "alice", "", `["a"]`, 400, "wrong_type", "the body is a JSON array"},
		{"unknown field", "POST", "/v1/embed", "alice", "", `{"texts": ["a"], "seed": 1}`, 400, "unknown_field", `unknown field "seed"`},
		{"long unknown field", "POST", "/v1/embed", "alice", "", `{"` + strings.Repeat("x", 100) + `": 1}`, 400, "unknown_field", `unknown field "` + strings.Repeat("x", 64) + `..."`},
		{"no texts", "POST", "/v1/embed", "alice", "", `{}`, 400, "missing_texts", `needs "texts"`},
		{"null texts", "POST", "/v1/embed", "alice", "", `{"texts": null}`, 400, "missing_texts", `needs "texts"`},
		{"empty texts", "POST", "/v1/embed", "alice", "", `{"texts": []}`, 400, "empty_texts", `"texts" is empty`},
		{"empty text", "POST", "/v1/embed", "alice", "", `{"texts": ["a", " \t"]}`, 400, "empty_text", "texts[1] is empty"},
		{"too many texts", "POST", "/v1/embed", "alice", "", `{"texts": ["a","b","c","d"]}`, 400, "too_many_texts", "4 texts, the limit is 3"},
		{"text too long", "POST", "/v1/embed", "alice", "", `{"texts": ["a", "0123456789x"]}`, 400, "text_too_long", "texts[1] has 11 bytes, the limit is 10"},
		{"body too large", "POST", "/v1/embed", "alice", "", `{"texts": ["` + strings.Repeat("a", 300) + `"]}`, 413, "body_too_large", "larger than 200 bytes"},
		{"content type", "POST", "/v1/embed", "alice", "text/plain", `{"texts": ["a"]}`, 415, "unsupported_media_type", `"text/plain"`},
		{"no key", "POST", "/v1/embed", "", "", `{"texts": ["a"]}`, 401, "unauthorized", "no API key"},
		{"unknown key", "POST", "/v1/embed", "nvdp_wrong", "", `{"texts": ["a"]}`, 401, "unauthorized", "unknown API key"},
		{"GET embed", "GET", "/v1/embed", "alice", "", ``, 405, "method_not_allowed", "use POST"},
		{"unknown path", "GET", "/v2/embed", "alice", "", ``, 404, "not_found", `"/v2/embed"`},
		// issue 32: http.ServeMux routes; its plain-text 404 and 405 are never sent
		{"DELETE embed", "DELETE", "/v1/embed", "alice", "", ``, 405, "method_not_allowed", "DELETE /v1/embed: use POST"},
		{"POST info", "POST", "/v1/info", "alice", "", ``, 405, "method_not_allowed", "use GET"},
		{"root", "GET", "/", "alice", "", ``, 404, "not_found", "routes: POST /v1/embed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key
			if key == "alice" {
				key = f.alice
			}
			code, body := f.do(t, tc.method, tc.path, key, tc.ctype, tc.body)
			e, _ := body["error"].(map[string]any)
			if code != tc.status || e == nil || e["code"] != tc.code || !strings.Contains(fmt.Sprint(e["message"]), tc.msg) || e["request_id"] == "" {
				t.Fatalf("%d %v, want %d %s %q", code, body, tc.status, tc.code, tc.msg)
			}
		})
	}
	if n := f.fake.Started(); n != 0 {
		t.Errorf("the model ran %d times", n)
	}
	if accts, _ := f.ledger.Accounts(); len(accts) != 0 {
		t.Errorf("ledger charged: %+v", accts)
	}
}

// TestConcurrencyLimit: with 1 release slot and a queue of 1, a third
// request is refused at once with 429 while the first runs and the second
// waits; both then finish.
func TestConcurrencyLimit(t *testing.T) {
	f := newFixture(t, 50, func(o *serve.Options) { o.MaxConcurrent, o.MaxQueue, o.BatchTexts = 1, 1, 1 })
	f.fake.Gate = make(chan struct{})
	type result struct{ code int }
	results := make(chan result, 2)
	for i := range 2 {
		go func() {
			code, _ := f.embed(t, f.alice, fmt.Sprint("text ", i))
			results <- result{code}
		}()
	}
	servetest.WaitFor(t, "a release running", func() bool { return f.fake.Started() == 1 })
	servetest.WaitFor(t, "a request queued", func() bool {
		_, m := f.do(t, "GET", "/metrics", "", "", "")
		return strings.Contains(m["raw"].(string), "nvdp_requests_queued 1")
	})
	start := time.Now()
	code, body := f.embed(t, f.alice, "third")
	if code != http.StatusTooManyRequests || body["error"].(map[string]any)["code"] != "overloaded" {
		t.Fatalf("third request: %d %v", code, body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the refusal took %v", d)
	}
	f.fake.Gate <- struct{}{}
	f.fake.Gate <- struct{}{}
	for range 2 {
		if r := <-results; r.code != 200 {
			t.Errorf("a held request ended with %d", r.code)
		}
	}
	if _, m := f.do(t, "GET", "/metrics", "", "", ""); !strings.Contains(m["raw"].(string), "nvdp_overload_refusals_total 1") {
		t.Error("overload refusal not counted")
	}
}

// TestTimeoutAndFailure: a release past RequestTimeout is a 503 and a
// failing model a 500 without its error; neither is charged.
func TestTimeoutAndFailure(t *testing.T) {
	f := newFixture(t, 50, func(o *serve.Options) { o.RequestTimeout = 50 * time.Millisecond })
	f.fake.Set(5*time.Second, nil)
	if code, body := f.embed(t, f.alice, "slow"); code != http.StatusServiceUnavailable || body["error"].(map[string]any)["code"] != "timeout" {
		t.Fatalf("slow release: %d %v", code, body)
	}
	f.fake.Set(0, errors.New("model exploded at /secret/path"))
	code, body := f.embed(t, f.alice, "fails")
	if code != 500 || strings.Contains(fmt.Sprint(body), "secret") || body["error"].(map[string]any)["code"] != "release_failed" {
		t.Fatalf("failing release: %d %v", code, body)
	}
	if !strings.Contains(f.logs.String(), "model exploded") {
		t.Error("the model's error is not logged")
	}
	if accts, _ := f.ledger.Accounts(); len(accts) != 0 {
		t.Errorf("ledger charged: %+v", accts)
	}
}

// TestMetricsAndInfo: /metrics has the request counter by route and code,
// the latency histogram, releases and budget refusals; /v1/info the
// guarantee and its scope; /healthz and /readyz answer.
func TestMetricsAndInfo(t *testing.T) {
	f := newFixture(t, epsOfReleases(3)*(1+1e-12), nil)
	f.embed(t, f.alice, "a", "b")
	f.embed(t, f.alice, "c", "d")
	f.embed(t, f.alice, "e")
	f.do(t, "POST", "/v1/embed", "", "", "{}")
	_, m := f.do(t, "GET", "/metrics", "", "", "")
	raw := m["raw"].(string)
	for _, want := range []string{
		`nvdp_http_requests_total{code="200",route="/v1/embed"} 2`,
		`nvdp_http_requests_total{code="429",route="/v1/embed"} 1`,
		`nvdp_http_requests_total{code="401",route="/v1/embed"} 1`,
		`nvdp_http_request_duration_seconds_count{route="/v1/embed"} 4`,
		`nvdp_http_request_duration_seconds_bucket{route="/v1/embed",le="0.001"}`,
		"nvdp_releases_total 3",
		"nvdp_budget_refusals_total 1",
		"nvdp_ledger_charge_duration_seconds_count 2",
		"nvdp_ledger_available 1",
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if !strings.Contains(raw, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	code, info := f.do(t, "GET", "/v1/info", "", "", "")
	g := info["guarantee"].(map[string]any)
	if code != 200 || num(info["components"]) != 3 || num(info["dims"]) != 4 || num(g["releases"]) != 1 ||
		len(g["orders"].([]any)) != len(privacy.DefaultOrders) || math.Abs(num(info["per_release"].(map[string]any)["epsilon"])-epsOfReleases(1)) > 1e-9 {
		t.Fatalf("info %d %v", code, info)
	}
	if scope := fmt.Sprint(info["scope"]); !strings.Contains(scope, "training data of the model is not covered") || !strings.Contains(scope, "Repeated releases compose") {
		t.Errorf("scope %s", scope)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := f.do(t, "GET", p, "", "", ""); code != 200 {
			t.Errorf("%s: %d %v", p, code, body)
		}
	}
}

// TestLedgerUnavailable: once the ledger's file is removed while serving,
// embed and budget requests answer 503 ledger_unavailable (nothing
// released), /readyz 503 while /healthz stays 200, the metric says so and
// an error line is logged; the server's backups still rescue the charges,
// and --backup-keep prunes them.
func TestLedgerUnavailable(t *testing.T) {
	bdir := t.TempDir()
	f := newFixture(t, 50, func(o *serve.Options) { o.BackupDir, o.BackupKeep = bdir, 1 })
	if code, body := f.embed(t, f.alice, "a", "b"); code != 200 {
		t.Fatalf("before: %d %v", code, body)
	}
	if code, _ := f.do(t, "GET", "/readyz", "", "", ""); code != 200 {
		t.Fatalf("readyz before: %d", code)
	}
	if err := os.Remove(f.ledger.Path()); err != nil {
		t.Fatal(err)
	}
	code, body := f.embed(t, f.alice, "c")
	e, _ := body["error"].(map[string]any)
	if code != http.StatusServiceUnavailable || e == nil || e["code"] != "ledger_unavailable" || body["embeddings"] != nil ||
		!strings.Contains(e["message"].(string), "nothing was released or charged") || strings.Contains(e["message"].(string), f.ledger.Path()) {
		t.Fatalf("embed after removal: %d %v", code, body)
	}
	started := f.fake.Started()
	if code, body := f.embed(t, f.bob, "d"); code != http.StatusServiceUnavailable || f.fake.Started() != started {
		t.Fatalf("second embed: %d %v (model runs %d -> %d)", code, body, started, f.fake.Started())
	}
	if code, _ := f.do(t, "GET", "/v1/budget", f.alice, "", ""); code != http.StatusServiceUnavailable {
		t.Errorf("budget: %d", code)
	}
	if code, body := f.do(t, "GET", "/readyz", "", "", ""); code != http.StatusServiceUnavailable || body["error"].(map[string]any)["code"] != "ledger_unavailable" {
		t.Errorf("readyz: %d %v", code, body)
	}
	if code, _ := f.do(t, "GET", "/healthz", "", "", ""); code != 200 {
		t.Errorf("healthz: %d", code)
	}
	if !strings.Contains(f.logs.String(), `"msg":"ledger unavailable: releases stopped"`) || !strings.Contains(f.logs.String(), "was removed") {
		t.Errorf("log lacks the error line:\n%s", f.logs.String())
	}
	for range 2 {
		info, err := f.srv.Backup()
		if err != nil || info.Releases != 2 || info.Accounts != 1 || info.Backup == nil {
			t.Fatalf("backup of the removed ledger: %+v %v", info, err)
		}
	}
	if left, _ := os.ReadDir(bdir); len(left) != 1 {
		t.Errorf("backups kept: %d, want 1", len(left))
	}
	_, m := f.do(t, "GET", "/metrics", "", "", "")
	for _, want := range []string{"nvdp_ledger_available 0", `nvdp_ledger_backups_total{result="ok"} 2`, `nvdp_ledger_backups_total{result="failed"} 0`,
		`nvdp_http_requests_total{code="503",route="/v1/embed"} 2`} {
		if !strings.Contains(m["raw"].(string), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestLogsHoldNoSecrets: the access log has a line per request with its
// account and counts, and never a key (valid or not) nor a text.
func TestLogsHoldNoSecrets(t *testing.T) {
	f := newFixture(t, 50, nil)
	f.embed(t, f.alice, "my secret diary entry")
	f.embed(t, "nvdp_not-a-real-key-but-secret", "another private text")
	f.do(t, "POST", "/v1/embed", f.alice, "", `{"texts": ["a private text", 3]}`)
	f.do(t, "GET", "/v1/budget", f.bob, "", "")
	logs := f.logs.String()
	for _, secret := range []string{f.alice, f.bob, "not-a-real-key", "diary", "private text", hashOf(f.alice)} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs)
		}
	}
	for _, want := range []string{`"account":"alice"`, `"texts":1,"releases":1`, `"status":401`, `"error":"wrong_type"`, `"account":"bob"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s:\n%s", want, logs)
		}
	}
}

func hashOf(key string) string {
	h := serve.HashKey(key)
	return fmt.Sprintf("%x", h[:])
}

// TestGracefulShutdown: cancelling Serve's context lets the request in
// flight finish (answered 200 and charged), refuses new connections, and
// Serve returns nil.
func TestGracefulShutdown(t *testing.T) {
	f := newFixture(t, 50, nil)
	f.fake.Gate = make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String() + "/v1/embed"
	got := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"texts": ["in flight"]}`))
		req.Header.Set("Authorization", "Bearer "+f.alice)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- -1
			return
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		got <- resp.StatusCode
	}()
	servetest.WaitFor(t, "the release to start", func() bool { return f.fake.Started() == 1 })
	cancel()
	servetest.WaitFor(t, "the listener to close", func() bool {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v with a request in flight", err)
	default:
	}
	f.fake.Gate <- struct{}{}
	if code := <-got; code != 200 {
		t.Fatalf("the request in flight ended with %d", code)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if accts, _ := f.ledger.Accounts(); len(accts) != 1 || accts[0].Releases != 1 {
		t.Fatalf("ledger %+v, want the drained release charged", accts)
	}
	if logs := f.logs.String(); !strings.Contains(logs, `"msg":"draining","running":1`) || !strings.Contains(logs, `"msg":"drained"`) {
		t.Errorf("logs:\n%s", logs)
	}
}

// TestNewErrors: options and budgets are checked before serving.
func TestNewErrors(t *testing.T) {
	l := servetest.OpenLedger(t)
	fake := servetest.NewFake(3, 4, rho)
	keys, _ := serve.ParseKeys("keys.txt", strings.NewReader("alice "+hashOf("k")+"\n"))
	tests := []struct {
		name string
		keys *serve.Keys
		edit func(*serve.Options)
		fake *servetest.Fake
		err  string
	}{
		{"no keys, no budget", nil, func(o *serve.Options) {}, fake, "budget_epsilon: required without a keys file"},
		{"key without budget, no default", keys, func(o *serve.Options) {}, fake, `budget_epsilon: keys keys.txt:1: key "alice" has no budget`},
		{"bad option", nil, func(o *serve.Options) { o.MaxConcurrent = 0 }, fake, "max_concurrent 0: must be > 0"},
		{"empty shape", nil, func(o *serve.Options) { o.BudgetEpsilon = 1 }, servetest.NewFake(0, 4, rho), "N = 0, P = 4"},
		{"no backup dir", nil, func(o *serve.Options) { o.BudgetEpsilon = 1; o.BackupDir = "/no/such/dir" }, fake, `backup_dir "/no/such/dir": not a directory`},
		{"negative backup keep", nil, func(o *serve.Options) { o.BudgetEpsilon = 1; o.BackupKeep = -1 }, fake, "backup_keep -1: must be >= 0"},
		{"negative BLAS threads", nil, func(o *serve.Options) { o.BudgetEpsilon = 1; o.BLASThreads = -1 }, fake, "blas_threads -1: must be >= 0 (0: the BLAS library's own thread count)"},
		{"backup every 1ns", nil, func(o *serve.Options) { o.BudgetEpsilon = 1; o.BackupEvery = 1 }, fake, "backup_every 1ns: must be 0 (a backup only when asked) or at least 1m0s"},
		{"backup every 59s", nil, func(o *serve.Options) { o.BudgetEpsilon = 1; o.BackupEvery = 59 * time.Second }, fake, "backup_every 59s: must be 0"},
		{"max epsilon 0", nil, func(o *serve.Options) { o.BudgetEpsilon, o.MaxEpsilon = 1, 0 }, fake, "max_epsilon 0: must be > 0"},
		{"max epsilon NaN", nil, func(o *serve.Options) { o.BudgetEpsilon, o.MaxEpsilon = 1, math.NaN() }, fake, "max_epsilon NaN: must be > 0"},
		// rho 2: the curve order x 2 certifies epsilon 10.7 at delta 1e-5, above the default 8
		{"model above the default max epsilon", nil, func(o *serve.Options) { o.BudgetEpsilon = 1 }, servetest.NewFake(3, 4, 2),
			"max_epsilon 8: the model certifies epsilon 10.73"},
		{"model above a max epsilon given", nil, func(o *serve.Options) { o.BudgetEpsilon, o.MaxEpsilon = 1, 0.5 }, fake,
			"max_epsilon 0.5: the model certifies epsilon"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := serve.DefaultOptions()
			tc.edit(&o)
			_, err := serve.New(tc.fake, l, tc.keys, o, nil)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

// TestNewMaxEpsilon: a model above the default threshold serves when the
// operator raises it (to the model's epsilon exactly, or +Inf), and the
// default is privacy.DefaultMaxEpsilon.
func TestNewMaxEpsilon(t *testing.T) {
	if got := serve.DefaultOptions().MaxEpsilon; got != privacy.DefaultMaxEpsilon {
		t.Fatalf("default max_epsilon %v, want %v", got, privacy.DefaultMaxEpsilon)
	}
	fake := servetest.NewFake(3, 4, 2)
	for _, max := range []float64{float64(fake.Guarantee().Epsilon), math.Inf(1)} {
		o := serve.DefaultOptions()
		o.BudgetEpsilon, o.MaxEpsilon = 100, max
		if _, err := serve.New(fake, servetest.OpenLedger(t), nil, o, nil); err != nil {
			t.Errorf("max_epsilon %v: %v", max, err)
		}
	}
}

// FuzzEmbedBody: whatever the body of POST /v1/embed, the server answers
// 200 with one embedding per text, or a 4xx JSON error (429 once the budget
// is spent), as api/openapi.yaml describes it; never a 5xx, never a release
// without a charge.
func FuzzEmbedBody(f *testing.F) {
	for _, s := range []string{`{"texts": ["a", "b"]}`, `{"texts": []}`, `{"texts": "a"}`, `{"texts": ["a", 1]}`,
		`{"texts": null, "x": 1}`, `[`, ``, `{"texts": ["\u00e9\ud800"]} {}`, `{"TEXTS": ["a"]}`} {
		f.Add(s)
	}
	fx := newFixture(f, math.Inf(1), func(o *serve.Options) { o.MaxTexts, o.MaxTextBytes, o.MaxBodyBytes = 4, 64, 512 })
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/embed", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+fx.alice)
		rec := httptest.NewRecorder()
		fx.srv.ServeHTTP(rec, req)
		servetest.Contract(t, req, []byte(body), rec.Result(), rec.Body.Bytes())
		var out struct {
			Embeddings [][][]float32    `json:"embeddings"`
			Error      *json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("status %d, body %q is not JSON: %v", rec.Code, rec.Body.String(), err)
		}
		switch {
		case rec.Code == http.StatusOK:
			var in struct{ Texts []string }
			if json.Unmarshal([]byte(body), &in) != nil || len(out.Embeddings) != len(in.Texts) || len(in.Texts) == 0 {
				t.Fatalf("200 with %d embeddings for body %q", len(out.Embeddings), body)
			}
		case rec.Code >= 400 && rec.Code < 500 && out.Error != nil:
		default:
			t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body.String())
		}
		accts, _ := fx.ledger.Accounts()
		var charged uint64
		for _, a := range accts {
			charged += a.Releases
		}
		if int64(charged) != fx.fake.Texts() {
			t.Fatalf("ledger %d releases, model %d", charged, fx.fake.Texts())
		}
	})
}

// failingLedger is a ledger whose charges fail with fail while it is set
// (a full disk: the file is there, Err is nil, every commit fails).
type failingLedger struct {
	ledger.Ledger
	mu   sync.Mutex
	fail error
}

func (l *failingLedger) set(err error) { l.mu.Lock(); l.fail = err; l.mu.Unlock() }

func (l *failingLedger) Charge(account string, curve *ledger.Curve, releases int, budget float64) (ledger.Balance, error) {
	l.mu.Lock()
	err := l.fail
	l.mu.Unlock()
	if err != nil {
		return ledger.Balance{}, err
	}
	return l.Ledger.Charge(account, curve, releases, budget)
}

// TestReadyWhileChargesFail: /readyz answers 503 ledger_unavailable while
// the ledger's charges fail though it answers (Err nil), and 200 again
// once a charge holds.
func TestReadyWhileChargesFail(t *testing.T) {
	l := &failingLedger{Ledger: servetest.OpenLedger(t)}
	o := serve.DefaultOptions()
	o.BudgetEpsilon = math.Inf(1)
	srv, err := serve.New(servetest.NewFake(3, 4, rho), l, nil, o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ready := func() int {
		code, _ := servetest.Do(t, "GET", hs.URL+"/readyz", "", "", "")
		return code
	}
	embed := func() int {
		code, _ := servetest.Do(t, "POST", hs.URL+"/v1/embed", "", "application/json", `{"texts": ["a"]}`)
		return code
	}
	if ready() != 200 {
		t.Fatal("not ready at start")
	}
	l.set(errors.New("ledger x: commit: write x: no space left on device"))
	if code := embed(); code != 500 {
		t.Errorf("embed on a full disk: %d", code)
	}
	if code := ready(); code != 503 {
		t.Errorf("readyz while charges fail: %d", code)
	}
	l.set(nil)
	if code := embed(); code != 200 {
		t.Errorf("embed once the disk has room: %d", code)
	}
	if code := ready(); code != 200 {
		t.Errorf("readyz once a charge held: %d", code)
	}
}

// windowLedger records the commit window the server sets.
type windowLedger struct {
	ledger.Ledger
	window time.Duration
	set    bool
}

func (l *windowLedger) SetCommitWindow(d time.Duration) { l.window, l.set = d, true }

// TestLedgerCommitWindow: New gives the ledger Options.LedgerCommitWindow, an explicit 0
// included, and refuses a negative one, naming the option.
func TestLedgerCommitWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		err    string
	}{
		{"default", ledger.DefaultCommitWindow, ""},
		{"zero", 0, ""},
		{"5ms", 5 * time.Millisecond, ""},
		{"negative", -time.Millisecond, "ledger_commit_window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &windowLedger{Ledger: servetest.OpenLedger(t)}
			o := serve.DefaultOptions()
			if o.LedgerCommitWindow != ledger.DefaultCommitWindow {
				t.Fatalf("default window %v, want %v", o.LedgerCommitWindow, ledger.DefaultCommitWindow)
			}
			o.BudgetEpsilon = math.Inf(1)
			o.LedgerCommitWindow = tc.window
			_, err := serve.New(servetest.NewFake(3, 4, rho), l, nil, o, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("window %v: error %v, want one naming %s", tc.window, err, tc.err)
				}
				if l.set {
					t.Error("the window was set though New failed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !l.set || l.window != tc.window {
				t.Errorf("ledger window %v (set %v), want %v", l.window, l.set, tc.window)
			}
		})
	}
}
