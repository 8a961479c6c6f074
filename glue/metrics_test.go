package glue

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// denseMetrics is an independent, straightforward implementation of the
// classification metrics: the dense confusion matrix C[true][pred] over the
// values that occur, then sklearn's formulas (accuracy_score, f1_score of
// class 1, matthews_corrcoef: cov_ytyp / sqrt(cov_ytyt * cov_ypyp) with
// cov_ytyp = correct*n - t.p, cov_ypyp = n^2 - p.p, cov_ytyt = n^2 - t.t).
// Every count is an integer, exact in float64, so the results must agree
// bit for bit with Accuracy, F1 and Matthews.
func denseMetrics(preds, labels []int) (acc, f1, mcc float64) {
	vals := slices.Sorted(slices.Values(append(slices.Clone(preds), labels...)))
	vals = slices.Compact(vals)
	k := len(vals)
	c := make([][]float64, k)
	for i := range c {
		c[i] = make([]float64, k)
	}
	for i := range preds {
		ti, _ := slices.BinarySearch(vals, labels[i])
		pi, _ := slices.BinarySearch(vals, preds[i])
		c[ti][pi]++
	}
	n := float64(len(preds))
	var correct, tp, fp, fn float64
	t, p := make([]float64, k), make([]float64, k)
	for i := range k {
		correct += c[i][i]
		for j := range k {
			t[i] += c[i][j]
			p[j] += c[i][j]
			switch {
			case vals[i] == 1 && vals[j] == 1:
				tp += c[i][j]
			case vals[j] == 1:
				fp += c[i][j]
			case vals[i] == 1:
				fn += c[i][j]
			}
		}
	}
	acc = correct / n
	if 2*tp+fp+fn > 0 {
		f1 = 2 * tp / (2*tp + fp + fn)
	}
	var tdotp, pdotp, tdott float64
	for i := range k {
		tdotp += t[i] * p[i]
		pdotp += p[i] * p[i]
		tdott += t[i] * t[i]
	}
	covYtYp, covYpYp, covYtYt := correct*n-tdotp, n*n-pdotp, n*n-tdott
	if den := math.Sqrt(covYtYt * covYpYp); den != 0 {
		mcc = covYtYp / den
	}
	return acc, f1, mcc
}

// TestClassMetricsVsDense compares Accuracy, F1 and Matthews with
// denseMetrics on random predictions and labels, bit for bit: binary,
// multiclass, skewed, constant and arbitrary (negative, sparse) class values.
func TestClassMetricsVsDense(t *testing.T) {
	for _, tc := range []struct {
		name    string
		classes []int
		n       int
		agree   float64 // probability that a prediction copies its label
	}{
		{"binary", []int{0, 1}, 200, 0.7},
		{"binary small", []int{0, 1}, 3, 0.5},
		{"binary one example", []int{0, 1}, 1, 0.5},
		{"binary all correct", []int{0, 1}, 50, 1},
		{"binary constant", []int{1}, 20, 0},
		{"no positive class", []int{0, 2}, 40, 0.6},
		{"three classes", []int{0, 1, 2}, 500, 0.5},
		{"five classes", []int{0, 1, 2, 3, 4}, 1000, 0.3},
		{"sparse values", []int{-3, 0, 1, 7, 100}, 300, 0.4},
		{"large", []int{0, 1}, 100000, 0.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), uint64(len(tc.classes))))
			for trial := range 10 {
				preds, labels := make([]int, tc.n), make([]int, tc.n)
				for i := range labels {
					labels[i] = tc.classes[rng.IntN(len(tc.classes))]
					preds[i] = tc.classes[rng.IntN(len(tc.classes))]
					if rng.Float64() < tc.agree {
						preds[i] = labels[i]
					}
				}
				acc, f1, mcc := denseMetrics(preds, labels)
				for _, m := range []struct {
					name string
					fn   func([]int, []int) (float64, error)
					want float64
				}{{MetricAccuracy, Accuracy, acc}, {MetricF1, F1, f1}, {MetricMatthews, Matthews, mcc}} {
					got, err := m.fn(preds, labels)
					if err != nil || math.Float64bits(got) != math.Float64bits(m.want) {
						t.Errorf("trial %d: %s = %v (%v), want %v", trial, m.name, got, err, m.want)
					}
				}
			}
		})
	}
}

// TestComputeMatchesMetrics: Compute returns, for every task (and a
// three-class task reporting every classification metric) and metric,
// exactly the value of the metric's own function on random inputs.
func TestComputeMatchesMetrics(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	all := []*Task{{Name: "three", NumLabels: 3, Metrics: []string{MetricAccuracy, MetricF1, MetricMatthews}}}
	for _, name := range TaskNames() {
		all = append(all, mustTask(t, name))
	}
	for _, task := range all {
		for _, n := range []int{1, 2, 17, 400} {
			preds, labels := make([]float64, n), make([]float64, n)
			for i := range preds {
				if task.IsRegression {
					labels[i] = math.Round(rng.Float64()*25) / 5
					preds[i] = labels[i] + rng.NormFloat64()
				} else {
					labels[i], preds[i] = float64(rng.IntN(task.NumLabels)), float64(rng.IntN(task.NumLabels))
				}
			}
			got, err := Compute(task, preds, labels)
			if err != nil {
				t.Fatalf("%s n=%d: %v", task.Name, n, err)
			}
			want := map[string]float64{}
			ip, il := make([]int, n), make([]int, n)
			for i := range preds {
				ip[i], il[i] = int(preds[i]), int(labels[i])
			}
			for _, m := range task.Metrics {
				var v float64
				switch m {
				case MetricAccuracy:
					v, err = Accuracy(ip, il)
				case MetricF1:
					v, err = F1(ip, il)
				case MetricMatthews:
					v, err = Matthews(ip, il)
				case MetricPearson:
					v, err = Pearson(preds, labels)
				case MetricSpearman:
					v, err = Spearman(preds, labels)
				}
				if err != nil {
					t.Fatal(err)
				}
				want[m] = v
			}
			if metricBits(got) != metricBits(want) {
				t.Errorf("%s n=%d: Compute %v, want %v", task.Name, n, got, want)
			}
		}
	}
}

// metricBits is a map of metrics with each value's exact bits, in key order.
func metricBits(m map[string]float64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%#x ", k, math.Float64bits(m[k]))
	}
	return b.String()
}
