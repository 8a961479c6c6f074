package audit

import (
	"os"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/privacy"
)

// copiesBytes is the memory of the float64 working copies of mu and
// sigma^2 a principled audit of p holds unless Options.LowMemory is set:
// 16 bytes per value of the M x N x P posteriors.
func copiesBytes(p *privacy.Posteriors) float64 {
	return 16 * float64(p.M) * float64(p.N) * float64(p.P)
}

// FitMemory sets o.LowMemory when a principled audit of p would hold float64
// copies, see copiesBytes, of more than half of available bytes, and
// reports whether it set it. An audit larger than the memory then runs per
// tile, with the same numbers but slower; see docs/performance.md.
//
// The reference mode holds no copies, and an available <= 0, meaning unknown,
// changes nothing. A caller that was told LowMemory explicitly does not call
// it.
func (o *Options) FitMemory(p *privacy.Posteriors, available float64) bool {
	if o.LowMemory || o.Mode == privacy.ModeReference || available <= 0 || copiesBytes(p) <= available/2 {
		return false
	}
	o.LowMemory = true
	return true
}

// MemAvailable returns the kernel's estimate, in bytes, of the memory
// available to a new process: MemAvailable of /proc/meminfo. It returns 0
// where that cannot be read, as on systems other than Linux.
func MemAvailable() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

// progressWork is the work, audited pairs x components x dims, above which
// an audit is long enough to report its progress; see [Options.Long].
const progressWork = 1e9

// Long reports whether an audit of p with o is long enough to report its
// progress: a principled audit of more than progressWork. The reference
// mode's batches take a moment and report none.
func (o Options) Long(p *privacy.Posteriors) bool {
	return o.Mode != privacy.ModeReference && float64(o.AuditedPairs(p.M))*float64(p.N)*float64(p.P) > progressWork
}
