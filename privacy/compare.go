package privacy

import (
	"cmp"
	"math"
)

// CompareBounds orders two privacy bounds of the same kind, RD in nats or
// epsilons, from tightest to loosest. It returns -1 when a is tighter, that
// is smaller, than b, +1 when a is looser, and 0 when they are equal.
//
// An undefined bound, NaN, counts as +Inf: it is never tighter than a defined
// one, whereas cmp.Compare would put NaN first.
func CompareBounds(a, b float64) int {
	if math.IsNaN(a) {
		a = math.Inf(1)
	}
	if math.IsNaN(b) {
		b = math.Inf(1)
	}
	return cmp.Compare(a, b)
}
