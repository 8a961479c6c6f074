package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// api holds the C functions of the driver, cuBLAS and NVRTC the backend
// calls (CUDA Driver API, cuBLAS v2 API and NVRTC, as their headers declare
// them; every handle and device pointer is a uintptr).
type api struct {
	driverPath, blasPath, nvrtcPath string
	libChoice                       string // why those: the driver's CUDA version
	nvrtcBuiltins                   string // the builtins preloaded before NVRTC ("": none; "PATH: dlerror" when that failed)

	cuInit                    func(flags uint32) int32
	cuDriverGetVersion        func(v *int32) int32
	cuDeviceGetCount          func(n *int32) int32
	cuDeviceGet               func(dev *int32, ordinal int32) int32
	cuDeviceGetName           func(name *byte, n int32, dev int32) int32
	cuDeviceGetAttribute      func(v *int32, attr int32, dev int32) int32
	cuDeviceTotalMem          func(bytes *uint64, dev int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuCtxSynchronize          func() int32
	cuMemGetInfo              func(free, total *uint64) int32
	cuMemAlloc                func(ptr *uintptr, bytes uint64) int32
	cuMemFree                 func(ptr uintptr) int32
	cuMemcpyHtoD              func(dst uintptr, src unsafe.Pointer, n uint64) int32
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uintptr, n uint64) int32
	cuMemcpyDtoD              func(dst, src uintptr, n uint64) int32
	cuMemsetD32               func(dst uintptr, v uint32, n uint64) int32
	cuModuleLoadData          func(mod *uintptr, image unsafe.Pointer) int32
	cuModuleUnload            func(mod uintptr) int32
	cuModuleGetFunction       func(fn *uintptr, mod uintptr, name string) int32
	cuFuncSetAttribute        func(fn uintptr, attr int32, v int32) int32
	cuLaunchKernel            func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra unsafe.Pointer) int32
	cuGetErrorName            func(code int32, s *uintptr) int32
	cuGetErrorString          func(code int32, s *uintptr) int32

	cublasCreate              func(h *uintptr) int32
	cublasDestroy             func(h uintptr) int32
	cublasGetVersion          func(h uintptr, v *int32) int32
	cublasSetMathMode         func(h uintptr, mode int32) int32
	cublasSgemm               func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a uintptr, lda int32, b uintptr, ldb int32, beta *float32, c uintptr, ldc int32) int32
	cublasSgemmStridedBatched func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a uintptr, lda int32, sa int64, b uintptr, ldb int32, sb int64, beta *float32, c uintptr, ldc int32, sc int64, batch int32) int32
	cublasGetStatusString     func(status int32) uintptr

	// The BF16 GEMMs (GemmBF16), bound when cuBLAS loads but needed only
	// by --precision bf16: blasBF16Err says why they are missing (nil when
	// bound), and Open refuses bf16 with it.
	cublasGemmEx               func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a uintptr, atype int32, lda int32, b uintptr, btype int32, ldb int32, beta *float32, c uintptr, ctype int32, ldc int32, compute int32, algo int32) int32
	cublasGemmStridedBatchedEx func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a uintptr, atype int32, lda int32, sa int64, b uintptr, btype int32, ldb int32, sb int64, beta *float32, c uintptr, ctype int32, ldc int32, sc int64, batch int32, compute int32, algo int32) int32
	blasBF16Err                error

	nvrtcVersion           func(major, minor *int32) int32
	nvrtcCreateProgram     func(prog *uintptr, src, name string, nHeaders int32, headers, includeNames unsafe.Pointer) int32
	nvrtcCompileProgram    func(prog uintptr, nOptions int32, options unsafe.Pointer) int32
	nvrtcGetProgramLogSize func(prog uintptr, n *uint64) int32
	nvrtcGetProgramLog     func(prog uintptr, log *byte) int32
	nvrtcGetCUBINSize      func(prog uintptr, n *uint64) int32
	nvrtcGetCUBIN          func(prog uintptr, cubin *byte) int32
	nvrtcDestroyProgram    func(prog *uintptr) int32
	nvrtcGetErrorString    func(code int32) uintptr
}

var (
	apiOnce sync.Once
	apiVal  *api
	apiErr  error
)

// loadAPI loads the three libraries once per process (a failure is
// remembered: the loader's state does not change while a program runs).
func loadAPI() (*api, error) { // newAPI: load.go (Linux), load_other.go
	apiOnce.Do(func() { apiVal, apiErr = newAPI() })
	return apiVal, apiErr
}

// ErrNoCUDA matches every error of a machine where CUDA cannot be loaded: a [*LoadError], no
// device, or an operating system without the backend.
var ErrNoCUDA = errors.New("cuda: not available")

// Error is a failed call of the driver, cuBLAS or NVRTC: the function, its
// status code and the library's name and description of the code.
type Error struct {
	Func string // the C function
	Code int32
	Name string // e.g. CUDA_ERROR_OUT_OF_MEMORY
	Desc string
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d): %s", e.Func, e.Name, e.Code, e.Desc)
}

// cstring copies the NUL-terminated C string at p (0: "").
func cstring(p uintptr) string {
	if p == 0 {
		return ""
	}
	base := *(*unsafe.Pointer)(unsafe.Pointer(&p)) // C memory, which the GC does not manage
	n := 0
	for n < 1<<16 && *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

// check turns a driver status into an *Error (nil for CUDA_SUCCESS).
func (a *api) check(fn string, code int32) error {
	if code == 0 {
		return nil
	}
	var name, desc uintptr
	a.cuGetErrorName(code, &name)
	a.cuGetErrorString(code, &desc)
	return &Error{Func: fn, Code: code, Name: cstring(name), Desc: cstring(desc)}
}

// checkBLAS turns a cuBLAS status into an *Error.
func (a *api) checkBLAS(fn string, code int32) error {
	if code == 0 {
		return nil
	}
	s := cstring(a.cublasGetStatusString(code))
	return &Error{Func: fn, Code: code, Name: s, Desc: "cuBLAS status " + s}
}

// checkNVRTC turns an NVRTC status into an *Error.
func (a *api) checkNVRTC(fn string, code int32) error {
	if code == 0 {
		return nil
	}
	s := cstring(a.nvrtcGetErrorString(code))
	return &Error{Func: fn, Code: code, Name: s, Desc: "NVRTC status " + s}
}
