package glue

import (
	"bufio"
	"fmt"
	"io"
	"math"
)

// WritePredictions writes test predictions in GLUE submission format: a header
// "index\tprediction", then one row per example. Save the output under Task.SubmissionFile.
//
// Classification predictions are class indices, written as the task's label strings as the
// reference code maps them in ref §8: entailment and not_entailment for RTE and QNLI, 0 and 1 for
// SST-2 and MRPC. STS-B predictions are the raw scores with three decimals, as Hugging Face's
// run_glue writes them.
//
// WritePredictions returns an error for a length mismatch, a class index out of range, a NaN or
// Inf score, or a write error.
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
