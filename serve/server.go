// Package serve is the online release service behind `nvdp serve`: an
// http.Handler that releases privatised embeddings of texts (a Releaser:
// one sample of each text's clipped posterior), charges every release's
// certified RDP curve to the caller's key in a durable Ledger before the
// response is written, and refuses (429) a request whose releases would
// exceed the key's budget, releasing nothing.
//
// Routes: POST /v1/embed, GET /v1/info (the guarantee and its scope), GET
// /v1/budget (the caller's balance and history), GET /v1/openapi.yaml (the
// contract, package api), GET /healthz, GET /readyz, GET /metrics
// (Prometheus). Keys come from a keys file of SHA-256 hashes
// (ParseKeys); without one, every request is charged to one shared account.
// Every error is JSON {"error": {"code", "message", ...}}. The access log
// (log/slog) has the route, status, duration, account ID and counts: never
// a key, a text or an embedding.
//
// docs/serving.md has the threat model, the formats and the API.
package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	excerptpkg "github.com/nvdp-project/nvdp/internal/excerpt"
	"github.com/nvdp-project/nvdp/safetensors"

	"github.com/nvdp-project/nvdp/api"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// SharedAccount is the ledger account of every request of a server without
// a keys file. No key ID can be "*".
const SharedAccount = "*"

// Scope is what the certified guarantee of a release covers and what it
// does not, as GET /v1/info shows it; docs/serving.md, "Threat model".
var Scope = []string{
	"Each release is one sample (Z, pi) of the clipped posterior of one text; its certified bound holds for any two input texts: an observer of the release cannot tell which of the two it came from beyond the RDP curve (epsilon at delta).",
	"Repeated releases compose: k releases of the same text have k times the curve at each order. Every release is charged to the caller's key, whatever the text, so a key's spent epsilon bounds everything its releases reveal about any text it sent.",
	"Releases to different keys are accounted separately: colluding keys, or one caller holding several keys, add up their budgets.",
	"The training data of the model is not covered: the guarantee is about the texts sent to the service, not the data the model was trained on.",
	"Side channels are not covered: response time, response size and errors depend on the request (text length changes the time of a release).",
}

// Server is the release service. Create it with New; it is an http.Handler,
// and Serve runs it on a listener with the timeouts and graceful shutdown of
// its Options.
type Server struct {
	rel  Releaser
	n, p int
	// seeded is true for a Releaser whose noise comes from a fixed seed
	// (one with a Seeded method saying so): the binary response's metadata
	// says it is not for release.
	seeded bool
	guar   *privacy.Guarantee
	// binaryKeys are the metadata of every binary response but its counts
	// and its privacy block (binaryKeys, made once by New).
	binaryKeys *safetensors.SharedMetadata
	one        privacyOfOne
	curve      *ledger.Curve
	ledger     ledger.Ledger
	// keys authenticates requests: nil without keys (one shared account),
	// fileKeys for a keys file (swapped by ReloadKeys), or a key store such
	// as a PostgreSQL ledger's keys table.
	keys     KeySource
	fileKeys atomic.Pointer[Keys]
	opts     Options
	log      *slog.Logger
	lim      *limiter
	batch    *batcher
	met      *metrics
	mux      *http.ServeMux

	draining atomic.Bool
	backupMu sync.Mutex // one Backup at a time
	// chargeFailed is when the last charge failed on the ledger (unix
	// nanoseconds; 0: the last charge held): readiness (readyz).
	chargeFailed atomic.Int64
}

// fileBackups is what a ledger whose server writes its backups (the file,
// *ledger.File) has beside ledger.Ledger.
type fileBackups interface {
	Backup(dir string) (ledger.Info, error)
	PruneBackups(dir string, keep int) ([]string, error)
}

// temporary is the failure of a ledger that may pass (a database that does
// not answer), as opposed to a file ledger's, which stays until an operator
// restarts the server on a good ledger.
type temporary interface{ Temporary() bool }

// isTemporary reports whether err is a ledger failure that may pass.
func isTemporary(err error) bool {
	var t temporary
	return errors.As(err, &t) && t.Temporary()
}

// chargeFailureHold is how long readiness stays 503 after a charge failed
// on the ledger (unless a charge holds meanwhile): long enough to take the
// replica out of a load balancer, short enough that it is sent requests
// again, one of which tries the ledger again (a server that never answered
// ready would never learn that its ledger works again).
const chargeFailureHold = 30 * time.Second

// privacyOfOne is the certified guarantee of one release: epsilon at delta,
// the order that gives it and the bound at that order.
type privacyOfOne struct {
	RD      jsonfloat.Float `json:"rd_certified"`
	Order   jsonfloat.Float `json:"order"`
	Epsilon jsonfloat.Float `json:"epsilon"`
	Delta   float64         `json:"delta"`
}

// route is one path's handlers by method.
type handler func(http.ResponseWriter, *http.Request, *reqInfo)

// infoKey is the context key of a request's *reqInfo (ServeHTTP sets it,
// the routes' handlers read it).
type infoKey struct{}

// routeList names the routes in the 404's message.
const routeList = "POST /v1/embed, GET /v1/info, /v1/budget, /v1/openapi.yaml, /healthz, /readyz, /metrics"

// newMux routes with http.ServeMux's method patterns ("POST /v1/embed").
// A known path with another method gets the service's JSON 405 with Allow
// (a pattern without a method, HEAD included: GET patterns would serve
// it), any other path its JSON 404 ("/"); ServeMux's own plain-text
// errors are never sent.
func (s *Server) newMux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range []struct {
		method, path string
		h            handler
	}{
		{http.MethodPost, "/v1/embed", s.embed},
		{http.MethodGet, "/v1/info", s.info},
		{http.MethodGet, "/v1/budget", s.budget},
		{http.MethodGet, "/v1/openapi.yaml", s.openapi},
		{http.MethodGet, "/healthz", s.healthz},
		{http.MethodGet, "/readyz", s.readyz},
		{http.MethodGet, "/metrics", s.metricsHandler()},
	} {
		mux.Handle(rt.method+" "+rt.path, withInfo(rt.h))
		notAllowed := withInfo(func(w http.ResponseWriter, r *http.Request, info *reqInfo) {
			w.Header().Set("Allow", rt.method)
			s.fail(w, info, http.StatusMethodNotAllowed, "method_not_allowed", "%s %s: use %s", r.Method, rt.path, rt.method)
		})
		mux.Handle(rt.path, notAllowed)
		if rt.method == http.MethodGet {
			mux.Handle(http.MethodHead+" "+rt.path, notAllowed)
		}
	}
	mux.Handle("/", withInfo(func(w http.ResponseWriter, r *http.Request, info *reqInfo) {
		s.fail(w, info, http.StatusNotFound, "not_found", "no route %s (routes: %s)", excerpt(r.URL.Path), routeList)
	}))
	return mux
}

// withInfo adapts a route's handler to http.Handler.
func withInfo(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(w, r, r.Context().Value(infoKey{}).(*reqInfo))
	})
}

// reqInfo is what a handler tells the access log (never a key or a text).
type reqInfo struct {
	id       string
	account  string
	texts    int
	releases int
	code     string // error code, "" on success
}

// commitWindowed is a ledger whose group commit waits for more charges under load: both of
// package ledger's (Options.LedgerCommitWindow).
type commitWindowed interface{ SetCommitWindow(time.Duration) }

// New returns a server releasing from rel, charging lg and authenticating
// with keys. It registers the model's curve in the ledger.
//
// lg is a [ledger.Ledger]: the bbolt file or PostgreSQL. keys is nil, or a
// nil [*Keys], for no keys and one shared account; a keys file, a *Keys
// that ReloadKeys replaces while serving; or another [KeySource], such as
// the keys table of a PostgreSQL ledger, [*pgledger.Ledger], whose keys
// change while the server runs. log receives the access log and the
// server's events; nil means slog.Default.
//
// Errors: invalid options, an [*option.Error]; a model with an empty shape
// or without the guarantee of one release; a key of the keys file without a
// budget when there is no default, an *option.Error for budget_epsilon; a
// BackupDir that is no directory, an *option.Error for backup_dir; the
// ledger refusing the curve.
func New(rel Releaser, lg ledger.Ledger, keys KeySource, o Options, log *slog.Logger) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	n, p := rel.Shape()
	if n <= 0 || p <= 0 {
		return nil, fmt.Errorf("model: release shape N = %d, P = %d: both must be > 0", n, p)
	}
	g := rel.Guarantee()
	if err := ledger.CheckGuarantee(g); err != nil {
		return nil, err
	}
	if err := privacy.CheckMaxEpsilon(g, o.MaxEpsilon); err != nil {
		return nil, &option.Error{Option: "max_epsilon", Value: o.MaxEpsilon, Reason: err.Error()}
	}
	fileKeys, isFile := keys.(*Keys)
	if isFile && fileKeys == nil {
		keys = nil
	}
	if keys == nil || isFile {
		if _, err := o.Budgets(fileKeys); err != nil {
			return nil, err
		}
	}
	if err := o.CheckFiles(); err != nil {
		return nil, err
	}
	sd, _ := rel.(interface{ Seeded() bool })
	seeded := sd != nil && sd.Seeded()
	binKeys, err := binaryKeys(rel, g, seeded)
	if err != nil {
		return nil, err
	}
	curve, err := lg.RegisterCurve(g, rel.Model())
	if err != nil {
		return nil, err
	}
	if w, ok := lg.(commitWindowed); ok {
		w.SetCommitWindow(o.LedgerCommitWindow)
	}
	s := &Server{rel: rel, n: n, p: p, seeded: seeded, guar: g, binaryKeys: binKeys, curve: curve, ledger: lg, keys: keys, opts: o,
		log: log, lim: newLimiter(o.MaxConcurrent, o.MaxQueue)}
	if isFile && fileKeys != nil {
		s.fileKeys.Store(fileKeys)
		s.keys = fileKeySource{&s.fileKeys}
	}
	s.one = privacyOfOne{Order: g.BestOrder, Epsilon: g.Epsilon, Delta: g.Delta, RD: jsonfloat.Float(math.NaN())}
	for _, pt := range g.Curve {
		if pt.Order == float64(g.BestOrder) {
			s.one.RD = pt.RD
		}
	}
	s.met = newMetrics(s.lim, lg, rel)
	s.batch = newBatcher(rel, s.lim, o.Batching, o.MaxConcurrent+o.MaxQueue, s.met.observeBatch)
	s.mux = s.newMux()
	return s, nil
}

// ServeHTTP routes a request, then counts it in the metrics and writes its
// access-log line.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &reqInfo{id: requestID()}
	sw := &statusWriter{ResponseWriter: w}
	sw.Header().Set("X-Request-Id", info.id)
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
	if clean := cleanPath(r.URL.Path); clean != r.URL.Path && r.Method != http.MethodConnect {
		// ServeMux would redirect (307) to the clean path: the service
		// answers its JSON 404 instead, naming the path to use.
		s.fail(sw, info, http.StatusNotFound, "not_found", "path %s is not clean: send %s", excerpt(r.URL.Path), excerpt(clean))
	} else {
		s.mux.ServeHTTP(sw, r) // sets r.Pattern: the route matched
	}
	name := "other"
	if _, path, _ := strings.Cut(r.Pattern, " "); path != "" && path != "/" {
		name = path
	} else if r.Pattern != "" && r.Pattern != "/" {
		name = r.Pattern
	}
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	d := time.Since(start)
	s.met.requests.WithLabelValues(name, strconv.Itoa(sw.status)).Inc()
	s.met.latency.WithLabelValues(name).Observe(d.Seconds())
	level := slog.LevelInfo
	if name == "/healthz" || name == "/readyz" || name == "/metrics" {
		level = slog.LevelDebug // probes and scrapes every few seconds
	}
	attrs := []slog.Attr{slog.String("id", info.id), slog.String("method", r.Method), slog.String("route", name),
		slog.Int("status", sw.status), slog.Int64("bytes", sw.bytes), slog.Float64("ms", float64(d.Microseconds())/1000),
		slog.String("remote", r.RemoteAddr)}
	if info.account != "" {
		attrs = append(attrs, slog.String("account", info.account))
	}
	if info.texts > 0 {
		attrs = append(attrs, slog.Int("texts", info.texts), slog.Int("releases", info.releases))
	}
	if info.code != "" {
		attrs = append(attrs, slog.String("error", info.code))
	}
	s.log.LogAttrs(r.Context(), level, "request", attrs...)
}

// statusWriter records the status and the size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestID is 8 random bytes in hex (X-Request-Id, the access log, errors).
// cleanPath is p as ServeMux cleans it before routing (path.Clean, with
// a leading slash and its trailing slash kept).
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

func requestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// excerpt bounds user input quoted in an error (a path, a content type).
func excerpt(s string) string {
	return strconv.Quote(excerptpkg.Cut(s, 64))
}

// apiError is the body of every error: {"error": {...}}.
type apiError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
	// Budget: the caller's balance, on a budget refusal (code
	// "budget_exceeded"), and Requested the releases the request asked for.
	Budget    *ledger.Balance `json:"budget,omitempty"`
	Requested int             `json:"requested_releases,omitempty"`
}

// fail writes an error response.
func (s *Server) fail(w http.ResponseWriter, info *reqInfo, status int, code, format string, args ...any) {
	s.writeError(w, info, status, apiError{Code: code, Message: fmt.Sprintf(format, args...)})
}

func (s *Server) writeError(w http.ResponseWriter, info *reqInfo, status int, e apiError) {
	info.code, e.RequestID = e.Code, info.id
	writeJSON(w, status, map[string]apiError{"error": e})
}

// writeJSON writes v as the JSON body of a response with status. v is
// marshalled first, so that nothing partial is ever sent.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("serve: response: %v", err)) // every response type marshals
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// authenticate returns the account of the request and its budget: the ID
// of the key in "Authorization: Bearer KEY" and the key's budget (the
// default budget when the key has none), or SharedAccount and the default
// budget without keys. On failure it writes the error (401 for a missing
// or unknown key; 400 for more than one Authorization header; 503 when the
// key store cannot be read) and returns ok false. The key is never logged or echoed.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, info *reqInfo) (account string, budget float64, ok bool) {
	if len(r.Header.Values("Authorization")) > 1 {
		s.fail(w, info, http.StatusBadRequest, "duplicate_header", "%d Authorization headers: send one", len(r.Header.Values("Authorization")))
		return "", 0, false
	}
	if s.keys == nil {
		info.account = SharedAccount
		return SharedAccount, s.opts.BudgetEpsilon, true
	}
	h := r.Header.Get("Authorization")
	scheme, secret, found := strings.Cut(h, " ")
	w.Header().Set("WWW-Authenticate", `Bearer realm="nvdp"`)
	switch {
	case h == "":
		s.fail(w, info, http.StatusUnauthorized, "unauthorized", "no API key: send the header \"Authorization: Bearer KEY\"")
	case !found || !strings.EqualFold(scheme, "Bearer"):
		s.fail(w, info, http.StatusUnauthorized, "unauthorized", "the Authorization header is not \"Bearer KEY\"")
	default:
		k, err := s.keys.LookupKey(strings.TrimSpace(secret))
		switch {
		case err != nil:
			w.Header().Del("WWW-Authenticate")
			s.ledgerFailed(w, info, err)
			return "", 0, false
		case k == nil:
			s.fail(w, info, http.StatusUnauthorized, "unauthorized", "unknown API key")
			return "", 0, false
		}
		w.Header().Del("WWW-Authenticate")
		info.account = k.ID
		budget := k.Budget
		if option.IsAuto(budget) {
			budget = s.opts.BudgetEpsilon
		}
		if option.IsAuto(budget) { // a key of a store added without a budget, and no default
			s.fail(w, info, http.StatusForbidden, "no_budget", "key %q has no privacy budget and the server has no default: nothing can be released to it", k.ID)
			return "", 0, false
		}
		return k.ID, budget, true
	}
	return "", 0, false
}

// EmbedRequest is the body of POST /v1/embed.
type EmbedRequest struct {
	Texts *[]string `json:"texts"`
}

// EmbedResponse is the body of a successful POST /v1/embed: per text, the
// release Z as N rows of P and the N Dirichlet weights pi, and the privacy
// of each release with the caller's balance after the charge.
type EmbedResponse struct {
	Embeddings [][][]float32 `json:"embeddings"` // [texts][N][P]
	Weights    [][]float32   `json:"weights"`    // [texts][N]
	Privacy    Privacy       `json:"privacy"`
}

// Privacy is the privacy block of an embed response: the certified
// guarantee of ONE release, rd_certified at order and epsilon at delta, the
// releases this request charged, and the caller's balance after them.
type Privacy struct {
	RDCertified       jsonfloat.Float `json:"rd_certified"`
	Order             jsonfloat.Float `json:"order"`
	Epsilon           jsonfloat.Float `json:"epsilon"`
	Delta             float64         `json:"delta"`
	Releases          int             `json:"releases"`
	Account           string          `json:"account"`
	SpentEpsilon      jsonfloat.Float `json:"spent_epsilon"`
	BudgetEpsilon     jsonfloat.Float `json:"budget_epsilon"`
	RemainingEpsilon  jsonfloat.Float `json:"remaining_epsilon"`
	RemainingReleases jsonfloat.Float `json:"remaining_releases"`
	// Release is how the embeddings were drawn (the guarantee's Release:
	// exact on its lattice, or not and why); absent for a Releaser whose
	// guarantee does not say.
	Release *privacy.ReleaseMechanism `json:"release,omitempty"`
}

// embed is POST /v1/embed: authenticate, admit (429 beyond the queue), read
// and check the body, refuse early when the budget cannot hold the
// releases, wait for a slot, release, charge (committed before anything is
// written) and respond. Nothing is released unless the charge holds.
func (s *Server) embed(w http.ResponseWriter, r *http.Request, info *reqInfo) {
	account, budget, ok := s.authenticate(w, r, info)
	if !ok {
		return
	}
	if !s.lim.admit() {
		s.met.overload.Inc()
		w.Header().Set("Retry-After", "1")
		s.fail(w, info, http.StatusTooManyRequests, "overloaded", "%d requests running or queued: the limit; retry later", s.opts.MaxConcurrent+s.opts.MaxQueue)
		return
	}
	defer s.lim.leave()
	arrived := s.batch.expect()
	defer arrived()
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
	defer cancel()
	binary, ok := acceptsSafetensors(r.Header.Values("Accept"))
	if !ok {
		s.fail(w, info, http.StatusNotAcceptable, "not_acceptable", "Accept %s: the releases are %s (default) or %s", excerpt(strings.Join(r.Header.Values("Accept"), ", ")), mediaJSON, MediaSafetensors)
		return
	}
	texts, ok := s.readTexts(w, r, info)
	if !ok {
		return
	}
	info.texts = len(texts)
	bal, err := s.ledger.Balance(account, s.curve, budget)
	if err != nil {
		s.ledgerFailed(w, info, err)
		return
	}
	var be *ledger.BudgetError
	if errors.As(bal.Check(len(texts)), &be) {
		s.refuse(w, info, be)
		return
	}
	embs, err := s.batch.Release(ctx, texts, arrived)
	switch {
	case ctx.Err() != nil:
		s.timeout(w, info, "releasing")
		return
	case err != nil:
		s.internal(w, info, "release_failed", err)
		return
	case len(embs) != len(texts):
		s.internal(w, info, "release_failed", fmt.Errorf("model released %d embeddings for %d texts", len(embs), len(texts)))
		return
	}
	for i, e := range embs {
		if err := checkEmbedding(e, s.n, s.p); err != nil {
			s.internal(w, info, "release_failed", fmt.Errorf("text %d: %w", i, err))
			return
		}
	}
	t0 := time.Now()
	bal, err = s.ledger.Charge(account, s.curve, len(texts), budget)
	s.met.commit.Observe(time.Since(t0).Seconds())
	switch {
	case errors.As(err, &be):
		s.refuse(w, info, be)
		return
	case err != nil:
		if !errors.Is(err, ledger.ErrBusy) {
			s.chargeFailed.Store(time.Now().UnixNano())
		}
		s.ledgerFailed(w, info, err)
		return
	}
	s.chargeFailed.Store(0)
	// Charged and committed: from here on the releases count as received.
	info.releases = len(texts)
	s.met.releases.Add(float64(len(texts)))
	s.respond(w, info, embs, bal, binary)
}

// respond writes the 200 of a charged request: its releases and privacy as JSON, or as
// safetensors when binary.
func (s *Server) respond(w http.ResponseWriter, info *reqInfo, embs []Embedding, bal ledger.Balance, binary bool) {
	resp := s.response(embs, bal)
	if !binary {
		writeEmbedJSON(w, &resp)
		return
	}
	if err := s.writeSafetensors(w, embs, resp.Privacy); err != nil {
		// Charged, not sent: the releases count as received (the ledger
		// is at or above what the client got, never below).
		s.internal(w, info, "release_failed", fmt.Errorf("encoding the safetensors response: %w", err))
	}
}

// readTexts reads and checks the body of an embed request; on failure it
// writes a 4xx and returns false. A Content-Length beyond MaxBodyBytes is
// refused before the body is read; the body is decoded strictly
// (decodeTexts).
func (s *Server) readTexts(w http.ResponseWriter, r *http.Request, info *reqInfo) ([]string, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			s.fail(w, info, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type %s: send application/json", excerpt(ct))
			return nil, false
		}
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		s.fail(w, info, http.StatusRequestEntityTooLarge, "body_too_large", "Content-Length %d: the body is larger than %d bytes", r.ContentLength, s.opts.MaxBodyBytes)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	var texts *[]string
	if err == nil {
		texts, err = decodeTexts(body)
	}
	if err != nil {
		status, code, msg := decodeError(err, s.opts.MaxBodyBytes)
		s.fail(w, info, status, code, "%s", msg)
		return nil, false
	}
	if texts == nil {
		s.fail(w, info, http.StatusBadRequest, "missing_texts", `the body needs "texts": an array of 1 to %d strings`, s.opts.MaxTexts)
		return nil, false
	}
	switch {
	case len(*texts) == 0:
		s.fail(w, info, http.StatusBadRequest, "empty_texts", `"texts" is empty: send 1 to %d texts`, s.opts.MaxTexts)
		return nil, false
	case len(*texts) > s.opts.MaxTexts:
		s.fail(w, info, http.StatusBadRequest, "too_many_texts", `"texts" has %d texts, the limit is %d`, len(*texts), s.opts.MaxTexts)
		return nil, false
	}
	for i, t := range *texts {
		switch {
		case strings.TrimSpace(t) == "":
			s.fail(w, info, http.StatusBadRequest, "empty_text", "texts[%d] is empty or only white space", i)
			return nil, false
		case len(t) > s.opts.MaxTextBytes:
			s.fail(w, info, http.StatusBadRequest, "text_too_long", "texts[%d] has %d bytes, the limit is %d", i, len(t), s.opts.MaxTextBytes)
			return nil, false
		}
	}
	return *texts, true
}

var errTrailing = errors.New("data after the JSON object")

// Errors of decodeTexts beyond encoding/json's.
type (
	// bodyError is a body that is JSON but not {"texts": [...]}: its code
	// and message.
	bodyError struct{ code, msg string }
	// encodingError is a body that is not valid UTF-8, or whose JSON
	// escapes a lone surrogate (not a character): encoding/json would
	// replace either by U+FFFD, releasing a text the client did not send.
	encodingError struct {
		offset int
		what   string
	}
)

func (e *bodyError) Error() string     { return e.msg }
func (e *encodingError) Error() string { return fmt.Sprintf("%s at byte %d", e.what, e.offset) }

// decodeTexts decodes the body of POST /v1/embed strictly: one JSON object
// (encoding/json's syntax errors, then no trailing data), valid UTF-8
// without lone surrogate escapes, whose only field is "texts" exactly (no
// other case, not twice), holding null (nil: missing) or an array of
// strings (a null, number, bool, array or object among them is the wrong
// type). Errors: as encoding/json's, errTrailing, *encodingError,
// *bodyError.
func decodeTexts(body []byte) (*[]string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errTrailing
	}
	if !utf8.Valid(raw) {
		off := 0
		for off < len(raw) {
			r, n := utf8.DecodeRune(raw[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return nil, &encodingError{offset: bytes.Index(body, raw) + off, what: "invalid UTF-8"}
	}
	if off, ok := loneSurrogate(raw); ok {
		return nil, &encodingError{offset: bytes.Index(body, raw) + off, what: "a lone surrogate escape (not a character)"}
	}
	dec = json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, _ := dec.Token() // raw is one valid JSON value
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, &bodyError{"wrong_type", fmt.Sprintf(`the body is a JSON %s, want an object {"texts": [...]}`, jsonKind(tok))}
	}
	var texts *[]string
	seen := false
	for dec.More() {
		tok, _ = dec.Token()
		name := tok.(string)
		switch {
		case name != "texts":
			msg := fmt.Sprintf(`unknown field %s: the body holds only "texts"`, excerpt(name))
			if strings.EqualFold(name, "texts") {
				msg += " (field names are case-sensitive)"
			}
			return nil, &bodyError{"unknown_field", msg}
		case seen:
			return nil, &bodyError{"duplicate_field", `"texts" appears twice in the body`}
		}
		seen = true
		tok, _ = dec.Token()
		if tok == nil {
			continue // null: missing
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return nil, &bodyError{"wrong_type", fmt.Sprintf(`"texts" holds a JSON %s, want an array of strings`, jsonKind(tok))}
		}
		list := []string{}
		for dec.More() {
			tok, _ = dec.Token()
			t, ok := tok.(string)
			if !ok {
				return nil, &bodyError{"wrong_type", fmt.Sprintf(`"texts" holds a JSON %s, want a string`, jsonKind(tok))}
			}
			list = append(list, t)
		}
		dec.Token() // ]
		texts = &list
	}
	return texts, nil
}

// jsonKind names the kind of a JSON token.
func jsonKind(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number:
		return "number"
	case string:
		return "string"
	case json.Delim:
		if t == '[' {
			return "array"
		}
		return "object"
	}
	return fmt.Sprintf("%T", tok)
}

// loneSurrogate finds a \uD800-\uDFFF escape in the strings of the valid
// JSON raw that is not half of a high-low pair, and returns its offset.
func loneSurrogate(raw []byte) (int, bool) {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	in := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == '\\':
			r, ok := hex4(i)
			if !ok {
				i++ // a one-letter escape
				continue
			}
			switch {
			case r >= 0xd800 && r < 0xdc00:
				lo, ok := hex4(i + 6)
				if !ok || lo < 0xdc00 || lo >= 0xe000 {
					return i, true
				}
				i += 11
			case r >= 0xdc00 && r < 0xe000:
				return i, true
			default:
				i += 5
			}
		}
	}
	return 0, false
}

// decodeError maps an error of reading or decoding a request body to a
// status, an error code and a message (never quoting the body's texts).
func decodeError(err error, limit int64) (int, string, string) {
	var (
		maxBytes *http.MaxBytesError
		syntax   *json.SyntaxError
		body     *bodyError
		enc      *encodingError
	)
	switch {
	case errors.As(err, &maxBytes):
		return http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body is larger than %d bytes", limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout, "body_timeout", "the body did not arrive within the read timeout"
	case errors.As(err, &syntax):
		return http.StatusBadRequest, "bad_json", fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &enc):
		return http.StatusBadRequest, "invalid_utf8", fmt.Sprintf("the body holds %v: send UTF-8 text", enc)
	case errors.As(err, &body):
		return http.StatusBadRequest, body.code, body.msg
	case errors.Is(err, io.EOF):
		return http.StatusBadRequest, "bad_json", `empty body: send {"texts": [...]}`
	case errors.Is(err, io.ErrUnexpectedEOF):
		return http.StatusBadRequest, "bad_json", "truncated JSON"
	case errors.Is(err, errTrailing):
		return http.StatusBadRequest, "bad_json", "data after the JSON object"
	}
	return http.StatusBadRequest, "bad_body", "reading the body failed: " + err.Error()
}

// refuse writes the 429 of a budget refusal: nothing released, the balance.
func (s *Server) refuse(w http.ResponseWriter, info *reqInfo, be *ledger.BudgetError) {
	s.met.refusals.Inc()
	bal := be.Balance
	s.writeError(w, info, http.StatusTooManyRequests, apiError{
		Code: "budget_exceeded", Requested: be.Requested, Budget: &bal,
		Message: fmt.Sprintf("%d releases would exceed the privacy budget of key %q (epsilon %v at delta %g; spent %v): %v releases remain; nothing was released",
			be.Requested, bal.Account, float64(bal.BudgetEpsilon), bal.Delta, float64(bal.SpentEpsilon), float64(bal.RemainingReleases)),
	})
}

// timeout writes the 503 of a request past its RequestTimeout (or whose
// client went away): nothing released or charged.
func (s *Server) timeout(w http.ResponseWriter, info *reqInfo, while string) {
	w.Header().Set("Retry-After", "1")
	s.fail(w, info, http.StatusServiceUnavailable, "timeout", "request timeout (%v) while %s: nothing was released or charged", s.opts.RequestTimeout, while)
}

// ledgerFailed answers a request whose ledger (or key store) read or
// charge failed; nothing was released or charged either way:
//   - 503 ledger_busy when too many charges were already waiting for the
//     ledger (ledger.ErrBusy): retry;
//   - 503 ledger_unavailable when the ledger cannot charge: a database that
//     does not answer (retry: the error may pass), or a file ledger that
//     was removed, replaced, truncated or could not be read (the server
//     releases nothing until an operator restarts it on a good ledger);
//   - else 500 ledger_error: a failure no retry changes (a permanent
//     database error, pgledger.Error.Permanent: permission denied, a table
//     missing), for an operator to fix.
func (s *Server) ledgerFailed(w http.ResponseWriter, info *reqInfo, err error) {
	switch {
	case errors.Is(err, ledger.ErrBusy):
		s.met.ledgerBusy.Inc()
		w.Header().Set("Retry-After", "1")
		s.fail(w, info, http.StatusServiceUnavailable, "ledger_busy",
			"too many charges are waiting for the privacy ledger (request %s): nothing was released or charged; retry later", info.id)
	case !errors.Is(err, ledger.ErrUnavailable):
		s.internal(w, info, "ledger_error", err)
	case isTemporary(err):
		s.log.Error("ledger unavailable: releases refused until it answers", "id", info.id, "ledger", s.ledger.Name(), "error", err)
		w.Header().Set("Retry-After", "5")
		s.fail(w, info, http.StatusServiceUnavailable, "ledger_unavailable",
			"the privacy ledger is unavailable (request %s): nothing was released or charged; retry later", info.id)
	default:
		s.log.Error("ledger unavailable: releases stopped", "id", info.id, "ledger", s.ledger.Name(), "error", err)
		w.Header().Set("Retry-After", "60")
		s.fail(w, info, http.StatusServiceUnavailable, "ledger_unavailable",
			"the privacy ledger is unavailable (request %s): nothing was released or charged, and nothing will be until an operator restores the ledger", info.id)
	}
}

// internal logs err and writes a 500 that does not show it (it may hold
// paths; it never holds texts).
func (s *Server) internal(w http.ResponseWriter, info *reqInfo, code string, err error) {
	s.log.Error("request failed", "id", info.id, "error", err)
	s.fail(w, info, http.StatusInternalServerError, code, "internal error (request %s): nothing was released or charged", info.id)
}

// response builds the 200 body: Z reshaped to [N][P] (views, no copies).
func (s *Server) response(embs []Embedding, bal ledger.Balance) EmbedResponse {
	out := EmbedResponse{Embeddings: make([][][]float32, len(embs)), Weights: make([][]float32, len(embs))}
	for i, e := range embs {
		rows := make([][]float32, s.n)
		for j := range rows {
			rows[j] = e.Z[j*s.p : (j+1)*s.p]
		}
		out.Embeddings[i], out.Weights[i] = rows, e.Pi
	}
	out.Privacy = Privacy{
		RDCertified: s.one.RD, Order: s.one.Order, Epsilon: s.one.Epsilon, Delta: s.one.Delta,
		Releases: len(embs), Account: bal.Account, SpentEpsilon: bal.SpentEpsilon, BudgetEpsilon: bal.BudgetEpsilon,
		RemainingEpsilon: bal.RemainingEpsilon, RemainingReleases: bal.RemainingReleases, Release: s.guar.Release,
	}
	return out
}

// Info is the body of GET /v1/info.
type Info struct {
	Model any `json:"model"`
	// Components N and Dims P of each release.
	Components int `json:"components"`
	Dims       int `json:"dims"`
	// PerRelease is the guarantee of one release at its best order;
	// Guarantee the whole certified curve of one release.
	PerRelease privacyOfOne       `json:"per_release"`
	Guarantee  *privacy.Guarantee `json:"guarantee"`
	Scope      []string           `json:"scope"`
	Accounting Accounting         `json:"accounting"`
	Limits     Limits             `json:"limits"`
	// RequestTimeout is Options.RequestTimeout in seconds.
	RequestTimeout float64 `json:"request_timeout_s"`
}

// Accounting says how releases are charged.
type Accounting struct {
	Ledger        string           `json:"ledger_format"`
	Composition   string           `json:"composition"`
	Keys          bool             `json:"keys"` // false: one shared account
	DefaultBudget *jsonfloat.Float `json:"default_budget_epsilon,omitempty"`
	CurveID       string           `json:"curve_id"`
}

func (s *Server) info(w http.ResponseWriter, _ *http.Request, _ *reqInfo) {
	in := Info{Model: s.rel.Model(), Components: s.n, Dims: s.p, PerRelease: s.one, Guarantee: s.guar, Scope: Scope,
		Accounting: Accounting{Ledger: s.ledger.Format(), Keys: s.keys != nil, CurveID: s.curve.ID,
			Composition: "each release of a text is charged the curve of one release to the caller's key; a key whose releases are all exactly Gaussian composes exactly (the mus compose into sqrt(sum n_i mu_i^2), its epsilon the analytic Gaussian mechanism's at delta); any other key's spent RDP is the sum of its releases' curves at each order, converted to epsilon at delta by the minimum over orders; the balance's accountant says which"},
		Limits: s.opts.Limits, RequestTimeout: s.opts.RequestTimeout.Seconds()}
	if !option.IsAuto(s.opts.BudgetEpsilon) {
		in.Accounting.DefaultBudget = jsonfloat.New(s.opts.BudgetEpsilon)
	}
	writeJSON(w, http.StatusOK, in)
}

// MaxBudgetHistory bounds GET /v1/budget?history=N.
const MaxBudgetHistory = 1000

// BudgetResponse is the body of GET /v1/budget: the caller's balance and,
// with ?history=N, the caller's N newest charges with the curves and
// models they were charged under.
type BudgetResponse struct {
	Budget  ledger.Balance  `json:"budget"`
	History *ledger.History `json:"history,omitempty"`
}

// budget is GET /v1/budget[?history=N]: the caller's balance, and its N
// newest charges.
func (s *Server) budget(w http.ResponseWriter, r *http.Request, info *reqInfo) {
	account, budget, ok := s.authenticate(w, r, info)
	if !ok {
		return
	}
	n := 0
	for k, v := range r.URL.Query() {
		if k != "history" {
			s.fail(w, info, http.StatusBadRequest, "bad_parameter", "unknown query parameter %s: GET /v1/budget takes only history=N", excerpt(k))
			return
		}
		var err error
		if n, err = strconv.Atoi(v[len(v)-1]); err != nil || len(v) != 1 || n < 1 || n > MaxBudgetHistory {
			s.fail(w, info, http.StatusBadRequest, "bad_parameter", "history=%s: want one count of charges from 1 to %d", excerpt(v[len(v)-1]), MaxBudgetHistory)
			return
		}
	}
	bal, err := s.ledger.Balance(account, s.curve, budget)
	if err != nil {
		s.ledgerFailed(w, info, err)
		return
	}
	resp := BudgetResponse{Budget: bal}
	if n > 0 {
		h, err := s.ledger.History(ledger.HistoryQuery{Account: account, Limit: n})
		if err != nil {
			s.ledgerFailed(w, info, err)
			return
		}
		resp.History = &h
	}
	writeJSON(w, http.StatusOK, resp)
}

// openapi is GET /v1/openapi.yaml: the service's contract (api.OpenAPI).
func (s *Server) openapi(w http.ResponseWriter, _ *http.Request, _ *reqInfo) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(api.OpenAPI)))
	_, _ = w.Write(api.OpenAPI)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ *reqInfo) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is 200 while the server takes requests, 503 once it drains, while
// its ledger is unavailable (ledger.Ledger.Err), and while its ledger
// cannot charge: for chargeFailureHold after a charge failed on it (a full
// disk, a database user without write rights: the ledger answers, but
// every charge fails), unless a charge holds meanwhile.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request, info *reqInfo) {
	if s.draining.Load() {
		s.fail(w, info, http.StatusServiceUnavailable, "draining", "shutting down: draining requests in flight")
		return
	}
	if err := s.ledger.Err(); err != nil {
		if !errors.Is(err, ledger.ErrUnavailable) { // a permanent error: not ready either
			s.log.Error("ledger cannot charge", "ledger", s.ledger.Name(), "error", err)
			s.fail(w, info, http.StatusServiceUnavailable, "ledger_unavailable", "the privacy ledger cannot charge (see the server's log)")
			return
		}
		s.ledgerFailed(w, info, err)
		return
	}
	if t := s.chargeFailed.Load(); t != 0 && time.Since(time.Unix(0, t)) < chargeFailureHold {
		w.Header().Set("Retry-After", strconv.Itoa(int(chargeFailureHold/time.Second)))
		s.fail(w, info, http.StatusServiceUnavailable, "ledger_unavailable",
			"the last charge failed on the privacy ledger %s ago: it cannot charge (see the server's log); ready again once a charge holds, or after %v, to try again",
			time.Since(time.Unix(0, t)).Round(time.Second), chargeFailureHold)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) metricsHandler() func(http.ResponseWriter, *http.Request, *reqInfo) {
	h := promhttp.HandlerFor(s.met.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)})
	return func(w http.ResponseWriter, r *http.Request, _ *reqInfo) { h.ServeHTTP(w, r) }
}

// Backup writes a backup of the server's ledger into Options.BackupDir and
// then removes the oldest beyond Options.BackupKeep; it logs the backup and
// counts it in the metrics. The ledger's Backup makes one consistent copy
// while charges go on. It works while the ledger is unavailable: a removed
// ledger file is rescued from the file the server holds open. One backup
// runs at a time.
func (s *Server) Backup() (ledger.Info, error) {
	s.backupMu.Lock()
	defer s.backupMu.Unlock()
	fb, ok := s.ledger.(fileBackups)
	if !ok {
		err := fmt.Errorf("ledger %s: %w: back the database up with its own tools (pg_dump, continuous archiving)", s.ledger.Name(), ledger.ErrNoBackup)
		s.log.Error("ledger backup failed", "error", err)
		return ledger.Info{}, err
	}
	info, err := fb.Backup(s.opts.BackupDir)
	if err != nil {
		s.met.backups.WithLabelValues("failed").Inc()
		s.log.Error("ledger backup failed", "error", err)
		return info, err
	}
	s.met.backups.WithLabelValues("ok").Inc()
	s.log.Info("ledger backup written", "backup", info.Path, "txid", info.Txid, "accounts", info.Accounts, "releases", info.Releases)
	if s.opts.BackupKeep > 0 {
		removed, err := fb.PruneBackups(s.opts.BackupDir, s.opts.BackupKeep)
		if err != nil {
			s.log.Error("removing old ledger backups failed", "error", err)
		}
		if len(removed) > 0 {
			s.log.Info("old ledger backups removed", "removed", removed, "kept", s.opts.BackupKeep)
		}
	}
	return info, nil
}

// backupEvery takes a backup every period until ctx is done.
func (s *Server) backupEvery(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Backup() // logged and counted; the next tick tries again
		}
	}
}

// Serve serves on ln until ctx is done, then shuts down gracefully: it
// stops accepting, marks itself not ready, and waits up to ShutdownTimeout
// for the requests in flight to finish, each charged and answered, after
// which it closes the connections left. It returns nil after a clean drain.
// It does not close the ledger. Error before serving: a server without keys
// on an address beyond loopback that the options do not allow, as
// [Options.CheckListener] finds.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.opts.CheckListener(ln.Addr(), s.keys != nil); err != nil {
		return err
	}
	if s.keys == nil && !isLoopback(ln.Addr()) {
		s.log.Warn("serving WITHOUT AUTHENTICATION beyond loopback: every request is charged to the one shared account, whoever sends it", "addr", ln.Addr().String())
	}
	hs := &http.Server{
		Handler: s, ReadTimeout: s.opts.ReadTimeout, ReadHeaderTimeout: s.opts.ReadTimeout,
		WriteTimeout: s.opts.WriteTimeout, IdleTimeout: s.opts.IdleTimeout,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if s.opts.BackupEvery > 0 {
		bctx, stop := context.WithCancel(ctx)
		defer stop()
		go s.backupEvery(bctx, s.opts.BackupEvery)
	}
	s.log.Info("serving", "addr", ln.Addr().String(), "components", s.n, "dims", s.p,
		"epsilon_per_release", float64(s.one.Epsilon), "delta", s.one.Delta, "ledger", s.ledger.Name(), "keys", s.keys != nil)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	running, queued := s.lim.running(), s.lim.waiting()
	s.log.Info("draining", "running", running, "queued", queued, "timeout", s.opts.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc // http.ErrServerClosed
	if err != nil {
		hs.Close()
		return fmt.Errorf("shutdown: requests still in flight after %v were cut off: %w", s.opts.ShutdownTimeout, err)
	}
	s.batch.Close()
	s.log.Info("drained")
	return nil
}

// ReloadKeys replaces the server's keys file with k, as `nvdp serve` does on
// SIGHUP with the file read again. Requests from then on authenticate
// against k; those in flight keep the keys they were admitted with. Keys
// removed from the file are refused from then on; their accounts stay in
// the ledger.
//
// Errors, with the old keys kept: the server does not serve a keys file,
// having no keys or a key store; k is nil; a key of k has no budget and
// there is no default, an [*option.Error] for budget_epsilon.
func (s *Server) ReloadKeys(k *Keys) error {
	if s.fileKeys.Load() == nil {
		return errors.New("reload keys: the server does not authenticate with a keys file")
	}
	if k == nil {
		return errors.New("reload keys: no keys")
	}
	if _, err := s.opts.Budgets(k); err != nil {
		return err
	}
	s.fileKeys.Store(k)
	s.met.keyReloads.Inc()
	s.log.Info("keys reloaded", "keys", k.File(), "count", len(k.All()))
	return nil
}
