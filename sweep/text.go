package sweep

import (
	"fmt"
	"io"
	"path/filepath"
)

// WriteText writes the summary of r, a sweep in the directory out, as `nvdp
// sweep` prints it: the cells by status, how many ran this time, the
// manifest file, then the C_mu selected for each of tasks that has one.
func (r *Result) WriteText(w io.Writer, out string, tasks []string) {
	m := r.Manifest
	fmt.Fprintf(w, "sweep %s: %d cells (%s), %d ran this time; manifest %s\n", out, len(m.Cells),
		m.CountsText(), r.Ran, filepath.Join(out, ManifestFile))
	for _, task := range tasks {
		if s := m.Selections[task]; s != nil {
			fmt.Fprintf(w, "%s C_mu = %g: %s\n", task, s.CMu, s.Reason)
		}
	}
}
