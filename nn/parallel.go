package nn

import (
	"runtime"
	"sync"
)

// minGrain is the smallest amount of work (in elements) worth a goroutine.
const minGrain = 1 << 14

// Parallel splits [0, n) into contiguous chunks and runs fn(lo, hi) on up to
// GOMAXPROCS goroutines. cost is the approximate work per index, in
// elements touched; small jobs run inline.
//
// Parallel must not be called concurrently with BLAS calls, since OpenBLAS
// uses the same cores for its own threads. The engine never does: its
// kernels run between BLAS calls.
func Parallel(n, cost int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	if cost < 1 {
		cost = 1
	}
	if w := n * cost / minGrain; w < workers {
		workers = w
	}
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, hi)
	}
	wg.Wait()
}
