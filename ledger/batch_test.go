package ledger

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// gatedCommits is a Batcher's commit that records each batch's size, then holds the batch until
// the test opens its gate.
type gatedCommits struct {
	mu      sync.Mutex
	sizes   []int
	entered chan int      // the size of each batch, as its commit starts
	gate    chan struct{} // one receive lets one commit finish
}

func newGatedCommits() *gatedCommits {
	return &gatedCommits{entered: make(chan int, 16), gate: make(chan struct{}, 16)}
}

func (g *gatedCommits) commit(batch []*ChargeRequest) {
	g.mu.Lock()
	g.sizes = append(g.sizes, len(batch))
	g.mu.Unlock()
	g.entered <- len(batch)
	<-g.gate
	for _, r := range batch {
		r.Done()
	}
}

// TestBatcherWindow: a committer whose previous commit held more than one charge waits up to its
// window for the charges that come after the queue ran dry, and with a window of 0 it does not.
// Charges A (alone), B and C (queued while A commits), D (queued while B and C commit), and E,
// submitted 50 ms after D's commit could start: with the window E shares D's commit.
func TestBatcherWindow(t *testing.T) {
	curve := &Curve{}
	for _, tc := range []struct {
		window time.Duration
		want   []int
	}{
		{0, []int{1, 2, 1, 1}},
		{400 * time.Millisecond, []int{1, 2, 2}},
	} {
		t.Run(tc.window.String(), func(t *testing.T) {
			g := newGatedCommits()
			b := NewBatcher(1, 16, true, g.commit)
			b.SetWindow(tc.window)
			if b.Window() != tc.window {
				t.Fatalf("Window %v after SetWindow(%v)", b.Window(), tc.window)
			}
			var wg sync.WaitGroup
			submit := func(account string) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := b.Submit(account, curve, 1, 1); err != nil {
						t.Error(err)
					}
				}()
			}
			queued := func(n int) {
				for deadline := time.Now().Add(10 * time.Second); b.Waiting() != n; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%d charges queued, want %d", b.Waiting(), n)
					}
				}
			}
			submit("A")
			<-g.entered
			submit("B")
			submit("C")
			queued(2)
			g.gate <- struct{}{} // A's commit ends; B and C are taken at once
			<-g.entered
			submit("D")
			queued(1)
			g.gate <- struct{}{} // B and C's commit ends; D is taken
			time.Sleep(50 * time.Millisecond)
			submit("E")
			all := make(chan struct{})
			go func() { wg.Wait(); close(all) }()
		commits: // the rest, however many
			for {
				select {
				case <-g.entered:
					g.gate <- struct{}{}
				case <-all:
					break commits
				case <-time.After(10 * time.Second):
					t.Fatal("the charges were not answered in 10 s")
				}
			}
			b.Close()
			if !slices.Equal(g.sizes, tc.want) {
				t.Errorf("commits of %v charges, want %v", g.sizes, tc.want)
			}
		})
	}
}

// TestBatcherAloneNeverWaits: charges that come one at a time (each commit holds one) never wait
// for the window, however long it is.
func TestBatcherAloneNeverWaits(t *testing.T) {
	var sizes []int
	b := NewBatcher(1, 16, true, func(batch []*ChargeRequest) {
		sizes = append(sizes, len(batch))
		for _, r := range batch {
			r.Done()
		}
	})
	b.SetWindow(time.Hour)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 5 {
			if _, err := b.Submit("A", &Curve{}, 1, 1); err != nil {
				t.Error(err)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("5 charges one after the other took over 10 s: a lone charge waited for the window")
	}
	b.Close()
	if !slices.Equal(sizes, []int{1, 1, 1, 1, 1}) {
		t.Errorf("commits of %v charges, want 5 of 1", sizes)
	}
}
