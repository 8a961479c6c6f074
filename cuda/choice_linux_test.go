//go:build linux

package cuda_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
)

// choiceReport is what TestLibraryChoiceHelper prints: the device's
// libraries, or the load error; and whether the builtins library is mapped
// into the process.
type choiceReport struct {
	Info          *cuda.Info      `json:"info"`
	Err           string          `json:"err"`
	LoadErr       *cuda.LoadError `json:"load_err"`
	BuiltinsInMem bool            `json:"builtins_in_mem"`
}

// TestLibraryChoiceOnStandIn opens the stand-in (a directory of links to
// its libraries, plus an NVRTC builtins library of CUDA 13.0 made here) in
// processes of their own whose driver reports a given CUDA version: a 13.0
// driver loads the 13 libraries and preloads the builtins beside libnvrtc
// (mapped into the process before any compilation); a 12.8 driver looks
// for the 12 libraries only, so that cuBLAS 13 beside it is not found; an
// 11.8 driver loads no library, saying why.
func TestLibraryChoiceOnStandIn(t *testing.T) {
	if !cudaemu.Emulated() {
		t.Skip("the stand-in's driver version is what this test sets")
	}
	emu, err := cudaemu.Build()
	if errors.Is(err, cudaemu.ErrNoCompiler) {
		t.Skipf("the CUDA stand-in is not built: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, lib := range []string{"libcuda.so.1", "libcublas.so.13", "libnvrtc.so.13"} {
		if err := os.Symlink(filepath.Join(emu, lib), filepath.Join(dir, lib)); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(dir, "builtins.c")
	builtins := filepath.Join(dir, "libnvrtc-builtins.so.13.0")
	if err := os.WriteFile(src, []byte("int nvdp_fake_builtins = 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", builtins, src).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", builtins, err, out)
	}
	for _, tc := range []struct {
		driver string
		check  func(r choiceReport) error
	}{
		{"13000", func(r choiceReport) error {
			switch {
			case r.Info == nil:
				return fmt.Errorf("no device: %s", r.Err)
			case r.Info.CUBLASLib != filepath.Join(dir, "libcublas.so.13") || r.Info.NVRTCLib != filepath.Join(dir, "libnvrtc.so.13"):
				return fmt.Errorf("libraries %s, %s", r.Info.CUBLASLib, r.Info.NVRTCLib)
			case r.Info.NVRTCBuiltins != builtins || !r.BuiltinsInMem:
				return fmt.Errorf("builtins %q (mapped: %v), want %s", r.Info.NVRTCBuiltins, r.BuiltinsInMem, builtins)
			case !strings.Contains(r.Info.LibChoice, "CUDA 13.0 (cuDriverGetVersion 13000): CUDA 13 first, then 12"):
				return fmt.Errorf("lib choice %q", r.Info.LibChoice)
			}
			return nil
		}},
		{"12080", func(r choiceReport) error {
			le := r.LoadErr
			switch {
			case le == nil:
				return fmt.Errorf("opened %+v (%s), want cuBLAS 12 not found", r.Info, r.Err)
			case le.What != "cuBLAS" || !slices.Equal(le.Sonames, []string{"libcublas.so.12"}) || !slices.Equal(le.Majors, []int{12}) || le.Driver != 12080:
				return fmt.Errorf("load error %+v", le)
			case !strings.Contains(r.Err, "cuBLAS not found: looked for libcublas.so.12 (the driver supports CUDA 12.8 (cuDriverGetVersion 12080): CUDA 12 only"):
				return fmt.Errorf("message %q", r.Err)
			case r.BuiltinsInMem:
				return fmt.Errorf("the builtins of CUDA 13 were loaded")
			}
			return nil
		}},
		{"11080", func(r choiceReport) error {
			le := r.LoadErr
			if le == nil || le.What != "cuBLAS and NVRTC" || le.Sonames != nil || le.Driver != 11080 || !strings.Contains(r.Err, "not loaded: the driver supports CUDA 11.8") {
				return fmt.Errorf("load error %+v: %s", le, r.Err)
			}
			return nil
		}},
	} {
		c := exec.Command(os.Args[0], "-test.run=^TestLibraryChoiceHelper$")
		c.Env = append(os.Environ(), "NVDP_CHOICE_HELPER="+builtins, cuda.LibDirEnv+"="+dir, "NVDP_EMU_INCLUDE="+emu,
			cudaemu.DriverVersionEnv+"="+tc.driver)
		out, err := c.Output()
		var r choiceReport
		line, _, _ := strings.Cut(string(out), "\n")
		if err != nil || json.Unmarshal([]byte(line), &r) != nil {
			t.Errorf("driver %s: helper: %v\n%s", tc.driver, err, out)
			continue
		}
		if err := tc.check(r); err != nil {
			t.Errorf("driver %s: %v", tc.driver, err)
		}
	}
}

// TestLibraryChoiceHelper opens the device in the helper process of
// TestLibraryChoiceOnStandIn and prints a choiceReport as one JSON line.
func TestLibraryChoiceHelper(t *testing.T) {
	builtins := os.Getenv("NVDP_CHOICE_HELPER")
	if builtins == "" {
		t.Skip("helper of TestLibraryChoiceOnStandIn")
	}
	var r choiceReport
	d, err := cuda.Open(cuda.Options{CacheDir: t.TempDir()})
	if err != nil {
		r.Err = err.Error()
		errors.As(err, &r.LoadErr)
	} else {
		info := d.Info()
		r.Info = &info
		d.Close()
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	r.BuiltinsInMem = strings.Contains(string(maps), builtins)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(string(b))
}
