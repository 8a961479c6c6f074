// Package loadgen drives an nvdp release server (package serve) with
// concurrent clients over HTTP and measures it: throughput, latency
// percentiles, errors by kind, the releases the clients received whole, and
// the server's memory from its /metrics. It is the harness of the load and
// fault tests (cmd/nvdp-load, the kill test of cmd/nvdp) and sends traffic
// only to the URL it is given, bounded in count and time.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nvdp-project/nvdp/internal/quantile"
	"github.com/nvdp-project/nvdp/safetensors"
	"github.com/valyala/fastjson"
)

// Config is one load run: Concurrency clients each send requests back to
// back until Duration has passed or Requests requests have been sent in all
// (the first bound reached; at least one must be set); the requests in
// flight then finish (within Timeout). Cancelling Run's context ends the
// run at once, cutting the requests in flight (not counted).
type Config struct {
	URL string // base URL of the server, e.g. http://127.0.0.1:8080
	// URLs, when set, are the servers (replicas of one service) the clients
	// spread over instead of URL: client i sends to URLs[i mod len(URLs)].
	URLs            []string
	Key             string // API key ("": no Authorization header)
	Concurrency     int
	Duration        time.Duration
	Requests        int
	Texts           []string // corpus; requests take TextsPerRequest texts in turn
	TextsPerRequest int
	Timeout         time.Duration // per request (0: none)
	// Binary asks for the safetensors response (Accept: application/vnd.safetensors) and checks
	// that its z tensor holds one release per text; false: JSON.
	Binary bool
	Client *http.Client // nil: one with keep-alive for Concurrency connections
}

// Result is what a run measured. Latencies are of the requests answered 200,
// in milliseconds.
type Result struct {
	Concurrency int     `json:"concurrency"`
	Requests    int     `json:"requests"` // sent
	OK          int     `json:"ok"`       // answered 200 with every embedding
	Releases    int64   `json:"releases"` // embeddings received in OK responses
	ElapsedS    float64 `json:"elapsed_s"`
	// Throughput is OK requests per second, ReleasesPerS released texts per second.
	Throughput   float64 `json:"requests_per_s"`
	ReleasesPerS float64 `json:"releases_per_s"`
	Latency      Latency `json:"latency_ms"`
	// Errors counts the failed requests by kind: "HTTP <status> <code>" for an
	// error response, "transport: <what>" for a connection that failed or
	// closed, "bad response: <what>" for a 200 that was not a whole release.
	Errors map[string]int `json:"errors"`
	// ServerRSSBytes is the server's process_resident_memory_bytes after the
	// run (0: not available); with URLs, the sum over the servers that
	// answered.
	ServerRSSBytes float64 `json:"server_rss_bytes,omitempty"`
	// Servers is how many servers the clients spread over (1: URL).
	Servers int `json:"servers,omitempty"`
}

// Latency holds the percentiles of a run's latencies (nearest rank).
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// ErrorCount is the count of failed requests.
func (r Result) ErrorCount() int {
	n := 0
	for _, c := range r.Errors {
		n += c
	}
	return n
}

// Validate checks a Config before any request.
func (c Config) Validate() error {
	switch {
	case c.URL == "" && len(c.URLs) == 0:
		return errors.New("loadgen: no URL")
	case slices.Contains(c.URLs, ""):
		return errors.New("loadgen: an empty URL among the servers")
	case c.Concurrency < 1:
		return fmt.Errorf("loadgen: concurrency %d: must be >= 1", c.Concurrency)
	case c.Duration <= 0 && c.Requests <= 0:
		return errors.New("loadgen: neither a duration nor a request count: the run would not end")
	case c.Duration < 0 || c.Requests < 0:
		return errors.New("loadgen: negative duration or request count")
	case len(c.Texts) == 0:
		return errors.New("loadgen: no texts")
	case c.TextsPerRequest < 1:
		return fmt.Errorf("loadgen: texts per request %d: must be >= 1", c.TextsPerRequest)
	}
	return nil
}

// sample is one request's outcome.
type sample struct {
	latency  time.Duration
	releases int
	kind     string // "" when OK
}

// Run drives the server as Config says and returns what it measured. It
// returns an error only for an invalid Config; failed requests are counted
// in Result.Errors.
func Run(ctx context.Context, c Config) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	client := c.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.Concurrency, MaxConnsPerHost: c.Concurrency, DisableCompression: true}}
		defer client.CloseIdleConnections()
	}
	start := time.Now()
	var deadline time.Time // no new request after it; those in flight finish
	if c.Duration > 0 {
		deadline = start.Add(c.Duration)
	}
	var (
		mu      sync.Mutex
		samples []sample
		next    int // requests handed out
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil || c.Requests > 0 && next >= c.Requests || !deadline.IsZero() && time.Now().After(deadline) {
			return 0, false
		}
		next++
		return next - 1, true
	}
	urls := c.servers()
	var wg sync.WaitGroup
	for w := range c.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := urls[w%len(urls)]
			for {
				i, ok := take()
				if !ok {
					return
				}
				s := c.one(ctx, client, url, i)
				if s.kind == "" || ctx.Err() == nil { // a request cut by cancelling the run is not an error of the server
					mu.Lock()
					samples = append(samples, s)
					mu.Unlock()
				}
				if strings.HasPrefix(s.kind, transportPrefix) {
					pause(ctx, transportBackoff) // a server that is down is not hammered
				}
			}
		}()
	}
	wg.Wait()
	res := summarise(samples, time.Since(start))
	res.Concurrency, res.Servers = c.Concurrency, len(urls)
	for _, u := range urls {
		res.ServerRSSBytes += scrapeRSS(client, u)
	}
	return res, nil
}

// servers are the URLs the clients send to: URLs, else URL.
func (c Config) servers() []string {
	if len(c.URLs) > 0 {
		return c.URLs
	}
	return []string{c.URL}
}

// transportPrefix starts the kind of a failed connection; after one, a
// client waits transportBackoff before its next request.
const (
	transportPrefix  = "transport: "
	transportBackoff = 10 * time.Millisecond
)

// pause waits d or until ctx is done.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// one sends request i to the server at url: texts i*k .. i*k+k-1 of the
// corpus, in turn.
func (c Config) one(ctx context.Context, client *http.Client, url string, i int) sample {
	texts := make([]string, c.TextsPerRequest)
	for j := range texts {
		texts[j] = c.Texts[(i*c.TextsPerRequest+j)%len(c.Texts)]
	}
	body, _ := json.Marshal(map[string][]string{"texts": texts})
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(url, "/")+"/v1/embed", bytes.NewReader(body))
	if err != nil {
		return sample{kind: transportPrefix + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Binary {
		req.Header.Set("Accept", mediaSafetensors)
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return sample{kind: transportPrefix + transportKind(err)}
	}
	defer resp.Body.Close()
	buf := bodies.Get().(*bytes.Buffer)
	defer bodies.Put(buf)
	buf.Reset()
	if resp.ContentLength > 0 {
		buf.Grow(int(min(resp.ContentLength, maxBodyHint)))
	}
	_, err = buf.ReadFrom(resp.Body)
	data := buf.Bytes()
	lat := time.Since(t0)
	if err != nil {
		return sample{kind: transportPrefix + transportKind(err)}
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		return sample{kind: strings.TrimSpace(fmt.Sprintf("HTTP %d %s", resp.StatusCode, e.Error.Code))}
	}
	if c.Binary {
		return binarySample(data, len(texts), lat)
	}
	var ok struct {
		Embeddings []json.RawMessage `json:"embeddings"`
		Weights    []json.RawMessage `json:"weights"`
	}
	if err := json.Unmarshal(data, &ok); err != nil {
		return sample{kind: "bad response: not JSON"}
	}
	if len(ok.Embeddings) != len(texts) || len(ok.Weights) != len(texts) {
		return sample{kind: fmt.Sprintf("bad response: %d embeddings for %d texts", len(ok.Embeddings), len(texts))}
	}
	return sample{latency: lat, releases: len(texts)}
}

// bodies holds the clients' response buffers, reused across requests.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxBodyHint caps the buffer grown ahead of a response from its Content-Length.
const maxBodyHint = 64 << 20

// mediaSafetensors is the service's binary response type (serve.MediaSafetensors; loadgen
// imports no server package).
const mediaSafetensors = "application/vnd.safetensors"

// binarySample checks a safetensors 200 of texts releases: a file whose header is JSON and whose z
// and pi tensors hold one release per text, their data within the file. fastjson validates the
// header (strictly: its parser alone lets invalid escapes by) and finds the two entries without
// decoding the metadata's strings; the standard decoder took 0.25 ms a one-text response for its
// 16 KB of escaped metadata (BenchmarkBinarySample: 0.08 ms since), on the cores the load
// generator may share with the server. The server's own tests check the metadata.
func binarySample(data []byte, texts int, lat time.Duration) sample {
	if len(data) < 8 {
		return sample{kind: "bad response: not safetensors"}
	}
	n := binary.LittleEndian.Uint64(data)
	if n > uint64(len(data)-8) {
		return sample{kind: "bad response: not safetensors"}
	}
	if fastjson.ValidateBytes(data[8:8+n]) != nil {
		return sample{kind: "bad response: not safetensors"}
	}
	p := headerParsers.Get()
	defer headerParsers.Put(p)
	h, err := p.ParseBytes(data[8 : 8+n])
	if err != nil || h.Type() != fastjson.TypeObject {
		return sample{kind: "bad response: not safetensors"}
	}
	var z, pi binaryEntry
	size := int64(len(data)) - 8 - int64(n)
	if !z.decode(h.Get("z")) || !pi.decode(h.Get("pi")) || !z.holds(4, texts, size) || !pi.holds(3, texts, size) {
		return sample{kind: fmt.Sprintf("bad response: no z and pi of %d releases", texts)}
	}
	return sample{latency: lat, releases: texts}
}

// headerParsers holds the clients' header parsers, reused across responses.
var headerParsers fastjson.ParserPool

// binaryEntry is a tensor's entry in a safetensors header.
type binaryEntry struct {
	DType       safetensors.DType `json:"dtype"`
	Shape       []int             `json:"shape"`
	DataOffsets [2]int64          `json:"data_offsets"`
}

// decode sets e from the header entry v, reporting whether v is an object that decodes as one.
func (e *binaryEntry) decode(v *fastjson.Value) bool {
	return v != nil && v.Type() == fastjson.TypeObject && json.Unmarshal(v.MarshalTo(nil), e) == nil
}

// holds reports whether e is a float32 tensor of rank dims whose first dimension is texts and
// whose data, as many bytes as its shape asks ([safetensors.ByteSize]), lies within a data buffer
// of size bytes.
func (e binaryEntry) holds(dims, texts int, size int64) bool {
	if e.DType != safetensors.F32 || len(e.Shape) != dims || e.Shape[0] != texts {
		return false
	}
	want, err := safetensors.ByteSize(e.DType, e.Shape)
	b, end := e.DataOffsets[0], e.DataOffsets[1]
	return err == nil && 0 <= b && b <= end && end <= size && end-b == int64(want)
}

// transportKind names a transport error without its addresses.
func transportKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return "other"
}

// summarise computes a Result from the samples of a run that took elapsed.
func summarise(samples []sample, elapsed time.Duration) Result {
	res := Result{Requests: len(samples), Errors: map[string]int{}, ElapsedS: elapsed.Seconds()}
	var lats []float64
	for _, s := range samples {
		if s.kind != "" {
			res.Errors[s.kind]++
			continue
		}
		res.OK++
		res.Releases += int64(s.releases)
		lats = append(lats, float64(s.latency.Microseconds())/1000)
	}
	if elapsed > 0 {
		res.Throughput = float64(res.OK) / elapsed.Seconds()
		res.ReleasesPerS = float64(res.Releases) / elapsed.Seconds()
	}
	res.Latency = percentiles(lats)
	return res
}

// percentiles returns the nearest-rank p50, p90, p99, the maximum and the
// mean of xs (zeros when empty).
func percentiles(xs []float64) Latency {
	if len(xs) == 0 {
		return Latency{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := func(p float64) float64 { return quantile.NearestRank(s, p) }
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Latency{P50: rank(50), P90: rank(90), P99: rank(99), Max: s[len(s)-1], Mean: sum / float64(len(s))}
}

// scrapeRSS reads process_resident_memory_bytes from the server's /metrics
// (0 when it cannot).
func scrapeRSS(client *http.Client, url string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/metrics", nil)
	if err != nil {
		return 0
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	return MetricValue(resp.Body, "process_resident_memory_bytes")
}

// MetricValue finds the sample of an unlabelled metric in the Prometheus
// text format (0 when absent).
func MetricValue(r io.Reader, name string) float64 {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return 0
}

// ReadTexts reads a corpus: one text per line, blank lines skipped.
func ReadTexts(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("texts: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			out = append(out, t)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("texts %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("texts %s: no text", path)
	}
	return out, nil
}

// SyntheticTexts is a corpus of n sentences of 8 to 30 words, deterministic,
// for runs without a text file.
func SyntheticTexts(n int) []string {
	words := strings.Fields("the a film story actor scene plot music camera moment quiet loud bright dark slow fast warm cold strange familiar " +
		"wonderful tedious clever clumsy honest moving and but with without of in on over under")
	out := make([]string, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		k := 8 + int(x%23)
		ws := make([]string, k)
		for j := range ws {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			ws[j] = words[x%uint64(len(words))]
		}
		out[i] = strings.Join(ws, " ")
	}
	return out
}
