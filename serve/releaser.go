package serve

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
	"github.com/prometheus/client_golang/prometheus"
)

// Releaser is the model a Server releases from: a [*release.Releaser]
// behind a small adapter in cmd/nvdp/serve.go, or servetest.Fake in tests.
// Implementations are safe for concurrent use.
type Releaser interface {
	// Shape is the release's size: N components of P dims (> 0 both).
	Shape() (n, p int)
	// Guarantee is the certified guarantee of ONE release of one text: its
	// RDP curve over privacy.DefaultOrders (Releases 1) and epsilon at its
	// Delta. Every release is charged this curve.
	Guarantee() *privacy.Guarantee
	// Model describes the model for GET /v1/info (directory, task, variant,
	// mode, N, P, clip constants); it must encode as JSON.
	Model() any
	// Release draws one sample of the clipped posterior of each text, with
	// noise of a cryptographically seeded generator fresh for every call:
	// one Embedding per text, in order. It returns early with ctx's error
	// when ctx is done.
	Release(ctx context.Context, texts []string) ([]Embedding, error)
}

// Embedding is the release of one text, as [release.Embedding]. Z is the
// sample of the N component means, row-major, shape [N*P]; Pi holds the
// Dirichlet weights of the N components, shape [N]. It holds neither the
// text, its tokens nor the posterior parameters.
type Embedding = release.Embedding

// FromRelease returns the Releaser of a model loaded by [release.Load]
// whose noise comes from src, the server's one [release.NewSource].
//
// The source's pool of exact noise is drawn ahead of the requests by
// workers keyed from crypto/rand and serves every request, each draw once,
// then wiped, so that a request's time does not depend on its noise;
// docs/serving.md, "What time reveals". Close closes src and r, with r's
// device twin, release.Options.Device.
func FromRelease(r *release.Releaser, src *release.Source) Releaser { return releaseModel{r, src} }

// Load loads the model in dir as the Releaser of a server: [release.Load]
// with opt, its device twin on opt.Device, then [FromRelease] with the
// noise of one new [release.NewSource]. Errors: those of release.Load and
// release.NewSource.
func Load(dir string, opt release.Options) (Releaser, error) {
	r, err := release.Load(dir, opt)
	if err != nil {
		return nil, err
	}
	src, err := release.NewSource()
	if err != nil {
		r.Close()
		return nil, err
	}
	return FromRelease(r, src), nil
}

type releaseModel struct {
	r   *release.Releaser
	src *release.Source
}

// Collectors are the noise pool's counters and gauges (release.PoolStats):
// nvdp_noise_pool_{drawn,used,dry,overruns}_total, nvdp_noise_pool_ready (the
// fill level), nvdp_noise_pool_target and nvdp_noise_pool_release_rate.
func (m releaseModel) Collectors() []prometheus.Collector {
	gauge := func(name, help string, v func(release.PoolStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return v(m.src.PoolStats()) })
	}
	counter := func(name, help string, v func(release.PoolStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(m.src.PoolStats())) })
	}
	return []prometheus.Collector{
		counter("nvdp_noise_pool_drawn_total", "Releases' exact noise drawn ahead by the pool's workers.", func(s release.PoolStats) int64 { return s.Drawn }),
		counter("nvdp_noise_pool_used_total", "Releases' noise handed to a release (each once, then wiped).", func(s release.PoolStats) int64 { return s.Used }),
		counter("nvdp_noise_pool_dry_total", "Releases that found the noise pool empty and waited for a paced draw.", func(s release.PoolStats) int64 { return s.Dry }),
		counter("nvdp_noise_pool_overruns_total", "Draws slower than the pool's pace: their availability depended on their noise (docs/serving.md, \"What time reveals\").", func(s release.PoolStats) int64 { return s.Overruns }),
		gauge("nvdp_noise_pool_ready", "Releases' noise ready in the pool now (its fill level).", func(s release.PoolStats) float64 { return float64(s.Ready) }),
		gauge("nvdp_noise_pool_target", "Releases' noise the pool's workers keep ready: a second of the measured release rate, within the pool's least and most.", func(s release.PoolStats) float64 { return float64(s.Target) }),
		gauge("nvdp_noise_pool_release_rate", "Releases per second taken from the pool, as measured to size it.", func(s release.PoolStats) float64 { return s.Rate }),
	}
}

// Close stops the noise pool's workers and wipes what it holds, then frees
// the model's device twin (release.Releaser.Close; nothing on the CPU).
func (m releaseModel) Close() error {
	m.src.Close()
	return m.r.Close()
}

func (m releaseModel) Shape() (n, p int)             { return m.r.Shape() }
func (m releaseModel) Guarantee() *privacy.Guarantee { return m.r.Guarantee() }

// Model is the model's description without the paths of the machine it
// runs on (GET /v1/info shows it to anyone): the directory's base name,
// and an encoder read from a directory (hf:DIR) by its base name.
func (m releaseModel) Model() any {
	info := m.r.Model()
	info.Dir = filepath.Base(info.Dir)
	if dir, ok := strings.CutPrefix(info.Encoder, "hf:"); ok && filepath.IsAbs(dir) {
		info.Encoder = "hf:" + filepath.Base(dir)
	}
	return info
}

func (m releaseModel) Release(ctx context.Context, texts []string) ([]Embedding, error) {
	return m.r.Release(ctx, texts, m.src)
}

// checkEmbedding checks one Releaser output against the shape: lengths
// N*P and N, every value finite. A failure is the Releaser's defect, and
// the server releases nothing of the request.
func checkEmbedding(e Embedding, n, p int) error {
	if len(e.Z) != n*p || len(e.Pi) != n {
		return fmt.Errorf("embedding of %d + %d values, want Z [%d*%d] and pi [%d]", len(e.Z), len(e.Pi), n, p, n)
	}
	if i := nn.NonFinite(e.Z); i >= 0 {
		return fmt.Errorf("embedding Z holds %v", e.Z[i])
	}
	for _, v := range e.Pi {
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("embedding pi holds %v, not in [0, 1]", v)
		}
	}
	return nil
}

// Seeded reports whether the noise comes from a fixed seed (release.NewSeededSource): the
// binary response's metadata then says it is not for release.
func (m releaseModel) Seeded() bool { return m.src.Seeded() }
