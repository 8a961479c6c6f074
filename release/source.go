package release

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"

	"github.com/nvdp-project/nvdp/noise"
)

// Source is the noise of releases.
//
// [NewSource] is the only source for real releases. The exact release's noise, from package noise,
// comes from a pool that workers fill ahead of the requests, each from its own ChaCha8 keyed from
// crypto/rand, so that the time a release takes does not depend on the noise it gets; see "What time
// reveals" in docs/serving.md. Close stops the workers.
//
// [NewSeededSource] is for tests and reproducible demos: every draw is made in the call, in order,
// from ChaCha8 keyed by the seed, and [Source.Seeded] reports it so that outputs can be marked "not
// for release".
//
// A Source may be shared by concurrent calls, whose draws are serialised; the order in which the
// calls then take their noise is not defined. A crypto source's pool serves the first model it is
// used with.
type Source struct {
	mu     sync.Mutex
	rng    *rand.Rand // seeded: every draw; crypto: the draws of an unproved (floating-point) release
	seeded bool
	spare  *draw // seeded: a wiped draw that the next one fills instead of allocating (guarded by mu)

	poolMu sync.Mutex
	pool   *pool
	closed bool
}

var errSourceClosed = errors.New("release: the noise source is closed")

// NewSource returns a crypto-seeded source whose exact noise comes from a pool of [DefaultPoolSize]
// releases, filled by [DefaultPoolWorkers] workers that the first release starts. It returns an
// error when the system's random source fails.
func NewSource() (*Source, error) {
	rng, err := cryptoRand()
	if err != nil {
		return nil, err
	}
	return &Source{rng: rng}, nil
}

// NewSeededSource returns the source of a seed: ChaCha8 keyed by the seed's 8 bytes in
// little-endian order, then 24 zero bytes. Anyone who knows the seed can reproduce its noise
// and remove it, so never use it for real releases.
func NewSeededSource(seed uint64) *Source {
	return &Source{rng: rand.New(rand.NewChaCha8(seedKey(seed))), seeded: true}
}

// seedKey returns the ChaCha8 key of a seeded source: the seed's 8 bytes in little-endian order, then
// 24 zero bytes.
func seedKey(seed uint64) [32]byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:8], seed)
	return key
}

// Seeded reports whether the source comes from [NewSeededSource], in which case its output is not
// for release.
func (s *Source) Seeded() bool { return s.seeded }

// Close stops the pool's workers and wipes the noise it holds; releases
// from the source fail afterwards. Closing twice is a no-op.
func (s *Source) Close() {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	if s.pool != nil {
		s.pool.close()
		s.pool = nil
	}
	s.closed = true
}

// PoolStats reports the pool's counts. They are zero before the first exact release, and for a
// seeded source, which has no pool.
func (s *Source) PoolStats() PoolStats {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	if s.pool == nil {
		return PoolStats{}
	}
	return s.pool.stats()
}

// use runs fn with the source's generator, one caller at a time.
func (s *Source) use(fn func(*rand.Rand)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.rng)
}

// exactDraw returns the noise of one exact release of e: from the pool
// (started on first use) for a crypto source, drawn now from the seed for
// a seeded one. The caller wipes it after use. Errors: a closed source, a
// pool started for another model, ctx done while the pool is empty.
func (s *Source) exactDraw(ctx context.Context, e *exactRelease) (*draw, error) {
	if s.seeded {
		var d *draw
		s.use(func(rng *rand.Rand) {
			if d, s.spare = s.spare, nil; d == nil || len(d.n) != e.N*e.P || len(d.pi) != e.N {
				d = e.newDraw()
			}
			e.fill(d, noise.NewNoise(e.lat, rng), rng)
		})
		return d, nil
	}
	p, err := s.poolFor(e)
	if err != nil {
		return nil, err
	}
	return p.take(ctx)
}

// done wipes a draw its release has used and, when it came from the pool,
// gives it back to be refilled (pool.recycle wipes it).
func (s *Source) done(d *draw) {
	s.poolMu.Lock()
	p := s.pool
	s.poolMu.Unlock()
	if p == nil { // a seeded source's draw: kept for the next
		d.wipe()
		s.mu.Lock()
		s.spare = d
		s.mu.Unlock()
		return
	}
	p.recycle(d)
}

// poolFor returns the source's pool, started for e on first use.
func (s *Source) poolFor(e *exactRelease) (*pool, error) {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	switch {
	case s.closed:
		return nil, errSourceClosed
	case s.pool == nil:
		p, err := startPool(e, DefaultPoolSize, MaxPoolSize, DefaultPoolWorkers(), 0, rateWindow)
		if err != nil {
			return nil, err
		}
		s.pool = p
	case s.pool.e != e:
		return nil, errors.New("release: a source's noise pool serves one model: use a source per model")
	}
	return s.pool, nil
}
