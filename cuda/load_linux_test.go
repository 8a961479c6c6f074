//go:build linux

package cuda_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// TestSelect: cpu opens nothing; an unknown device or precision, and tf32
// or bf16 on the CPU, are errors naming them; auto falls back to the CPU with the
// reason where no GPU loads (here: a load error of a library that does not
// exist stands in for a machine without CUDA).
func TestSelect(t *testing.T) {
	if d, fb, err := cuda.Select(cuda.DeviceCPU, cuda.PrecisionFP32, cuda.Options{}); d != nil || fb != "" || err != nil {
		t.Errorf("cpu: %v %q %v", d, fb, err)
	}
	for _, tc := range []struct{ dev, prec, want string }{
		{"gpu", "fp32", `device "gpu": want cpu, cuda or auto`},
		{"cuda", "bf17", `precision "bf17": want fp32, tf32 or bf16`},
		{"cpu", "tf32", "precision tf32: GEMMs on the CPU are FP32"},
		{"cpu", "bf16", "precision bf16: GEMMs on the CPU are FP32 (bf16 needs a GPU)"},
	} {
		if _, _, err := cuda.Select(tc.dev, tc.prec, cuda.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s/%s: %v, want %q", tc.dev, tc.prec, err, tc.want)
		}
	}
}

// TestSelectAutoFallback runs TestSelectAutoHelper in a process of its own
// (the libraries load once per process) where no CUDA library can be
// found: auto falls back to the CPU with the reason, cuda is the load error
// naming what was looked for, never a panic.
func TestSelectAutoFallback(t *testing.T) {
	c := exec.Command(os.Args[0], "-test.run=^TestSelectAutoHelper$", "-test.v")
	c.Env = append(os.Environ(), "NVDP_SELECT_HELPER=1", cuda.LibDirEnv+"="+t.TempDir())
	out, err := c.CombinedOutput()
	if strings.Contains(string(out), "a GPU loads here") {
		t.Skip("this machine has the NVIDIA driver: no fallback to test")
	}
	if err != nil || !strings.Contains(string(out), "PASS: TestSelectAutoHelper") {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}

func TestSelectAutoHelper(t *testing.T) {
	if os.Getenv("NVDP_SELECT_HELPER") != "1" {
		t.Skip("helper of TestSelectAutoFallback")
	}
	d, fb, err := cuda.Select(cuda.DeviceAuto, cuda.PrecisionTF32, cuda.Options{})
	if d != nil {
		fmt.Println("a GPU loads here")
		return
	}
	if err != nil || !strings.Contains(fb, "the NVIDIA driver not found: looked for libcuda.so.1") {
		t.Fatalf("auto: %v, fallback %q", err, fb)
	}
	_, _, err = cuda.Select(cuda.DeviceCUDA, cuda.PrecisionFP32, cuda.Options{})
	if !errors.Is(err, cuda.ErrNoCUDA) || !strings.Contains(err.Error(), cuda.LibDirEnv+"=") {
		t.Fatalf("cuda: %v", err)
	}
}
