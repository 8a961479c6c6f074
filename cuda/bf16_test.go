package cuda_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
)

// bf16Value is the float32 of the bfloat16 bits h.
func bf16Value(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// TestGemmBF16: a bf16 device says so (Info, Backend, Precision); its BF16
// GEMM (cublasGemmEx, cublasGemmStridedBatchedEx on bfloat16 operands, FP32
// output) equals the float64 product of the same bfloat16 values within
// FP32 accumulation (1e-5 relative), for every transpose and for the
// strided-batched form over heads read in place; an fp32 device says fp32.
func TestGemmBF16(t *testing.T) {
	if d := cudaemu.OpenDevice(t); d.Precision() != cuda.PrecisionFP32 || !strings.HasSuffix(d.Backend(), ", fp32)") || d.Info().Precision != cuda.PrecisionFP32 {
		t.Errorf("fp32 device: precision %q, backend %q, info %q", d.Precision(), d.Backend(), d.Info().Precision)
	}
	d := cudaemu.OpenDevicePrecision(t, cuda.PrecisionBF16)
	if in := d.Info(); d.Precision() != cuda.PrecisionBF16 || in.Precision != cuda.PrecisionBF16 || in.TF32 || !strings.HasSuffix(d.Backend(), ", bf16)") {
		t.Errorf("bf16 device: precision %q, backend %q, info %+v", d.Precision(), d.Backend(), in)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	randbf := func(n int) []uint16 { // bfloat16 values of N(0,1) draws (truncated: any bfloat16 will do)
		v := make([]uint16, n)
		for i := range v {
			v[i] = uint16(math.Float32bits(float32(rng.NormFloat64())) >> 16)
		}
		return v
	}
	// ref is alpha op(A) op(B) + beta C, row-major, in float64.
	ref := func(ta, tb bool, m, n, k int, alpha float64, a []uint16, lda int, b []uint16, ldb int, beta float64, c []float32, ldc int) []float64 {
		out := make([]float64, len(c))
		for i := range c {
			out[i] = float64(c[i])
		}
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s float64
				for l := 0; l < k; l++ {
					ai, bi := i*lda+l, l*ldb+j
					if ta {
						ai = l*lda + i
					}
					if tb {
						bi = j*ldb + l
					}
					s += float64(bf16Value(a[ai])) * float64(bf16Value(b[bi]))
				}
				out[i*ldc+j] = alpha*s + beta*out[i*ldc+j]
			}
		}
		return out
	}
	check := func(what string, got []float32, want []float64) {
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > 1e-5*(1+math.Abs(want[i])) {
				t.Errorf("%s [%d] = %v, want %v", what, i, got[i], want[i])
				return
			}
		}
	}
	err := d.Do(func() error {
		alloc := func(bytes int) cuda.Buffer {
			b, err := d.Alloc(bytes)
			if err != nil {
				panic(err)
			}
			return b
		}
		const m, n, k = 7, 5, 11
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				a, b := randbf(m*k), randbf(k*n)
				c := make([]float32, m*n)
				for i := range c {
					c[i] = float32(rng.NormFloat64())
				}
				lda, ldb := k, n
				if ta {
					lda = m
				}
				if tb {
					ldb = k
				}
				want := ref(ta, tb, m, n, k, 0.7, a, lda, b, ldb, 0.3, c, n)
				da, db, dc := alloc(2*len(a)), alloc(2*len(b)), alloc(4*len(c))
				cuda.Upload(d, da, a)
				cuda.Upload(d, db, b)
				cuda.Upload(d, dc, c)
				if err := d.GemmBF16(ta, tb, m, n, k, 0.7, da, lda, 0, db, ldb, 0, 0.3, dc, n, 0, 1); err != nil {
					return err
				}
				got := make([]float32, len(c))
				cuda.Download(d, got, dc)
				check("gemm", got, want)
				d.Free(da)
				d.Free(db)
				d.Free(dc)
			}
		}
		// Batched: 3 heads of width 4 in [T=6, 3*4] rows, scores = Q K^T per head.
		const T, H, dh = 6, 3, 4
		q, kk := randbf(T*H*dh), randbf(T*H*dh)
		want := make([]float64, H*T*T)
		for h := range H {
			copy(want[h*T*T:], ref(false, true, T, T, dh, 1, q[h*dh:], H*dh, kk[h*dh:], H*dh, 0, make([]float32, T*T), T))
		}
		dq, dk, ds := alloc(2*len(q)), alloc(2*len(kk)), alloc(4*len(want))
		defer d.Free(dq)
		defer d.Free(dk)
		defer d.Free(ds)
		cuda.Upload(d, dq, q)
		cuda.Upload(d, dk, kk)
		if err := d.GemmBF16(false, true, T, T, dh, 1, dq, H*dh, dh, dk, H*dh, dh, 0, ds, T, T*T, H); err != nil {
			return err
		}
		got := make([]float32, len(want))
		cuda.Download(d, got, ds)
		check("batched", got, want)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBF16Options: an unknown precision, and TF32 with another precision,
// are errors of Open; a cuBLAS without the BF16 GEMMs is an error naming
// both functions (here the stand-in's driver library, which has neither;
// Open wraps it in ErrNoBF16); the stand-in's cuBLAS has them.
func TestBF16Options(t *testing.T) {
	cudaemu.OpenDevice(t) // builds the stand-in and points the loader at it
	for _, o := range []cuda.Options{{Precision: "fp16"}, {Precision: cuda.PrecisionBF16, TF32: true}} {
		if d, err := cuda.Open(o); err == nil {
			d.Close()
			t.Errorf("Open(%+v): no error", o)
		}
	}
	dir, err := cudaemu.Build()
	if err != nil {
		t.Skip(err)
	}
	err = cuda.BindBF16From(filepath.Join(dir, "libcuda.so.1"))
	if err == nil || !strings.Contains(err.Error(), "lacks cublasGemmEx, cublasGemmStridedBatchedEx") {
		t.Errorf("a library without the BF16 GEMMs: %v", err)
	}
	if err := cuda.BindBF16From(filepath.Join(dir, "libcublas.so.13")); err != nil {
		t.Errorf("the stand-in's cuBLAS: %v", err)
	}
}
