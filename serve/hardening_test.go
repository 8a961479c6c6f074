package serve_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

// TestStrictBodies: what encoding/json accepts leniently is refused with
// its own code, and nothing released: invalid UTF-8 and lone surrogate
// escapes (it would replace them by U+FFFD, releasing a text the client did
// not send, which nvdp embed refuses), a duplicate "texts" (it would take
// the last), "Texts" and "TEXTS" (it matches names without case), null
// among the texts (it decoded as an empty text); a surrogate pair and
// "texts": null keep their meaning.
func TestStrictBodies(t *testing.T) {
	f := newFixture(t, 50, nil)
	tests := []struct {
		name, body string
		status     int
		code, msg  string
	}{
		{"invalid UTF-8", "{\"texts\": [\"caf\xe9\"]}", 400, "invalid_utf8", "the body holds invalid UTF-8 at byte 15"},
		{"invalid UTF-8 in a name", "{\"te\xffxts\": [\"a\"]}", 400, "invalid_utf8", "invalid UTF-8 at byte 4"},
		{"lone high surrogate", `{"texts": ["a\ud800b"]}`, 400, "invalid_utf8", "a lone surrogate escape (not a character) at byte 13"},
		{"high surrogate at the end", `{"texts": ["a\ud800"]}`, 400, "invalid_utf8", "lone surrogate"},
		{"lone low surrogate", `{"texts": ["\udc00"]}`, 400, "invalid_utf8", "lone surrogate"},
		{"reversed pair", `{"texts": ["\udc00\ud800"]}`, 400, "invalid_utf8", "lone surrogate"},
		{"duplicate texts", `{"texts": ["a"], "texts": ["b"]}`, 400, "duplicate_field", `"texts" appears twice`},
		{"Texts", `{"Texts": ["a"]}`, 400, "unknown_field", `unknown field "Texts": the body holds only "texts" (field names are case-sensitive)`},
		{"TEXTS", `{"TEXTS": ["a"]}`, 400, "unknown_field", `unknown field "TEXTS"`},
		{"null text", `{"texts": [null]}`, 400, "wrong_type", `"texts" holds a JSON null, want a string`},
		{"bool text", `{"texts": ["a", true]}`, 400, "wrong_type", `"texts" holds a JSON bool, want a string`},
		{"nested array", `{"texts": [["a"]]}`, 400, "wrong_type", `"texts" holds a JSON array, want a string`},
		{"texts an object", `{"texts": {"a": 1}}`, 400, "wrong_type", `"texts" holds a JSON object, want an array of strings`},
		{"body null", `null`, 400, "wrong_type", "the body is a JSON null"},
		{"body a string", `"texts"`, 400, "wrong_type", "the body is a JSON string"},
		{"escaped quote and backslash", `{"texts": ["a \"quoted\" \\ \ud83d\ude00 text"]}`, 200, "", ""},
		{"an escaped backslash before u", `{"texts": ["\\ud800 is text here"]}`, 200, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			started := f.fake.Started()
			code, body := f.do(t, "POST", "/v1/embed", f.alice, "application/json", tc.body)
			if tc.status == 200 {
				if code != 200 {
					t.Fatalf("%d %v", code, body)
				}
				return
			}
			e, _ := body["error"].(map[string]any)
			if code != tc.status || e == nil || e["code"] != tc.code || !strings.Contains(fmt.Sprint(e["message"]), tc.msg) {
				t.Fatalf("%d %v, want %d %s %q", code, body, tc.status, tc.code, tc.msg)
			}
			if f.fake.Started() != started {
				t.Error("the model ran")
			}
		})
	}
	accts, _ := f.ledger.Accounts()
	if len(accts) != 1 || accts[0].Releases != 2 {
		t.Fatalf("ledger %+v, want the 2 good requests' releases only", accts)
	}
}

// TestContentLengthTooLarge: a request announcing a body beyond the limit
// and sending none is answered 413 at once, not after the read timeout.
func TestContentLengthTooLarge(t *testing.T) {
	f := newFixture(t, 50, func(o *serve.Options) { o.ReadTimeout = 10 * time.Second })
	c, err := net.Dial("tcp", strings.TrimPrefix(f.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/embed HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n", f.alice)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within 3 s: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || time.Since(start) > 2*time.Second {
		t.Fatalf("status %d after %v, want 413 at once", resp.StatusCode, time.Since(start))
	}
}

// TestUnauthenticatedBeyondLoopback: a server without keys refuses to
// serve on every interface unless allowed, and then warns; with keys, or
// on loopback, it serves.
func TestUnauthenticatedBeyondLoopback(t *testing.T) {
	serveOn := func(addr string, keys bool, allow bool) (error, string) {
		t.Helper()
		logs := &logBuffer{}
		o := serve.DefaultOptions()
		o.BudgetEpsilon, o.AllowUnauthenticated = 10, allow
		var ks serve.KeySource
		if keys {
			k, err := serve.ParseKeys("keys.txt", strings.NewReader("alice "+hashOf("k")+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			ks = k
		}
		srv, err := serve.New(servetest.NewFake(3, 4, rho), servetest.OpenLedger(t), ks, o, slog.New(slog.NewTextHandler(logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, ln) }()
		select {
		case err := <-done:
			cancel()
			return err, logs.String()
		case <-time.After(300 * time.Millisecond):
		}
		cancel()
		return <-done, logs.String()
	}
	err, _ := serveOn("0.0.0.0:0", false, false)
	if err == nil || !strings.Contains(err.Error(), "allow_unauthenticated false: listening on ") || !strings.Contains(err.Error(), "beyond loopback, without keys") {
		t.Fatalf("every interface without keys: %v", err)
	}
	err, logs := serveOn("0.0.0.0:0", false, true)
	if err != nil || !strings.Contains(logs, "serving WITHOUT AUTHENTICATION beyond loopback") {
		t.Fatalf("allowed: %v\n%s", err, logs)
	}
	for _, tc := range []struct {
		addr string
		keys bool
	}{{"0.0.0.0:0", true}, {"127.0.0.1:0", false}, {"[::1]:0", false}} {
		if tc.addr == "[::1]:0" {
			if ln, err := net.Listen("tcp", tc.addr); err != nil {
				continue // no IPv6 loopback here
			} else {
				ln.Close()
			}
		}
		if err, logs := serveOn(tc.addr, tc.keys, false); err != nil || strings.Contains(logs, "WITHOUT AUTHENTICATION") {
			t.Errorf("%s keys %v: %v\n%s", tc.addr, tc.keys, err, logs)
		}
	}
}

// TestBudgetHistory: GET /v1/budget?history=N adds the caller's N newest
// charges (never another key's) with the curve's guarantee of one release
// and the model; bad parameters are 400.
func TestBudgetHistory(t *testing.T) {
	f := newFixture(t, 50, nil)
	f.embed(t, f.alice, "a", "b")
	f.embed(t, f.bob, "c")
	f.embed(t, f.alice, "d")
	code, body := f.do(t, "GET", "/v1/budget?history=5", f.alice, "", "")
	h, _ := body["history"].(map[string]any)
	if code != 200 || h == nil {
		t.Fatalf("%d %v", code, body)
	}
	charges := h["charges"].([]any)
	if len(charges) != 2 || num(charges[0].(map[string]any)["releases"]) != 1 || num(charges[1].(map[string]any)["releases"]) != 2 {
		t.Fatalf("alice's charges %v", charges)
	}
	c := charges[0].(map[string]any)
	curve := h["curves"].(map[string]any)[c["curve"].(string)].(map[string]any)
	if c["account"] != "alice" || num(curve["epsilon_per_release"]) != epsOfReleases(1) || h["models"].(map[string]any)[c["model"].(string)] == nil {
		t.Errorf("charge %v, curve %v, models %v", c, curve, h["models"])
	}
	if code, body := f.do(t, "GET", "/v1/budget", f.alice, "", ""); code != 200 || body["history"] != nil {
		t.Errorf("without history: %d %v", code, body)
	}
	for _, q := range []string{"history=0", "history=1001", "history=x", "history=1&history=2", "since=1"} {
		if code, body := f.do(t, "GET", "/v1/budget?"+q, f.alice, "", ""); code != 400 || body["error"].(map[string]any)["code"] != "bad_parameter" {
			t.Errorf("?%s: %d %v", q, code, body)
		}
	}
}

// TestReloadKeys: ReloadKeys swaps the keys file while serving: a new key
// authenticates, a removed one is refused; a file whose key has no budget
// (no default) is refused and the old keys stay.
func TestReloadKeys(t *testing.T) {
	f := newFixture(t, 50, nil)
	carol := mustKey(t)
	k, err := serve.ParseKeys("keys2.txt", strings.NewReader("carol "+hashOf(carol)+" 5\nbob "+hashOf(f.bob)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := f.embed(t, carol, "x"); code != 401 {
		t.Fatalf("carol before the reload: %d", code)
	}
	if err := f.srv.ReloadKeys(k); err != nil {
		t.Fatal(err)
	}
	if code, body := f.embed(t, carol, "x"); code != 200 || num(body["privacy"].(map[string]any)["budget_epsilon"]) != 5 {
		t.Fatalf("carol after the reload: %d %v", code, body)
	}
	if code, _ := f.embed(t, f.alice, "x"); code != 401 {
		t.Errorf("alice, removed: %d", code)
	}
	if code, _ := f.embed(t, f.bob, "x"); code != 200 {
		t.Errorf("bob, kept: %d", code)
	}
	// Without a default budget, a file with a key without its own is refused.
	own, _ := serve.ParseKeys("keys3.txt", strings.NewReader("erin "+hashOf("e")+" 3\n"))
	noBudget, _ := serve.ParseKeys("keys4.txt", strings.NewReader("dave "+hashOf("d")+"\n"))
	srv, err := serve.New(servetest.NewFake(3, 4, rho), servetest.OpenLedger(t), own, serve.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.ReloadKeys(noBudget); err == nil || !strings.Contains(err.Error(), `key "dave" has no budget of its own, and there is no default`) {
		t.Errorf("a key without a budget: %v", err)
	}
	if code, _ := servetest.Do(t, "POST", newTestServer(t, srv)+"/v1/embed", "e", "", `{"texts": ["x"]}`); code != 200 {
		t.Errorf("erin after the refused reload: %d", code)
	}
	_, m := f.do(t, "GET", "/metrics", "", "", "")
	if !strings.Contains(m["raw"].(string), "nvdp_keys_reloads_total 1") {
		t.Error("the reload is not counted")
	}
}

// TestHTTPEdgeCases: what reaches the service from Go's HTTP server, sent
// raw to a server on a real listener and checked against the contract
// (servetest.Contract): two Authorization headers are refused (400
// duplicate_header), not the first one used; an unclean path (//v1/info,
// /v1/../v1/info) gets the service's JSON 404 naming the clean path, not a
// redirect; Go's own 431 (headers beyond 64 KiB) and 400 (Content-Length
// -1) are the text/plain answers api/openapi.yaml documents.
func TestHTTPEdgeCases(t *testing.T) {
	f := newFixture(t, 50, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	exchange := func(method, target string, header http.Header, body string, rawHeader string) (*http.Response, []byte) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", method, target)
		for k, vs := range header {
			for _, v := range vs {
				fmt.Fprintf(&b, "%s: %s\r\n", k, v)
			}
		}
		b.WriteString(rawHeader + "\r\n" + body)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, b.String()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+target, strings.NewReader(body))
		req.Header = header.Clone()
		servetest.Contract(t, req, []byte(body), resp, rb)
		return resp, rb
	}
	embed := `{"texts": ["a"]}`
	started := f.fake.Started()
	for _, tc := range []struct {
		name, method, target string
		header               http.Header
		body, raw            string
		status               int
		contentType, want    string
	}{
		{"two Authorization headers", "POST", "/v1/embed", http.Header{"Authorization": {"Bearer " + f.alice, "Bearer " + f.bob}, "Content-Type": {"application/json"}, "Content-Length": {fmt.Sprint(len(embed))}},
			embed, "", 400, "application/json", `"duplicate_header"`},
		{"double slash", "GET", "//v1/info", nil, "", "", 404, "application/json", `path \"//v1/info\" is not clean: send \"/v1/info\"`},
		{"dot dot", "GET", "/v1/../v1/info", nil, "", "", 404, "application/json", `is not clean: send \"/v1/info\"`},
		{"header of 100 KB", "GET", "/v1/info", nil, "", "X-Big: " + strings.Repeat("a", 100<<10) + "\r\n", 431, "text/plain", "431"},
		{"Content-Length -1", "POST", "/v1/embed", http.Header{"Authorization": {"Bearer " + f.alice}, "Content-Length": {"-1"}}, "", "", 400, "text/plain", "400 Bad Request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := exchange(tc.method, tc.target, tc.header, tc.body, tc.raw)
			if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.contentType) || !strings.Contains(string(body), tc.want) {
				t.Errorf("%d %s %s, want %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status, tc.contentType, tc.want)
			}
		})
	}
	if f.fake.Started() != started {
		t.Error("the model ran")
	}
}
