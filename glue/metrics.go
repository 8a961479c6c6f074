package glue

import (
	"fmt"
	"math"
	"sort"
)

func checkLens(n1, n2 int) error {
	if n1 != n2 {
		return fmt.Errorf("glue metrics: %d predictions but %d labels", n1, n2)
	}
	if n1 == 0 {
		return fmt.Errorf("glue metrics: no examples")
	}
	return nil
}

// Accuracy is the fraction of preds equal to labels.
func Accuracy(preds, labels []int) (float64, error) {
	if err := checkLens(len(preds), len(labels)); err != nil {
		return 0, err
	}
	c := 0
	for i := range preds {
		if preds[i] == labels[i] {
			c++
		}
	}
	return float64(c) / float64(len(preds)), nil
}

// F1 is the binary F1 score of the positive class 1: 2*TP / (2*TP + FP + FN), as sklearn's
// f1_score(average="binary"); 0 when there are no true or predicted positives.
func F1(preds, labels []int) (float64, error) {
	if err := checkLens(len(preds), len(labels)); err != nil {
		return 0, err
	}
	var tp, fp, fn int
	for i := range preds {
		switch {
		case preds[i] == 1 && labels[i] == 1:
			tp++
		case preds[i] == 1:
			fp++
		case labels[i] == 1:
			fn++
		}
	}
	if 2*tp+fp+fn == 0 {
		return 0, nil
	}
	return 2 * float64(tp) / float64(2*tp+fp+fn), nil
}

// Matthews is the Matthews correlation coefficient (multiclass form of sklearn's
// matthews_corrcoef, which reduces to (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) for
// two classes); 0 when the denominator is 0.
func Matthews(preds, labels []int) (float64, error) {
	if err := checkLens(len(preds), len(labels)); err != nil {
		return 0, err
	}
	tcount := map[int]float64{} // true occurrences per class
	pcount := map[int]float64{} // predicted occurrences per class
	correct := 0.0
	for i := range preds {
		tcount[labels[i]]++
		pcount[preds[i]]++
		if preds[i] == labels[i] {
			correct++
		}
	}
	s := float64(len(preds))
	var pk, tk, pp, tt float64
	for k, t := range tcount {
		tk += t * pcount[k]
		tt += t * t
	}
	for _, p := range pcount {
		pp += p * p
	}
	pk = correct*s - tk
	den := math.Sqrt((s*s - pp) * (s*s - tt))
	if den == 0 {
		return 0, nil
	}
	return pk / den, nil
}

func checkFinite(name string, x []float64) error {
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("glue metrics: %s[%d] = %v", name, i, v)
		}
	}
	return nil
}

// Pearson is the Pearson correlation of x and y (scipy.stats.pearsonr); NaN when either is
// constant.
func Pearson(x, y []float64) (float64, error) {
	if err := checkLens(len(x), len(y)); err != nil {
		return 0, err
	}
	if err := checkFinite("x", x); err != nil {
		return 0, err
	}
	if err := checkFinite("y", y); err != nil {
		return 0, err
	}
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= n
	my /= n
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN(), nil
	}
	r := sxy / math.Sqrt(sxx*syy)
	return math.Max(-1, math.Min(1, r)), nil
}

// Ranks returns 1-based ranks of x with ties given their average rank (scipy rankdata
// "average").
func Ranks(x []float64) []float64 {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return x[idx[a]] < x[idx[b]] })
	r := make([]float64, len(x))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && x[idx[j+1]] == x[idx[i]] {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
		}
		i = j + 1
	}
	return r
}

// Spearman is Spearman's rank correlation (scipy.stats.spearmanr): the Pearson correlation of
// the average ranks.
func Spearman(x, y []float64) (float64, error) {
	if err := checkLens(len(x), len(y)); err != nil {
		return 0, err
	}
	if err := checkFinite("x", x); err != nil {
		return 0, err
	}
	if err := checkFinite("y", y); err != nil {
		return 0, err
	}
	return Pearson(Ranks(x), Ranks(y))
}

// classes converts float class predictions/labels to ints, rejecting non-integral values.
func classes(name string, x []float64, numLabels int) ([]int, error) {
	out := make([]int, len(x))
	for i, v := range x {
		if v != math.Trunc(v) || v < 0 || int(v) >= numLabels {
			return nil, fmt.Errorf("glue metrics: %s[%d] = %v is not a class index in [0, %d)", name, i, v, numLabels)
		}
		out[i] = int(v)
	}
	return out, nil
}

// Compute returns all of the task's GLUE metrics (Task.Metrics, named as HF evaluate does):
// accuracy for SST-2, RTE, QNLI; accuracy and f1 for MRPC; pearson and spearmanr for STS-B.
// For classification tasks preds and labels hold class indices (as float64, e.g. argmax of
// the logits); for STS-B the raw predicted scores and the gold scores.
//
// Errors: length mismatch, empty input, NaN/Inf, or a non-class value for classification.
func Compute(task *Task, preds, labels []float64) (map[string]float64, error) {
	if err := checkLens(len(preds), len(labels)); err != nil {
		return nil, fmt.Errorf("%s: %w", task.Name, err)
	}
	out := map[string]float64{}
	if task.IsRegression {
		for _, m := range task.Metrics {
			var v float64
			var err error
			switch m {
			case MetricPearson:
				v, err = Pearson(preds, labels)
			case MetricSpearman:
				v, err = Spearman(preds, labels)
			default:
				err = fmt.Errorf("metric %s does not apply to regression", m)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", task.Name, err)
			}
			out[m] = v
		}
		return out, nil
	}
	p, err := classes("preds", preds, task.NumLabels)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", task.Name, err)
	}
	l, err := classes("labels", labels, task.NumLabels)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", task.Name, err)
	}
	for _, m := range task.Metrics {
		var v float64
		switch m {
		case MetricAccuracy:
			v, err = Accuracy(p, l)
		case MetricF1:
			v, err = F1(p, l)
		case MetricMatthews:
			v, err = Matthews(p, l)
		default:
			err = fmt.Errorf("metric %s does not apply to classification", m)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", task.Name, err)
		}
		out[m] = v
	}
	return out, nil
}

// SelectionMetric returns the task's model-selection metric (ref §8: MRPC f1, STS-B spearmanr,
// others accuracy) and its name. Arguments as for Compute.
func SelectionMetric(task *Task, preds, labels []float64) (float64, string, error) {
	m, err := Compute(task, preds, labels)
	if err != nil {
		return 0, task.Metric, err
	}
	return m[task.Metric], task.Metric, nil
}

// Argmax returns, per row of a row-major [n, k] logits matrix, the index of the largest value
// (the first on ties), as float64 class predictions for Compute.
func Argmax(logits []float32, k int) []float64 {
	if k <= 0 || len(logits)%k != 0 {
		panic(fmt.Sprintf("glue.Argmax: %d logits not a multiple of %d classes", len(logits), k))
	}
	out := make([]float64, len(logits)/k)
	for i := range out {
		row := logits[i*k : (i+1)*k]
		best := 0
		for j := 1; j < k; j++ {
			if row[j] > row[best] {
				best = j
			}
		}
		out[i] = float64(best)
	}
	return out
}
