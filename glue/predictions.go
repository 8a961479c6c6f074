package glue

import (
	"bufio"
	"fmt"
	"io"
	"math"
)

// WritePredictions writes test predictions in GLUE submission format: a header
// "index\tprediction", then one row per example. Classification predictions are class indices
// written as the task's label strings (RTE/QNLI entailment / not_entailment, SST-2/MRPC 0 / 1,
// as the reference code maps them, ref §8); STS-B predictions are the raw scores with three
// decimals (as HF run_glue writes them). Save the output under Task.SubmissionFile.
//
// Errors: length mismatch, a class index out of range, a NaN/Inf score, or a write error.
func WritePredictions(w io.Writer, task *Task, indices []int, preds []float64) error {
	if len(indices) != len(preds) {
		return fmt.Errorf("glue %s predictions: %d indices but %d predictions", task.Name, len(indices), len(preds))
	}
	bw := bufio.NewWriter(w)
	fmt.Fprint(bw, "index\tprediction\n")
	for i, p := range preds {
		if math.IsNaN(p) || math.IsInf(p, 0) {
			return fmt.Errorf("glue %s predictions: row %d (index %d): prediction %v", task.Name, i, indices[i], p)
		}
		if task.IsRegression {
			fmt.Fprintf(bw, "%d\t%.3f\n", indices[i], p)
			continue
		}
		c := int(p)
		if float64(c) != p || c < 0 || c >= len(task.LabelNames) {
			return fmt.Errorf("glue %s predictions: row %d (index %d): %v is not a class index in [0, %d)", task.Name, i, indices[i], p, len(task.LabelNames))
		}
		fmt.Fprintf(bw, "%d\t%s\n", indices[i], task.LabelNames[c])
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("glue %s predictions: %w", task.Name, err)
	}
	return nil
}
