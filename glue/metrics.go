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

// confusion are the counts of a classification, from one pass over its examples (countPairs):
// every classification metric (Accuracy, F1, Matthews) is read off them. Counts are integers, and
// the sums of their products exact in float64 below 2^53 (n < 9e7), so the metrics do not depend
// on the order the counts are visited in.
type confusion struct {
	n      int
	counts map[classPair]int // examples per (prediction, label)
}

// classPair is one cell of a confusion matrix.
type classPair struct{ pred, label int }

// countPairs counts the (prediction, label) pairs of preds and labels. Errors: length mismatch,
// empty input.
func countPairs(preds, labels []int) (confusion, error) {
	if err := checkLens(len(preds), len(labels)); err != nil {
		return confusion{}, err
	}
	c := confusion{n: len(preds), counts: map[classPair]int{}}
	for i := range preds {
		c.counts[classPair{preds[i], labels[i]}]++
	}
	return c, nil
}

// correct is the number of examples predicted right.
func (c confusion) correct() int {
	n := 0
	for p, k := range c.counts {
		if p.pred == p.label {
			n += k
		}
	}
	return n
}

// binary are the true positives, false positives and false negatives of class pos.
func (c confusion) binary(pos int) (tp, fp, fn int) {
	for p, k := range c.counts {
		switch {
		case p.pred == pos && p.label == pos:
			tp += k
		case p.pred == pos:
			fp += k
		case p.label == pos:
			fn += k
		}
	}
	return tp, fp, fn
}

// marginals are the true and the predicted occurrences per class.
func (c confusion) marginals() (truth, pred map[int]float64) {
	truth, pred = map[int]float64{}, map[int]float64{}
	for p, k := range c.counts {
		truth[p.label] += float64(k)
		pred[p.pred] += float64(k)
	}
	return truth, pred
}

func (c confusion) accuracy() float64 { return float64(c.correct()) / float64(c.n) }

func (c confusion) f1() float64 {
	tp, fp, fn := c.binary(1)
	if 2*tp+fp+fn == 0 {
		return 0
	}
	return 2 * float64(tp) / float64(2*tp+fp+fn)
}

func (c confusion) matthews() float64 {
	tcount, pcount := c.marginals()
	correct, s := float64(c.correct()), float64(c.n)
	var tk, pp, tt float64
	for k, t := range tcount {
		tk += t * pcount[k]
		tt += t * t
	}
	for _, p := range pcount {
		pp += p * p
	}
	den := math.Sqrt((s*s - pp) * (s*s - tt))
	if den == 0 {
		return 0
	}
	return (correct*s - tk) / den
}

// classMetric is one classification metric of preds and labels.
func classMetric(preds, labels []int, metric func(confusion) float64) (float64, error) {
	c, err := countPairs(preds, labels)
	if err != nil {
		return 0, err
	}
	return metric(c), nil
}

// Accuracy returns the fraction of preds equal to labels.
func Accuracy(preds, labels []int) (float64, error) {
	return classMetric(preds, labels, confusion.accuracy)
}

// F1 returns the binary F1 score of the positive class 1, 2*TP / (2*TP + FP + FN), as sklearn's
// f1_score with average="binary". It is 0 when there are no true or predicted positives.
func F1(preds, labels []int) (float64, error) {
	return classMetric(preds, labels, confusion.f1)
}

// Matthews returns the Matthews correlation coefficient in the multiclass form of sklearn's
// matthews_corrcoef, or 0 when the denominator is 0. For two classes it reduces to
//
//	(TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))
func Matthews(preds, labels []int) (float64, error) {
	return classMetric(preds, labels, confusion.matthews)
}

// checkScores checks the inputs of a correlation: equal lengths, not empty, finite.
func checkScores(x, y []float64) error {
	if err := checkLens(len(x), len(y)); err != nil {
		return err
	}
	if err := checkFinite("x", x); err != nil {
		return err
	}
	return checkFinite("y", y)
}

func checkFinite(name string, x []float64) error {
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("glue metrics: %s[%d] = %v", name, i, v)
		}
	}
	return nil
}

// Pearson returns the Pearson correlation of x and y, as scipy.stats.pearsonr. It is NaN when
// either is constant.
func Pearson(x, y []float64) (float64, error) {
	if err := checkScores(x, y); err != nil {
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

// Ranks returns the 1-based ranks of x, with ties given their average rank, as scipy's rankdata
// with method "average".
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

// Spearman returns Spearman's rank correlation, as scipy.stats.spearmanr: the Pearson correlation
// of the average ranks.
func Spearman(x, y []float64) (float64, error) {
	if err := checkScores(x, y); err != nil {
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

// Compute returns all of the task's GLUE metrics, [Task].Metrics, named as Hugging Face's evaluate
// names them: accuracy for SST-2, RTE and QNLI; accuracy and f1 for MRPC; pearson and spearmanr
// for STS-B.
//
// For classification tasks preds and labels hold class indices as float64, such as the argmax of
// the logits; for STS-B they hold the raw predicted scores and the gold scores.
//
// Compute returns an error for a length mismatch, empty input, NaN or Inf, or a non-class value
// for classification.
func Compute(task *Task, preds, labels []float64) (map[string]float64, error) {
	if err := checkLens(len(preds), len(labels)); err != nil {
		return nil, fmt.Errorf("%s: %w", task.Name, err)
	}
	metric, err := taskMetric(task, preds, labels)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", task.Name, err)
	}
	out := map[string]float64{}
	for _, m := range task.Metrics {
		v, err := metric(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", task.Name, err)
		}
		out[m] = v
	}
	return out, nil
}

// taskMetric returns the function computing one named metric of the task on preds and labels
// (arguments as for Compute): the correlations for a regression task, else the metrics of the
// class indices' confusion counts, counted once. Errors: a non-class value for classification.
func taskMetric(task *Task, preds, labels []float64) (func(name string) (float64, error), error) {
	if task.IsRegression {
		return func(m string) (float64, error) {
			switch m {
			case MetricPearson:
				return Pearson(preds, labels)
			case MetricSpearman:
				return Spearman(preds, labels)
			}
			return 0, fmt.Errorf("metric %s does not apply to regression", m)
		}, nil
	}
	p, err := classes("preds", preds, task.NumLabels)
	if err != nil {
		return nil, err
	}
	l, err := classes("labels", labels, task.NumLabels)
	if err != nil {
		return nil, err
	}
	c, err := countPairs(p, l)
	if err != nil {
		return nil, err
	}
	return func(m string) (float64, error) {
		switch m {
		case MetricAccuracy:
			return c.accuracy(), nil
		case MetricF1:
			return c.f1(), nil
		case MetricMatthews:
			return c.matthews(), nil
		}
		return 0, fmt.Errorf("metric %s does not apply to classification", m)
	}, nil
}

// SelectionMetric returns the task's model-selection metric and its name, as ref §8 chooses it:
// f1 for MRPC, spearmanr for STS-B, accuracy for the others. The arguments are as for [Compute].
func SelectionMetric(task *Task, preds, labels []float64) (float64, string, error) {
	m, err := Compute(task, preds, labels)
	if err != nil {
		return 0, task.Metric, err
	}
	return m[task.Metric], task.Metric, nil
}

// Argmax returns, per row of a row-major [n, k] logits matrix, the index of the largest value, the
// first on ties, as float64 class predictions for [Compute].
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
