//go:build linux

package cuda_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestLoadOrder: the preferred soname (the newer CUDA major version) is
// tried in every directory of NVDP_CUDA_LIB_DIR before the next soname,
// and the loader path comes last; a directory without the file costs no
// attempt. (The files are empty: each attempt fails, and the error lists
// them in the order tried.)
func TestLoadOrder(t *testing.T) {
	old := fakeLibs(t, []string{"libnvdp-fake.so.12"})
	recent := fakeLibs(t, []string{"libnvdp-fake.so.13"})
	t.Setenv(cuda.LibDirEnv, old+":"+recent)
	err := cuda.TryLoad(cuda.Library{What: "cuBLAS", Sonames: []string{"libnvdp-fake.so.13", "libnvdp-fake.so.12"}})
	var le *cuda.LoadError
	if !errors.As(err, &le) {
		t.Fatalf("error %v, want a *LoadError", err)
	}
	want := []string{filepath.Join(recent, "libnvdp-fake.so.13"), filepath.Join(old, "libnvdp-fake.so.12"), "libnvdp-fake.so.13", "libnvdp-fake.so.12"}
	var got []string
	for _, a := range le.Attempts {
		path, _, _ := strings.Cut(a, ": ")
		got = append(got, path)
	}
	if !slices.Equal(got, want) {
		t.Errorf("attempts %q, want in order %q", le.Attempts, want)
	}
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
// (the libraries load once per process) where NVDP_CUDA_LIB_DIR is an empty
// directory: auto falls back to the CPU with the load error's text, cuda is
// that *LoadError, never a panic. Which library is missing depends on the
// machine (no driver here; on a GPU machine whose cuBLAS or NVRTC come from
// pip wheels, those), so the helper checks the error's structure: what was
// looked for, in the directory given, and for cuBLAS and NVRTC the CUDA
// versions chosen from the driver's and why.
func TestSelectAutoFallback(t *testing.T) {
	dir := t.TempDir()
	c := exec.Command(os.Args[0], "-test.run=^TestSelectAutoHelper$", "-test.v")
	c.Env = append(os.Environ(), "NVDP_SELECT_HELPER="+dir, cuda.LibDirEnv+"="+dir)
	out, err := c.CombinedOutput()
	if strings.Contains(string(out), "a GPU loads here") {
		t.Skip("every CUDA library loads from the loader path here: no fallback to test")
	}
	if err != nil || !strings.Contains(string(out), "PASS: TestSelectAutoHelper") {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}

func TestSelectAutoHelper(t *testing.T) {
	dir := os.Getenv("NVDP_SELECT_HELPER")
	if dir == "" {
		t.Skip("helper of TestSelectAutoFallback")
	}
	d, fb, err := cuda.Select(cuda.DeviceAuto, cuda.PrecisionTF32, cuda.Options{CacheDir: dir})
	if d != nil {
		d.Close()
		fmt.Println("a GPU loads here")
		return
	}
	if err != nil {
		t.Fatalf("auto: error %v, want a fallback", err)
	}
	_, _, err = cuda.Select(cuda.DeviceCUDA, cuda.PrecisionFP32, cuda.Options{CacheDir: dir})
	var le *cuda.LoadError
	if !errors.As(err, &le) || !errors.Is(err, cuda.ErrNoCUDA) {
		t.Fatalf("cuda: %v, want a *LoadError", err)
	}
	if fb != err.Error() {
		t.Errorf("auto's fallback %q, want the load error %q", fb, err)
	}
	if !strings.Contains(fb, le.What+" not found: looked for "+strings.Join(le.Sonames, ", ")) || !strings.Contains(fb, cuda.LibDirEnv+"="+dir) {
		t.Errorf("fallback %q does not say what was looked for where", fb)
	}
	if len(le.Dirs) != 1 || le.Dirs[0] != dir {
		t.Errorf("dirs %q, want [%s]", le.Dirs, dir)
	}
	switch le.What {
	case "the NVIDIA driver":
		if want := []string{"libcuda.so.1", "libcuda.so"}; !slices.Equal(le.Sonames, want) || le.Majors != nil || le.Driver != 0 {
			t.Errorf("driver: sonames %q (want %q), majors %v, driver version %d", le.Sonames, want, le.Majors, le.Driver)
		}
	case "cuBLAS", "NVRTC":
		want, _, _ := cuda.ChooseMajors(le.Driver, nil)
		if le.Driver < 12000 || !slices.Equal(le.Majors, want) || len(le.Sonames) != len(want) || !strings.Contains(le.Why, "cuDriverGetVersion") {
			t.Errorf("%s: driver %d, majors %v (want %v), sonames %q, why %q", le.What, le.Driver, le.Majors, want, le.Sonames, le.Why)
		}
	default:
		t.Errorf("what %q: want the NVIDIA driver, cuBLAS or NVRTC", le.What)
	}
}

// TestChooseMajors: cuBLAS and NVRTC are looked for in the CUDA major
// versions the driver runs (its own and older, never newer), newest first;
// a driver that cannot say gets both; one older than CUDA 12 is a
// *LoadError saying why.
func TestChooseMajors(t *testing.T) {
	for _, tc := range []struct {
		drv     int32
		verr    error
		want    []int
		why     string // a part of why
		wantErr bool
	}{
		{13000, nil, []int{13, 12}, "the driver supports CUDA 13.0 (cuDriverGetVersion 13000): CUDA 13 first, then 12", false},
		{13020, nil, []int{13, 12}, "CUDA 13.2 (cuDriverGetVersion 13020)", false},
		{14010, nil, []int{13, 12}, "CUDA 14.1", false},
		{12080, nil, []int{12}, "the driver supports CUDA 12.8 (cuDriverGetVersion 12080): CUDA 12 only (CUDA 13 needs a driver for CUDA 13.0 or later)", false},
		{12000, nil, []int{12}, "CUDA 12.0", false},
		{11080, nil, nil, "the driver supports CUDA 11.8 (cuDriverGetVersion 11080): nvdp needs cuBLAS and NVRTC of CUDA 13 or 12, that is a driver for CUDA 12.0 or later", true},
		{0, errors.New("CUDA_ERROR_UNKNOWN"), []int{13, 12}, "cuDriverGetVersion failed (CUDA_ERROR_UNKNOWN): CUDA 13 first, then 12", false},
	} {
		got, why, err := cuda.ChooseMajors(tc.drv, tc.verr)
		if !slices.Equal(got, tc.want) || !strings.Contains(why, tc.why) {
			t.Errorf("%d %v: majors %v, why %q; want %v, %q", tc.drv, tc.verr, got, why, tc.want, tc.why)
		}
		var le *cuda.LoadError
		if tc.wantErr != (err != nil) {
			t.Errorf("%d: error %v, want one: %v", tc.drv, err, tc.wantErr)
		} else if err != nil && (!errors.As(err, &le) || !errors.Is(err, cuda.ErrNoCUDA) || le.Driver != tc.drv || le.Why != why ||
			err.Error() != "cuda: cuBLAS and NVRTC not loaded: "+why) {
			t.Errorf("%d: error %#v (%v)", tc.drv, err, err)
		}
	}
}

// TestLibrarySonames: the sonames tried follow the chosen majors, in order.
func TestLibrarySonames(t *testing.T) {
	for _, tc := range []struct {
		majors      []int
		blas, nvrtc []string
	}{
		{[]int{13, 12}, []string{"libcublas.so.13", "libcublas.so.12"}, []string{"libnvrtc.so.13", "libnvrtc.so.12"}},
		{[]int{12}, []string{"libcublas.so.12"}, []string{"libnvrtc.so.12"}},
	} {
		blas, nvrtc := cuda.LibrarySonames(tc.majors)
		if !slices.Equal(blas, tc.blas) || !slices.Equal(nvrtc, tc.nvrtc) {
			t.Errorf("%v: %q %q, want %q %q", tc.majors, blas, nvrtc, tc.blas, tc.nvrtc)
		}
	}
}

// fakeLibs makes the files of spec in a new directory: "NAME" an empty
// file, "NAME->TARGET" a symbolic link.
func fakeLibs(t *testing.T, spec []string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range spec {
		name, target, link := strings.Cut(f, "->")
		var err error
		if link {
			err = os.Symlink(target, filepath.Join(dir, name))
		} else {
			err = os.WriteFile(filepath.Join(dir, name), nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestNVRTCBuiltins: the builtins library found beside libnvrtc, as pip
// wheels and the toolkit lay them out (fake files): the minor version is in
// the name, the one of libnvrtc's target wins when known, else the newest
// (numerically), and a name that only starts like it is not it.
func TestNVRTCBuiltins(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		major int
		want  string // base name, "" for none
	}{
		{"wheel 12", []string{"libnvrtc.so.12", "libnvrtc-builtins.so.12.8"}, 12, "libnvrtc-builtins.so.12.8"},
		{"wheel 13", []string{"libnvrtc.so.13", "libnvrtc-builtins.so.13.0"}, 13, "libnvrtc-builtins.so.13.0"},
		{"wheel 13, major 12 asked", []string{"libnvrtc.so.13", "libnvrtc-builtins.so.13.0"}, 12, ""},
		{"toolkit links", []string{"libnvrtc.so.12->libnvrtc.so.12.8.93", "libnvrtc.so.12.8.93",
			"libnvrtc-builtins.so.12.8->libnvrtc-builtins.so.12.8.93", "libnvrtc-builtins.so.12.8.93"}, 12, "libnvrtc-builtins.so.12.8"},
		{"two minors, libnvrtc's wins", []string{"libnvrtc.so.12->libnvrtc.so.12.4.127", "libnvrtc.so.12.4.127",
			"libnvrtc-builtins.so.12.4", "libnvrtc-builtins.so.12.8"}, 12, "libnvrtc-builtins.so.12.4"},
		{"two minors, newest numerically", []string{"libnvrtc.so.12", "libnvrtc-builtins.so.12.9", "libnvrtc-builtins.so.12.10"}, 12, "libnvrtc-builtins.so.12.10"},
		{"no minor in the name", []string{"libnvrtc.so.12", "libnvrtc-builtins.so.12"}, 12, "libnvrtc-builtins.so.12"},
		{"broken link", []string{"libnvrtc.so.12", "libnvrtc-builtins.so.12.8->gone"}, 12, ""},
		{"other names", []string{"libnvrtc.so.1", "libnvrtc-builtins.so", "libnvrtc-builtins.so.12.8", "libnvrtc-builtins.so.120"}, 1, ""},
		{"empty", nil, 12, ""},
	} {
		dir := fakeLibs(t, tc.files)
		want := ""
		if tc.want != "" {
			want = filepath.Join(dir, tc.want)
		}
		if got := cuda.NVRTCBuiltins(dir, tc.major); got != want {
			t.Errorf("%s: %q, want %q", tc.name, got, want)
		}
	}
}

// TestPreloads: what is loaded before cuBLAS and NVRTC of one CUDA version
// from their directory: its cuBLASLt and its NVRTC builtins, nothing of
// another version.
func TestPreloads(t *testing.T) {
	dir := fakeLibs(t, []string{"libcublas.so.12", "libcublasLt.so.12", "libnvrtc.so.12", "libnvrtc-builtins.so.12.8", "libcublasLt.so.11"})
	for _, tc := range []struct {
		major       int
		blas, nvrtc []string
	}{
		{12, []string{filepath.Join(dir, "libcublasLt.so.12")}, []string{filepath.Join(dir, "libnvrtc-builtins.so.12.8")}},
		{13, nil, nil},
	} {
		blas, nvrtc := cuda.Preloads(dir, tc.major)
		if !slices.Equal(blas, tc.blas) || !slices.Equal(nvrtc, tc.nvrtc) {
			t.Errorf("%d: %q %q, want %q %q", tc.major, blas, nvrtc, tc.blas, tc.nvrtc)
		}
	}
}

// TestBuiltinsHint: a compilation that fails for NVRTC's builtins says
// which were preloaded; other failures say nothing of them.
func TestBuiltinsHint(t *testing.T) {
	for _, tc := range []struct {
		code            int32
		nvrtc, builtins string
		want            string // a part of the hint, "" for no hint
	}{
		{6, "/w/libnvrtc.so.12", "/w/libnvrtc-builtins.so.12.8", ""},
		{7, "/w/libnvrtc.so.12", "/w/libnvrtc-builtins.so.12.8", "; preloaded /w/libnvrtc-builtins.so.12.8; put the builtins' directory in LD_LIBRARY_PATH"},
		{7, "libnvrtc.so.12", "", "none preloaded: libnvrtc.so.12 came from the loader path"},
	} {
		got := cuda.BuiltinsHint(tc.code, tc.nvrtc, tc.builtins)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%d %q: %q, want %q", tc.code, tc.builtins, got, tc.want)
		}
	}
}
