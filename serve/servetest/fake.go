// Package servetest provides a fake serve.Releaser for tests of the release
// service, its command and its load generator: deterministic output, a
// configurable latency, a gate that holds releases, and a certified curve of
// the Gaussian mechanism's form, so that budgets have exact numbers.
package servetest

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/serve"
)

// Fake is a [serve.Releaser] whose release of a text is a function of the
// text alone. It draws no noise, so it is not private, only a stand-in with
// the shape and the guarantee of a model. Set the fields before use.
type Fake struct {
	N, P int
	// Rho sets the certified curve of one release: rd(order) = order Rho
	// nats, the RDP curve of a Gaussian mechanism of sensitivity 1 and
	// noise sigma = 1/sqrt(2 Rho).
	Rho float64
	// Mu, when > 0, makes the release exactly a Gaussian mechanism of
	// sensitivity / sigma Mu: the guarantee is ExactGaussianGuarantee(Mu)
	// (Rho is not used), which the ledgers compose exactly.
	Mu float64
	// Latency is how long each Release takes (it returns early, with ctx's
	// error, when ctx is done first).
	Latency time.Duration
	// Gate, when not nil, holds each Release until it receives a value (or
	// ctx is done).
	Gate chan struct{}
	// Err, when not nil, is what Release returns.
	Err error
	// FailText, when not "", fails every Release of texts that holds it
	// (a model failing on one text, as in a batch of requests).
	FailText string

	started, texts atomic.Int64
	mu             sync.Mutex // guards Latency and Err after the server has started (Set)
}

// Set changes Latency and Err while a server may be calling Release.
func (f *Fake) Set(latency time.Duration, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Latency, f.Err = latency, err
}

var _ serve.Releaser = (*Fake)(nil)

// NewFake returns a Fake of N components, P dims and curve rd = order rho.
func NewFake(n, p int, rho float64) *Fake { return &Fake{N: n, P: p, Rho: rho} }

// Shape returns N, P.
func (f *Fake) Shape() (n, p int) { return f.N, f.P }

// Guarantee returns [GaussianGuarantee] of f.Rho, or
// [ExactGaussianGuarantee] of f.Mu when f.Mu > 0.
func (f *Fake) Guarantee() *privacy.Guarantee {
	if f.Mu > 0 {
		return ExactGaussianGuarantee(f.Mu)
	}
	return GaussianGuarantee(f.Rho)
}

// Model describes the fake.
func (f *Fake) Model() any {
	if f.Mu > 0 {
		return map[string]any{"model": "servetest.Fake", "components": f.N, "dims": f.P, "mu": f.Mu}
	}
	return map[string]any{"model": "servetest.Fake", "components": f.N, "dims": f.P, "rho": f.Rho}
}

// Release returns, for each text, Z of standard normal values drawn from a
// PCG stream seeded by the FNV-1a hash of the text, and pi, N positive
// weights summing to 1, after Latency and the Gate.
func (f *Fake) Release(ctx context.Context, texts []string) ([]serve.Embedding, error) {
	f.started.Add(1)
	f.mu.Lock()
	latency, failure := f.Latency, f.Err
	f.mu.Unlock()
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	if f.Gate != nil {
		select {
		case <-f.Gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if failure != nil {
		return nil, failure
	}
	for i, t := range texts {
		if f.FailText != "" && t == f.FailText {
			return nil, fmt.Errorf("servetest: text %d fails", i)
		}
	}
	out := make([]serve.Embedding, len(texts))
	for i, t := range texts {
		out[i] = Embed(t, f.N, f.P)
	}
	f.texts.Add(int64(len(texts)))
	return out, nil
}

// Embed is the Fake's release of text.
func Embed(text string, n, p int) serve.Embedding {
	h := fnv.New64a()
	h.Write([]byte(text))
	rng := rand.New(rand.NewPCG(h.Sum64(), 1))
	e := serve.Embedding{Z: make([]float32, n*p), Pi: make([]float32, n)}
	for i := range e.Z {
		e.Z[i] = float32(rng.NormFloat64())
	}
	var sum float64
	w := make([]float64, n)
	for i := range w {
		w[i] = rng.ExpFloat64() + 1e-3
		sum += w[i]
	}
	for i := range w {
		e.Pi[i] = float32(w[i] / sum)
	}
	return e
}

// Started is the count of Release calls begun.
func (f *Fake) Started() int64 { return f.started.Load() }

// Texts returns the count of texts released by calls that returned embeddings.
func (f *Fake) Texts() int64 { return f.texts.Load() }

// GaussianGuarantee returns the guarantee of one release whose RDP curve is
// rd(order) = order rho over privacy.DefaultOrders, at privacy.DefaultDelta.
func GaussianGuarantee(rho float64) *privacy.Guarantee {
	g := &privacy.Guarantee{Releases: 1, Delta: privacy.DefaultDelta, Direction: privacy.DirectionStandard,
		MaxOrder: jsonfloat.Float(math.Inf(1))}
	for _, o := range privacy.DefaultOrders {
		g.Curve = append(g.Curve, privacy.OrderRD{Order: o, RD: jsonfloat.Float(o * rho)})
	}
	eps, order, err := privacy.BestEpsilon(g.Curve, g.Delta)
	if err != nil {
		panic(err) // rho < 0 or NaN: a test's mistake
	}
	g.Epsilon, g.BestOrder = jsonfloat.Float(eps), jsonfloat.Float(order)
	be, bl, err := privacy.CertifiedBDP(g.Curve, g.Delta)
	if err != nil {
		panic(err)
	}
	g.BDPEpsilon, g.BDPOrder = jsonfloat.Float(be), jsonfloat.Float(bl)
	return g
}

// ExactGaussianGuarantee returns the guarantee of one release that is
// exactly a Gaussian mechanism of sensitivity / sigma mu, at
// privacy.DefaultDelta, as [privacy.CertifyCurve] gives for a fixed-noise
// clip set. mu is > 0.
//
// Its accountant is [privacy.AccountantGaussian], its GaussianMu mu, its
// epsilon privacy.GaussianMechanismEpsilon of mu and delta, and its RDP
// curve rd(order) = order mu^2 / 2 over privacy.DefaultOrders, whose
// conversion is RDPEpsilon at BestOrder. The ledgers register it as a
// Gaussian curve.
func ExactGaussianGuarantee(mu float64) *privacy.Guarantee {
	g := GaussianGuarantee(mu * mu / 2)
	g.Format, g.Label = privacy.GuaranteeFormat, privacy.LabelCertified
	g.RDPEpsilon = g.Epsilon
	eps, err := privacy.GaussianMechanismEpsilon(mu, g.Delta)
	if err != nil {
		panic(err) // mu not finite: a test's mistake
	}
	g.Epsilon, g.Accountant, g.GaussianMu = jsonfloat.Float(eps), privacy.AccountantGaussian, jsonfloat.Float(mu)
	return g
}
