package attack

import (
	"errors"
	"fmt"
	quantilepkg "github.com/nvdp-project/nvdp/internal/quantile"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/nvdp-project/nvdp/option"
)

// Bootstrap returns the percentile bootstrap interval at confidence conf of a
// statistic of n units, after Efron and Tibshirani 1993, ch. 13. It draws reps
// resamples of n unit indices uniformly with replacement from rng, computes
// stat of each, and returns the empirical alpha/2 and 1 - alpha/2 quantiles
// of the values, with alpha = 1 - conf, as gonum's stat.Quantile with
// stat.Empirical computes them. A resample whose statistic is NaN, because it
// is undefined on it as an AUC of a resample with one class is, is left out.
//
// It returns an error when n < 1, reps < 1, conf is outside (0, 1), or every
// resample is NaN.
func Bootstrap(n, reps int, conf float64, rng *rand.Rand, stat func(idx []int) float64) (lo, hi float64, err error) {
	switch {
	case n < 1:
		return 0, 0, fmt.Errorf("attack: bootstrap of %d units", n)
	case reps < 1:
		return 0, 0, fmt.Errorf("attack: bootstrap of %d resamples", reps)
	case !(conf > 0 && conf < 1):
		return 0, 0, fmt.Errorf("attack: confidence %v outside (0, 1)", conf)
	}
	vals := make([]float64, 0, reps)
	idx := make([]int, n)
	for range reps {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		if v := stat(idx); !math.IsNaN(v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return 0, 0, errors.New("attack: bootstrap: the statistic is undefined on every resample")
	}
	sort.Float64s(vals)
	a := 1 - conf
	return quantile(a/2, vals), quantile(1-a/2, vals), nil
}

// quantile is the bootstrap intervals' convention (quantile.Empirical).
func quantile(p float64, sorted []float64) float64 { return quantilepkg.Empirical(sorted, p) }

// Interval configures the confidence intervals of the attacks' numbers.
type Interval struct {
	Confidence float64 `json:"confidence"` // two-sided confidence of every interval, in (0, 1)
	Bootstrap  int     `json:"bootstrap"`  // resamples of a bootstrap interval (>= 1)
}

// DefaultInterval is 95% intervals, 1000 bootstrap resamples.
func DefaultInterval() Interval { return Interval{Confidence: 0.95, Bootstrap: 1000} }

// Validate checks i; errors are *option.Error.
func (i Interval) Validate() error {
	switch {
	case !(i.Confidence > 0 && i.Confidence < 1):
		return option.Errorf("confidence", i.Confidence, "must be in (0, 1)")
	case i.Bootstrap < 1:
		return option.Errorf("bootstrap", i.Bootstrap, "must be >= 1")
	}
	return nil
}
