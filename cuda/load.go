//go:build linux

package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ebitengine/purego"
)

// LibDirEnv is the environment variable of the directories, separated by ':', searched first for
// the CUDA libraries, such as the lib directories of the pip wheels nvidia-cublas and
// nvidia-cuda-nvrtc.
const LibDirEnv = "NVDP_CUDA_LIB_DIR"

// library is one shared library the backend loads: its candidate sonames
// in the order tried, the CUDA major version of each (0 for the driver),
// and the libraries to preload from the directory a candidate is found in
// (its dependencies, when no RUNPATH finds them).
type library struct {
	what    string   // what it is, for errors and logs
	sonames []string // candidates, in the order tried
	majors  []int    // the CUDA major version of each soname (nil: the driver)
	// before returns the paths in dir to load (RTLD_GLOBAL) before the
	// candidate of CUDA major version major found there (nil: none).
	before func(dir string, major int) []string
	why    string // why these majors: the driver's CUDA version (LoadError.Why)
	driver int32  // cuDriverGetVersion (LoadError.Driver)
}

var libDriver = library{what: "the NVIDIA driver", sonames: []string{"libcuda.so.1", "libcuda.so"}}

// blasLibrary is cuBLAS of the CUDA major versions majors, in that order,
// each preceded by the cuBLASLt of its version from the same directory.
func blasLibrary(majors []int, why string, driver int32) library {
	l := library{what: "cuBLAS", majors: majors, why: why, driver: driver, before: func(dir string, major int) []string {
		if p := filepath.Join(dir, fmt.Sprintf("libcublasLt.so.%d", major)); fileExists(p) {
			return []string{p}
		}
		return nil
	}}
	for _, m := range majors {
		l.sonames = append(l.sonames, fmt.Sprintf("libcublas.so.%d", m))
	}
	return l
}

// nvrtcLibrary is NVRTC of the CUDA major versions majors, in that order,
// each preceded by the builtins library beside it (nvrtcBuiltins).
func nvrtcLibrary(majors []int, why string, driver int32) library {
	l := library{what: "NVRTC", majors: majors, why: why, driver: driver, before: func(dir string, major int) []string {
		if p := nvrtcBuiltins(dir, major); p != "" {
			return []string{p}
		}
		return nil
	}}
	for _, m := range majors {
		l.sonames = append(l.sonames, fmt.Sprintf("libnvrtc.so.%d", m))
	}
	return l
}

// The CUDA major versions of cuBLAS and NVRTC that the backend knows.
const (
	newestMajor = 13
	oldestMajor = 12
)

// chooseMajors returns the CUDA major versions of cuBLAS and NVRTC to try,
// in order, for a driver that supports CUDA version drv (cuDriverGetVersion:
// 1000*major + 10*minor; verr its failure, nil when it answered), and why.
// A driver runs the libraries of its own CUDA major version and older ones,
// never newer: 13.0 or later tries 13 then 12, a 12.x driver 12 only. When
// the driver cannot say, both are tried, newest first. Error: a driver
// older than CUDA 12.0 (a *LoadError: errors.Is ErrNoCUDA).
func chooseMajors(drv int32, verr error) ([]int, string, error) {
	if verr != nil {
		return []int{newestMajor, oldestMajor}, fmt.Sprintf("cuDriverGetVersion failed (%v): CUDA %d first, then %d", verr, newestMajor, oldestMajor), nil
	}
	ver := fmt.Sprintf("the driver supports CUDA %d.%d (cuDriverGetVersion %d)", drv/1000, drv%1000/10, drv)
	major := int(drv / 1000)
	switch {
	case major >= newestMajor:
		var ms []int
		for m := newestMajor; m >= oldestMajor; m-- {
			ms = append(ms, m)
		}
		return ms, fmt.Sprintf("%s: CUDA %d first, then %d", ver, newestMajor, oldestMajor), nil
	case major >= oldestMajor:
		return []int{major}, fmt.Sprintf("%s: CUDA %d only (CUDA %d needs a driver for CUDA %d.0 or later)", ver, major, major+1, major+1), nil
	default:
		why := fmt.Sprintf("%s: nvdp needs cuBLAS and NVRTC of CUDA %d or %d, that is a driver for CUDA %d.0 or later", ver, newestMajor, oldestMajor, oldestMajor)
		return nil, why, &LoadError{What: "cuBLAS and NVRTC", Driver: drv, Why: why}
	}
}

// builtinsPrefix is the name of NVRTC's builtins library of CUDA major
// version major up to its minor version: libnvrtc-builtins.so.12.8 is
// "libnvrtc-builtins.so.12" + ".8".
func builtinsPrefix(major int) string { return fmt.Sprintf("libnvrtc-builtins.so.%d", major) }

// nvrtcBuiltins returns the path of the NVRTC builtins library of CUDA
// major version major in dir ("" when none): libnvrtc opens it by its
// soname, which carries the minor version (libnvrtc-builtins.so.12.8),
// through the system loader only, so a libnvrtc found in NVDP_CUDA_LIB_DIR
// or a pip wheel without RUNPATH fails every compilation
// (NVRTC_ERROR_BUILTIN_OPERATION_FAILURE) unless the builtins are loaded
// first with RTLD_GLOBAL. Of the files libnvrtc-builtins.so.MAJOR[.*] in
// dir (broken links skipped), the one whose minor version is that of
// libnvrtc.so.MAJOR's target (a toolkit's libnvrtc.so.12 -> libnvrtc.so.12.8.93)
// when that is known, else the highest version; of equal versions the
// shortest name (the soname rather than the file it links to).
func nvrtcBuiltins(dir string, major int) string {
	prefix := builtinsPrefix(major)
	matches, _ := filepath.Glob(filepath.Join(dir, prefix+"*")) // the pattern is well formed: no error
	var names []string
	for _, m := range matches {
		b := filepath.Base(m)
		if (b == prefix || strings.HasPrefix(b, prefix+".")) && fileExists(m) {
			names = append(names, b)
		}
	}
	if len(names) == 0 {
		return ""
	}
	if target, err := filepath.EvalSymlinks(filepath.Join(dir, fmt.Sprintf("libnvrtc.so.%d", major))); err == nil {
		if v := soVersion(filepath.Base(target), fmt.Sprintf("libnvrtc.so.%d", major)); len(v) >= 1 {
			want := fmt.Sprintf("%s.%d", prefix, v[0])
			var same []string
			for _, n := range names {
				if n == want || strings.HasPrefix(n, want+".") {
					same = append(same, n)
				}
			}
			if len(same) > 0 {
				names = same
			}
		}
	}
	sort.Slice(names, func(i, j int) bool {
		vi, vj := soVersion(names[i], prefix), soVersion(names[j], prefix)
		for k := 0; k < len(vi) && k < len(vj); k++ {
			if vi[k] != vj[k] {
				return vi[k] > vj[k]
			}
		}
		return len(names[i]) < len(names[j])
	})
	return filepath.Join(dir, names[0])
}

// soVersion returns the numbers after prefix in name, a soname or file
// name: soVersion("libnvrtc.so.12.8.93", "libnvrtc.so.12") is [8 93]. A
// part that is not a number counts as -1.
func soVersion(name, prefix string) []int {
	rest := strings.TrimPrefix(strings.TrimPrefix(name, prefix), ".")
	if rest == "" || !strings.HasPrefix(name, prefix) {
		return nil
	}
	var v []int
	for _, p := range strings.Split(rest, ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			n = -1
		}
		v = append(v, n)
	}
	return v
}

// LoadError is a library that could not be loaded. It says what was looked for and where, with
// each attempt's error, and for cuBLAS and NVRTC the CUDA major versions looked for and why, from
// the driver's CUDA version.
type LoadError struct {
	What     string   // "the NVIDIA driver", "cuBLAS", "NVRTC", "cuBLAS and NVRTC" (a driver too old)
	Sonames  []string // the sonames tried, in order (none for a driver too old)
	Dirs     []string // the directories of NVDP_CUDA_LIB_DIR tried before the loader path
	Attempts []string // "PATH: dlerror" per attempt
	Majors   []int    // the CUDA major versions of Sonames, in order (nil: the driver)
	Driver   int32    // cuDriverGetVersion (0: not asked, the driver itself failed to load)
	Why      string   // why Majors: the driver's CUDA version
}

func (e *LoadError) Error() string {
	if len(e.Sonames) == 0 {
		return fmt.Sprintf("cuda: %s not loaded: %s", e.What, e.Why)
	}
	dirs := LibDirEnv + " unset"
	if len(e.Dirs) > 0 {
		dirs = LibDirEnv + "=" + strings.Join(e.Dirs, ":")
	}
	why := ""
	if e.Why != "" {
		why = " (" + e.Why + ")"
	}
	return fmt.Sprintf("cuda: %s not found: looked for %s%s in %s, then on the loader path (LD_LIBRARY_PATH=%q, the ld.so cache): %s",
		e.What, strings.Join(e.Sonames, ", "), why, dirs, os.Getenv("LD_LIBRARY_PATH"), strings.Join(e.Attempts, "; "))
}

// Is reports whether target is [ErrNoCUDA], so that errors.Is(err, ErrNoCUDA) holds.
func (e *LoadError) Is(target error) bool { return target == ErrNoCUDA }

// libDirs returns the directories of NVDP_CUDA_LIB_DIR.
func libDirs() []string {
	var dirs []string
	for _, d := range strings.Split(os.Getenv(LibDirEnv), ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// loaded is a library that open loaded.
type loaded struct {
	h         uintptr
	path      string   // the path (or soname, from the loader path) that loaded
	major     int      // its CUDA major version (0: the driver)
	preloaded []string // the paths loaded before it (before); a failure reads "PATH: dlerror"
}

// open loads lib: each soname (in order: the preferred CUDA major version
// first) in each directory of NVDP_CUDA_LIB_DIR, preceded by what
// lib.before names there; then each soname on the loader path. Error: a *LoadError naming every soname, directory and
// failed attempt.
func (lib library) open() (loaded, error) {
	dirs := libDirs()
	e := &LoadError{What: lib.what, Sonames: lib.sonames, Dirs: dirs, Majors: lib.majors, Driver: lib.driver, Why: lib.why}
	try := func(i int, dir string) (loaded, bool) {
		l := loaded{path: lib.sonames[i]}
		if lib.majors != nil {
			l.major = lib.majors[i]
		}
		if dir != "" {
			l.path = filepath.Join(dir, lib.sonames[i])
			if !fileExists(l.path) {
				return l, false // not there: not worth a line of the error
			}
			if lib.before != nil {
				for _, p := range lib.before(dir, l.major) {
					if _, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
						p += ": " + err.Error() // its consequence, if any, shows when the library loads or runs
					}
					l.preloaded = append(l.preloaded, p)
				}
			}
		}
		h, err := purego.Dlopen(l.path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			e.Attempts = append(e.Attempts, l.path+": "+err.Error())
			return l, false
		}
		l.h = h
		return l, true
	}
	for i := range lib.sonames { // the preferred major in any directory before the next
		for _, dir := range dirs {
			if l, ok := try(i, dir); ok {
				return l, nil
			}
		}
	}
	for i := range lib.sonames {
		if l, ok := try(i, ""); ok {
			return l, nil
		}
	}
	return loaded{}, e
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// bind registers each function of fns (pointers to func variables, by C
// name) from the library handle h. A missing symbol is an error naming it
// (a driver or library too old).
func bind(h uintptr, what, path string, fns map[string]any) error {
	for name, fptr := range fns {
		sym, err := purego.Dlsym(h, name)
		if err != nil {
			return fmt.Errorf("cuda: %s (%s) lacks %s: %w", what, path, name, err)
		}
		purego.RegisterFunc(fptr, sym)
	}
	return nil
}

// bindOptional is bind for functions that only one feature needs: all of
// fns are registered, or none, and the error names every one missing, so
// that the library still serves everything else and the feature fails with
// that error when it is asked for.
func bindOptional(h uintptr, what, path string, fns map[string]any) error {
	syms := map[string]uintptr{}
	var missing []string
	for name := range fns {
		sym, err := purego.Dlsym(h, name)
		if err != nil {
			missing = append(missing, name)
			continue
		}
		syms[name] = sym
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%s (%s) lacks %s", what, path, strings.Join(missing, ", "))
	}
	for name, fptr := range fns {
		purego.RegisterFunc(fptr, syms[name])
	}
	return nil
}

// newAPI loads the driver, then cuBLAS and NVRTC of the CUDA major version
// the driver runs (chooseMajors), and binds their functions.
func newAPI() (*api, error) {
	a := &api{}
	drv, err := libDriver.open()
	if err != nil {
		return nil, err
	}
	a.driverPath = drv.path
	if err := bind(drv.h, libDriver.what, drv.path, map[string]any{
		"cuInit": &a.cuInit, "cuDriverGetVersion": &a.cuDriverGetVersion, "cuDeviceGetCount": &a.cuDeviceGetCount,
		"cuDeviceGet": &a.cuDeviceGet, "cuDeviceGetName": &a.cuDeviceGetName, "cuDeviceGetAttribute": &a.cuDeviceGetAttribute,
		"cuDeviceTotalMem_v2": &a.cuDeviceTotalMem, "cuDevicePrimaryCtxRetain": &a.cuDevicePrimaryCtxRetain,
		"cuDevicePrimaryCtxRelease_v2": &a.cuDevicePrimaryCtxRelease, "cuCtxSetCurrent": &a.cuCtxSetCurrent,
		"cuCtxSynchronize": &a.cuCtxSynchronize, "cuMemGetInfo_v2": &a.cuMemGetInfo, "cuMemAlloc_v2": &a.cuMemAlloc,
		"cuMemFree_v2": &a.cuMemFree, "cuMemcpyHtoD_v2": &a.cuMemcpyHtoD, "cuMemcpyDtoH_v2": &a.cuMemcpyDtoH,
		"cuMemcpyDtoD_v2": &a.cuMemcpyDtoD, "cuMemsetD32_v2": &a.cuMemsetD32, "cuModuleLoadData": &a.cuModuleLoadData,
		"cuModuleUnload": &a.cuModuleUnload, "cuModuleGetFunction": &a.cuModuleGetFunction,
		"cuFuncSetAttribute": &a.cuFuncSetAttribute, "cuLaunchKernel": &a.cuLaunchKernel,
		"cuGetErrorName": &a.cuGetErrorName, "cuGetErrorString": &a.cuGetErrorString,
	}); err != nil {
		return nil, err
	}
	var version int32
	verr := a.check("cuDriverGetVersion", a.cuDriverGetVersion(&version)) // needs no cuInit
	majors, why, err := chooseMajors(version, verr)
	if err != nil {
		return nil, err
	}
	a.libChoice = why
	blas, err := blasLibrary(majors, why, version).open()
	if err != nil {
		return nil, err
	}
	a.blasPath = blas.path
	if err := bind(blas.h, "cuBLAS", blas.path, map[string]any{
		"cublasCreate_v2": &a.cublasCreate, "cublasDestroy_v2": &a.cublasDestroy, "cublasGetVersion_v2": &a.cublasGetVersion,
		"cublasSetMathMode": &a.cublasSetMathMode, "cublasSgemm_v2": &a.cublasSgemm,
		"cublasSgemmStridedBatched": &a.cublasSgemmStridedBatched, "cublasGetStatusString": &a.cublasGetStatusString,
	}); err != nil {
		return nil, err
	}
	if err := bindOptional(blas.h, "cuBLAS", blas.path, map[string]any{
		"cublasGemmEx": &a.cublasGemmEx, "cublasGemmStridedBatchedEx": &a.cublasGemmStridedBatchedEx,
	}); err != nil {
		a.blasBF16Err = fmt.Errorf("%w: %w", ErrNoBF16, err)
	}
	rtc, err := nvrtcLibrary(majors, why, version).open()
	if err != nil {
		return nil, err
	}
	a.nvrtcPath, a.nvrtcBuiltins = rtc.path, strings.Join(rtc.preloaded, "; ")
	if err := bind(rtc.h, "NVRTC", rtc.path, map[string]any{
		"nvrtcVersion": &a.nvrtcVersion, "nvrtcCreateProgram": &a.nvrtcCreateProgram, "nvrtcCompileProgram": &a.nvrtcCompileProgram,
		"nvrtcGetProgramLogSize": &a.nvrtcGetProgramLogSize, "nvrtcGetProgramLog": &a.nvrtcGetProgramLog,
		"nvrtcGetCUBINSize": &a.nvrtcGetCUBINSize, "nvrtcGetCUBIN": &a.nvrtcGetCUBIN,
		"nvrtcDestroyProgram": &a.nvrtcDestroyProgram, "nvrtcGetErrorString": &a.nvrtcGetErrorString,
	}); err != nil {
		return nil, err
	}
	return a, nil
}
