package serve_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

// TestBatching: requests that wait while a batch runs share the next forward pass (one Release
// call for three requests of two texts), each gets its own texts' releases and is charged its own
// releases; with BatchTexts below their sum they split; a request alone never waits the window.
func TestBatching(t *testing.T) {
	cases := []struct {
		name       string
		batchTexts int
		calls      int64 // Release calls for the first request and the three that wait
	}{
		{"one batch", 8, 2},
		{"split by batch_texts", 4, 3}, // 2 + 2 fit, the third request's 2 make another batch
		{"no batching", 1, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 1000, func(o *serve.Options) {
				o.MaxConcurrent, o.BatchTexts, o.BatchWindow = 1, c.batchTexts, 2*time.Second
			})
			// The first request's batch is held until the others wait; closing hold then lets every
			// Release pass.
			hold := make(chan struct{})
			f.fake.Gate = hold
			first := make(chan int, 1)
			go func() { code, _ := f.embed(t, f.alice, "first"); first <- code }()
			servetest.WaitFor(t, "the first batch", func() bool { return f.fake.Started() == 1 })
			var wg sync.WaitGroup
			codes := make([]int, 3)
			bodies := make([]map[string]any, 3)
			for i := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					codes[i], bodies[i] = f.embed(t, f.alice, fmt.Sprintf("text %d a", i), fmt.Sprintf("text %d b", i))
				}()
			}
			servetest.WaitFor(t, "three requests queued", func() bool {
				_, m := f.do(t, "GET", "/metrics", "", "", "")
				return strings.Contains(m["raw"].(string), "nvdp_requests_queued 3")
			})
			close(hold) // every later Release passes
			if code := <-first; code != 200 {
				t.Fatalf("first request: %d", code)
			}
			wg.Wait()
			for i := range 3 {
				if codes[i] != 200 {
					t.Fatalf("request %d: %d %v", i, codes[i], bodies[i])
				}
				embs := bodies[i]["embeddings"].([]any)
				for j, text := range []string{fmt.Sprintf("text %d a", i), fmt.Sprintf("text %d b", i)} {
					want := servetest.Embed(text, 3, 4)
					if got := num(embs[j].([]any)[1].([]any)[2]); float32(got) != want.Z[1*4+2] {
						t.Errorf("request %d text %d: Z[1][2] = %v, want %v (another request's release?)", i, j, got, want.Z[6])
					}
				}
				if got := num(bodies[i]["privacy"].(map[string]any)["releases"]); got != 2 {
					t.Errorf("request %d charged %v releases, want 2", i, got)
				}
			}
			if got := f.fake.Started(); got != c.calls {
				t.Errorf("%d Release calls, want %d", got, c.calls)
			}
			if accts, _ := f.ledger.Accounts(); len(accts) != 1 || accts[0].Releases != 7 {
				t.Errorf("ledger %+v, want 7 releases", accts)
			}
			// Alone, a request does not wait the window (2 s): far below it on any machine.
			start := time.Now()
			for range 5 {
				if code, _ := f.embed(t, f.alice, "alone"); code != 200 {
					t.Fatal("alone:", code)
				}
			}
			if d := time.Since(start) / 5; d >= time.Second {
				t.Errorf("a request alone took %v, as if it waited the window", d)
			}
		})
	}
}

// TestBatchFailureIsOwn: when a batch's forward pass fails on one request's text, the others of the
// batch are released on their own and answered 200; only the failing one is a 500, and only the
// others are charged.
func TestBatchFailureIsOwn(t *testing.T) {
	f := newFixture(t, 1000, func(o *serve.Options) { o.MaxConcurrent, o.BatchWindow = 1, 20*time.Millisecond })
	f.fake.FailText = "fails"
	hold := make(chan struct{})
	f.fake.Gate = hold
	first := make(chan int, 1)
	go func() { code, _ := f.embed(t, f.alice, "first"); first <- code }()
	servetest.WaitFor(t, "the first batch", func() bool { return f.fake.Started() == 1 })
	texts := [][]string{{"good 1"}, {"x", "fails"}, {"good 2", "good 3"}}
	codes := make([]int, len(texts))
	var wg sync.WaitGroup
	for i, tx := range texts {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i], _ = f.embed(t, f.alice, tx...) }()
	}
	servetest.WaitFor(t, "three requests queued", func() bool {
		_, m := f.do(t, "GET", "/metrics", "", "", "")
		return strings.Contains(m["raw"].(string), "nvdp_requests_queued 3")
	})
	close(hold)
	<-first
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusInternalServerError || codes[2] != http.StatusOK {
		t.Errorf("codes %v, want [200 500 200]", codes)
	}
	if accts, _ := f.ledger.Accounts(); len(accts) != 1 || accts[0].Releases != 1+1+2 {
		t.Errorf("ledger %+v, want 4 releases (first, good 1, good 2 and 3)", accts)
	}
}
