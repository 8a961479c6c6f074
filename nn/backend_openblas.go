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

	"gonum.org/v1/netlib/blas/netlib"
)

// backendName is reported by Backend.
const backendName = "openblas"

func init() { setImpl(netlib.Implementation{}) }

var serialMu sync.Mutex

// serialBLAS runs fn with OpenBLAS limited to one thread, so that fn may
// issue many small BLAS calls from parallel goroutines (one per core)
// without oversubscribing the cores with OpenBLAS's own thread pool. The
// previous thread count is restored afterwards.
func serialBLAS(fn func()) {
	serialMu.Lock()
	defer serialMu.Unlock()
	n := C.openblas_get_num_threads()
	C.openblas_set_num_threads(1)
	defer C.openblas_set_num_threads(n)
	fn()
}
