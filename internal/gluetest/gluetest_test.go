package gluetest

import (
	"testing"

	"github.com/nvdp-project/nvdp/glue"
)

// TestWrite: glue.Load reads every split Write writes, for each kind of
// task (single text, pair, regression), with Rows rows and the labels of
// good and bad.
func TestWrite(t *testing.T) {
	names := glue.TaskNames()
	dir, _ := Write(t, t.TempDir(), names...)
	for _, name := range names {
		task, _ := glue.LookupTask(name)
		for split, n := range Rows {
			ds, err := glue.Load(dir, task, split, glue.LoadOptions{})
			if err != nil {
				t.Fatalf("%s %s: %v", name, split, err)
			}
			if len(ds.Examples) != n {
				t.Errorf("%s %s: %d rows, want %d", name, split, len(ds.Examples), n)
			}
		}
	}
}
