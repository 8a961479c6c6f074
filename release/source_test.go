package release

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// TestSeededSourceConcurrentDraws: a seeded Source shared by many
// goroutines serialises its draws (Source.mu): the draws made at once are
// exactly the draws made one after the other from the same seed, in some
// order, every one distinct; the exact release's (exactDraw) and the
// generator's (use, the unproved release's) alike. Without the mutex the
// goroutines interleave inside draws (and -race reports it): draws repeat
// or are not the stream's. Run with -race.
func TestSeededSourceConcurrentDraws(t *testing.T) {
	const goroutines, each = 8, 200
	e := poolRelease(t)
	key := func(d *draw) string { return fmt.Sprint(d.n, d.pi) }
	for _, tc := range []struct {
		name string
		draw func(s *Source) string
	}{
		{"exact", func(s *Source) string {
			d, err := s.exactDraw(context.Background(), e)
			if err != nil {
				panic(err)
			}
			return key(d)
		}},
		{"generator", func(s *Source) string {
			var v [8]uint64
			s.use(func(rng *rand.Rand) {
				for i := range v {
					v[i] = rng.Uint64()
				}
			})
			return fmt.Sprint(v)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq := NewSeededSource(7)
			var want []string
			for range goroutines * each {
				want = append(want, tc.draw(seq))
			}
			shared := NewSeededSource(7)
			got := make([][]string, goroutines)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := range goroutines {
				wg.Go(func() {
					<-start
					for range each {
						got[g] = append(got[g], tc.draw(shared))
					}
				})
			}
			close(start)
			wg.Wait()
			all := slices.Concat(got...)
			distinct := map[string]bool{}
			for _, k := range all {
				distinct[k] = true
			}
			if len(distinct) != goroutines*each {
				t.Errorf("%d distinct draws of %d", len(distinct), goroutines*each)
			}
			slices.Sort(all)
			slices.Sort(want)
			if !slices.Equal(all, want) {
				t.Errorf("the concurrent draws are not the seed's stream, one draw at a time")
			}
		})
	}
}
