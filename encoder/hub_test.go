package encoder

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/progress"
)

// fakeHub serves files under /{repo}/resolve/main/{file} with Range support
// (http.ServeContent) and records requests.
type fakeHub struct {
	mu       sync.Mutex
	files    map[string][]byte // "owner/name/file" -> content
	requests []string          // "METHOD path range auth"
}

func (f *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path+" "+r.Header.Get("Range")+" "+r.Header.Get("Authorization"))
	f.mu.Unlock()
	repo, file, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/resolve/main/")
	b, found := f.files[repo+"/"+file]
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, file, time.Unix(0, 0), bytes.NewReader(b))
}

func (f *fakeHub) gets() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		if strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

func hubFiles(t *testing.T, repo string) (map[string][]byte, *Encoder) {
	t.Helper()
	src := randomEncoder(t, "bert", 51)
	dir := t.TempDir()
	writeCheckpoint(t, dir, src, func(n string) string { return "bert." + n }, nil)
	files := map[string][]byte{}
	for _, n := range []string{ConfigFile, WeightsFile} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		files[repo+"/"+n] = b
	}
	files[repo+"/vocab.txt"] = []byte("[PAD]\n[UNK]\n")
	return files, src
}

func TestHubDownload(t *testing.T) {
	files, src := hubFiles(t, "acme/tiny-bert")
	fh := &fakeHub{files: files}
	srv := httptest.NewServer(fh)
	defer srv.Close()
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "secret-token")
	t.Setenv("HF_HUB_OFFLINE", "")

	e, err := Load("hf:acme/tiny-bert", LoadOptions{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	wantDir := filepath.Join(cache, "models--acme--tiny-bert", "main")
	if e.SourceDir != wantDir {
		t.Fatalf("SourceDir %s, want %s", e.SourceDir, wantDir)
	}
	if got := e.Layers[1].Out.W.Value.Data[5]; got != src.Layers[1].Out.W.Value.Data[5] {
		t.Fatalf("weights differ: %v vs %v", got, src.Layers[1].Out.W.Value.Data[5])
	}
	// vocab.txt came along; tokenizer.json (404) did not.
	if tf := TokenizerFiles(e.SourceDir); len(tf) != 1 || filepath.Base(tf[0]) != "vocab.txt" {
		t.Fatalf("tokenizer files %v", tf)
	}
	gets := fh.gets()
	if len(gets) != 2+len(TokenizerFileNames) {
		t.Fatalf("%d GETs: %v", len(gets), gets)
	}
	for _, g := range gets {
		if !strings.HasSuffix(g, "Bearer secret-token") || !strings.Contains(g, "/acme/tiny-bert/resolve/main/") {
			t.Fatalf("request %q lacks token or path", g)
		}
	}
	// No temporary files left behind.
	left, _ := filepath.Glob(filepath.Join(wantDir, "*.incomplete"))
	if len(left) != 0 {
		t.Fatalf("leftover partial files %v", left)
	}
	// Second load: everything from the cache, no requests.
	if _, err := Load("hf:acme/tiny-bert", LoadOptions{CacheDir: cache}); err != nil {
		t.Fatal(err)
	}
	if g := fh.gets()[len(gets):]; len(g) != 0 {
		t.Fatalf("cached model fetched again: %v", g)
	}
	// Offline: cache only, no requests.
	n := len(fh.gets())
	if _, err := Load("hf:acme/tiny-bert", LoadOptions{CacheDir: cache, Offline: true}); err != nil {
		t.Fatal(err)
	}
	if len(fh.gets()) != n {
		t.Fatal("offline load made requests")
	}
	if _, err := Load("hf:acme/other", LoadOptions{CacheDir: cache, Offline: true}); err == nil || !strings.Contains(err.Error(), "offline") {
		t.Fatalf("offline miss: %v", err)
	}
}

func TestHubResume(t *testing.T) {
	files, _ := hubFiles(t, "bert-tiny-test")
	fh := &fakeHub{files: files}
	srv := httptest.NewServer(fh)
	defer srv.Close()
	cache := t.TempDir()
	dir := filepath.Join(cache, "models--bert-tiny-test", "main")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := files["bert-tiny-test/"+WeightsFile]
	half := len(w) / 2
	if err := os.WriteFile(filepath.Join(dir, WeightsFile+".incomplete"), w[:half], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load("hf:bert-tiny-test", LoadOptions{CacheDir: cache, Endpoint: srv.URL}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, WeightsFile))
	if err != nil || !bytes.Equal(got, w) {
		t.Fatalf("resumed file differs (%d vs %d bytes) %v", len(got), len(w), err)
	}
	ranged := false
	for _, g := range fh.gets() {
		ranged = ranged || strings.Contains(g, WeightsFile+" bytes="+strconv.Itoa(half)+"-")
	}
	if !ranged {
		t.Fatalf("no Range request: %v", fh.gets())
	}
}

func TestHubErrors(t *testing.T) {
	files, _ := hubFiles(t, "acme/m")
	binOnly := map[string][]byte{"acme/bin/" + ConfigFile: files["acme/m/"+ConfigFile], "acme/bin/" + PyTorchBinFile: []byte("x")}
	noCfg := map[string][]byte{"acme/nocfg/" + WeightsFile: files["acme/m/"+WeightsFile]}
	all := map[string][]byte{}
	for _, m := range []map[string][]byte{binOnly, noCfg} {
		for k, v := range m {
			all[k] = v
		}
	}
	srv := httptest.NewServer(&fakeHub{files: all})
	defer srv.Close()
	tests := []struct{ spec, want string }{
		{"hf:acme/bin", "only pytorch_model.bin"},
		{"hf:acme/nocfg", "config.json"},
		{"hf:acme/absent", "config.json"},
		{"hf:acme/..", "hub model name"},
		{"hf:acme/../etc", "does not exist"},
		{"hf:./no/such/dir", "does not exist"},
		{"scratch:bert-gigantic", "unknown preset"},
		{"bert-base", "want scratch:PRESET"},
		{"gguf:x", "unknown kind"},
	}
	for _, tc := range tests {
		_, err := Load(tc.spec, LoadOptions{CacheDir: t.TempDir(), Endpoint: srv.URL})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%q) error %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestLoadScratchAndDir(t *testing.T) {
	e1, err := Load("scratch:bert-tiny", LoadOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	e2, _ := Load("scratch:bert-tiny", LoadOptions{Seed: 3})
	if e1.Config.NumHiddenLayers != 2 || e1.Layers[0].Query.W.Value.Data[9] != e2.Layers[0].Query.W.Value.Data[9] {
		t.Fatal("scratch load not seeded or wrong preset")
	}
	dir := t.TempDir()
	src := randomEncoder(t, "roberta", 61)
	writeCheckpoint(t, dir, src, nil, nil)
	e, err := Load("hf:"+dir, LoadOptions{})
	if err != nil || e.Config.ModelType != "roberta" {
		t.Fatalf("hf:DIR: %v", err)
	}
}

// TestHubProgress: a download reports its bytes through LoadOptions.Progress, one stage per
// file, and draws nothing itself (it drew a progress bar on stderr even when stderr was not
// a terminal). The 3 MiB vocab.txt spans several report blocks; half of it is already on disk
// (a resumed download starts at the bytes it has).
func TestHubProgress(t *testing.T) {
	files, _ := hubFiles(t, "acme/big")
	big := bytes.Repeat([]byte("token\n"), 3<<20/6)
	files["acme/big/vocab.txt"] = big
	srv := httptest.NewServer(&fakeHub{files: files})
	defer srv.Close()
	cache := t.TempDir()
	dir := filepath.Join(cache, "models--acme--big", "main")
	os.MkdirAll(dir, 0o755)
	half := int64(len(big) / 2)
	os.WriteFile(filepath.Join(dir, "vocab.txt.incomplete"), big[:half], 0o644)

	stderr := os.Stderr
	capture, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	os.Stderr = capture
	prevLog := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer func() { os.Stderr = stderr; slog.SetDefault(prevLog) }()

	var mu sync.Mutex
	events := map[string][]progress.Event{}
	report := func(e progress.Event) {
		mu.Lock()
		defer mu.Unlock()
		events[e.Stage] = append(events[e.Stage], e)
	}
	if _, err := Download("acme/big", LoadOptions{CacheDir: cache, Endpoint: srv.URL}); err != nil {
		t.Fatal(err)
	}
	os.Stderr = stderr
	if out, _ := os.ReadFile(capture.Name()); len(out) != 0 {
		t.Fatalf("the download wrote %d bytes to stderr: %.200q", len(out), out)
	}

	os.RemoveAll(cache)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "vocab.txt.incomplete"), big[:half], 0o644)
	if _, err := Download("acme/big", LoadOptions{CacheDir: cache, Endpoint: srv.URL, Progress: report}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ConfigFile, WeightsFile, "vocab.txt"} {
		ev := events["download acme/big/"+f]
		size := int64(len(files["acme/big/"+f]))
		if len(ev) == 0 {
			t.Fatalf("no progress for %s (stages: %v)", f, events)
		}
		first, last := ev[0], ev[len(ev)-1]
		if last.Done != size || last.Total != size || last.Unit != "bytes" || last.HasLoss() {
			t.Errorf("%s: last event %+v, want %d of %d bytes", f, last, size, size)
		}
		for i := 1; i < len(ev); i++ {
			if ev[i].Done < ev[i-1].Done {
				t.Errorf("%s: Done decreases: %d after %d", f, ev[i].Done, ev[i-1].Done)
			}
		}
		if f == "vocab.txt" && (first.Done != half || len(ev) < 3) {
			t.Errorf("vocab.txt: %d events starting at %d, want >= 3 starting at the %d bytes on disk", len(ev), first.Done, half)
		}
	}
	if ev := events["download acme/big/tokenizer.json"]; len(ev) != 0 {
		t.Errorf("progress for a file the hub does not have: %+v", ev)
	}
}
