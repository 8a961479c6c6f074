package serve

import (
	"github.com/nvdp-project/nvdp/ledger"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the Prometheus metrics of a Server, in a registry of its own
// (with the Go runtime and process collectors), served at GET /metrics.
// Labels are bounded: a route pattern (unknown paths are "other") and a
// status code; no key, account or text ever becomes a label.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec   // by route and code
	latency   *prometheus.HistogramVec // by route
	releases  prometheus.Counter
	refusals  prometheus.Counter
	overload  prometheus.Counter
	commit    prometheus.Histogram
	releaseTm prometheus.Histogram
	// batchTexts and batchReqs are each batch's texts and requests.
	batchTexts, batchReqs prometheus.Histogram
	backups               *prometheus.CounterVec // by result: ok, failed
	// ledgerBusy counts requests refused because too many charges were
	// waiting (ledger.ErrBusy), keyReloads the keys file's reloads.
	ledgerBusy prometheus.Counter
	keyReloads prometheus.Counter
}

// ledgerCollectors is what a ledger with metrics of its own has beside
// ledger.Ledger: both of package ledger's, the charges each commit held, and
// *pgledger.Ledger its connection pool and waiting charges.
type ledgerCollectors interface {
	Collectors() []prometheus.Collector
}

// latencyBuckets are the histogram buckets of request and release latency,
// in seconds: 1 ms to 30 s.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// releaserCollectors is what a Releaser with metrics of its own has
// beside Releaser (FromRelease: its noise pool).
type releaserCollectors interface {
	Collectors() []prometheus.Collector
}

func newMetrics(lim *limiter, lg ledger.Ledger, rel Releaser) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nvdp_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nvdp_http_request_duration_seconds", Help: "Time from the request's headers to the end of its response, by route.",
			Buckets: latencyBuckets,
		}, []string{"route"}),
		releases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nvdp_releases_total", Help: "Released embeddings (one per text), each charged to the ledger before its response.",
		}),
		refusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nvdp_budget_refusals_total", Help: "Requests refused because their releases would exceed the key's privacy budget.",
		}),
		overload: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nvdp_overload_refusals_total", Help: "Requests refused because the concurrency limit and its queue were full.",
		}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nvdp_ledger_charge_duration_seconds", Help: "Time to commit a charge to the ledger (fsync included).",
			Buckets: latencyBuckets,
		}),
		releaseTm: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nvdp_release_duration_seconds", Help: "Time the model takes to release the texts of one batch of requests.",
			Buckets: latencyBuckets,
		}),
		batchTexts: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nvdp_release_batch_texts", Help: "Texts released in one forward pass (a batch of requests).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}),
		batchReqs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nvdp_release_batch_requests", Help: "Requests sharing one forward pass.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}),
		backups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nvdp_ledger_backups_total", Help: "Backups of the ledger taken by the server, by result (ok, failed).",
		}, []string{"result"}),
		ledgerBusy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nvdp_ledger_busy_refusals_total", Help: "Requests refused (503 ledger_busy) because too many charges were waiting for the ledger.",
		}),
		keyReloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nvdp_keys_reloads_total", Help: "Reloads of the keys file (SIGHUP) that took effect.",
		}),
	}
	m.backups.WithLabelValues("ok")
	m.backups.WithLabelValues("failed")
	m.reg.MustRegister(m.requests, m.latency, m.releases, m.refusals, m.overload, m.commit, m.releaseTm, m.batchTexts, m.batchReqs, m.backups, m.ledgerBusy, m.keyReloads,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "nvdp_requests_running", Help: "Batches of requests being released (each holds a release slot).",
		}, func() float64 { return float64(lim.running()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "nvdp_requests_queued", Help: "Requests admitted beyond the batches being released.",
		}, func() float64 { return float64(lim.waiting()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "nvdp_ledger_available", Help: "1 while the ledger can charge; 0 while its database does not answer, or once its file was removed, replaced, truncated or could not be read (no release is served then).",
		}, func() float64 {
			if lg.Err() != nil {
				return 0
			}
			return 1
		}),
	)
	if lc, ok := lg.(ledgerCollectors); ok {
		m.reg.MustRegister(lc.Collectors()...)
	}
	if rc, ok := rel.(releaserCollectors); ok {
		m.reg.MustRegister(rc.Collectors()...)
	}
	return m
}

// observeBatch records one batch: its requests, texts and release time.
func (m *metrics) observeBatch(requests, texts int, seconds float64) {
	m.batchReqs.Observe(float64(requests))
	m.batchTexts.Observe(float64(texts))
	m.releaseTm.Observe(seconds)
}
