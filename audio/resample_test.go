package audio

import (
	"math"
	"testing"
)

func sine(rate int, seconds, freq, amp, phase float64) []float32 {
	x := make([]float32, int(seconds*float64(rate)))
	for i := range x {
		x[i] = float32(amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate)+phase))
	}
	return x
}

// interior is the range of output samples whose filter lies inside the
// input (the filter reaches half = ceil(zeros/fc) input samples each side).
func interior(n, from, to int) (lo, hi int) {
	fc := resampleRolloff * math.Min(1, float64(to)/float64(from))
	edge := int(math.Ceil(resampleZeros/fc*float64(to)/float64(from))) + 2
	return edge, n - edge
}

// TestResampleSine: a resampled sine is the same sine sampled at the new
// rate: frequency, amplitude and phase kept, within tol x the amplitude at
// every interior sample: 1e-6 up to 0.8 x the lower Nyquist frequency,
// 3e-3 at 0.9 x (the filter's transition band starts near there; 16001 Hz
// exercises the untabulated filter).
func TestResampleSine(t *testing.T) {
	for _, tc := range []struct {
		from, to  int
		freq, tol float64
	}{
		{44100, 16000, 440, 1e-6},
		{44100, 16000, 6400, 1e-6}, // 0.8 x 8 kHz
		{44100, 16000, 7200, 3e-3}, // 0.9 x 8 kHz
		{48000, 16000, 1000, 1e-6},
		{22050, 16000, 3000, 1e-6},
		{8000, 16000, 440, 1e-6},
		{8000, 16000, 3200, 1e-6}, // 0.8 x 4 kHz
		{8000, 16000, 3600, 3e-3}, // 0.9 x 4 kHz
		{11025, 16000, 2000, 1e-6},
		{16001, 16000, 5000, 1e-6},
		{16000, 44100, 6000, 1e-6},
	} {
		const amp, phase = 0.5, 0.3
		x := sine(tc.from, 0.25, tc.freq, amp, phase)
		y, err := Resample(x, tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if want := (len(x)*tc.to + tc.from - 1) / tc.from; len(y) != want {
			t.Errorf("%d -> %d: %d samples, want %d", tc.from, tc.to, len(y), want)
		}
		want := sine(tc.to, float64(len(y))/float64(tc.to)+1, tc.freq, amp, phase)
		lo, hi := interior(len(y), tc.from, tc.to)
		worst := 0.0
		for i := lo; i < hi; i++ {
			worst = math.Max(worst, math.Abs(float64(y[i]-want[i])))
		}
		t.Logf("%d -> %d Hz, %g Hz sine: max error %.2g over samples [%d, %d)", tc.from, tc.to, tc.freq, worst, lo, hi)
		if worst > tc.tol*amp {
			t.Errorf("%d -> %d Hz, %g Hz sine: max error %g, want <= %g", tc.from, tc.to, tc.freq, worst, tc.tol*amp)
		}
	}
}

// TestResampleAliasing: tones the 16 kHz output cannot represent are
// removed, not folded back (a decimator without the low-pass filter would
// alias 10 kHz to 6 kHz at full amplitude).
func TestResampleAliasing(t *testing.T) {
	for _, tc := range []struct {
		from int
		freq float64
	}{{44100, 10000}, {48000, 8500}, {48000, 20000}, {22050, 9000}} {
		x := sine(tc.from, 0.25, tc.freq, 1, 0)
		y, err := Resample(x, tc.from, SampleRate)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := interior(len(y), tc.from, SampleRate)
		worst := 0.0
		for _, v := range y[lo:hi] {
			worst = math.Max(worst, math.Abs(float64(v)))
		}
		t.Logf("%d Hz, %g Hz tone: max output %.2g", tc.from, tc.freq, worst)
		if worst > 1e-6 {
			t.Errorf("%d Hz, %g Hz tone: max output %g, want <= 1e-6", tc.from, tc.freq, worst)
		}
	}
}

func TestResampleEdges(t *testing.T) {
	if _, err := Resample([]float32{1}, 0, 16000); err == nil {
		t.Error("rate 0 accepted")
	}
	if _, err := Resample([]float32{1}, 16000, -1); err == nil {
		t.Error("rate -1 accepted")
	}
	x := []float32{1, 2, 3}
	y, err := Resample(x, 16000, 16000)
	if err != nil || len(y) != 3 || y[2] != 3 || &y[0] == &x[0] {
		t.Errorf("identity: %v, %v (want a copy)", y, err)
	}
	for _, tc := range []struct{ n, from, to, want int }{{0, 44100, 16000, 0}, {1, 44100, 16000, 1}, {441, 44100, 16000, 160}, {442, 44100, 16000, 161}, {3, 8000, 16000, 6}} {
		y, err := Resample(make([]float32, tc.n), tc.from, tc.to)
		if err != nil || len(y) != tc.want {
			t.Errorf("%d samples %d -> %d: %d samples, %v; want %d", tc.n, tc.from, tc.to, len(y), err, tc.want)
		}
	}
	// besselI0 against its integral (1/pi) int_0^pi exp(x cos t) dt, by the
	// midpoint rule with 200,000 points in Python.
	for _, tc := range []struct{ x, want float64 }{{0, 1}, {1, 1.2660658777520104}, {5, 27.239871823603398}, {resampleBeta, 271903.6406813065}} {
		if got := besselI0(tc.x); math.Abs(got-tc.want) > 1e-12*tc.want {
			t.Errorf("I0(%g) = %g, want %g", tc.x, got, tc.want)
		}
	}
}

func BenchmarkResample44100(b *testing.B) {
	x := sine(44100, 5, 440, 0.5, 0)
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		if _, err := Resample(x, 44100, SampleRate); err != nil {
			b.Fatal(err)
		}
	}
}
