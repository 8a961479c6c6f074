package speech

import (
	"fmt"
	"sort"
)

// Metric names of the speech task: the selection metric, macro-F1 as in the
// paper's Table 2, and accuracy.
const (
	MetricF1       = "macro_f1"
	MetricAccuracy = "accuracy"
)

// Scores returns the accuracy and macro-F1 of predicted against true language
// indices. Macro-F1 is the unweighted mean, over the languages that occur in
// labels or preds, of each language's F1 = 2 TP / (2 TP + FP + FN). This is
// scikit-learn's f1_score(average="macro") with its default labels, the
// union, so a language predicted but absent from labels scores 0.
//
// It returns an error when the lengths differ or there is no example.
func Scores(preds, labels []int) (accuracy, macroF1 float64, err error) {
	if len(preds) != len(labels) {
		return 0, 0, fmt.Errorf("speech metrics: %d predictions, %d labels", len(preds), len(labels))
	}
	if len(labels) == 0 {
		return 0, 0, fmt.Errorf("speech metrics: no example")
	}
	tp, fp, fn := map[int]int{}, map[int]int{}, map[int]int{}
	correct := 0
	for i, y := range labels {
		p := preds[i]
		if p == y {
			correct++
			tp[y]++
			continue
		}
		fp[p]++
		fn[y]++
	}
	classes := map[int]bool{}
	for i := range labels {
		classes[labels[i]], classes[preds[i]] = true, true
	}
	ids := make([]int, 0, len(classes))
	for c := range classes {
		ids = append(ids, c)
	}
	sort.Ints(ids) // a fixed summation order
	for _, c := range ids {
		if d := 2*tp[c] + fp[c] + fn[c]; d > 0 {
			macroF1 += float64(2*tp[c]) / float64(d)
		}
	}
	return float64(correct) / float64(len(labels)), macroF1 / float64(len(ids)), nil
}
