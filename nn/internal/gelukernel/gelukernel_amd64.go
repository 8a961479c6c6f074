//go:build !purego

// Package gelukernel is the AVX2 kernel of package nn's inference GELU, in a package of its own
// because Go assembly cannot live in a package that uses cgo (nn does, with the openblas tag).
package gelukernel

import "golang.org/x/sys/cpu"

// Available reports whether the CPU has AVX2, which [AVX2] needs.
var Available = cpu.X86.HasAVX2

// AVX2 sets y[k] = x[k] Phi(x[k]) for k < n, n a positive multiple of 4, four elements at a time,
// Phi from tab, package nn's table of cubic coefficients (4 per interval of width 1/32 on
// [-10, 10)): the operations of nn's normalCDF, each rounded on its own (no FMA), so the same
// bits. It stops at the first group of four with an element outside (-10, 10) (NaN included) and
// returns how many elements it wrote, a multiple of 4, so that the caller does that group itself.
// x, y and tab must hold n, n and 2,560 values.
//
//go:noescape
func AVX2(x, y *float32, n int, tab *float64) int
