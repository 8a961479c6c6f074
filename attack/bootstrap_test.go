package attack

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Bootstrap on hand-made statistics: a constant has the interval (c, c); the mean of 0/1 data has an
// interval around the sample mean matching the normal approximation mean +- 1.96 sd / sqrt(n); a
// statistic undefined on some resamples skips them; the errors.
func TestBootstrap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	if lo, hi, err := Bootstrap(10, 100, 0.95, rng, func([]int) float64 { return 3 }); err != nil || lo != 3 || hi != 3 {
		t.Errorf("constant: [%v, %v] %v", lo, hi, err)
	}
	const n = 400
	data := make([]float64, n)
	for i := range 120 {
		data[i] = 1 // mean 0.3
	}
	mean := func(idx []int) float64 {
		s := 0.0
		for _, i := range idx {
			s += data[i]
		}
		return s / float64(len(idx))
	}
	lo, hi, err := Bootstrap(n, 4000, 0.95, rng, mean)
	half := 1.96 * math.Sqrt(0.3*0.7/n)
	if err != nil || math.Abs(lo-(0.3-half)) > 0.006 || math.Abs(hi-(0.3+half)) > 0.006 {
		t.Errorf("mean of 0/1: [%v, %v] %v, want about [%v, %v]", lo, hi, err, 0.3-half, 0.3+half)
	}
	// defined only when unit 0 is in the resample (probability 1 - (1 - 1/2)^2 = 3/4 for n = 2)
	calls := 0
	lo, hi, err = Bootstrap(2, 100, 0.9, rng, func(idx []int) float64 {
		calls++
		for _, i := range idx {
			if i == 0 {
				return 1
			}
		}
		return math.NaN()
	})
	if err != nil || lo != 1 || hi != 1 || calls != 100 {
		t.Errorf("partly undefined: [%v, %v] %v after %d calls", lo, hi, err, calls)
	}
	for _, tc := range []struct {
		n, reps int
		conf    float64
		stat    func([]int) float64
		want    string
	}{
		{0, 10, 0.95, mean, "0 units"},
		{5, 0, 0.95, mean, "0 resamples"},
		{5, 10, 1, mean, "confidence 1"},
		{5, 10, 0.95, func([]int) float64 { return math.NaN() }, "undefined on every resample"},
	} {
		if _, _, err := Bootstrap(tc.n, tc.reps, tc.conf, rng, tc.stat); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}
