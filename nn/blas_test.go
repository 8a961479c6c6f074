package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemmTransposes checks all four transpose combinations against a naive product.
func TestGemmTransposes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, n, k := 5, 7, 3
	A := make([]float32, m*k)
	B := make([]float32, k*n)
	for i := range A {
		A[i] = float32(rng.NormFloat64())
	}
	for i := range B {
		B[i] = float32(rng.NormFloat64())
	}
	want := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			for p := 0; p < k; p++ {
				want[i*n+j] += float64(A[i*k+p]) * float64(B[p*n+j])
			}
		}
	}
	At := make([]float32, k*m)
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			At[p*m+i] = A[i*k+p]
		}
	}
	Bt := make([]float32, n*k)
	for p := 0; p < k; p++ {
		for j := 0; j < n; j++ {
			Bt[j*k+p] = B[p*n+j]
		}
	}
	for _, tc := range []struct {
		name   string
		ta, tb bool
		a, b   []float32
	}{{"NN", false, false, A, B}, {"TN", true, false, At, B}, {"NT", false, true, A, Bt}, {"TT", true, true, At, Bt}} {
		c := make([]float32, m*n)
		for i := range c {
			c[i] = 1
		}
		Gemm(tc.ta, tc.tb, m, n, k, 2, tc.a, tc.b, 0.5, c)
		for i := range c {
			if w := 2*want[i] + 0.5; math.Abs(float64(c[i])-w) > 1e-5 {
				t.Fatalf("%s: c[%d] = %v, want %v", tc.name, i, c[i], w)
			}
		}
	}
}

func BenchmarkGemm512(b *testing.B) {
	n := 512
	A, B, C := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for i := range A {
		A[i], B[i] = 0.001*float32(i%7), 0.002*float32(i%5)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Gemm(false, false, n, n, n, 1, A, B, 0, C)
	}
	b.ReportMetric(2*float64(n*n*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
