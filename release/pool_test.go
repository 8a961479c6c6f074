package release

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/nvib"
)

// poolRelease is the exact release of a small gaussian clip set (N 5, P 3, sigma 1).
func poolRelease(t *testing.T) *exactRelease {
	t.Helper()
	e, err := newExact(nvib.GaussianClipSet(0.5, 1, 4, 3), true)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The pool hands out every draw once: 200 draws taken from two workers are 200 distinct draws with
// distinct noise; a wiped draw holds only zeros; 200 more, each given back after use, bring new
// noise every time; the counts add up; a closed pool refuses.
func TestPoolDrawsOnce(t *testing.T) {
	e := poolRelease(t)
	p, err := startPool(e, 4, 4, 2, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[*draw]bool{}
	noises := map[[3]int64]bool{}
	ctx := context.Background()
	const takes = 200
	for range takes {
		d, err := p.take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen[d] {
			t.Fatal("a draw was handed out twice")
		}
		seen[d] = true
		key := [3]int64{d.n[0], d.n[1], d.n[2]}
		if noises[key] {
			t.Fatalf("two draws share their noise %v", key)
		}
		noises[key] = true
		d.wipe()
		if slices.ContainsFunc(d.n, func(v int64) bool { return v != 0 }) || slices.ContainsFunc(d.pi, func(v float32) bool { return v != 0 }) {
			t.Fatal("a wiped draw still holds noise")
		}
	}
	// used draws given back are refilled with new noise, never handed out with the old
	for range takes {
		d, err := p.take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		key := [3]int64{d.n[0], d.n[1], d.n[2]}
		if noises[key] {
			t.Fatalf("a recycled draw came back with noise already used: %v", key)
		}
		noises[key] = true
		p.recycle(d)
	}
	st := p.stats()
	p.close()
	if st.Used != 2*takes || st.Drawn < 2*takes || st.Pace <= 0 {
		t.Errorf("stats %+v: want %d used, as many drawn or more, a pace", st, 2*takes)
	}
	if _, err := p.take(ctx); !errors.Is(err, errSourceClosed) {
		t.Errorf("take from a closed pool: %v", err)
	}
}

// A worker offers a draw only its pace after it started it, so a release waiting on an empty pool is
// served on that schedule, not when the draw happened to finish: with one worker and room for one
// draw, successive takes are at least a pace apart (less a timer's slack); the takes that found the
// pool empty are counted.
func TestPoolPace(t *testing.T) {
	e := poolRelease(t)
	p, err := startPool(e, 1, 1, 1, 20*time.Millisecond, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx := context.Background()
	d, _ := p.take(ctx) // the first: ready a pace after the start
	d.wipe()
	last := time.Now()
	for range 5 {
		d, err := p.take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d.wipe()
		if gap := time.Since(last); gap < 15*time.Millisecond {
			t.Errorf("takes %v apart, the pace is %v", gap, p.pace)
		}
		last = time.Now()
	}
	if st := p.stats(); st.Dry < 5 {
		t.Errorf("stats %+v: the takes that waited are not counted as dry", st)
	}
}

// A crypto source starts its pool on first use and serves one model; after Close it refuses; a
// seeded source draws in the call and has no pool.
func TestSourcePool(t *testing.T) {
	e, other := poolRelease(t), poolRelease(t)
	ctx := context.Background()
	src, err := NewSource()
	if err != nil {
		t.Fatal(err)
	}
	if st := src.PoolStats(); st != (PoolStats{}) {
		t.Errorf("stats before the first release: %+v", st)
	}
	d, err := src.exactDraw(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	d.wipe()
	if _, err := src.exactDraw(ctx, other); err == nil {
		t.Error("a source's pool served a second model")
	}
	if st := src.PoolStats(); st.Used != 1 {
		t.Errorf("stats %+v, want 1 used", st)
	}
	src.Close()
	src.Close()
	if _, err := src.exactDraw(ctx, e); !errors.Is(err, errSourceClosed) {
		t.Errorf("draw from a closed source: %v", err)
	}
	seeded := NewSeededSource(1)
	a, _ := seeded.exactDraw(ctx, e)
	b, _ := NewSeededSource(1).exactDraw(ctx, e)
	if !slices.Equal(a.n, b.n) || !slices.Equal(a.pi, b.pi) {
		t.Error("seeded sources of one seed draw different noise")
	}
	if st := seeded.PoolStats(); st != (PoolStats{}) {
		t.Errorf("a seeded source has pool stats %+v", st)
	}
}

// The pool keeps ready what the measured rate of releases needs: with a window of 20 ms, takes at
// about 1,000 per second raise the target from its least (4) to the most (16), the noise ready never
// exceeds the most, and after the takes stop the workers fill it up to the target; the stats say
// so. A rate below the least per second (2.5 takes/s) keeps the least.
func TestPoolSizedFromRate(t *testing.T) {
	e := poolRelease(t)
	p, err := startPool(e, 4, 16, 2, time.Microsecond, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx := context.Background()
	if st := p.stats(); st.Target != 4 {
		t.Fatalf("target %d before any take, want the least, 4", st.Target)
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		d, err := p.take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.recycle(d)
		if n := len(p.ready); n > 16 {
			t.Fatalf("%d draws ready, more than the most, 16", n)
		}
		time.Sleep(time.Millisecond)
	}
	st := p.stats()
	if st.Target != 16 || st.Rate < 100 {
		t.Errorf("after ~1,000 takes/s: target %d (want 16), rate %.0f/s", st.Target, st.Rate)
	}
	waitFor := time.Now().Add(10 * time.Second)
	for p.stats().Ready < 16 && time.Now().Before(waitFor) {
		time.Sleep(time.Millisecond)
	}
	if st := p.stats(); st.Ready != 16 {
		t.Errorf("%d ready after the takes stopped, want the target 16", st.Ready)
	}

	slow, err := startPool(e, 4, 16, 1, time.Microsecond, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.close()
	for range 3 {
		d, err := slow.take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slow.recycle(d)
		time.Sleep(400 * time.Millisecond)
	}
	if st := slow.stats(); st.Target != 4 || st.Rate > 4 {
		t.Errorf("at ~2.5 takes/s: target %d (want the least, 4), rate %.1f/s", st.Target, st.Rate)
	}
}
