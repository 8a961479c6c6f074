// Package gluetest writes small GLUE-shaped directories, real TSV files in
// glue's layout and a WordPiece vocabulary, for the tests of the packages
// that check, train or evaluate the text tasks.
package gluetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/glue"
)

// Words are the words of the texts [Write] writes, in its vocabulary after
// [PAD], [UNK], [CLS], [SEP] and [MASK].
var Words = []string{"good", "bad", "the", "movie", "is"}

// Rows are the rows [Write] writes of each split.
var Rows = map[string]int{"train": 16, "dev": 6, "test": 6}

// Write writes under dir, for each task of tasks (glue names, such as
// "sst2" and "rte"), a GLUE directory's <Task.Dir>/{train,dev,test}.tsv
// with the task's columns, and a vocab.txt; it returns the GLUE directory
// (dir/glue) and the vocabulary's path.
//
// Row i of a split is "the movie is good" for even i and "... bad" for odd
// i (both texts of a pair task), labelled with the task's second label
// (SST-2's 1, RTE's not_entailment; a regression score 5) for good and its
// first (0, entailment; 0) for bad. test.tsv has an index column and no
// label, as GLUE's. It fails tb on an unknown task or a write error.
func Write(tb testing.TB, dir string, tasks ...string) (glueDir, vocab string) {
	tb.Helper()
	vocab = filepath.Join(dir, "vocab.txt")
	if err := os.WriteFile(vocab, []byte(strings.Join(append([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}, Words...), "\n")+"\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	glueDir = filepath.Join(dir, "glue")
	for _, name := range tasks {
		task, err := glue.LookupTask(name)
		if err != nil {
			tb.Fatal(err)
		}
		writeTask(tb, filepath.Join(glueDir, task.Dir), task)
	}
	return glueDir, vocab
}

// writeTask writes task's three splits into dir.
func writeTask(tb testing.TB, dir string, task *glue.Task) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	texts := task.TextFields[:1]
	if task.IsPair() {
		texts = task.TextFields[:]
	}
	for split, n := range Rows {
		var b strings.Builder
		cols := append([]string{}, texts...)
		if split == "test" {
			cols = append([]string{"index"}, cols...)
		} else {
			cols = append(cols, task.LabelField)
		}
		b.WriteString(strings.Join(cols, "\t") + "\n")
		for i := range n {
			s := "the movie is " + Words[i%2]
			row := make([]string, 0, len(cols))
			if split == "test" {
				row = append(row, fmt.Sprint(i))
			}
			for range texts {
				row = append(row, s)
			}
			if split != "test" {
				row = append(row, label(task, 1-i%2))
			}
			b.WriteString(strings.Join(row, "\t") + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, split+".tsv"), []byte(b.String()), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// label is the label of class k (0 or 1) of task: its name, or a score of
// 5k for a regression.
func label(task *glue.Task, k int) string {
	if task.IsRegression || len(task.LabelNames) == 0 {
		return fmt.Sprint(5 * k)
	}
	return task.LabelNames[k]
}
