//go:build openblas

package nn

/*
#cgo LDFLAGS: -lopenblas
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
*/
import "C"

import (
	"sync"
	"sync/atomic"

	"gonum.org/v1/netlib/blas/netlib"
)

// backendName is reported by Backend.
const backendName = "openblas"

func init() { setImpl(netlib.Implementation{}) }

var serialMu sync.Mutex

// blasThreads is the thread count SetBLASThreads gave OpenBLAS (0: never
// called, OpenBLAS's own).
var blasThreads atomic.Int32

// serialBLAS runs fn with OpenBLAS limited to one thread, so that fn may
// issue many small BLAS calls from parallel goroutines (one per core)
// without oversubscribing the cores with OpenBLAS's own thread pool. The
// previous thread count is restored afterwards. Under SetBLASThreads(1),
// OpenBLAS is single-threaded already: fn runs at once, so that concurrent
// forward passes (a service's) do not wait for each other here.
func serialBLAS(fn func()) {
	if blasThreads.Load() == 1 {
		fn()
		return
	}
	serialMu.Lock()
	defer serialMu.Unlock()
	n := C.openblas_get_num_threads()
	C.openblas_set_num_threads(1)
	defer C.openblas_set_num_threads(n)
	fn()
}

func blasThreadsSet() int { return int(blasThreads.Load()) }

func setBLASThreads(n int) int {
	serialMu.Lock()
	defer serialMu.Unlock()
	prev := int(C.openblas_get_num_threads())
	C.openblas_set_num_threads(C.int(n))
	blasThreads.Store(int32(n))
	return prev
}
