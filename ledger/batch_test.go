package ledger

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
			if n, sum := commitSizes(t, b.CommitSizes()); n != uint64(len(tc.want)) || sum != 5 {
				t.Errorf("nvdp_ledger_charge_batch_size: %d commits of %v charges in all, want %d of 5", n, sum, len(tc.want))
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

// commitSizes gathers a Batcher's histogram of commit sizes: the commits and their charges.
func commitSizes(t *testing.T, h prometheus.Collector) (commits uint64, charges float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "nvdp_ledger_charge_batch_size" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, %v", mfs, err)
	}
	m := mfs[0].GetMetric()[0].GetHistogram()
	return m.GetSampleCount(), m.GetSampleSum()
}

// TestFileCollectors: a serving file ledger exports the sizes of its commits, three commits of
// one charge after three charges one after the other; a read-only one exports nothing.
func TestFileCollectors(t *testing.T) {
	l, c, _ := servingLedger(t, 2)
	for range 3 {
		if _, err := l.Charge("a1", c, 1, 1e9); err != nil {
			t.Fatal(err)
		}
	}
	cs := l.Collectors()
	if len(cs) != 1 {
		t.Fatalf("%d collectors, want 1", len(cs))
	}
	if n, sum := commitSizes(t, cs[0]); n != 3 || sum != 3 {
		t.Errorf("%d commits of %v charges, want 3 of 3", n, sum)
	}
	path, _ := populatedLedger(t, t.TempDir(), 1)
	ro, err := OpenFileReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if cs := ro.Collectors(); cs != nil {
		t.Errorf("a read-only ledger exports %d collectors", len(cs))
	}
}
