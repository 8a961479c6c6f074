package cuda_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
	"github.com/nvdp-project/nvdp/nn"
)

// TestDeviceInfoAndMemory: the device describes itself and its libraries;
// memory round-trips, copies and zeroes; a copy out of an allocation's
// bounds is the driver's error, not a silent write.
func TestDeviceInfoAndMemory(t *testing.T) {
	d := cudaemu.OpenDevice(t)
	info := d.Info()
	if info.Name == "" || info.ComputeCapability == "" || info.MemoryBytes <= 0 || info.DriverLib == "" || info.CUBLASLib == "" || info.NVRTCLib == "" ||
		!strings.Contains(info.LibChoice, "cuDriverGetVersion") {
		t.Fatalf("info %+v", info)
	}
	if b, err := json.Marshal(info); err == nil {
		t.Logf("device %s", b) // scripts/gpu-check.sh smoke: what was found, and why
	}
	err := d.Do(func() error {
		src := []float32{1, -2.5, 3e-8, float32(math.Inf(1)), 7}
		b, err := d.Alloc(4 * len(src))
		if err != nil {
			return err
		}
		defer d.Free(b)
		c, err := d.Alloc(4 * len(src))
		if err != nil {
			return err
		}
		defer d.Free(c)
		if err := cuda.Upload(d, b, src); err != nil {
			return err
		}
		if err := d.Copy(c, b, b.Bytes); err != nil {
			return err
		}
		got := make([]float32, len(src))
		if err := cuda.Download(d, got, c); err != nil {
			return err
		}
		for i := range src {
			if got[i] != src[i] {
				t.Errorf("round trip [%d] = %v, want %v", i, got[i], src[i])
			}
		}
		if err := d.Zero(c.Offset(8), 8); err != nil {
			return err
		}
		cuda.Download(d, got, c)
		if got[0] != 1 || got[2] != 0 || got[3] != 0 || got[4] != 7 {
			t.Errorf("after zeroing floats 2-3: %v", got)
		}
		if cudaemu.Emulated() {
			var e *cuda.Error
			if err := d.Copy(cuda.Buffer{Ptr: c.Ptr + 8, Bytes: 16}, b, 16); !errors.As(err, &e) || e.Name != "CUDA_ERROR_INVALID_VALUE" {
				t.Errorf("copy past the end of an allocation: %v", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testKernels exercise the launch conventions: scalars of every type, a
// block reduction through static shared memory and __syncthreads, dynamic
// shared memory, a double accumulator, atomicAdd.
const testKernels = `
KERNEL void axpby(float *y, const float *x, float a, double b, int n, long long off) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + (float)(b * y[i]) + (float)off;
}

KERNEL void block_sum(float *out, const float *x, int n) {
	__shared__ float part[256];
	int t = threadIdx.x;
	float s = 0;
	for (int i = blockIdx.x * blockDim.x + t; i < n; i += blockDim.x * gridDim.x) s += x[i];
	part[t] = s;
	__syncthreads();
	for (int w = blockDim.x / 2; w > 0; w /= 2) {
		if (t < w) part[t] += part[t + w];
		__syncthreads();
	}
	if (t == 0) atomicAdd(out, part[0]);
}

KERNEL void reverse_dyn(float *y, const float *x, int n) {
	SHARED_DYN(float, buf);
	int t = threadIdx.x;
	if (t < n) buf[t] = x[t];
	__syncthreads();
	if (t < n) y[t] = buf[n - 1 - t];
}
`

// TestCompileAndLaunch: kernels compile, cache and run with the launch's
// arguments in order; a compilation error returns the compiler's log.
func TestCompileAndLaunch(t *testing.T) {
	d := cudaemu.OpenDevice(t)
	err := d.Do(func() error {
		m, err := d.Compile("test", testKernels)
		if err != nil {
			return err
		}
		if m2, err := d.Compile("test", testKernels); err != nil || m2 != m {
			t.Errorf("second compile: %v, same module %v", err, m2 == m)
		}
		const n = 1000
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i] = float32(i)*0.5, float32(n-i)
		}
		bx, _ := d.Alloc(4 * n)
		by, _ := d.Alloc(4 * n)
		bs, _ := d.Alloc(4)
		defer d.Free(bx)
		defer d.Free(by)
		defer d.Free(bs)
		cuda.Upload(d, bx, x)
		cuda.Upload(d, by, y)
		k, err := m.Kernel(d, "axpby")
		if err != nil {
			return err
		}
		if err := d.Launch(k, cuda.Blocks(n, 128), cuda.Threads(128), 0, by, bx, float32(2), float64(0.25), n, int64(3)); err != nil {
			return err
		}
		got := make([]float32, n)
		cuda.Download(d, got, by)
		for i := range got {
			if want := 2*x[i] + 0.25*y[i] + 3; got[i] != want {
				return fmt.Errorf("axpby[%d] = %v, want %v", i, got[i], want)
			}
		}
		ks, err := m.Kernel(d, "block_sum")
		if err != nil {
			return err
		}
		d.Zero(bs, 4)
		if err := d.Launch(ks, cuda.Dim3{X: 3, Y: 1, Z: 1}, cuda.Threads(256), 0, bs, bx, n); err != nil {
			return err
		}
		sum := make([]float32, 1)
		cuda.Download(d, sum, bs)
		if want := float32(0.5 * n * (n - 1) / 2); sum[0] != want {
			t.Errorf("block_sum = %v, want %v", sum[0], want)
		}
		kr, err := m.Kernel(d, "reverse_dyn")
		if err != nil {
			return err
		}
		if err := d.Launch(kr, cuda.Dim3{X: 1, Y: 1, Z: 1}, cuda.Threads(64), 64*4, by, bx, 64); err != nil {
			return err
		}
		cuda.Download(d, got[:64], by)
		for i := range 64 {
			if got[i] != x[63-i] {
				return fmt.Errorf("reverse_dyn[%d] = %v, want %v", i, got[i], x[63-i])
			}
		}
		if _, err := m.Kernel(d, "no_such_kernel"); err == nil || !strings.Contains(err.Error(), "no_such_kernel") {
			t.Errorf("missing kernel: %v", err)
		}
		_, err = d.Compile("broken", "KERNEL void broken(float *y) { y[0] = undeclared_thing; }")
		if err == nil || !strings.Contains(err.Error(), "compiling broken") || !strings.Contains(err.Error(), "undeclared_thing") {
			t.Errorf("compilation error: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKernelCache: a second device (a second process, as far as the cache
// knows) loads a compiled module from the cache directory without
// compiling it again.
func TestKernelCache(t *testing.T) {
	if !cudaemu.Emulated() {
		t.Skip("the stand-in's compiler is what this test removes")
	}
	dir := t.TempDir()
	open := func() *cuda.Device {
		cudaemu.OpenDevice(t).Close() // builds the stand-in and points the loader at it
		d, err := cuda.Open(cuda.Options{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	d := open()
	if err := d.Do(func() error { _, err := d.Compile("test", testKernels); return err }); err != nil {
		t.Fatal(err)
	}
	cached, _ := filepath.Glob(filepath.Join(dir, "*.cubin"))
	if len(cached) != 1 {
		t.Fatalf("cache holds %v", cached)
	}
	t.Setenv("NVDP_EMU_CC", "/nonexistent/cc") // a compilation now fails
	d2 := open()
	if err := d2.Do(func() error { _, err := d2.Compile("test", testKernels); return err }); err != nil {
		t.Fatalf("a cached module compiled again: %v", err)
	}
	if err := d2.Do(func() error { _, err := d2.Compile("test", testKernels+" "); return err }); err == nil {
		t.Fatal("a changed source was not compiled again")
	}
}

// TestGemm: the device's row-major GEMM (cuBLAS's column-major call with
// its operands swapped) equals nn.Gemm for every transpose, and the
// strided-batched form equals nn.GemmStrided per matrix.
func TestGemm(t *testing.T) {
	d := cudaemu.OpenDevice(t)
	rng := rand.New(rand.NewPCG(1, 2))
	randn := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	const m, n, k = 7, 5, 11
	err := d.Do(func() error {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				a, b, c := randn(m*k), randn(k*n), randn(m*n)
				want := append([]float32(nil), c...)
				nn.Gemm(ta, tb, m, n, k, 0.7, a, b, 0.3, want)
				da, _ := d.Alloc(4 * len(a))
				db, _ := d.Alloc(4 * len(b))
				dc, _ := d.Alloc(4 * len(c))
				cuda.Upload(d, da, a)
				cuda.Upload(d, db, b)
				cuda.Upload(d, dc, c)
				if err := d.Gemm(ta, tb, m, n, k, 0.7, da, db, 0.3, dc); err != nil {
					return err
				}
				got := make([]float32, len(c))
				cuda.Download(d, got, dc)
				for i := range got {
					if math.Abs(float64(got[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
						return fmt.Errorf("gemm(%v, %v)[%d] = %v, want %v", ta, tb, i, got[i], want[i])
					}
				}
				d.Free(da)
				d.Free(db)
				d.Free(dc)
			}
		}
		// Batched: 3 heads of width 4 in [T=6, 3*4] rows, scores = Q K^T per head.
		const T, H, dh = 6, 3, 4
		q, kk := randn(T*H*dh), randn(T*H*dh)
		want := make([]float32, H*T*T)
		for h := range H {
			nn.GemmStrided(false, true, T, T, dh, 1, q[h*dh:], H*dh, kk[h*dh:], H*dh, 0, want[h*T*T:], T)
		}
		dq, _ := d.Alloc(4 * len(q))
		dk, _ := d.Alloc(4 * len(kk))
		ds, _ := d.Alloc(4 * len(want))
		defer d.Free(dq)
		defer d.Free(dk)
		defer d.Free(ds)
		cuda.Upload(d, dq, q)
		cuda.Upload(d, dk, kk)
		if err := d.GemmStridedBatched(false, true, T, T, dh, 1, dq, H*dh, dh, dk, H*dh, dh, 0, ds, T, T*T, H); err != nil {
			return err
		}
		got := make([]float32, len(want))
		cuda.Download(d, got, ds)
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
				return fmt.Errorf("batched [%d] = %v, want %v", i, got[i], want[i])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDoSurvivesPanic: a function run on the device goroutine that panics
// (with a value or an error) or ends the goroutine (runtime.Goexit, what
// t.Fatal inside Do does) is an error of Do, and the device keeps working
// (memory included: the context is current on the goroutine that takes
// over); Do after Close is ErrClosed.
func TestDoSurvivesPanic(t *testing.T) {
	d := cudaemu.OpenDevice(t)
	sentinel := errors.New("sentinel")
	for _, tc := range []struct {
		name  string
		fn    func() error
		check func(error) bool
	}{
		{"panic value", func() error { panic("boom") }, func(err error) bool { return err != nil && strings.Contains(err.Error(), "boom") }},
		{"panic error", func() error { panic(sentinel) }, func(err error) bool { return errors.Is(err, sentinel) }},
		{"Goexit", func() error { runtime.Goexit(); return nil }, func(err error) bool { return errors.Is(err, cuda.ErrGoexit) }},
		{"Goexit again", func() error { runtime.Goexit(); return nil }, func(err error) bool { return errors.Is(err, cuda.ErrGoexit) }},
		{"returned error", func() error { return sentinel }, func(err error) bool { return err == sentinel }},
	} {
		if err := d.Do(tc.fn); !tc.check(err) {
			t.Errorf("%s: error %v", tc.name, err)
		}
		err := d.Do(func() error {
			b, err := d.Alloc(16)
			if err != nil {
				return err
			}
			defer d.Free(b)
			got := make([]float32, 4)
			if err := cuda.Upload(d, b, []float32{1, 2, 3, 4}); err != nil {
				return err
			}
			if err := cuda.Download(d, got, b); err != nil {
				return err
			}
			if got[3] != 4 {
				return fmt.Errorf("round trip %v", got)
			}
			return nil
		})
		if err != nil {
			t.Errorf("after %s: %v", tc.name, err)
		}
	}
	d.Close()
	if err := d.Do(func() error { return nil }); !errors.Is(err, cuda.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestCounts: each operation of the device counts once in its counter
// (a table of operations and the counts each adds), and HostWaits sums
// the copies to and from the host and the explicit synchronisations.
func TestCounts(t *testing.T) {
	d := cudaemu.OpenDevice(t)
	err := d.Do(func() error {
		m, err := d.Compile("test", testKernels)
		if err != nil {
			return err
		}
		k, err := m.Kernel(d, "axpby")
		if err != nil {
			return err
		}
		a, err := d.Alloc(4 * 16)
		if err != nil {
			return err
		}
		defer d.Free(a)
		b, err := d.Alloc(4 * 16)
		if err != nil {
			return err
		}
		defer d.Free(b)
		host := make([]float32, 16)
		for _, c := range []struct {
			name string
			op   func() error
			want cuda.Counts
		}{
			{"launch", func() error {
				return d.Launch(k, cuda.Blocks(16, 8), cuda.Threads(8), 0, b, a, float32(1), 1.0, 16, int64(0))
			}, cuda.Counts{Launches: 1}},
			{"gemm", func() error { return d.Gemm(false, false, 4, 4, 4, 1, a, a, 0, b) }, cuda.Counts{BLASCalls: 1}},
			{"strided gemm", func() error { return d.GemmStridedBatched(false, false, 2, 2, 2, 1, a, 2, 4, a, 2, 4, 0, b, 2, 4, 4) }, cuda.Counts{BLASCalls: 1}},
			{"empty gemm", func() error { return d.Gemm(false, false, 0, 4, 4, 1, a, a, 0, b) }, cuda.Counts{}},
			{"zero", func() error { return d.Zero(a, 64) }, cuda.Counts{Memsets: 1}},
			{"copy", func() error { return d.Copy(b, a, 64) }, cuda.Counts{Copies: 1}},
			{"upload", func() error { return cuda.Upload(d, a, host) }, cuda.Counts{Uploads: 1}},
			{"download", func() error { return cuda.Download(d, host, a) }, cuda.Counts{Downloads: 1}},
			{"sync", d.Sync, cuda.Counts{Syncs: 1}},
		} {
			before := d.Counts()
			if err := c.op(); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if got := d.Counts().Sub(before); got != c.want {
				t.Errorf("%s counted %+v, want %+v", c.name, got, c.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if w := (cuda.Counts{Launches: 5, Uploads: 2, Downloads: 3, Syncs: 7}).HostWaits(); w != 12 {
		t.Errorf("HostWaits = %d, want 12", w)
	}
}

// TestNoFMAD: a device opened with NVDP_CUDA_FMAD=0 (cuda.Options.NoFMAD)
// compiles its kernels with --fmad=false: a*b + c rounds the product
// first. The inputs make the two differ: a = b = 1 + 2^-12, c = -(1 +
// 2^-11), a*b = 1 + 2^-11 + 2^-24 exactly, so a fused multiply-add gives
// 2^-24 and the rounded product (a tie, to even: 1 + 2^-11) gives 0. The
// stand-in never contracts; a GPU does by default (NVRTC's --fmad=true),
// which the real run checks.
func TestNoFMAD(t *testing.T) {
	const src = `KERNEL void muladd(float *y, const float *a, const float *b, const float *c, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a[i] * b[i] + c[i];
}`
	a := float32(1 + 0x1p-12)
	c := -float32(1 + 0x1p-11)
	unfused := float32(a*a) + c
	if unfused != 0 {
		t.Fatalf("the host's unfused a*b+c = %g, want 0", unfused)
	}
	for _, env := range []string{"0", "1"} {
		t.Setenv(cuda.FMADEnv, env)
		d := cudaemu.OpenDevice(t)
		if d.Info().FMAD != (env == "1") {
			t.Errorf("%s=%s: Info.FMAD %v", cuda.FMADEnv, env, d.Info().FMAD)
		}
		want := unfused
		if env == "1" && !cudaemu.Emulated() {
			want = 0x1p-24 // NVRTC contracts by default
		}
		var got []float32
		err := d.Do(func() error {
			m, err := d.Compile("muladd", src)
			if err != nil {
				return err
			}
			k, err := m.Kernel(d, "muladd")
			if err != nil {
				return err
			}
			bufs := make([]cuda.Buffer, 4)
			for i := range bufs {
				if bufs[i], err = d.Alloc(4); err != nil {
					return err
				}
				defer d.Free(bufs[i])
			}
			for i, v := range []float32{a, a, c} {
				if err := cuda.Upload(d, bufs[i+1], []float32{v}); err != nil {
					return err
				}
			}
			if err := d.Launch(k, cuda.Blocks(1, 32), cuda.Threads(32), 0, bufs[0], bufs[1], bufs[2], bufs[3], 1); err != nil {
				return err
			}
			got = make([]float32, 1)
			return cuda.Download(d, got, bufs[0])
		})
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != want {
			t.Errorf("%s=%s: a*b+c = %g, want %g", cuda.FMADEnv, env, got[0], want)
		}
	}
}
