package loadgen

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

func TestPercentiles(t *testing.T) {
	xs := make([]float64, 200)
	for i := range xs {
		xs[len(xs)-1-i] = float64(i + 1) // 200 .. 1, unsorted
	}
	got := percentiles(xs)
	want := Latency{P50: 100, P90: 180, P99: 198, Max: 200, Mean: 100.5}
	if got != want {
		t.Fatalf("percentiles = %+v, want %+v", got, want)
	}
	if got := percentiles([]float64{7}); got != (Latency{7, 7, 7, 7, 7}) {
		t.Fatalf("one sample: %+v", got)
	}
	if got := percentiles(nil); got != (Latency{}) {
		t.Fatalf("none: %+v", got)
	}
}

func TestMetricValue(t *testing.T) {
	text := "# HELP process_resident_memory_bytes x\n# TYPE process_resident_memory_bytes gauge\n" +
		"process_resident_memory_bytes_total 1\nprocess_resident_memory_bytes 1.2345e+07\n"
	if got := MetricValue(strings.NewReader(text), "process_resident_memory_bytes"); got != 1.2345e7 {
		t.Fatalf("got %v", got)
	}
}

func TestValidate(t *testing.T) {
	ok := Config{URL: "http://127.0.0.1:1", Concurrency: 1, Requests: 1, Texts: []string{"a"}, TextsPerRequest: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*Config)
		err  string
	}{
		{func(c *Config) { c.URL = "" }, "no URL"},
		{func(c *Config) { c.Concurrency = 0 }, "concurrency 0"},
		{func(c *Config) { c.Requests = 0 }, "would not end"},
		{func(c *Config) { c.Texts = nil }, "no texts"},
		{func(c *Config) { c.TextsPerRequest = 0 }, "texts per request 0"},
	} {
		c := ok
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("err = %v, want %q", err, tc.err)
		}
	}
}

// TestRun drives a release server on a fake model: every request of a run
// bounded by count is answered and counted, releases are requests x texts,
// and once the budget is spent the refusals are counted by kind and no
// release is counted for them.
func TestRun(t *testing.T) {
	ledger := servetest.OpenLedger(t)
	const rho = 0.01
	// A budget of exactly 30 releases (2 per request: 15 requests).
	g := servetest.GaussianGuarantee(rho)
	var curve []privacy.OrderRD
	for _, p := range g.Curve {
		curve = append(curve, privacy.OrderRD{Order: p.Order, RD: 30 * p.RD})
	}
	eps30, _, _ := privacy.BestEpsilon(curve, g.Delta)
	o := serve.DefaultOptions()
	o.BudgetEpsilon = eps30 * (1 + 1e-12)
	fake := servetest.NewFake(3, 4, rho)
	fake.Latency = time.Millisecond
	srv, err := serve.New(fake, ledger, nil, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := Config{URL: hs.URL, Concurrency: 4, Requests: 10, Texts: SyntheticTexts(7), TextsPerRequest: 2, Timeout: 10 * time.Second}
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 10 || res.OK != 10 || res.Releases != 20 || res.ErrorCount() != 0 || res.Concurrency != 4 {
		t.Fatalf("first run: %+v", res)
	}
	if res.Latency.P50 <= 0 || res.Latency.P50 > res.Latency.P99 || res.Latency.P99 > res.Latency.Max || res.Throughput <= 0 || res.ServerRSSBytes <= 0 {
		t.Errorf("first run figures: %+v", res)
	}
	if math.Abs(res.ReleasesPerS-2*res.Throughput) > 1e-9*res.ReleasesPerS {
		t.Errorf("releases/s %v, requests/s %v", res.ReleasesPerS, res.Throughput)
	}
	res, _ = Run(context.Background(), c)
	if res.OK != 5 || res.Releases != 10 || res.Errors["HTTP 429 budget_exceeded"] != 5 || res.ErrorCount() != 5 {
		t.Fatalf("second run (5 requests of budget left): %+v", res)
	}
	// A run bounded by time ends on time; a server that is gone is a
	// transport error.
	hs.Close()
	start := time.Now()
	res, _ = Run(context.Background(), Config{URL: hs.URL, Concurrency: 2, Duration: 200 * time.Millisecond, Texts: []string{"a"}, TextsPerRequest: 1})
	if d := time.Since(start); d > 5*time.Second || res.OK != 0 || res.Errors["transport: connection refused"] == 0 {
		t.Fatalf("run against a closed server (%v): %+v", d, res)
	}
}

// TestRunDurationDrains: a run bounded by time sends no request after its
// duration but lets those in flight finish, so that every release the
// server made is one the clients counted (none is charged and dropped).
// Each request runs alone (BatchTexts 1), so that the server's Release
// calls count its requests: batched, two requests that met in one forward
// pass counted once, and the test failed when they did.
func TestRunDurationDrains(t *testing.T) {
	o := serve.DefaultOptions()
	o.BudgetEpsilon = math.Inf(1)
	o.BatchTexts = 1
	fake := servetest.NewFake(3, 4, 0.01)
	fake.Latency = 40 * time.Millisecond
	srv, err := serve.New(fake, servetest.OpenLedger(t), nil, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	start := time.Now()
	res, _ := Run(context.Background(), Config{URL: hs.URL, Concurrency: 3, Duration: 100 * time.Millisecond,
		Texts: []string{"a", "b"}, TextsPerRequest: 1, Timeout: 10 * time.Second})
	if d := time.Since(start); d < 100*time.Millisecond || d > 10*time.Second {
		t.Errorf("run took %v", d)
	}
	if res.ErrorCount() != 0 || res.OK < 3 || int64(res.Requests) != fake.Started() || res.Releases != fake.Texts() {
		t.Fatalf("%+v: clients sent %d requests and received %d releases, the server began %d releases and made %d",
			res, res.Requests, res.Releases, fake.Started(), fake.Texts())
	}
}

// TestRunSpreadsOverServers: with URLs, client i sends to URLs[i mod n]:
// 6 clients over 3 servers each send a third of the requests, and the
// result counts the servers and sums their memory.
func TestRunSpreadsOverServers(t *testing.T) {
	o := serve.DefaultOptions()
	o.BudgetEpsilon = math.Inf(1)
	var fakes []*servetest.Fake
	var urls []string
	for range 3 {
		fake := servetest.NewFake(3, 4, 0.01)
		fake.Latency = 5 * time.Millisecond
		srv, err := serve.New(fake, servetest.OpenLedger(t), nil, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		defer hs.Close()
		fakes, urls = append(fakes, fake), append(urls, hs.URL)
	}
	res, err := Run(context.Background(), Config{URLs: urls, Concurrency: 6, Duration: 300 * time.Millisecond, Texts: []string{"a"}, TextsPerRequest: 1, Timeout: 10 * time.Second})
	if err != nil || res.ErrorCount() != 0 || res.Servers != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	var total int64
	for i, f := range fakes {
		if f.Texts() < int64(res.OK)/6 {
			t.Errorf("server %d released %d of %d", i, f.Texts(), res.OK)
		}
		total += f.Texts()
	}
	if total != res.Releases {
		t.Errorf("the servers released %d, the clients received %d", total, res.Releases)
	}
}

// TestRunBinary: with Binary the clients ask for the safetensors response and count its releases
// from the z tensor; a server answering JSON to that request is a bad response.
func TestRunBinary(t *testing.T) {
	o := serve.DefaultOptions()
	o.BudgetEpsilon = math.Inf(1)
	srv, err := serve.New(servetest.NewFake(3, 4, 0.01), servetest.OpenLedger(t), nil, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := Config{URL: hs.URL, Concurrency: 2, Requests: 6, Texts: SyntheticTexts(5), TextsPerRequest: 3, Timeout: 10 * time.Second, Binary: true}
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 6 || res.Releases != 18 || res.ErrorCount() != 0 {
		t.Fatalf("binary run: %+v", res)
	}
	json := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"embeddings": [[]], "weights": [[]]}`))
	}))
	defer json.Close()
	c.URL, c.Requests, c.TextsPerRequest = json.URL, 1, 1
	if res, _ := Run(context.Background(), c); res.Errors["bad response: not safetensors"] != 1 {
		t.Errorf("JSON to a binary request: %+v", res)
	}
}

// TestBinarySample: a safetensors response counts its releases only when its z and pi entries are
// float32 tensors of the right rank, one release per text, their data within the file.
func TestBinarySample(t *testing.T) {
	file := func(header string, data int) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
		return append(append(b, header...), make([]byte, data)...)
	}
	const md = `"__metadata__":{"guarantee":"{\"label\":\"certified\"}"}`
	good := `{` + md + `,"z":{"dtype":"F32","shape":[2,1,3,4],"data_offsets":[0,96]},"pi":{"dtype":"F32","shape":[2,1,3],"data_offsets":[96,120]}}`
	for _, tc := range []struct {
		name string
		data []byte
		want string // sample kind; "" for two releases
	}{
		{"good", file(good, 120), ""},
		{"data cut short", file(good, 119), "bad response: no z and pi of 2 releases"},
		{"wrong text count", file(strings.Replace(good, "[2,1,3,4]", "[1,1,3,4]", 1), 120), "bad response: no z and pi of 2 releases"},
		{"offsets not the shape", file(strings.Replace(good, "[0,96]", "[0,95]", 1), 120), "bad response: no z and pi of 2 releases"},
		{"float64", file(strings.Replace(good, `"F32","shape":[2,1,3]`, `"F64","shape":[2,1,3]`, 1), 120), "bad response: no z and pi of 2 releases"},
		{"no pi", file(`{"z":{"dtype":"F32","shape":[2,1,3,4],"data_offsets":[0,96]}}`, 96), "bad response: no z and pi of 2 releases"},
		{"shape whose size overflows to the offsets", file(strings.Replace(good, "[2,1,3,4]", "[2,1,3,4611686018427387908]", 1), 120), "bad response: no z and pi of 2 releases"},
		{"header beyond the file", file(good, 120)[:100], "bad response: not safetensors"},
		{"header not JSON", file(`{"z":`, 0), "bad response: not safetensors"},
		{"shorter than its length", []byte{1, 2, 3}, "bad response: not safetensors"},
	} {
		s := binarySample(tc.data, 2, time.Millisecond)
		if s.kind != tc.want || tc.want == "" && s.releases != 2 {
			t.Errorf("%s: kind %q, %d releases; want %q", tc.name, s.kind, s.releases, tc.want)
		}
	}
}

// BenchmarkBinarySample checks a one-text response whose header carries 16 KB of metadata, as the
// service's does (docs/performance.md, "The service at 3.6 ms a release").
func BenchmarkBinarySample(b *testing.B) {
	data := benchData(b)
	b.SetBytes(int64(binary.LittleEndian.Uint64(data)))
	for b.Loop() {
		if s := binarySample(data, 1, time.Millisecond); s.releases != 1 {
			b.Fatalf("kind %q", s.kind)
		}
	}
}

func benchData(b *testing.B) []byte {
	var g strings.Builder
	for i := 0; g.Len() < 16<<10; i++ {
		fmt.Fprintf(&g, `{"order":%d.5,"rdp":%g,"label":"certified"},`, i, 1/float64(i+3))
	}
	md, err := json.Marshal(map[string]string{"guarantee": g.String(), "model": "bert-tiny"})
	if err != nil {
		b.Fatal(err)
	}
	header := `{"__metadata__":` + string(md) + `,"pi":{"dtype":"F32","shape":[1,1,65],"data_offsets":[33280,33540]},"z":{"dtype":"F32","shape":[1,1,65,128],"data_offsets":[0,33280]}}`
	data := append(binary.LittleEndian.AppendUint64(nil, uint64(len(header))), header...)
	return append(data, make([]byte, 33540)...)
}

// FuzzBinarySample: any bytes as a response to a request of 1 to 3 texts give a sample, never a
// panic; one that counts releases holds z and pi entries of that many texts, their data within
// the file, as a strict parse of its header (encoding/json) confirms.
func FuzzBinarySample(f *testing.F) {
	header := `{"__metadata__":{"k":"v\"x"},"z":{"dtype":"F32","shape":[2,1,3,4],"data_offsets":[0,96]},"pi":{"dtype":"F32","shape":[2,1,3],"data_offsets":[96,120]}}`
	good := append(binary.LittleEndian.AppendUint64(nil, uint64(len(header))), header...)
	f.Add(append(good, make([]byte, 120)...), uint8(2))
	f.Add(good[:40], uint8(2))
	f.Add([]byte{1, 2, 3}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, texts uint8) {
		n := 1 + int(texts)%3
		s := binarySample(data, n, time.Millisecond)
		if s.releases == 0 {
			if s.kind == "" {
				t.Fatal("no releases and no error kind")
			}
			return
		}
		if s.releases != n || s.kind != "" {
			t.Fatalf("%d releases, kind %q, for %d texts", s.releases, s.kind, n)
		}
		hn := binary.LittleEndian.Uint64(data)
		var h map[string]json.RawMessage
		if err := json.Unmarshal(data[8:8+hn], &h); err != nil {
			t.Fatalf("counted a response whose header is not JSON: %v", err)
		}
		for _, name := range []string{"z", "pi"} {
			var e binaryEntry
			if err := json.Unmarshal(h[name], &e); err != nil || e.Shape[0] != n || e.DataOffsets[1] > int64(len(data))-8-int64(hn) {
				t.Fatalf("counted a response whose %s entry is %s", name, h[name])
			}
		}
	})
}
