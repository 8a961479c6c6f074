//go:build !linux

package cuda

import (
	"fmt"
	"runtime"
)

// LibDirEnv is the environment variable of the directories searched first for the CUDA libraries,
// on Linux only.
const LibDirEnv = "NVDP_CUDA_LIB_DIR"

// newAPI: this operating system has no CUDA backend (nvdp loads the NVIDIA
// libraries on Linux).
func newAPI() (*api, error) {
	return nil, fmt.Errorf("%w: the CUDA backend runs on Linux, not %s/%s", ErrNoCUDA, runtime.GOOS, runtime.GOARCH)
}
