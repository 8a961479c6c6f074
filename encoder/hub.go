package encoder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/progress"
)

// DefaultEndpoint is the Hugging Face hub. HF_ENDPOINT overrides it, as in huggingface_hub.
const DefaultEndpoint = "https://huggingface.co"

// LoadOptions configures Load.
type LoadOptions struct {
	// Rng initialises scratch models; nil means a PCG seeded with Seed.
	Rng  *rand.Rand
	Seed uint64
	// CacheDir holds hub downloads; "" means $NVDP_HOME/hub, else ~/.cache/nvdp/hub.
	CacheDir string
	// Endpoint is the hub base URL; "" means $HF_ENDPOINT, else DefaultEndpoint.
	Endpoint string
	// Token is sent as "Authorization: Bearer"; "" means $HF_TOKEN (none if unset).
	Token string
	// Revision is the branch, tag or commit; "" means "main".
	Revision string
	// Offline uses only the cache. HF_HUB_OFFLINE=1 sets it too.
	Offline bool
	// Client is the HTTP client; nil means http.DefaultClient.
	Client *http.Client
	// Context cancels downloads; nil means context.Background().
	Context context.Context
	// Progress receives the bytes of each file downloaded, with stage "download NAME/FILE" and
	// unit "bytes". Done counts from the bytes a resumed download already had; Total is the file
	// size, 0 while unknown, and equals Done when the file is done. nil discards the events. The
	// library draws nothing: the caller decides how to show them.
	Progress progress.Func
}

// Load builds an encoder from a spec:
//
//	scratch:NAME   preset NAME: bert-tiny, bert-mini, bert-base, bert-large or
//	               roberta-base, with HF initialisation from opts.Rng or opts.Seed
//	hf:DIR         a local HF directory holding config.json and model.safetensors,
//	               taken when DIR exists
//	hf:owner/name  a hub model, or hf:bert-base-uncased, downloaded into the
//	               cache by Download and loaded from there
//
// The result's SourceDir is the directory with the tokenizer files; it is empty for scratch models.
func Load(spec string, opts LoadOptions) (*Encoder, error) {
	kind, arg, ok := strings.Cut(spec, ":")
	if !ok || arg == "" {
		return nil, fmt.Errorf("encoder spec %q: want scratch:PRESET, hf:DIR or hf:owner/name", spec)
	}
	switch kind {
	case "scratch":
		cfg, err := Preset(arg)
		if err != nil {
			return nil, fmt.Errorf("encoder spec %q: %w", spec, err)
		}
		rng := opts.Rng
		if rng == nil {
			rng = rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
		}
		return New(cfg, rng)
	case "hf":
		dir, err := ResolveHF(arg, opts)
		if err != nil {
			return nil, fmt.Errorf("encoder spec %q: %w", spec, err)
		}
		return LoadDir(dir)
	}
	return nil, fmt.Errorf("encoder spec %q: unknown kind %q (want scratch or hf)", spec, kind)
}

// ResolveHF returns the local directory of the argument of an hf: spec: arg itself when it is a
// directory, an error when it looks like a path that does not exist, and otherwise the cache
// directory of the hub model arg; see [Download].
func ResolveHF(arg string, opts LoadOptions) (string, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		return arg, nil
	}
	if looksLikePath(arg) {
		return "", fmt.Errorf("%s: directory does not exist", arg)
	}
	return Download(arg, opts)
}

func looksLikePath(s string) bool {
	return strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "~") || strings.Count(s, "/") > 1
}

var repoNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$`)

// CacheDir returns the hub cache directory for opts; see [LoadOptions].CacheDir.
func CacheDir(opts LoadOptions) (string, error) {
	if opts.CacheDir != "" {
		return opts.CacheDir, nil
	}
	if h := os.Getenv("NVDP_HOME"); h != "" {
		return filepath.Join(h, "hub"), nil
	}
	home, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("hub cache: %w (set NVDP_HOME)", err)
	}
	return filepath.Join(home, "nvdp", "hub"), nil
}

// Download fetches a hub model into the cache and returns its directory,
// CACHE/models--owner--name/REVISION/. It fetches config.json and model.safetensors, which are
// required, and whichever [TokenizerFileNames] exist, from ENDPOINT/NAME/resolve/REVISION/FILE.
//
// Files already in the cache are not fetched again. Each file is written to FILE.incomplete and
// renamed when complete; an interrupted download resumes with an HTTP Range request. A finished
// download is marked, and later calls make no requests. Offline mode uses the cache only.
//
// A missing model.safetensors is an error that says whether only pytorch_model.bin exists, which
// is not supported. A 404 for a tokenizer file is not an error.
func Download(name string, opts LoadOptions) (string, error) {
	if !repoNameRE.MatchString(name) || strings.Contains(name, "..") {
		return "", fmt.Errorf("hub model name %q: want owner/name or name", name)
	}
	rev := opts.Revision
	if rev == "" {
		rev = "main"
	}
	if strings.Contains(rev, "..") || strings.ContainsAny(rev, `\`) {
		return "", fmt.Errorf("hub revision %q invalid", rev)
	}
	cache, err := CacheDir(opts)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "models--"+strings.ReplaceAll(name, "/", "--"), filepath.FromSlash(rev))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("hub cache: %w", err)
	}
	offline := opts.Offline || os.Getenv("HF_HUB_OFFLINE") == "1"
	h := &hub{opts: opts, name: name, rev: rev, dir: dir, offline: offline}
	h.endpoint = strings.TrimRight(firstNonEmpty(opts.Endpoint, os.Getenv("HF_ENDPOINT"), DefaultEndpoint), "/")
	h.token = firstNonEmpty(opts.Token, os.Getenv("HF_TOKEN"))
	h.client = opts.Client
	if h.client == nil {
		h.client = http.DefaultClient
	}
	h.ctx = opts.Context
	if h.ctx == nil {
		h.ctx = context.Background()
	}

	marker := filepath.Join(dir, completeMarker)
	if _, err := os.Stat(marker); err == nil {
		return dir, nil // fully downloaded before
	}
	if err := h.fetch(ConfigFile); err != nil {
		return "", err
	}
	if err := h.fetch(WeightsFile); err != nil {
		if !errors.Is(err, errNotFound) {
			return "", err
		}
		// Say why: probe for the files we do not support.
		return "", missingWeightsError(h.url(""), func(f string) bool { return h.exists(f) })
	}
	for _, f := range TokenizerFileNames {
		if err := h.fetch(f); err != nil && !errors.Is(err, errNotFound) {
			return "", err
		}
	}
	if !offline {
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			return "", fmt.Errorf("hub cache: %w", err)
		}
	}
	return dir, nil
}

// completeMarker marks a cache directory whose download finished (required
// files present, optional files fetched or known absent).
const completeMarker = ".nvdp-complete"

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

type hub struct {
	opts            LoadOptions
	name, rev, dir  string
	endpoint, token string
	offline         bool
	client          *http.Client
	ctx             context.Context
}

func (h *hub) url(file string) string {
	return h.endpoint + "/" + h.name + "/resolve/" + h.rev + "/" + file
}

func (h *hub) request(method, file string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(h.ctx, method, h.url(file), nil)
	if err != nil {
		return nil, err
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	req.Header.Set("User-Agent", "nvdp")
	return req, nil
}

// exists reports whether the hub has file (HEAD 2xx); used for error messages.
func (h *hub) exists(file string) bool {
	if h.offline {
		_, err := os.Stat(filepath.Join(h.dir, file))
		return err == nil
	}
	req, err := h.request(http.MethodHead, file)
	if err != nil {
		return false
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode/100 == 2
}

// fetch downloads file into the cache unless it is there; errNotFound (wrapped)
// for a 404 or, offline, a file not in the cache.
func (h *hub) fetch(file string) error {
	dst := filepath.Join(h.dir, file)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if h.offline {
		return fmt.Errorf("hub %s: %s not in the cache %s (offline): %w", h.name, file, h.dir, errNotFound)
	}
	part := dst + ".incomplete"
	var have int64
	if st, err := os.Stat(part); err == nil {
		have = st.Size()
	}
	req, err := h.request(http.MethodGet, file)
	if err != nil {
		return fmt.Errorf("hub %s: %w", h.url(file), err)
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("hub download %s: %w", h.url(file), err)
	}
	defer resp.Body.Close()
	flag := os.O_CREATE | os.O_WRONLY
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		flag |= os.O_APPEND
	case resp.StatusCode == http.StatusOK:
		flag |= os.O_TRUNC
		have = 0
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
		// The partial file is already complete (or stale): start over.
		os.Remove(part)
		return h.fetch(file)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("hub %s: %s: %w", h.name, file, errNotFound)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("hub download %s: %s (gated or private model? set HF_TOKEN)", h.url(file), resp.Status)
	default:
		return fmt.Errorf("hub download %s: %s", h.url(file), resp.Status)
	}
	out, err := os.OpenFile(part, flag, 0o644)
	if err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	total := resp.ContentLength
	if total >= 0 {
		total += have
	}
	pw := &progressWriter{w: out, report: h.opts.Progress, ev: progress.Event{Stage: "download " + h.name + "/" + file,
		Unit: "bytes", Done: have, Total: max(total, 0), Loss: math.NaN()}}
	if total < 0 || have < total {
		pw.report.Report(pw.ev) // the start, from the bytes a resumed download has
	}
	n, err := io.Copy(pw, resp.Body)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("hub download %s: after %d bytes: %w (the partial file is kept; a later call resumes)", h.url(file), have+n, err)
	}
	if total >= 0 && have+n != total {
		return fmt.Errorf("hub download %s: got %d of %d bytes (the partial file is kept; a later call resumes)", h.url(file), have+n, total)
	}
	pw.ev.Total = pw.ev.Done // ends the stage, also when the size was unknown
	pw.report.Report(pw.ev)
	if err := os.Rename(part, dst); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	slog.Info("downloaded", "model", h.name, "file", file, "bytes", have+n)
	return nil
}

// progressReportBytes is how many bytes a download copies between two progress events.
const progressReportBytes = 1 << 20

// progressWriter writes to w and reports the bytes written, every progressReportBytes.
type progressWriter struct {
	w        io.Writer
	report   progress.Func
	ev       progress.Event
	reported int64
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.ev.Done += int64(n)
	if p.ev.Done-p.reported >= progressReportBytes {
		p.report.Report(p.ev)
		p.reported = p.ev.Done
	}
	return n, err
}
