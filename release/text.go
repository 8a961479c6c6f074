package release

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/nvdp-project/nvdp/privacy"
)

// WriteText writes the summary of md, the metadata of the output file
// path, as `nvdp embed` prints it: the output's shape, the model, the
// certified epsilon per release and per text, the release and the warning of
// a seeded output.
func (md *Metadata) WriteText(w io.Writer, path string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	m := md.Model
	row("output", fmt.Sprintf("%s (%d texts x %d releases: z [N %d, P %d], pi [N %d])", path, md.Texts, md.ReleasesPerText, m.N, m.P, m.N))
	row("model", fmt.Sprintf("%s (%s, %s, %s)", m.Dir, m.Task, m.Variant, m.Mode))
	g, all := md.Guarantee, md.GuaranteePerText
	row("certified", g.Scope)
	row(fmt.Sprintf("epsilon per release (delta %g)", g.Delta), privacy.FormatValue(g.Epsilon)+", "+g.How())
	if md.ReleasesPerText > 1 {
		row(fmt.Sprintf("epsilon per text (%d releases)", md.ReleasesPerText), privacy.FormatValue(all.Epsilon)+", "+all.How())
	}
	if g.Release != nil {
		row("release", g.Release.String())
	}
	if md.Seeded {
		row("WARNING", md.Warning)
	}
	return tw.Flush()
}
