package audio

import (
	"context"
	"fmt"
	"math"
)

// The resampler's low-pass filter: a Kaiser-windowed sinc with the parameters of resampy's
// "kaiser_best" filter, which is also torchaudio's "kaiser_best" preset. It has 64 zero crossings
// each side, a roll-off of 0.9475937167399596 of the lower Nyquist frequency, and Kaiser beta
// 14.769656459379492.
const (
	resampleZeros   = 64
	resampleRolloff = 0.9475937167399596
	resampleBeta    = 14.769656459379492
	// maxTableTaps bounds the precomputed filter, phases x taps; rates whose reduced ratio needs
	// more evaluate the window per tap.
	maxTableTaps = 1 << 21
)

// Resample converts x from rate from to rate to, in Hz, by band-limited interpolation:
//
//	y[n] = sum_k x[k] h(n*from/to - k),  h(t) = fc sinc(fc t) w(t / half)
//
// where fc = rolloff * min(1, to/from) is the cut-off relative to the input's Nyquist frequency,
// half = zeros / fc input samples, and w is a Kaiser window. This is the bandlimited interpolation
// of Smith, "Digital Audio Resampling", as in resampy and torchaudio. Samples outside x count as 0.
// The output has ceil(len(x)*to/from) samples, the length of torchaudio.functional.resample.
// Positions repeat with period to/gcd(from, to), so the filter is tabulated per phase, as a
// polyphase filter.
//
// Away from the edges, as TestResampleSine and TestResampleAliasing check, a sine up to 0.8 x the
// lower Nyquist frequency comes out as the same sine at the new rate within 1e-6 of its amplitude,
// from float32 rounding, with 6e-8 measured. At 0.9 x, in the transition band, it is within 3e-3,
// with 2.6e-3 measured. A tone above the output's Nyquist frequency comes out below 1e-6 of its
// amplitude, with 1e-7 measured.
//
// Resample returns an error for a rate <= 0. from == to returns a copy.
func Resample(x []float32, from, to int) ([]float32, error) {
	return resample(context.Background(), x, from, to, NoCrop)
}

// cancelTaps is how many filter taps resample evaluates between two checks
// of its context: under a millisecond with the tabulated filter, about 50
// ms where every tap evaluates the Kaiser window.
const cancelTaps = 1 << 18

// resample is Resample computing only the first limit output samples (all
// with NoCrop), bit for bit those of Resample; ctx is checked before the
// first output sample and then about every cancelTaps filter taps, its
// error returned wrapped.
func resample(ctx context.Context, x []float32, from, to, limit int) ([]float32, error) {
	if from <= 0 || to <= 0 {
		return nil, fmt.Errorf("audio: resampling from %d Hz to %d Hz: rates must be > 0", from, to)
	}
	n := resampledLen(len(x), from, to)
	if limit != NoCrop {
		n = min(n, limit)
	}
	if from == to {
		return append([]float32(nil), x[:n]...), nil
	}
	g := gcd(from, to)
	up, down := to/g, from/g // output n sits at input position n*down/up
	fc := resampleRolloff * math.Min(1, float64(to)/float64(from))
	half := filterHalf(from, to) // taps each side, in input samples
	width := 2*half + 1
	// tap(p, j): the weight of input sample i-half+j for an output at
	// input position i + p/up.
	tap := func(p, j int) float64 {
		t := float64(p)/float64(up) + float64(half-j)
		return fc * sinc(fc*t) * kaiser(t/(resampleZeros/fc))
	}
	var table []float64
	if up*width <= maxTableTaps {
		table = make([]float64, up*width)
		for p := range up {
			for j := range width {
				table[p*width+j] = tap(p, j)
			}
		}
	}
	y := make([]float32, n)
	checkEvery := max(1, cancelTaps/width) // output samples
	for o := range y {
		if o%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("resampling from %d Hz to %d Hz: stopped at output sample %d of %d: %w", from, to, o, n, err)
			}
		}
		pos := int64(o) * int64(down)
		i, p := int(pos/int64(up)), int(pos%int64(up))
		s := 0.0
		lo, hi := max(0, half-i), min(width, len(x)-i+half)
		for j := lo; j < hi; j++ {
			w := 0.0
			if table != nil {
				w = table[p*width+j]
			} else {
				w = tap(p, j)
			}
			s += w * float64(x[i-half+j])
		}
		y[o] = float32(s)
	}
	return y, nil
}

// resampledLen is the length of Resample's output for n input samples:
// ceil(n*to/from).
func resampledLen(n, from, to int) int {
	return int((int64(n)*int64(to) + int64(from) - 1) / int64(from))
}

// filterHalf is the number of input samples each side of an output that
// the resampler's filter reaches from rate from to rate to: ceil(zeros /
// fc), fc = rolloff * min(1, to/from) (68 upsampling; 203 from 48 kHz and
// 1,621 from 384 kHz to 16 kHz).
func filterHalf(from, to int) int {
	fc := resampleRolloff * math.Min(1, float64(to)/float64(from))
	return int(math.Ceil(resampleZeros / fc))
}

// resampleInput is the number of leading input samples that the first n
// output samples of Resample from rate from to rate to depend on (n for
// from == to): the input position of output n-1 plus the filter's
// half-width, plus one. Resampling just those gives the same first n
// outputs, bit for bit: the samples beyond count as 0 either way.
// math.MaxInt when the count overflows.
func resampleInput(n, from, to int) int {
	if n <= 0 {
		return 0
	}
	if from == to {
		return n
	}
	if int64(n-1) > math.MaxInt64/int64(from) {
		return math.MaxInt
	}
	last := int64(n-1) * int64(from) / int64(to) // floor of output n-1's position
	if last > int64(math.MaxInt-filterHalf(from, to)-1) {
		return math.MaxInt
	}
	return int(last) + filterHalf(from, to) + 1
}

// sinc is sin(pi x) / (pi x), 1 at 0.
func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

// kaiser is the Kaiser window of shape resampleBeta at u in [-1, 1]
// (I0(beta sqrt(1 - u^2)) / I0(beta)), 0 outside.
func kaiser(u float64) float64 {
	if u < -1 || u > 1 {
		return 0
	}
	return besselI0(resampleBeta*math.Sqrt(1-u*u)) / besselI0(resampleBeta)
}

// besselI0 is the modified Bessel function of the first kind of order 0, by
// its power series sum_k ((x/2)^k / k!)^2 (converges for every x; beta <= 15
// needs under 40 terms for double precision).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	q := x * x / 4
	for k := 1; term > 1e-17*sum; k++ {
		term *= q / float64(k*k)
		sum += term
	}
	return sum
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
