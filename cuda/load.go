//go:build linux

package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ebitengine/purego"
)

// LibDirEnv is the environment variable of the directories (separated by
// ':') searched first for the CUDA libraries, e.g. the lib directories of
// the pip wheels nvidia-cublas and nvidia-cuda-nvrtc.
const LibDirEnv = "NVDP_CUDA_LIB_DIR"

// library is one shared library the backend loads: its candidate sonames,
// newest first, and the libraries to load before it from the same
// directory (their dependencies, when no RUNPATH finds them).
type library struct {
	what    string   // what it is, for errors and logs
	sonames []string // candidates, newest first
	before  []string // sonames preloaded from the directory the library is found in, when present
}

var (
	libDriver = library{what: "the NVIDIA driver", sonames: []string{"libcuda.so.1", "libcuda.so"}}
	libBLAS   = library{what: "cuBLAS", sonames: []string{"libcublas.so.13", "libcublas.so.12"},
		before: []string{"libcublasLt.so.13", "libcublasLt.so.12"}}
	libNVRTC = library{what: "NVRTC", sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12"},
		before: []string{"libnvrtc-builtins.so.13", "libnvrtc-builtins.so.12"}}
)

// LoadError is a library that could not be loaded: what was looked for and
// where, with each attempt's error.
type LoadError struct {
	What     string   // "the NVIDIA driver", "cuBLAS", "NVRTC"
	Sonames  []string // the sonames tried
	Dirs     []string // the directories of NVDP_CUDA_LIB_DIR tried before the loader path
	Attempts []string // "PATH: dlerror" per attempt
}

func (e *LoadError) Error() string {
	dirs := LibDirEnv + " unset"
	if len(e.Dirs) > 0 {
		dirs = LibDirEnv + "=" + strings.Join(e.Dirs, ":")
	}
	return fmt.Sprintf("cuda: %s not found: looked for %s in %s, then on the loader path (LD_LIBRARY_PATH=%q, the ld.so cache): %s",
		e.What, strings.Join(e.Sonames, ", "), dirs, os.Getenv("LD_LIBRARY_PATH"), strings.Join(e.Attempts, "; "))
}

// Is makes errors.Is(err, ErrNoCUDA) true.
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

// open loads lib: each soname in each directory of NVDP_CUDA_LIB_DIR, then
// each soname on the loader path. It returns the handle and the path (or
// soname) that loaded.
func (lib library) open() (uintptr, string, error) {
	dirs := libDirs()
	e := &LoadError{What: lib.what, Sonames: lib.sonames, Dirs: dirs}
	try := func(path string, dir string) (uintptr, bool) {
		if dir != "" {
			if _, err := os.Stat(path); err != nil {
				return 0, false // not there: not worth a line of the error
			}
			for _, dep := range lib.before {
				if p := filepath.Join(dir, dep); fileExists(p) {
					purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL) // best effort: its own failure shows below
				}
			}
		}
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			e.Attempts = append(e.Attempts, path+": "+err.Error())
			return 0, false
		}
		return h, true
	}
	for _, dir := range dirs {
		for _, so := range lib.sonames {
			if h, ok := try(filepath.Join(dir, so), dir); ok {
				return h, filepath.Join(dir, so), nil
			}
		}
	}
	for _, so := range lib.sonames {
		if h, ok := try(so, ""); ok {
			return h, so, nil
		}
	}
	return 0, "", e
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

// newAPI loads the driver, cuBLAS and NVRTC and binds their functions.
func newAPI() (*api, error) {
	a := &api{}
	h, path, err := libDriver.open()
	if err != nil {
		return nil, err
	}
	a.driverPath = path
	if err := bind(h, libDriver.what, path, map[string]any{
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
	if h, path, err = libBLAS.open(); err != nil {
		return nil, err
	}
	a.blasPath = path
	if err := bind(h, libBLAS.what, path, map[string]any{
		"cublasCreate_v2": &a.cublasCreate, "cublasDestroy_v2": &a.cublasDestroy, "cublasGetVersion_v2": &a.cublasGetVersion,
		"cublasSetMathMode": &a.cublasSetMathMode, "cublasSgemm_v2": &a.cublasSgemm,
		"cublasSgemmStridedBatched": &a.cublasSgemmStridedBatched, "cublasGetStatusString": &a.cublasGetStatusString,
	}); err != nil {
		return nil, err
	}
	if err := bindOptional(h, libBLAS.what, path, map[string]any{
		"cublasGemmEx": &a.cublasGemmEx, "cublasGemmStridedBatchedEx": &a.cublasGemmStridedBatchedEx,
	}); err != nil {
		a.blasBF16Err = fmt.Errorf("%w: %w", ErrNoBF16, err)
	}
	if h, path, err = libNVRTC.open(); err != nil {
		return nil, err
	}
	a.nvrtcPath = path
	if err := bind(h, libNVRTC.what, path, map[string]any{
		"nvrtcVersion": &a.nvrtcVersion, "nvrtcCreateProgram": &a.nvrtcCreateProgram, "nvrtcCompileProgram": &a.nvrtcCompileProgram,
		"nvrtcGetProgramLogSize": &a.nvrtcGetProgramLogSize, "nvrtcGetProgramLog": &a.nvrtcGetProgramLog,
		"nvrtcGetCUBINSize": &a.nvrtcGetCUBINSize, "nvrtcGetCUBIN": &a.nvrtcGetCUBIN,
		"nvrtcDestroyProgram": &a.nvrtcDestroyProgram, "nvrtcGetErrorString": &a.nvrtcGetErrorString,
	}); err != nil {
		return nil, err
	}
	return a, nil
}
