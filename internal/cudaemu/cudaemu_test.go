package cudaemu

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestCompileLeavesNothing: compiling and loading a module on the
// stand-in leaves no file in the temporary directory (each compilation
// left a /tmp/nvdp-emu-* directory: its cubin named a shared object in it),
// and the cubin, read back from the kernel cache by a second device, loads
// with no file beside it.
func TestCompileLeavesNothing(t *testing.T) {
	OpenDevice(t) // the stand-in built and the process's kernel cache made, where they belong
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the stand-in's NVRTC and driver write
	// a cache miss, compiled by the first device, loaded from the cache by the second
	src := fmt.Sprintf(`KERNEL void touch(float *x) { x[0] = %d.0f; }`, rand.IntN(1<<30))
	for i := range 2 {
		d := OpenDevice(t)
		if _, err := d.Compile("touch", src); err != nil {
			t.Fatalf("device %d: %v", i, err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		left, err := filepath.Glob(filepath.Join(tmp, "*"))
		if err != nil || len(left) != 0 {
			t.Fatalf("device %d left %v in the temporary directory (%v)", i, left, err)
		}
	}
	// nor where earlier stand-ins wrote whatever TMPDIR said
	old, _ := filepath.Glob("/tmp/nvdp-emu-*/kernels.c")
	for _, path := range old {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), src) {
			t.Errorf("the compilation left %s", filepath.Dir(path))
		}
	}
}

// TestRemoveStale: the kernel caches of processes that have ended are
// removed, those of running processes and other names kept.
func TestRemoveStale(t *testing.T) {
	tmp := t.TempDir()
	dead := 1<<22 + 4321      // beyond Linux's largest pid_max
	names := map[string]bool{ // name: kept
		fmt.Sprintf("%s%d-abc", cachePrefix, dead):        false,
		fmt.Sprintf("%s%d-abc", cachePrefix, os.Getpid()): true,
		cachePrefix + "123456":                            true, // an earlier version's, new
		"nvdp-cudaemu-0123456789abcdef":                   true, // a build
		"other":                                           true,
	}
	for name := range names {
		if err := os.Mkdir(filepath.Join(tmp, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removeStale(tmp)
	for name, kept := range names {
		if _, err := os.Stat(filepath.Join(tmp, name)); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", name, err == nil, kept)
		}
	}
}

// fakeTB records what BuildFor's judgement does to a test.
type fakeTB struct {
	testing.TB
	failed, skipped bool
}

func (f *fakeTB) Helper()                     {}
func (f *fakeTB) Fatalf(string, ...any)       { f.failed = true }
func (f *fakeTB) Fatal(...any)                { f.failed = true }
func (f *fakeTB) Skipf(string, ...any)        { f.skipped = true }
func (f *fakeTB) Cleanup(func())              {}
func (f *fakeTB) Setenv(k, v string)          {}
func (f *fakeTB) Deadline() (time.Time, bool) { return time.Time{}, false }

// TestBuiltInCI: without a C compiler a test needing the stand-in skips,
// but fails where CI=true (a suite must not be skipped unseen in CI);
// another error fails it.
func TestBuiltInCI(t *testing.T) {
	noCC := fmt.Errorf("cudaemu: %w (cc)", ErrNoCompiler)
	for _, tc := range []struct {
		ci              string
		err             error
		failed, skipped bool
	}{
		{"", noCC, false, true},
		{"false", noCC, false, true},
		{"true", noCC, true, false},
		{"true", errors.New("cudaemu: building libcuda.so.1"), true, false},
		{"true", nil, false, false},
	} {
		t.Setenv(CIEnv, tc.ci)
		f := &fakeTB{}
		built(f, "dir", tc.err)
		if f.failed != tc.failed || f.skipped != tc.skipped {
			t.Errorf("CI=%q, %v: failed %v skipped %v, want %v %v", tc.ci, tc.err, f.failed, f.skipped, tc.failed, tc.skipped)
		}
	}
}
