// Package cudaemu is a CPU stand-in of the CUDA driver, cuBLAS and NVRTC
// for the tests of package cuda and of the device layers on machines
// without a GPU (CI). Its C sources (fakecuda.c, fakecublas.c,
// fakenvrtc.c) are built into libcuda.so.1, libcublas.so.13 and
// libnvrtc.so.13 with the C compiler, and package cuda loads them through
// NVDP_CUDA_LIB_DIR as it loads the real ones: the Go side (loading,
// memory, launches, the kernel cache, GEMM operand order) runs unchanged,
// and the kernels, compiled as plain C (nvdp_emu.h), run their arithmetic
// on the CPU, so that each device layer can be compared with its CPU twin.
// A block's threads run in turn, as coroutines meeting at __syncthreads
// where the kernel synchronises. What it cannot show: CUDA compilation
// errors, races between threads or blocks (they run one after the other),
// launch limits of a real card, speed.
//
// Tests call OpenDevice. With NVDP_CUDA_REAL=1 it opens the real GPU
// instead (scripts/gpu-check.sh), skipping with one line where none loads.
package cudaemu

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/cuda"
)

//go:embed csrc/nvdp_emu.h
var emuHeader []byte

//go:embed csrc/fakecuda.c
var fakeCUDA []byte

//go:embed csrc/fakecublas.c
var fakeBLAS []byte

//go:embed csrc/fakenvrtc.c
var fakeNVRTC []byte

// RealEnv set to 1 makes OpenDevice open the real GPU.
const RealEnv = "NVDP_CUDA_REAL"

// DriverVersionEnv is the CUDA version the stand-in's driver reports
// (cuDriverGetVersion: 1000*major + 10*minor; unset: 13000), for the tests
// of which cuBLAS and NVRTC package cuda looks for.
const DriverVersionEnv = "NVDP_EMU_DRIVER_VERSION"

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// ErrNoCompiler is Build on a machine without a C compiler.
var ErrNoCompiler = errors.New("no C compiler")

// Build builds the stand-in libraries (once per process, into a directory
// of the system's temporary directory named by the sources' hash, reused by
// later runs) and returns the directory. Errors: no C compiler, a
// compilation error.
func Build() (string, error) {
	buildOnce.Do(func() { buildDir, buildErr = build() })
	return buildDir, buildErr
}

func build() (string, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return "", fmt.Errorf("cudaemu: %w (%s): %w", ErrNoCompiler, cc, err)
	}
	h := sha256.New()
	for _, b := range [][]byte{emuHeader, fakeCUDA, fakeBLAS, fakeNVRTC} {
		h.Write(b)
	}
	dir := filepath.Join(os.TempDir(), "nvdp-cudaemu-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "ok")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "nvdp-cudaemu-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	files := map[string][]byte{"nvdp_emu.h": emuHeader, "fakecuda.c": fakeCUDA, "fakecublas.c": fakeBLAS, "fakenvrtc.c": fakeNVRTC}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return "", err
		}
	}
	for lib, src := range map[string]string{"libcuda.so.1": "fakecuda.c", "libcublas.so.13": "fakecublas.c", "libnvrtc.so.13": "fakenvrtc.c"} {
		out, err := exec.Command(cc, "-std=gnu11", "-O2", "-g", "-fPIC", "-shared", "-Wall", "-Werror", "-I", tmp,
			"-o", filepath.Join(tmp, lib), filepath.Join(tmp, src), "-lpthread", "-ldl").CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("cudaemu: building %s: %w\n%s", lib, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "ok"), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Stat(filepath.Join(dir, "ok")); serr != nil { // another process won the race: use its build
			return "", err
		}
	}
	return dir, nil
}

// CIEnv is the variable CI sets to "true": there a test that needs the
// stand-in fails where it cannot be built instead of skipping, so that no
// suite is skipped unseen.
const CIEnv = "CI"

// BuildFor builds the stand-in for a test (Build) and returns its
// directory. Without a C compiler it skips the test with one line, or
// fails it where CI=true; another error fails it.
func BuildFor(tb testing.TB) string {
	tb.Helper()
	dir, err := Build()
	return built(tb, dir, err)
}

// built is BuildFor's judgement of Build's result.
func built(tb testing.TB, dir string, err error) string {
	tb.Helper()
	switch {
	case errors.Is(err, ErrNoCompiler) && os.Getenv(CIEnv) == "true":
		tb.Fatalf("the CUDA stand-in is not built (%s=true: install a C compiler, the tests need it): %v", CIEnv, err)
	case errors.Is(err, ErrNoCompiler):
		tb.Skipf("the CUDA stand-in is not built: %v", err)
	case err != nil:
		tb.Fatal(err)
	}
	return dir
}

// OpenDevice opens the device of a test: the stand-in (built with Build,
// loaded through NVDP_CUDA_LIB_DIR), or with NVDP_CUDA_REAL=1 the real GPU.
// With NVDP_CUDA_FMAD=0 (cuda.FMADEnv) its kernels compile with
// --fmad=false (cuda.Options.NoFMAD: what the stand-in always computes).
// It skips the test with one line when the stand-in cannot be built (no C
// compiler; a failure where CI=true: BuildFor) or, for the real GPU, when
// none loads. The device is closed
// when the test ends; compiled kernels are cached in a temporary directory
// of the process (processCache).
func OpenDevice(tb testing.TB) *cuda.Device {
	tb.Helper()
	return OpenDevicePrecision(tb, cuda.PrecisionFP32)
}

// OpenDevicePrecision is OpenDevice with the GEMM precision of the device
// (cuda.PrecisionFP32, PrecisionTF32, PrecisionBF16: the stand-in's BF16
// GEMMs widen BF16 inputs and accumulate in FP32; its TF32 is FP32).
func OpenDevicePrecision(tb testing.TB, precision string) *cuda.Device {
	tb.Helper()
	o := cuda.Options{CacheDir: processCache(tb), Precision: precision}
	switch v := os.Getenv(cuda.FMADEnv); v {
	case "", "1":
	case "0":
		o.NoFMAD = true
	default:
		tb.Fatalf("%s=%q: want 0 (kernels compiled with %s) or 1 (NVRTC's default)", cuda.FMADEnv, v, cuda.NoFMAD)
	}
	if os.Getenv(RealEnv) == "1" {
		d, err := cuda.Open(o)
		if errors.Is(err, cuda.ErrNoCUDA) {
			tb.Skipf("no GPU: %v", err)
		}
		if errors.Is(err, cuda.ErrNoBF16) {
			tb.Skipf("no BF16 GEMMs here: %v", err)
		}
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { d.Close() })
		return d
	}
	dir := BuildFor(tb)
	os.Setenv(cuda.LibDirEnv, dir) // the process loads the CUDA libraries once: every test uses the same
	os.Setenv("NVDP_EMU_INCLUDE", dir)
	d, err := cuda.Open(o)
	if err != nil {
		tb.Fatalf("the CUDA stand-in: %v", err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

var (
	cacheOnce sync.Once
	cacheDir  string
	cacheOwn  bool // made here: Main removes it
	cacheErr  error
)

// cachePrefix names the kernel caches processCache makes:
// nvdp-cudaemu-kernels-<pid>-<random> in the system's temporary directory.
const cachePrefix = "nvdp-cudaemu-kernels-"

// processCache is the kernel cache of the process's devices: $NVDP_CUDA_CACHE
// when set (scripts/gpu-check.sh: one cache for all its binaries), else a
// temporary directory made once, so that a module is compiled once per test
// process, not once per test. Main removes it when the tests end, and the
// next process removes those of processes that ended without Main
// (removeStale). The stand-in's cubins hold their compiled kernels (no
// file beside them: fakenvrtc.c).
func processCache(tb testing.TB) string {
	cacheOnce.Do(func() {
		if cacheDir = os.Getenv(cuda.CacheEnv); cacheDir == "" {
			removeStale(os.TempDir())
			cacheDir, cacheErr = os.MkdirTemp("", fmt.Sprintf("%s%d-", cachePrefix, os.Getpid()))
			cacheOwn = cacheErr == nil
		}
	})
	if cacheErr != nil {
		tb.Fatal(cacheErr)
	}
	return cacheDir
}

// removeStale removes from tmp the kernel caches of processes that no
// longer run (cachePrefix<pid>-*), and those of earlier versions, named
// without the pid, a day old.
func removeStale(tmp string) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), cachePrefix) {
			continue
		}
		pid, _, ok := strings.Cut(strings.TrimPrefix(e.Name(), cachePrefix), "-")
		n, err := strconv.Atoi(pid)
		info, ierr := e.Info()
		if ok && err == nil && !alive(n) || !ok && ierr == nil && time.Since(info.ModTime()) > 24*time.Hour {
			os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}

// alive reports whether process pid runs (signal 0 reaches it, or it is
// another user's).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Main runs the tests of a package that uses the stand-in and removes the
// kernel cache processCache made; it returns m.Run's exit code:
//
//	func TestMain(m *testing.M) { os.Exit(cudaemu.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if cacheOwn {
		os.RemoveAll(cacheDir)
	}
	return code
}

// Emulated reports whether OpenDevice opens the stand-in (not the real GPU).
func Emulated() bool { return os.Getenv(RealEnv) != "1" }
