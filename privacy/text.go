package privacy

import (
	"fmt"
	"math"
	"strconv"

	"github.com/nvdp-project/nvdp/jsonfloat"
)

// FormatValue formats a privacy number as the commands print it: six
// decimals, "+Inf", or "n/a" for NaN.
func FormatValue(v jsonfloat.Float) string {
	x := float64(v)
	if math.IsInf(x, 1) {
		return "+Inf"
	}
	if math.IsNaN(x) {
		return "n/a"
	}
	return strconv.FormatFloat(x, 'f', 6, 64)
}

// FormatOptional is [FormatValue] of an optional number: "not computed" for nil.
func FormatOptional(v *jsonfloat.Float) string {
	if v == nil {
		return "not computed"
	}
	return FormatValue(*v)
}

// WriteRows writes the certified guarantee r as key-value rows, the form
// `nvdp audit`, `nvdp run` and `nvdp eval` print it in.
//
// The rows are the certified RD at r.Order with its three parts, the
// (epsilon, delta) guarantee and the certified BDP, then the scope and the
// release; an unbounded report (see [CertifiedReport.Unbounded]) writes
// "none: unclipped" with its reason and scope. A nil r writes nothing.
func (r *CertifiedReport) WriteRows(row func(key, value string)) {
	if r == nil {
		return
	}
	if r.Unbounded() {
		row("certified guarantee (every pair of inputs)", "none: unclipped ("+r.Reason+")")
		row("  certified scope", r.Scope)
		return
	}
	releases := ""
	if r.Releases > 1 {
		releases = fmt.Sprintf(", %d releases", r.Releases)
	}
	rd := FormatValue(r.RD)
	if r.Finite {
		rd = fmt.Sprintf("%s  (variance %s + mean %s + Dirichlet %s)", rd, FormatValue(r.Parts.Variance), FormatValue(r.Parts.Mean), FormatValue(r.Parts.Dirichlet))
	}
	row(fmt.Sprintf("certified RD (every pair of inputs), order %s%s", strconv.FormatFloat(r.Order, 'g', -1, 64), releases), rd)
	if !r.Finite {
		row("  certified RD is +Inf", r.Reason)
	}
	row(fmt.Sprintf("certified ε (delta %g)", r.Delta), FormatValue(r.Epsilon)+", "+r.How())
	bdpOrder := ""
	if o := float64(r.BDPOrder); !math.IsNaN(o) && !math.IsInf(o, 0) {
		bdpOrder = "  at moment order " + strconv.FormatFloat(o, 'g', 6, 64)
	}
	row(fmt.Sprintf("certified BDP ε_μ (delta %g)", r.Delta), FormatValue(r.BDPEpsilon)+bdpOrder+"  ("+r.BDPNote+")")
	row("  certified scope", r.Scope)
	if r.Release != nil {
		row("  release", r.Release.String())
	}
}
