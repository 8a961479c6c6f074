// Package attack measures what a release actually leaks (docs/attacks.md):
// membership-style distinguishing tests with an epsilon lower bound,
// inversion of released embeddings to tokens, and inference of a property
// of the text. Their numbers are empirical lower bounds on leakage, to be
// read against the certified upper bound (privacy.Certify); an attack that
// exceeds the certified epsilon is a bug in one of the two.
package attack

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// ROCPoint is one threshold of a score test: scores >= Threshold are called
// positive; TPR and FPR are the fractions of positive and negative samples
// called positive.
type ROCPoint struct {
	Threshold float64 `json:"threshold"`
	TPR       float64 `json:"tpr"`
	FPR       float64 `json:"fpr"`
	TP        int     `json:"tp"`
	FP        int     `json:"fp"`
}

// ROC returns the receiver operating characteristic of the scores pos,
// samples of the positive hypothesis, against neg. It has the point (0, 0)
// at threshold +Inf first, then one point per distinct score from the highest
// threshold, with FPR near 0, down, ending at (1, 1). It returns an error for
// an empty or NaN sample.
func ROC(pos, neg []float64) ([]ROCPoint, error) {
	if err := checkScores(pos, neg); err != nil {
		return nil, err
	}
	type s struct {
		v   float64
		pos bool
	}
	all := make([]s, 0, len(pos)+len(neg))
	for _, v := range pos {
		all = append(all, s{v, true})
	}
	for _, v := range neg {
		all = append(all, s{v, false})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
	out := []ROCPoint{{Threshold: math.Inf(1)}}
	tp, fp := 0, 0
	for i := 0; i < len(all); {
		v := all[i].v
		for ; i < len(all) && all[i].v == v; i++ {
			if all[i].pos {
				tp++
			} else {
				fp++
			}
		}
		out = append(out, ROCPoint{Threshold: v, TP: tp, FP: fp,
			TPR: float64(tp) / float64(len(pos)), FPR: float64(fp) / float64(len(neg))})
	}
	return out, nil
}

// AUC returns the area under the ROC curve of pos against neg: the
// probability that a positive sample scores above a negative one, with ties
// counted half. It is the Mann-Whitney statistic divided by
// len(pos) len(neg).
func AUC(pos, neg []float64) (float64, error) {
	roc, err := ROC(pos, neg)
	if err != nil {
		return 0, err
	}
	a := 0.0
	for i := 1; i < len(roc); i++ {
		a += (roc[i].FPR - roc[i-1].FPR) * (roc[i].TPR + roc[i-1].TPR) / 2
	}
	return a, nil
}

// tprAtFPR returns the largest TPR of roc among the thresholds whose FPR is
// at most fpr, or 0 when there is none.
func tprAtFPR(roc []ROCPoint, fpr float64) float64 {
	best := 0.0
	for _, p := range roc {
		if p.FPR <= fpr && p.TPR > best {
			best = p.TPR
		}
	}
	return best
}

// clopperPearson returns the exact two-sided binomial confidence interval of
// a proportion with k successes in n trials at confidence conf, after Clopper
// and Pearson 1934. With alpha = 1 - conf, lo is the alpha/2 quantile of
// Beta(k, n-k+1) and hi the 1 - alpha/2 quantile of Beta(k+1, n-k); lo = 0
// when k = 0, and hi = 1 when k = n.
//
// It returns an error when n < 1, k is outside [0, n], or conf is outside
// (0, 1).
func clopperPearson(k, n int, conf float64) (lo, hi float64, err error) {
	switch {
	case n < 1:
		return 0, 0, fmt.Errorf("attack: Clopper-Pearson interval of %d trials", n)
	case k < 0 || k > n:
		return 0, 0, fmt.Errorf("attack: Clopper-Pearson interval of %d successes in %d trials", k, n)
	case !(conf > 0 && conf < 1):
		return 0, 0, fmt.Errorf("attack: confidence %v outside (0, 1)", conf)
	}
	a := 1 - conf
	lo, hi = 0, 1
	if k > 0 {
		lo = distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1)}.Quantile(a / 2)
	}
	if k < n {
		hi = distuv.Beta{Alpha: float64(k + 1), Beta: float64(n - k)}.Quantile(1 - a/2)
	}
	return lo, hi, nil
}

func checkScores(pos, neg []float64) error {
	if len(pos) == 0 || len(neg) == 0 {
		return errors.New("attack: ROC of an empty sample")
	}
	for _, v := range append(append([]float64(nil), pos...), neg...) {
		if math.IsNaN(v) {
			return errors.New("attack: NaN score")
		}
	}
	return nil
}
