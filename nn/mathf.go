package nn

import "math"

// Expf is a fast float32 exp (Cephes Expf: range reduction by ln 2 and a
// degree-5 minimax polynomial; about 1 ulp). Arguments below -87.33 (and
// -Inf) give 0, above 88.72 give +Inf; NaN gives NaN.
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

// Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7), the approximation
// PyTorch's vectorised CPU erf uses.
const (
	asP  = 0.3275911
	asA1 = 0.254829592
	asA2 = -0.284496736
	asA3 = 1.421413741
	asA4 = -1.453152027
	asA5 = 1.061405429
)

// geluParts returns Phi(x) (the standard normal CDF, through erf) and
// phi(x) = exp(-x^2/2)/sqrt(2 pi), sharing one exponential.
func geluParts(x float32) (cdf, pdf float32) {
	z := x * invSqrt2
	if z < 0 {
		z = -z
	}
	t := 1 / (1 + asP*z)
	e := Expf(-z * z)
	q := 0.5 * t * (asA1 + t*(asA2+t*(asA3+t*(asA4+t*asA5)))) * e // 0.5*erfc(|x|/sqrt2)
	if x < 0 {
		cdf = q
	} else {
		cdf = 1 - q
	}
	return cdf, invSqrt2Pi * e
}
