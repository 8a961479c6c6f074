//go:build linux

package cuda_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
)

// TestNoCUDAError: where the libraries are not found, opening a device is
// an error naming what was looked for and where (not a panic).
func TestNoCUDAError(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(cuda.LibDirEnv, dir+":"+filepath.Join(dir, "missing"))
	err := cuda.TryLoad(cuda.Library{What: "cuBLAS", Sonames: []string{"libnvdp-no-such.so.13", "libnvdp-no-such.so.12"}})
	var le *cuda.LoadError
	if !errors.As(err, &le) || !errors.Is(err, cuda.ErrNoCUDA) {
		t.Fatalf("error %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"cuBLAS not found", "libnvdp-no-such.so.13, libnvdp-no-such.so.12", cuda.LibDirEnv + "=" + dir, "libnvdp-no-such.so.12: "} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	os.Unsetenv(cuda.LibDirEnv)
}
