package release

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvdp-project/nvdp/noise"
)

// The noise pool of real releases; see "What time reveals" in docs/serving.md.
const (
	// DefaultPoolSize is the least number of releases' noise a source holds ready; the pool
	// grows toward MaxPoolSize with the measured rate of releases (rateHorizon of them).
	DefaultPoolSize = 32
	// MaxPoolSize bounds the noise held ready (about 66 KB a release for N 65 and P 128).
	MaxPoolSize = 256
	// rateWindow is how often the rate of releases is measured, and rateHorizon how long a
	// pool sized from it lasts at that rate without its workers: a burst of one second.
	rateWindow  = time.Second
	rateHorizon = time.Second
	// paceProbes throwaway draws, timed when a pool starts, set its pace:
	// paceFactor times the slowest of them.
	paceProbes = 4
	paceFactor = 4
)

// DefaultPoolWorkers returns how many goroutines fill a pool: one per core the Go scheduler runs
// on, GOMAXPROCS, so that the paced workers keep up with releases that use every core for their
// forward passes.
func DefaultPoolWorkers() int { return runtime.GOMAXPROCS(0) }

// PoolStats counts what a source's noise pool did; see [Source.PoolStats].
type PoolStats struct {
	// Drawn is the number of releases' noise drawn, and Used the number handed to releases, each
	// once and then wiped.
	Drawn, Used int64
	// Dry counts releases that found the pool empty and waited for a draw.
	Dry int64
	// Overruns counts draws that took longer than Pace: the time at which
	// such a draw became available depended on its noise.
	Overruns int64
	// Pace is the fixed interval between the start of a worker's draw and the moment it is offered.
	// It is zero before the pool starts.
	Pace time.Duration
	// Ready is how many releases' noise the pool holds now, and Target how many its workers
	// keep ready: the measured rate of releases over a second, between [DefaultPoolSize] and
	// [MaxPoolSize]. Rate is that rate, in releases per second.
	Ready, Target int
	Rate          float64
}

// pool holds the exact release's noise drawn ahead of the requests. Each
// worker draws from its own ChaCha8 keyed from crypto/rand, and offers a
// draw only a fixed Pace after it started it, so that when a release waits
// on an empty pool, the moment it is served does not depend on how long
// the noise it gets took to draw (unless the draw overran the pace,
// counted). A draw is handed out once and wiped after use.
type pool struct {
	e     *exactRelease
	ready chan *draw
	free  chan *draw // wiped draws, refilled instead of allocated
	stop  chan struct{}
	wg    sync.WaitGroup
	pace  time.Duration
	// taken wakes a worker waiting for room below the target.
	taken chan struct{}
	// min and the capacity of ready bound target, the draws the workers
	// keep ready, set from the rate of takes measured every window.
	min    int
	target atomic.Int64
	window time.Duration
	rate   struct {
		sync.Mutex
		start time.Time
		count int
		ewma  float64
	}

	drawn, used, dry, overruns atomic.Int64
}

// cryptoRand returns a ChaCha8 generator keyed from crypto/rand.
func cryptoRand() (*rand.Rand, error) {
	var key [32]byte
	if _, err := crand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("release: seeding the noise from crypto/rand: %w", err)
	}
	return rand.New(rand.NewChaCha8(key)), nil
}

// startPool starts workers filling a pool of between minSize and maxSize draws of e
// (sized from the rate of takes measured every window), each offered pace
// after its draw started (0: paceFactor times the slowest of paceProbes
// throwaway draws).
func startPool(e *exactRelease, minSize, maxSize, workers int, pace, window time.Duration) (*pool, error) {
	p := &pool{e: e, ready: make(chan *draw, maxSize), free: make(chan *draw, maxSize), stop: make(chan struct{}), pace: pace,
		taken: make(chan struct{}, workers), min: minSize, window: window}
	p.target.Store(int64(minSize))
	p.rate.start = time.Now()
	if pace == 0 {
		probe, err := cryptoRand() // throwaway noise: only its time is kept
		if err != nil {
			return nil, err
		}
		nz, d := noise.NewNoise(e.lat, probe), e.newDraw()
		var slowest time.Duration
		for range paceProbes {
			t := time.Now()
			e.fill(d, nz, probe)
			slowest = max(slowest, time.Since(t))
		}
		d.wipe()
		p.pace = paceFactor * slowest
	}
	for range workers {
		rng, err := cryptoRand()
		if err != nil {
			p.close()
			return nil, err
		}
		p.wg.Add(1)
		go p.work(rng)
	}
	return p, nil
}

// work fills the pool until stop.
func (p *pool) work(rng *rand.Rand) {
	defer p.wg.Done()
	nz := noise.NewNoise(p.e.lat, rng)
	for {
		for len(p.ready) >= int(p.target.Load()) { // enough ready: wait for a take
			select {
			case <-p.taken:
			case <-p.stop:
				return
			}
		}
		var d *draw
		select {
		case d = <-p.free:
		default:
			d = p.e.newDraw()
		}
		start := time.Now()
		p.e.fill(d, nz, rng)
		p.drawn.Add(1)
		if took := time.Since(start); took > p.pace {
			p.overruns.Add(1)
		} else {
			t := time.NewTimer(p.pace - took)
			select {
			case <-t.C:
			case <-p.stop:
				t.Stop()
				d.wipe()
				return
			}
		}
		select {
		case p.ready <- d:
		case <-p.stop:
			d.wipe()
			return
		}
	}
}

// take hands out one draw (the caller wipes it after use), waiting while
// the pool is empty. Errors: ctx done first.
func (p *pool) take(ctx context.Context) (*draw, error) {
	select {
	case d := <-p.ready:
		p.took()
		return d, nil
	default:
	}
	p.dry.Add(1)
	select {
	case d := <-p.ready:
		p.took()
		return d, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.stop:
		return nil, errSourceClosed
	}
}

// took counts a draw handed out, measures the rate of takes once a window has passed (an
// exponential average over windows, half each), sizes the target from it, and wakes a worker.
func (p *pool) took() {
	p.used.Add(1)
	p.rate.Lock()
	p.rate.count++
	if el := time.Since(p.rate.start); el >= p.window {
		r := float64(p.rate.count) / el.Seconds()
		if p.rate.ewma == 0 {
			p.rate.ewma = r
		} else {
			p.rate.ewma = (p.rate.ewma + r) / 2
		}
		p.rate.start, p.rate.count = time.Now(), 0
		t := int(math.Ceil(p.rate.ewma * rateHorizon.Seconds()))
		p.target.Store(int64(min(max(t, p.min), cap(p.ready))))
	}
	p.rate.Unlock()
	select {
	case p.taken <- struct{}{}:
	default:
	}
}

// recycle takes back a draw its release has used: wiped, it is refilled
// with new noise later (or dropped when the free list is full).
func (p *pool) recycle(d *draw) {
	d.wipe()
	select {
	case p.free <- d:
	default:
	}
}

// close stops the workers and wipes the draws left.
func (p *pool) close() {
	close(p.stop)
	p.wg.Wait()
	for {
		select {
		case d := <-p.ready:
			d.wipe()
		default:
			return
		}
	}
}

func (p *pool) stats() PoolStats {
	p.rate.Lock()
	rate := p.rate.ewma
	p.rate.Unlock()
	return PoolStats{Drawn: p.drawn.Load(), Used: p.used.Load(), Dry: p.dry.Load(), Overruns: p.overruns.Load(), Pace: p.pace,
		Ready: len(p.ready), Target: int(p.target.Load()), Rate: rate}
}
