// Package memlimit refuses, before anything is allocated, what cannot fit
// in memory: a library estimates the bytes an operation will hold from its
// options and checks them with [Need.Check], which returns an
// *option.Error naming the option to lower (by its JSON key; a program
// maps it to its own name, as cmd/nvdp maps it to the flag) instead of a
// Go out-of-memory crash with a stack dump.
//
// The limit is the operation's own bound (release.MaxBatchBytes, a batch
// of `nvdp embed`) or the machine's memory ([Total]).
package memlimit

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/nvdp-project/nvdp/option"
)

// Need is an estimate of the memory an operation holds at once, and the
// limit it must fit.
type Need struct {
	// What the bytes are, as the error says it: "a batch of 32 texts x 3
	// releases x (N P + N = 1000 float32)".
	What string
	// Bytes is the estimate (float64: a product of options overflows no
	// int).
	Bytes float64
	// Limit is the most bytes allowed, and Of what the limit is: "a batch
	// may hold", "of this machine's memory". A Limit <= 0 (unknown) lets
	// everything pass.
	Limit float64
	Of    string
	// Option and Value are the option the error names (its JSON key) and
	// its value; Lower are the options that lower Bytes (Option among
	// them), named by the error's advice.
	Option string
	Value  any
	Lower  []string
}

// Check returns nil when n.Bytes fits n.Limit, else an *option.Error for
// n.Option: "<What> takes <Bytes> GiB, more than the <Limit> GiB <Of>:
// lower <Lower>". A NaN or infinite estimate does not fit.
func (n Need) Check() error {
	if n.Limit <= 0 || n.Bytes <= n.Limit {
		return nil
	}
	lower := n.Lower
	if len(lower) == 0 {
		lower = []string{n.Option}
	}
	return option.MentionErrorf(lower, n.Option, n.Value, "%s takes %.3g GiB, more than the %.3g GiB %s: lower %s",
		n.What, n.Bytes/(1<<30), n.Limit/(1<<30), n.Of, strings.Join(lower, " or "))
}

// OfMachine is Need.Of for a limit of [Total].
const OfMachine = "of this machine's memory"

var total = sync.OnceValue(func() float64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseMemTotal(bufio.NewScanner(f))
})

// Total returns the machine's physical memory in bytes (MemTotal of
// /proc/meminfo), or 0 where it cannot be read (every [Need] of this limit
// then passes).
func Total() float64 { return total() }

// parseMemTotal reads the MemTotal line ("MemTotal: 131072 kB") of s; 0
// when there is none.
func parseMemTotal(s *bufio.Scanner) float64 {
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok || k != "MemTotal" {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || !(kb > 0) || math.IsInf(kb, 0) {
			return 0
		}
		return kb * 1024
	}
	return 0
}

// Floats is the bytes of n float32 values, as float64 (no overflow).
func Floats(n ...int) float64 {
	b := 4.0
	for _, v := range n {
		b *= float64(v)
	}
	return b
}
