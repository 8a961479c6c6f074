//go:build openblas

package nn

import (
	"testing"
	"time"
)

// TestSerialBLASOneThread: under SetBLASThreads(1) serialBLAS runs its
// work without the lock that orders the multi-threaded case, so that
// concurrent forward passes (a service's) do not wait for each other;
// with more threads it waits for the lock.
func TestSerialBLASOneThread(t *testing.T) {
	prev := SetBLASThreads(2)
	defer SetBLASThreads(max(prev, 1))
	for _, tc := range []struct {
		threads int
		waits   bool
	}{{1, false}, {2, true}} {
		SetBLASThreads(tc.threads)
		serialMu.Lock()
		ran := make(chan struct{})
		go serialBLAS(func() { close(ran) })
		select {
		case <-ran:
			if tc.waits {
				t.Errorf("%d threads: serialBLAS ran while the lock was held", tc.threads)
			}
		case <-time.After(200 * time.Millisecond):
			if !tc.waits {
				t.Errorf("%d threads: serialBLAS waited for the lock", tc.threads)
			}
		}
		serialMu.Unlock()
		<-ran
	}
}
