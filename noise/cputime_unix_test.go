//go:build unix

package noise

import (
	"syscall"
	"time"
)

// cpuTime is the process's user and system CPU time so far, or 0 where unknown: a benchmark's
// rate by CPU time holds while other processes share the cores, where the wall clock's does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
