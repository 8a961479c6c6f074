package nn

import (
	"math"

	"github.com/nvdp-project/nvdp/nn/internal/avx2"
)

// Expf returns a fast float32 exp, to about 1 ulp. It is Cephes' expf: a
// range reduction by ln 2 and a degree-5 minimax polynomial. Arguments
// below -87.33, -Inf included, give 0; above 88.72 they give +Inf; NaN
// gives NaN.
func Expf(x float32) float32 {
	if x < -87.33654 {
		return 0
	}
	if x > 88.72283 {
		if x != x {
			return x
		}
		return float32(math.Inf(1))
	}
	const (
		log2e = 1.44269504088896341
		c1    = 0.693359375
		c2    = -2.12194440e-4
	)
	fn := x*log2e + 0.5
	n := int32(fn)
	if fn < 0 && float32(n) != fn {
		n-- // floor
	}
	z := float32(n)
	r := x - z*c1 - z*c2
	r2 := r * r
	p := ((((1.9875691500e-4*r+1.3981999507e-3)*r+8.3334519073e-3)*r+4.1665795894e-2)*r+1.6666665459e-1)*r + 5.0000001201e-1
	y := p*r2 + r + 1
	// 2^n; n in [-126, 128]: split to stay within normal exponents.
	if n < -125 {
		return y * math.Float32frombits(uint32(n+127+64)<<23) * 5.421010862427522e-20 // 2^-64
	}
	if n > 127 {
		return y * math.Float32frombits(uint32(n+127-1)<<23) * 2
	}
	return y * math.Float32frombits(uint32(n+127)<<23)
}

// expShifted sets s[k] = Expf(s[k] - mx), the softmax's exponentials, with the AVX2 kernel
// ([avx2.ExpShifted]) where the CPU has it: the same bits either way.
func expShifted(s []float32, mx float32) {
	for i := 0; i < len(s); {
		if n := (len(s) - i) &^ 7; avx2.Available && n > 0 {
			i += avx2.ExpShifted(&s[i], n, mx)
		}
		for end := min(i+8, len(s)); i < end; i++ { // the group the kernel left, or the tail
			s[i] = Expf(s[i] - mx)
		}
	}
}
