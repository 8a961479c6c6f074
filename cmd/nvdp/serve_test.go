package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	nvledger "github.com/nvdp-project/nvdp/ledger"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/internal/loadgen"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/release"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

// fakeLoader is the test's model loader: a servetest.Fake of N = 3, P = 4
// (model "fake") or N x P (model "fake:NxP"), rd(order) = 0.001 order, with
// the given latency.
func fakeLoader(latency time.Duration) func(string, release.Options) (serve.Releaser, error) {
	return func(dir string, _ release.Options) (serve.Releaser, error) {
		n, p := 3, 4
		if dir != "fake" {
			if _, err := fmt.Sscanf(dir, "fake:%dx%d", &n, &p); err != nil {
				return nil, fmt.Errorf("model %s: not the fake", dir)
			}
		}
		f := servetest.NewFake(n, p, 0.001)
		f.Latency = latency
		return f, nil
	}
}

// TestServeHelper is the `nvdp serve` process of TestServeKillAndRestart:
// it runs with NVDP_SERVE_HELPER=1, the arguments of NVDP_SERVE_ARGS (a
// JSON array) and the fake model whose latency is NVDP_SERVE_LATENCY. It
// also serves the fake for harness checks of nvdp-load
// (docs/performance.md, "Release service").
func TestServeHelper(t *testing.T) {
	if os.Getenv("NVDP_SERVE_HELPER") != "1" {
		t.Skip("helper process of TestServeKillAndRestart")
	}
	latency, err := time.ParseDuration(os.Getenv("NVDP_SERVE_LATENCY"))
	if err != nil {
		t.Fatal(err)
	}
	// NVDP_SERVE_ARGS: a JSON array of strings (scripts/serve-ledgers.sh);
	// NVDP_SERVE_RAW_ARGS: of base64 byte strings (helperCommand: any bytes).
	var args []string
	if env := os.Getenv("NVDP_SERVE_RAW_ARGS"); env != "" {
		var raw [][]byte
		if err := json.Unmarshal([]byte(env), &raw); err != nil {
			t.Fatal(err)
		}
		for _, a := range raw {
			args = append(args, string(a))
		}
	} else if err := json.Unmarshal([]byte(os.Getenv("NVDP_SERVE_ARGS")), &args); err != nil {
		t.Fatal(err)
	}
	loadReleaser = fakeLoader(latency)
	rootCmd.SetArgs(args)
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "nvdp:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveProcess is a running `nvdp serve` helper process.
type serveProcess struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs strings.Builder
	done chan struct{} // closed when stderr is read to its end
}

// helperCommand is the command that runs `nvdp ARGS...` in a helper process
// (TestServeHelper) on the fake model with latency.
func helperCommand(latency time.Duration, args ...string) *exec.Cmd {
	raw := make([][]byte, len(args)) // base64 in JSON: the bytes as they are (a string would turn invalid UTF-8 into U+FFFD)
	for i, a := range args {
		raw[i] = []byte(a)
	}
	a, _ := json.Marshal(raw)
	c := exec.Command(os.Args[0], "-test.run=^TestServeHelper$")
	c.Env = append(os.Environ(), "NVDP_SERVE_HELPER=1", "NVDP_SERVE_RAW_ARGS="+string(a), "NVDP_SERVE_LATENCY="+latency.String())
	return c
}

// runHelper runs `nvdp ARGS...` in a helper process to its end and returns
// its stdout, stderr and exit status (a crash cannot take the test down).
func runHelper(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	c := helperCommand(0, args...)
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// startServe starts `nvdp serve` on the fake model (with latency) on a
// free loopback port with ledger, keys ("": none, e.g. with
// --keys-in-ledger among extra) and the extra flags, and waits for its
// "serving" log line.
func startServe(t *testing.T, ledger, keys string, latency time.Duration, extra ...string) *serveProcess {
	t.Helper()
	args := []string{"serve", "--model", "fake", "--addr", "127.0.0.1:0", "--ledger", ledger,
		"--log-format", "json", "--shutdown-timeout", "20s"}
	if keys != "" {
		args = append(args, "--keys", keys)
	}
	if !slices.Contains(extra, "--keys-in-ledger") { // each key of the database has its own budget
		args = append(args, "--budget-epsilon", "1e6")
	}
	return startServeArgs(t, latency, append(args, extra...)...)
}

// startServeArgs starts `nvdp ARGS...` (a serve command line that logs
// JSON) on the fake model with latency and waits for its "serving" line.
func startServeArgs(t *testing.T, latency time.Duration, args ...string) *serveProcess {
	t.Helper()
	c := helperCommand(latency, args...)
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: c, done: make(chan struct{})}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" {
				addr <- line.Addr
			}
		}
	}()
	select {
	case a := <-addr:
		p.url = "http://" + a
	case <-p.done:
		t.Fatalf("nvdp serve ended before serving:\n%s", p.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("nvdp serve did not start:\n%s", p.log())
	}
	return p
}

func (p *serveProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// get sends GET path with key (servetest.Do).
func (p *serveProcess) get(t *testing.T, path, key string) (int, map[string]any) {
	t.Helper()
	return servetest.Do(t, http.MethodGet, p.url+path, key, "", "")
}

// TestServeKillAndRestart is the ledger's crash test: `nvdp serve` under
// load from 8 clients is killed with SIGKILL; restarted on the same ledger,
// it holds at least every release the clients received whole, and at most
// the releases of the requests in flight more. The restarted server then
// drains a request in flight on SIGTERM (answered 200, exit status 0), and
// no key appears in either process's logs.
func TestServeKillAndRestart(t *testing.T) {
	dir := t.TempDir()
	ledger, keys := filepath.Join(dir, "ledger.db"), filepath.Join(dir, "keys.txt")
	key, err := serve.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.AppendKey(keys, "load", key, option.Auto()); err != nil {
		t.Fatal(err)
	}
	if _, err := nvledger.CreateFile(ledger); err != nil {
		t.Fatal(err)
	}
	const clients, perRequest = 8, 2
	p := startServe(t, ledger, keys, 2*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make(chan loadgen.Result, 1)
	go func() {
		r, err := loadgen.Run(ctx, loadgen.Config{URL: p.url, Key: key, Concurrency: clients, Duration: 30 * time.Second,
			Texts: loadgen.SyntheticTexts(50), TextsPerRequest: perRequest, Timeout: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		results <- r
	}()
	// Kill once the server has released for a while, mid-load.
	servetest.WaitFor(t, "100 releases", func() bool { return p.metricAtLeast(t, "nvdp_releases_total", 100) })
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	<-p.done
	time.Sleep(100 * time.Millisecond) // the clients see the dead server
	cancel()
	res := <-results
	t.Logf("clients: %d requests, %d answered, %d releases received, errors %v", res.Requests, res.OK, res.Releases, res.Errors)
	for kind := range res.Errors {
		if !strings.HasPrefix(kind, "transport: ") {
			t.Errorf("error %q: the server failed a request before the kill", kind)
		}
	}

	p2 := startServe(t, ledger, keys, time.Second)
	code, body := p2.get(t, "/v1/budget", key)
	if code != 200 {
		t.Fatalf("GET /v1/budget after the restart: %d %v", code, body)
	}
	charged := int64(body["budget"].(map[string]any)["releases"].(float64))
	t.Logf("ledger after the restart: %d releases charged", charged)
	if charged < res.Releases || charged > res.Releases+clients*perRequest {
		t.Fatalf("ledger holds %d releases, clients received %d: want between %d and %d (in-flight requests)",
			charged, res.Releases, res.Releases, res.Releases+clients*perRequest)
	}
	if res.Releases < 100 {
		t.Fatalf("clients received %d releases before the kill, want >= 100", res.Releases)
	}

	// SIGTERM with a request in flight: it is answered, then the process exits 0.
	got := make(chan int, 1)
	go func() {
		r, _ := loadgen.Run(context.Background(), loadgen.Config{URL: p2.url, Key: key, Concurrency: 1, Requests: 1,
			Texts: []string{"in flight at SIGTERM"}, TextsPerRequest: 1, Timeout: 20 * time.Second})
		got <- r.OK
	}()
	servetest.WaitFor(t, "a request in flight", func() bool { return p2.metricAtLeast(t, "nvdp_requests_running", 1) })
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if ok := <-got; ok != 1 {
		t.Fatalf("the request in flight at SIGTERM was not answered:\n%s", p2.log())
	}
	if err := p2.cmd.Wait(); err != nil {
		t.Fatalf("nvdp serve after SIGTERM: %v\n%s", err, p2.log())
	}
	<-p2.done
	logs := p.log() + p2.log()
	for _, want := range []string{`"msg":"draining"`, `"msg":"drained"`, `"account":"load"`} {
		if !strings.Contains(p2.log(), want) {
			t.Errorf("restarted server's log lacks %s", want)
		}
	}
	if strings.Contains(logs, key) || strings.Contains(logs, strings.TrimPrefix(key, serve.KeyPrefix)) {
		t.Fatal("a log holds the key")
	}
	out, err := runCmd(newServeCmd(), "ledger", "--ledger", ledger)
	var accts []nvledger.Account
	if err != nil || json.Unmarshal([]byte(out), &accts) != nil || len(accts) != 1 || int64(accts[0].Releases) != charged+1 {
		t.Fatalf("nvdp serve ledger: %v %s, want %d releases", err, out, charged+1)
	}
}

// metricAtLeast reports whether the server's unlabelled metric name is at
// least v.
func (p *serveProcess) metricAtLeast(t *testing.T, name string, v float64) bool {
	_, m := p.get(t, "/metrics", "")
	return loadgen.MetricValue(strings.NewReader(fmt.Sprint(m["raw"])), name) >= v
}

// TestServeFlagErrors: every bad input is refused before the ledger is
// created, naming the flag.
func TestServeFlagErrors(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.db")
	badKeys, noBudget, openKeys := servetest.BadKeyFiles(t, dir)
	t.Setenv("NVDP_TEST_NO_DSN", "")
	prev := loadReleaser
	t.Cleanup(func() { loadReleaser = prev })
	base := []string{"--model", "fake", "--ledger", ledger, "--addr", "127.0.0.1:0"}
	tests := []struct {
		name   string
		args   []string
		loader bool
		err    string
	}{
		{"no model", []string{"--ledger", ledger, "--budget-epsilon", "1"}, true, "--model: required"},
		{"no ledger", []string{"--model", "fake", "--budget-epsilon", "1"}, true, "--ledger: required"},
		{"negative budget", append(base, "--budget-epsilon", "-1"), true, "--budget-epsilon -1: must be >= 0"},
		{"NaN budget", append(base, "--budget-epsilon", "nan"), true, `"nan" is not a number, inf or none`},
		{"no budget, no keys", base, true, "--budget-epsilon: required without a keys file"},
		{"key without budget", append(base, "--keys", noBudget), true, `--budget-epsilon: keys ` + noBudget + `:1: key "alice" has no budget`},
		{"bad keys file", append(base, "--keys", badKeys, "--budget-epsilon", "1"), true, "--keys: keys " + badKeys + ":1:"},
		{"zero concurrency", append(base, "--budget-epsilon", "1", "--max-concurrent", "0"), true, "--max-concurrent 0: must be > 0"},
		{"negative queue", append(base, "--budget-epsilon", "1", "--max-queue", "-1"), true, "--max-queue -1: must be >= 0"},
		{"write before request timeout", append(base, "--budget-epsilon", "1", "--write-timeout", "1s"), true, "--write-timeout 1s: must be above the request timeout (30s)"},
		{"unknown model", []string{"--model", "other", "--ledger", ledger, "--budget-epsilon", "1"}, true, "--model: model other: not the fake"},
		{"missing ledger", append(base, "--budget-epsilon", "1"), true, "--ledger: ledger " + ledger + " does not exist: a ledger is created explicitly"},
		{"backup dir", append(base, "--budget-epsilon", "1", "--backup-dir", filepath.Join(dir, "none")), true, "--backup-dir \"" + filepath.Join(dir, "none") + "\": not a directory"},
		{"negative backup keep", append(base, "--budget-epsilon", "1", "--backup-keep", "-1"), true, "--backup-keep -1: must be >= 0"},
		{"negative BLAS threads", append(base, "--budget-epsilon", "1", "--blas-threads", "-1"), true, "--blas-threads -1: must be >= 0"},
		{"backup every 1ns", append(base, "--budget-epsilon", "1", "--backup-every", "1ns"), true, "--backup-every 1ns: must be 0 (a backup only when asked) or at least 1m0s"},
		{"budget with keys in the ledger", []string{"--model", "fake", "--ledger", "postgres://h/db", "--keys-in-ledger", "--budget-epsilon", "5"}, true,
			"--budget-epsilon 5: has no effect with --keys-in-ledger (each key of the database has its own budget: nvdp serve keys budget)"},
		{"not a model directory (the real loader)", append(base, "--budget-epsilon", "1"), false, "--model: "},
		{"keys file others may write", append(base, "--keys", openKeys), true, "--keys: keys " + openKeys + " is writable by group or others (mode 0666)"},
		{"every interface without keys", []string{"--model", "fake", "--ledger", ledger, "--addr", "0.0.0.0:0", "--budget-epsilon", "1"}, true,
			"--allow-unauthenticated false: listening on [::]:"},
		{"keys and keys in ledger", append(base, "--keys", noBudget, "--keys-in-ledger"), true, "--keys and --keys-in-ledger: give one"},
		{"unknown device", append(base, "--budget-epsilon", "1", "--device", "gpu"), true, `--device gpu --precision fp32: device "gpu": want cpu, cuda or auto`},
		{"keys in a file ledger", append(base, "--keys-in-ledger"), true, "--keys-in-ledger: the keys are a PostgreSQL ledger's, and --ledger " + ledger + " is a file"},
		{"empty DSN variable", []string{"--model", "fake", "--ledger", "env:NVDP_TEST_NO_DSN", "--budget-epsilon", "1"}, true,
			"--ledger: env:NVDP_TEST_NO_DSN: the environment variable NVDP_TEST_NO_DSN is unset or empty"},
		{"pool of one", []string{"--model", "fake", "--ledger", "postgres://h/db", "--budget-epsilon", "1", "--ledger-max-conns", "1"}, true,
			"--ledger-max-conns 1: want 3 to 1000"},
		{"no timeout", []string{"--model", "fake", "--ledger", "postgres://h/db", "--budget-epsilon", "1", "--ledger-timeout", "0s"}, true,
			"--ledger-timeout 0s: must be at least 10ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			loadReleaser = prev // release.Load
			if tc.loader {
				loadReleaser = fakeLoader(0)
			}
			_, err := runCmd(newServeCmd(), tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if _, err := os.Stat(ledger); err == nil {
				t.Fatal("the ledger was created")
			}
		})
	}
}

// TestServeKeygen: keygen prints a key that authenticates against the line
// it appended (explicit budget 0 kept), and refuses a second key of an ID.
func TestServeKeygen(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.txt")
	out, err := runCmd(newServeCmd(), "keygen", "--keys", keys, "--id", "alice", "--budget-epsilon", "0")
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(out)
	k, err := serve.ReadKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Lookup(key); got == nil || got.ID != "alice" || got.Budget != 0 {
		t.Fatalf("the printed key %q does not authenticate as alice with budget 0: %+v", key, got)
	}
	if data, _ := os.ReadFile(keys); strings.Contains(string(data), key) {
		t.Fatal("the keys file holds the key")
	}
	if _, err := runCmd(newServeCmd(), "keygen", "--keys", keys, "--id", "alice"); err == nil || !strings.Contains(err.Error(), `ID "alice" already on line 1`) {
		t.Fatalf("second key of alice: %v", err)
	}
	if _, err := runCmd(newServeCmd(), "keygen", "--keys", keys, "--id", "bob", "--budget-epsilon", "-2"); err == nil || !strings.Contains(err.Error(), "--budget-epsilon -2: must be >= 0") {
		t.Fatalf("negative budget: %v", err)
	}
}
