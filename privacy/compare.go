package privacy

import (
	"cmp"
	"math"
)

// CompareBounds orders two privacy bounds of the same kind (RD in nats, an
// epsilon) from tightest to loosest: -1 when a is tighter (smaller) than b,
// +1 when looser, 0 when equal. An undefined bound (NaN) counts as +Inf:
// never tighter than a defined one (cmp.Compare would put NaN first).
func CompareBounds(a, b float64) int {
	if math.IsNaN(a) {
		a = math.Inf(1)
	}
	if math.IsNaN(b) {
		b = math.Inf(1)
	}
	return cmp.Compare(a, b)
}
