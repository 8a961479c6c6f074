package sweep

import (
	"bytes"
	"testing"
)

// TestResultWriteText: the counts, the cells that ran and the manifest, then
// a line per task with a C_mu selection, in the order of tasks.
func TestResultWriteText(t *testing.T) {
	r := &Result{Ran: 2, Manifest: &Manifest{Counts: map[string]int{CellDone: 3, CellFailed: 1}, Cells: make([]*Cell, 4),
		Selections: map[string]*CMuSelection{"sst2": {CMu: 2, Reason: "best dev accuracy"}, "qnli": {CMu: 0.5, Reason: "r"}}}}
	var b bytes.Buffer
	r.WriteText(&b, "out", []string{"qnli", "cola", "sst2"})
	want := "sweep out: 4 cells (3 done, 1 failed), 2 ran this time; manifest out/" + ManifestFile + "\nqnli C_mu = 0.5: r\nsst2 C_mu = 2: best dev accuracy\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
