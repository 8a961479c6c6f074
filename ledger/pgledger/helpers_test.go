package pgledger_test

import (
	"math"

	"github.com/nvdp-project/nvdp/privacy"
)

const rho = 0.01 // the fake's curve: rd(order) = order rho

// epsOfReleases is the independent conversion of m releases of the fake's
// curve (the formula of docs/privacy.md, written out again).
func epsOfReleases(m float64) float64 {
	best := math.Inf(1)
	for _, o := range privacy.DefaultOrders {
		best = math.Min(best, m*o*rho+math.Log((o-1)/o)-(math.Log(privacy.DefaultDelta)+math.Log(o))/(o-1))
	}
	return math.Max(0, best)
}
