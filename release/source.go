package release

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
)

// Source is the noise of releases: a ChaCha8 stream (math/rand/v2). NewSource seeds it from crypto/rand
// (the only source for real releases); NewSeededSource(seed) is for tests and reproducible demos, and
// Seeded() reports it so that outputs can be marked "not for release".
//
// A Source may be shared by concurrent calls (draws are serialised); the order in which the calls then
// take their noise is not defined.
type Source struct {
	mu     sync.Mutex
	rng    *rand.Rand
	seeded bool
}

// NewSource returns a source whose 32-byte ChaCha8 key comes from crypto/rand. Errors: the system's
// random source fails.
func NewSource() (*Source, error) {
	var key [32]byte
	if _, err := crand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("release: seeding the noise from crypto/rand: %w", err)
	}
	return &Source{rng: rand.New(rand.NewChaCha8(key))}, nil
}

// NewSeededSource returns the source of a seed: ChaCha8 keyed by SeedKey(seed). Its noise can be
// reproduced (and removed) by anyone who knows the seed: never use it for real releases.
func NewSeededSource(seed uint64) *Source {
	return &Source{rng: rand.New(rand.NewChaCha8(SeedKey(seed))), seeded: true}
}

// SeedKey is the ChaCha8 key of a seeded source: the seed's 8 bytes little-endian, then 24 zero bytes.
func SeedKey(seed uint64) [32]byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:8], seed)
	return key
}

// Seeded reports whether the source comes from NewSeededSource (its output is not for release).
func (s *Source) Seeded() bool { return s.seeded }

// use runs fn with the source's generator, one caller at a time.
func (s *Source) use(fn func(*rand.Rand)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.rng)
}
