package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
)

// Module is a compiled kernel source loaded into the device.
type Module struct {
	name string
	mod  uintptr
	fns  map[string]*Kernel
}

// Kernel is one __global__ function of a Module.
type Kernel struct {
	Name string
	fn   uintptr
}

// cacheVersion changes when the cache's layout or the prelude's meaning
// does, so that old entries are never read.
const cacheVersion = "nvdp-cuda-cache-1"

// Compile compiles the CUDA C source with NVRTC for the device's architecture, loads it, and
// returns the module. It runs on the device goroutine. name names the source in errors and the
// cache. The Prelude comes first, and the extra NVRTC options, such as "-DBLOCK=256", follow the
// backend's own.
//
// The cubin is cached in the cache directory under the SHA-256 of the prelude, source, options,
// architecture and NVRTC version, so a second process loads it without compiling. The device keeps
// the module until Close.
//
// Compile returns the compiler's log on a compilation error, and the driver's errors.
func (d *Device) Compile(name, source string, options ...string) (*Module, error) {
	opts := []string{"--gpu-architecture=" + d.arch, "--std=c++17"}
	if d.noFMAD {
		opts = append(opts, NoFMAD)
	}
	opts = append(opts, options...)
	h := sha256.New()
	for _, s := range append([]string{cacheVersion, Prelude, source, d.arch, d.info.NVRTCVersion}, opts...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	key := hex.EncodeToString(h.Sum(nil))
	d.modMu.Lock()
	defer d.modMu.Unlock()
	if m, ok := d.modules[key]; ok {
		return m, nil
	}
	path := filepath.Join(d.cacheDir, key+".cubin")
	cubin, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if cubin, err = d.nvrtc(name, Prelude+source, opts); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(d.cacheDir, 0o755); err == nil { // a cache that cannot be written only costs a compilation
			atomicfile.WriteBytes(path, cubin)
		}
	} else if err != nil {
		return nil, fmt.Errorf("cuda: kernel cache %s: %w", path, err)
	}
	cubin = append(cubin, 0) // a NUL after the image: the driver may read it as text
	m := &Module{name: name, fns: map[string]*Kernel{}}
	err = d.a.check("cuModuleLoadData", d.a.cuModuleLoadData(&m.mod, unsafe.Pointer(&cubin[0])))
	runtime.KeepAlive(cubin)
	if err != nil {
		return nil, fmt.Errorf("module %s (%s): %w", name, path, err)
	}
	d.modules[key] = m
	return m, nil
}

// nvrtcBuiltinOperationFailure is NVRTC_ERROR_BUILTIN_OPERATION_FAILURE
// (nvrtc.h): among its causes, libnvrtc-builtins.so.MAJOR.MINOR not found.
const nvrtcBuiltinOperationFailure = 7

// builtinsHint is what a failed compilation's error adds about NVRTC's
// builtins library when code is NVRTC_ERROR_BUILTIN_OPERATION_FAILURE
// (else ""): which one was preloaded beside nvrtc, if any.
func builtinsHint(code int32, nvrtc, builtins string) string {
	if code != nvrtcBuiltinOperationFailure {
		return ""
	}
	what := "preloaded " + builtins
	if builtins == "" {
		what = "none preloaded: " + nvrtc + " came from the loader path, or has no libnvrtc-builtins.so.* beside it"
	}
	return fmt.Sprintf(" (NVRTC opens libnvrtc-builtins.so.MAJOR.MINOR through the system loader; %s; put the builtins' directory in LD_LIBRARY_PATH)", what)
}

// nvrtc compiles src with options and returns the cubin.
func (d *Device) nvrtc(name, src string, options []string) ([]byte, error) {
	a := d.a
	var prog uintptr
	if err := a.checkNVRTC("nvrtcCreateProgram", a.nvrtcCreateProgram(&prog, src, name, 0, nil, nil)); err != nil {
		return nil, err
	}
	defer a.nvrtcDestroyProgram(&prog)
	cstrs := make([][]byte, len(options))
	ptrs := make([]uintptr, len(options))
	for i, o := range options {
		cstrs[i] = append([]byte(o), 0)
		ptrs[i] = uintptr(unsafe.Pointer(&cstrs[i][0]))
	}
	var optp unsafe.Pointer
	if len(ptrs) > 0 {
		optp = unsafe.Pointer(&ptrs[0])
	}
	code := a.nvrtcCompileProgram(prog, int32(len(options)), optp)
	runtime.KeepAlive(cstrs)
	runtime.KeepAlive(ptrs)
	if code != 0 {
		var n uint64
		a.nvrtcGetProgramLogSize(prog, &n)
		log := make([]byte, n+1)
		a.nvrtcGetProgramLog(prog, &log[0])
		return nil, fmt.Errorf("cuda: compiling %s with %s: %w%s\n%s", name, strings.Join(options, " "), a.checkNVRTC("nvrtcCompileProgram", code),
			builtinsHint(code, a.nvrtcPath, a.nvrtcBuiltins), cstringBytes(log))
	}
	var n uint64
	if err := a.checkNVRTC("nvrtcGetCUBINSize", a.nvrtcGetCUBINSize(prog, &n)); err != nil {
		return nil, err
	}
	cubin := make([]byte, n)
	if n > 0 {
		if err := a.checkNVRTC("nvrtcGetCUBIN", a.nvrtcGetCUBIN(prog, &cubin[0])); err != nil {
			return nil, err
		}
	}
	return cubin, nil
}

// Kernel returns the module's kernel name, a KERNEL function of its source. It runs on the device
// goroutine.
func (m *Module) Kernel(d *Device, name string) (*Kernel, error) {
	if k, ok := m.fns[name]; ok {
		return k, nil
	}
	k := &Kernel{Name: name}
	if err := d.a.check("cuModuleGetFunction", d.a.cuModuleGetFunction(&k.fn, m.mod, name)); err != nil {
		return nil, fmt.Errorf("module %s: kernel %s: %w", m.name, name, err)
	}
	m.fns[name] = k
	return k, nil
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// Blocks returns the 1-D grid of blocks of threads threads that covers n items.
func Blocks(n, threads int) Dim3 { return Dim3{X: max(1, (n+threads-1)/threads), Y: 1, Z: 1} }

// Threads returns a 1-D block of n threads.
func Threads(n int) Dim3 { return Dim3{X: n, Y: 1, Z: 1} }

// maxDynamicShared is the dynamic shared memory a launch may use without
// opting in (48 KiB on every architecture).
const maxDynamicShared = 48 << 10

// Launch runs k on grid x block with shared bytes of dynamic shared memory. It runs on the device
// goroutine and, as every kernel, asynchronously.
//
// Each argument is passed as the kernel's parameter of the same position: a [Buffer] as its device
// pointer, an int as a C int, which it must fit, and int32, uint32, int64, uint64, float32 and
// float64 as themselves. A wrong type is a programmer error and panics.
func (d *Device) Launch(k *Kernel, grid, block Dim3, shared int, args ...any) error {
	slots := make([]uint64, len(args))
	ptrs := make([]uintptr, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case Buffer:
			slots[i] = uint64(v.Ptr)
		case int:
			if v < math.MinInt32 || v > math.MaxInt32 {
				panic(fmt.Sprintf("cuda: kernel %s argument %d: int %d does not fit a C int", k.Name, i, v))
			}
			*(*int32)(unsafe.Pointer(&slots[i])) = int32(v)
		case int32:
			*(*int32)(unsafe.Pointer(&slots[i])) = v
		case uint32:
			*(*uint32)(unsafe.Pointer(&slots[i])) = v
		case int64:
			slots[i] = uint64(v)
		case uint64:
			slots[i] = v
		case float32:
			*(*float32)(unsafe.Pointer(&slots[i])) = v
		case float64:
			*(*float64)(unsafe.Pointer(&slots[i])) = v
		default:
			panic(fmt.Sprintf("cuda: kernel %s argument %d: unsupported type %T", k.Name, i, a))
		}
		ptrs[i] = uintptr(unsafe.Pointer(&slots[i]))
	}
	for _, v := range []int{grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z} {
		if v < 1 {
			panic(fmt.Sprintf("cuda: kernel %s launched on grid %v, block %v", k.Name, grid, block))
		}
	}
	if shared > maxDynamicShared {
		if err := d.a.check("cuFuncSetAttribute", d.a.cuFuncSetAttribute(k.fn, 8, int32(shared))); err != nil { // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
			return fmt.Errorf("kernel %s: %d bytes of shared memory: %w", k.Name, shared, err)
		}
	}
	var pp unsafe.Pointer
	if len(ptrs) > 0 {
		pp = unsafe.Pointer(&ptrs[0])
	}
	d.launches.Add(1)
	err := d.a.check("cuLaunchKernel", d.a.cuLaunchKernel(k.fn, uint32(grid.X), uint32(grid.Y), uint32(grid.Z),
		uint32(block.X), uint32(block.Y), uint32(block.Z), uint32(shared), 0, pp, nil))
	runtime.KeepAlive(slots)
	runtime.KeepAlive(ptrs)
	if err != nil {
		return fmt.Errorf("kernel %s on grid %v, block %v: %w", k.Name, grid, block, err)
	}
	return nil
}
