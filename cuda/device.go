package cuda

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
)

// Options choose the device and where compiled kernels are cached.
type Options struct {
	// Ordinal is the GPU's index among those visible, after CUDA_VISIBLE_DEVICES applies.
	Ordinal int
	// CacheDir is where compiled kernels are kept. "" means $NVDP_CUDA_CACHE, or else the user
	// cache directory's nvdp/cuda.
	CacheDir string
	// Precision is the precision of the GEMMs of package dnn's layers, set by --precision:
	// [PrecisionFP32], also written "", [PrecisionTF32] or [PrecisionBF16]. BF16 takes BF16 inputs
	// with FP32 accumulation and output, through the Ex functions of cuBLAS, and needs compute
	// capability 8.0 or later.
	Precision string
	// TF32 lets cuBLAS round FP32 GEMM inputs to TF32 on tensor cores, as --precision tf32 does.
	// It is the same as Precision tf32, which it implies when Precision is "".
	TF32 bool
	// NoFMAD compiles every kernel with NVRTC's --fmad=false, [NoFMAD]: no contraction of a*b+c
	// into a fused multiply-add, as the CPU stand-in computes; NVRTC contracts by default. The twin
	// tests ask for it with NVDP_CUDA_FMAD=0, see [FMADEnv] and internal/cudaemu, so that a GPU run
	// can tell a tolerance broken by contraction from a bug.
	NoFMAD bool
}

// NoFMAD is NVRTC's option that turns off the contraction of multiply-adds into FMA instructions,
// as [Options].NoFMAD asks. The CPU stand-in never contracts and accepts it.
const NoFMAD = "--fmad=false"

// FMADEnv, set to 0, makes the devices of the tests, opened by internal/cudaemu's OpenDevice,
// compile their kernels with [NoFMAD]. Unset or 1, they keep NVRTC's default, contraction.
const FMADEnv = "NVDP_CUDA_FMAD"

// precision is the GEMM precision o asks for. Errors: an unknown one, TF32
// with another precision.
func (o Options) precision() (string, error) {
	switch p := o.Precision; p {
	case "", PrecisionFP32, PrecisionTF32, PrecisionBF16:
		if p == "" {
			p = PrecisionFP32
			if o.TF32 {
				p = PrecisionTF32
			}
		}
		if o.TF32 && p != PrecisionTF32 {
			return "", fmt.Errorf("cuda: Options: TF32 with precision %s", p)
		}
		return p, nil
	default:
		return "", fmt.Errorf("cuda: precision %q: want %s, %s or %s", p, PrecisionFP32, PrecisionTF32, PrecisionBF16)
	}
}

// CacheEnv overrides the default directory of compiled kernels.
const CacheEnv = "NVDP_CUDA_CACHE"

// Info describes an open device: the card and the libraries in use.
type Info struct {
	Name              string `json:"name"`
	Ordinal           int    `json:"ordinal"`
	ComputeCapability string `json:"compute_capability"` // e.g. "9.0"
	MemoryBytes       int64  `json:"memory_bytes"`
	Multiprocessors   int    `json:"multiprocessors"`
	DriverVersion     string `json:"driver_version"` // the CUDA version the driver supports, e.g. "13.0"
	DriverLib         string `json:"driver_lib"`
	CUBLASVersion     string `json:"cublas_version"`
	CUBLASLib         string `json:"cublas_lib"`
	NVRTCVersion      string `json:"nvrtc_version"`
	NVRTCLib          string `json:"nvrtc_lib"`
	// NVRTCBuiltins is the NVRTC builtins library loaded before NVRTC from its directory. It is ""
	// when there is none there, as for an NVRTC from the loader path, which finds the builtins
	// itself, and "PATH: dlerror" when that load failed.
	NVRTCBuiltins string `json:"nvrtc_builtins"`
	// LibChoice says which CUDA major versions of cuBLAS and NVRTC were
	// looked for and why: the CUDA version the driver supports.
	LibChoice string `json:"lib_choice"`
	TF32      bool   `json:"tf32"`      // Precision is tf32
	Precision string `json:"precision"` // of the GEMMs: fp32, tf32 or bf16
	// FMAD is whether NVRTC may contract multiply-adds in the kernels; it is false when they were
	// compiled with [NoFMAD].
	FMAD bool `json:"fmad"`
}

// Device is one open GPU: its primary CUDA context, owned by one goroutine locked to its OS thread,
// a cuBLAS handle and a cache of compiled kernels. Methods documented as running "on the device
// goroutine" must be called from a function that [Device.Do] runs.
type Device struct {
	a        *api
	dev      int32
	ctx      uintptr
	blas     uintptr
	info     Info
	arch     string // NVRTC --gpu-architecture, e.g. sm_90
	noFMAD   bool   // Options.NoFMAD: every Compile adds NoFMAD
	cacheDir string

	work   chan job
	done   chan struct{}
	mu     sync.Mutex // guards closed
	closed bool

	modMu   sync.Mutex
	modules map[string]*Module // by cache key

	launches, blasCalls, memsets, copies, uploads, downloads, syncs atomic.Int64 // Counts
}

// Counts are what a device has been asked to do since it opened: the figures of issue 38's launch
// and synchronisation budget. The Go side counts them, so the CPU stand-in counts what a GPU would
// run. The difference of two snapshots, from [Counts.Sub], is a step's.
type Counts struct {
	Launches  int64 `json:"launches"`   // kernel launches (Launch)
	BLASCalls int64 `json:"blas_calls"` // cuBLAS GEMM calls (Gemm, GemmStridedBatched, GemmBF16)
	Memsets   int64 `json:"memsets"`    // Zero (cuMemsetD32: a launch of the driver's)
	Copies    int64 `json:"copies"`     // device-to-device copies (Copy)
	// Uploads are host-to-device copies, by [Upload]. From pageable memory the driver waits for
	// the work queued before each, so each is a host-device synchronisation.
	Uploads int64 `json:"uploads"`
	// Downloads are device-to-host copies, by [Download]. Each waits for the work queued before
	// it.
	Downloads int64 `json:"downloads"`
	Syncs     int64 `json:"syncs"` // explicit synchronisations (Sync)
}

// HostWaits is the number of times the host waited for the device:
// Uploads + Downloads + Syncs.
func (c Counts) HostWaits() int64 { return c.Uploads + c.Downloads + c.Syncs }

// Sub returns c - b, field by field: the work between two snapshots.
func (c Counts) Sub(b Counts) Counts {
	return Counts{Launches: c.Launches - b.Launches, BLASCalls: c.BLASCalls - b.BLASCalls, Memsets: c.Memsets - b.Memsets,
		Copies: c.Copies - b.Copies, Uploads: c.Uploads - b.Uploads,
		Downloads: c.Downloads - b.Downloads, Syncs: c.Syncs - b.Syncs}
}

// Counts returns a snapshot of the device's counters. It may be called from any goroutine, since it
// uses atomic loads.
func (d *Device) Counts() Counts {
	return Counts{Launches: d.launches.Load(), BLASCalls: d.blasCalls.Load(), Memsets: d.memsets.Load(), Copies: d.copies.Load(), Uploads: d.uploads.Load(),
		Downloads: d.downloads.Load(), Syncs: d.syncs.Load()}
}

// CUdevice_attribute values, from cuda.h.
const (
	attrMultiprocessors = 16
	attrCCMajor         = 75
	attrCCMinor         = 76
)

// ErrNoBF16 matches the errors of [Open] with [PrecisionBF16] where BF16 GEMMs cannot run: a cuBLAS
// without cublasGemmEx and cublasGemmStridedBatchedEx, where the error names those missing, or a
// GPU older than compute capability 8.0.
var ErrNoBF16 = errors.New("cuda: precision bf16 unavailable")

// ErrNoDevice is the error of [Open] on a machine whose driver loads but shows no GPU.
var ErrNoDevice = fmt.Errorf("%w: no GPU visible", ErrNoCUDA)

// Open loads the CUDA libraries, once per process, opens GPU o.Ordinal with its primary context
// and a cuBLAS handle, and starts the goroutine that owns them.
//
// Open returns a [*LoadError], which matches [ErrNoCUDA], naming what was looked for and where;
// [ErrNoDevice]; an error for an ordinal out of range; an [*Error] of the driver or cuBLAS; or an
// error for an unknown precision. With [PrecisionBF16] it returns an error matching [ErrNoBF16]
// for a cuBLAS without cublasGemmEx and cublasGemmStridedBatchedEx, naming them, or a GPU older
// than compute capability 8.0.
func Open(o Options) (*Device, error) {
	prec, err := o.precision()
	if err != nil {
		return nil, err
	}
	a, err := loadAPI()
	if err != nil {
		return nil, err
	}
	if prec == PrecisionBF16 && a.blasBF16Err != nil {
		return nil, a.blasBF16Err
	}
	o.Precision, o.TF32 = prec, prec == PrecisionTF32
	d := &Device{a: a, work: make(chan job), done: make(chan struct{}), modules: map[string]*Module{}, noFMAD: o.NoFMAD}
	d.cacheDir = o.CacheDir
	if d.cacheDir == "" {
		d.cacheDir = os.Getenv(CacheEnv)
	}
	if d.cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		d.cacheDir = filepath.Join(base, "nvdp", "cuda")
	}
	started := make(chan error, 1)
	go d.loop(o, started)
	if err := <-started; err != nil {
		return nil, err
	}
	return d, nil
}

// loop is the device goroutine: it initialises the context on its locked
// thread, then runs the functions of Do until Close.
func (d *Device) loop(o Options, started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.init(o); err != nil {
		started <- err
		return
	}
	started <- nil
	d.serve()
}

// serve runs the functions of Do until Close, on the device goroutine (its
// thread locked, the context current). When a function ends the goroutine
// with runtime.Goexit (a test's t.Fatal or t.Skip inside Do), serve hands
// the device to a new goroutine (resume), so that Do and Close still work.
func (d *Device) serve() {
	exited := true
	defer func() {
		if exited {
			go d.resume()
		}
	}()
	for j := range d.work {
		j.run()
	}
	exited = false
	d.teardown()
	close(d.done)
}

// resume is the device goroutine again after a Goexit: a new locked
// thread, the device's context made current there, then serve. A context
// that cannot be made current fails every later Do with that error.
func (d *Device) resume() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.a.check("cuCtxSetCurrent", d.a.cuCtxSetCurrent(d.ctx)); err != nil {
		err = fmt.Errorf("cuda: the device goroutine restarted after runtime.Goexit: %w", err)
		for j := range d.work {
			j.res <- err
		}
		d.teardown()
		close(d.done)
		return
	}
	d.serve()
}

// init opens the device on the locked thread.
func (d *Device) init(o Options) error {
	a := d.a
	if err := a.check("cuInit", a.cuInit(0)); err != nil {
		if e := (*Error)(nil); errors.As(err, &e) && e.Code == 100 { // CUDA_ERROR_NO_DEVICE
			return ErrNoDevice
		}
		return err
	}
	var n, drv int32
	if err := a.check("cuDeviceGetCount", a.cuDeviceGetCount(&n)); err != nil {
		return err
	}
	if n == 0 {
		return ErrNoDevice
	}
	if o.Ordinal < 0 || o.Ordinal >= int(n) {
		return fmt.Errorf("cuda: device %d: %d visible (0..%d)", o.Ordinal, n, n-1)
	}
	if err := a.check("cuDeviceGet", a.cuDeviceGet(&d.dev, int32(o.Ordinal))); err != nil {
		return err
	}
	a.cuDriverGetVersion(&drv)
	name := make([]byte, 256)
	a.cuDeviceGetName(&name[0], int32(len(name)), d.dev)
	var major, minor, sms int32
	a.cuDeviceGetAttribute(&major, attrCCMajor, d.dev)
	a.cuDeviceGetAttribute(&minor, attrCCMinor, d.dev)
	a.cuDeviceGetAttribute(&sms, attrMultiprocessors, d.dev)
	var mem uint64
	a.cuDeviceTotalMem(&mem, d.dev)
	if o.Precision == PrecisionBF16 && major < 8 {
		return fmt.Errorf("%w: the GPU (compute capability %d.%d) has no BF16 tensor cores (8.0, Ampere, or later); use fp32", ErrNoBF16, major, minor)
	}
	if err := a.check("cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain(&d.ctx, d.dev)); err != nil {
		return err
	}
	if err := a.check("cuCtxSetCurrent", a.cuCtxSetCurrent(d.ctx)); err != nil {
		a.cuDevicePrimaryCtxRelease(d.dev)
		return err
	}
	if err := a.checkBLAS("cublasCreate_v2", a.cublasCreate(&d.blas)); err != nil {
		a.cuDevicePrimaryCtxRelease(d.dev)
		return err
	}
	mode := int32(0) // CUBLAS_DEFAULT_MATH: IEEE FP32 (bf16: the FP32 GEMMs outside dnn's layers stay IEEE)
	if o.TF32 {
		mode = 3 // CUBLAS_TF32_TENSOR_OP_MATH
	}
	if err := a.checkBLAS("cublasSetMathMode", a.cublasSetMathMode(d.blas, mode)); err != nil {
		return err
	}
	var blasV, rtcMajor, rtcMinor int32
	a.cublasGetVersion(d.blas, &blasV)
	a.nvrtcVersion(&rtcMajor, &rtcMinor)
	d.arch = fmt.Sprintf("sm_%d%d", major, minor)
	d.info = Info{
		Name: cstringBytes(name), Ordinal: o.Ordinal, ComputeCapability: fmt.Sprintf("%d.%d", major, minor),
		MemoryBytes: int64(mem), Multiprocessors: int(sms),
		DriverVersion: fmt.Sprintf("%d.%d", drv/1000, drv%1000/10), DriverLib: a.driverPath,
		CUBLASVersion: fmt.Sprintf("%d.%d.%d", blasV/10000, blasV%10000/100, blasV%100), CUBLASLib: a.blasPath,
		NVRTCVersion: fmt.Sprintf("%d.%d", rtcMajor, rtcMinor), NVRTCLib: a.nvrtcPath, NVRTCBuiltins: a.nvrtcBuiltins, LibChoice: a.libChoice, TF32: o.TF32,
		Precision: o.Precision, FMAD: !o.NoFMAD,
	}
	return nil
}

// cstringBytes is the string in b up to its first NUL.
func cstringBytes(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// teardown releases what init took, on the device goroutine.
func (d *Device) teardown() {
	for _, m := range d.modules {
		d.a.cuModuleUnload(m.mod)
	}
	d.a.cublasDestroy(d.blas)
	d.a.cuDevicePrimaryCtxRelease(d.dev)
}

// ErrClosed is the error of [Device.Do] on a closed device.
var ErrClosed = errors.New("cuda: device closed")

// ErrGoexit is the error of [Device.Do] when its function ended the device goroutine with
// runtime.Goexit instead of returning, as a test's t.Fatal or t.Skip inside Do does. Report with
// t.Error instead, or return the error and fail outside Do. The device goes on, on a new goroutine.
var ErrGoexit = errors.New("cuda: the function run by Do called runtime.Goexit (t.Fatal or t.Skip on the device goroutine?)")

// job is a function of Do and where its result goes.
type job struct {
	fn  func() error
	res chan<- error
}

// run runs j.fn on the device goroutine and sends its result: its error, a
// panic as an error, ErrGoexit when fn ends the goroutine.
func (j job) run() {
	returned := false
	defer func() {
		if returned {
			return
		}
		switch r := recover().(type) {
		case nil:
			j.res <- ErrGoexit
		case error:
			j.res <- fmt.Errorf("cuda: on the device goroutine: %w", r)
		default:
			j.res <- fmt.Errorf("cuda: panic on the device goroutine: %v", r)
		}
	}()
	err := j.fn()
	returned = true
	j.res <- err
}

// Do runs fn on the device goroutine, the thread whose current context is the device's, and
// returns its error. Calls from several goroutines run one at a time. fn must not call Do.
//
// A panic in fn is returned as an error, so that the device goroutine survives it; the error wraps
// the panic's value when that is an error, since device layers panic with the [*Error] of a failed
// launch. fn calling runtime.Goexit, as t.Fatal does, gives [ErrGoexit], and the device goes on.
//
// Do panics on a Device that [Open] did not return (its zero value): nothing
// would ever run fn, and the call would block for ever.
func (d *Device) Do(fn func() error) error {
	if d.work == nil {
		panic("cuda: Device.Do on a device not opened (use cuda.Open)")
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	res := make(chan error, 1)
	d.work <- job{fn: fn, res: res}
	d.mu.Unlock()
	return <-res
}

// Info returns a description of the device and the libraries in use.
func (d *Device) Info() Info { return d.info }

// Backend names what computes on the device, for reports beside the CPU engine's nn.Backend:
// "cuda (NAME, fp32)", "cuda (NAME, tf32)" or "cuda (NAME, bf16)".
func (d *Device) Backend() string {
	return "cuda (" + d.info.Name + ", " + d.info.Precision + ")"
}

// Precision returns the precision of the GEMMs of package dnn's layers, as [Options].Precision
// chose it: [PrecisionFP32], [PrecisionTF32] or [PrecisionBF16].
func (d *Device) Precision() string { return d.info.Precision }

// Sync waits until the device has finished every operation queued, with cuCtxSynchronize. It runs
// on the device goroutine.
func (d *Device) Sync() error {
	d.syncs.Add(1)
	return d.a.check("cuCtxSynchronize", d.a.cuCtxSynchronize())
}

// MemInfo returns the device's free and total memory in bytes. It runs on the device goroutine.
func (d *Device) MemInfo() (free, total int64, err error) {
	var f, t uint64
	err = d.a.check("cuMemGetInfo_v2", d.a.cuMemGetInfo(&f, &t))
	return int64(f), int64(t), err
}

// CloseLogged closes d (nil: nothing) and logs an error of Close as a
// warning, for callers whose results are written by the time they close
// the device.
func CloseLogged(d *Device) {
	if d == nil {
		return
	}
	if err := d.Close(); err != nil {
		slog.Warn("closing the GPU", "err", err)
	}
}

// Close finishes the functions queued, unloads the modules, destroys the
// cuBLAS handle and releases the context. Buffers must be freed before.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.work)
	d.mu.Unlock()
	<-d.done
	return nil
}
