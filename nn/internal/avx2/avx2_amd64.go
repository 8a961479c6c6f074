//go:build !purego

// Package avx2 holds package nn's AVX2 kernels, in a package of their own because Go assembly
// cannot live in a package that uses cgo (nn does, with the openblas tag). Each kernel does the
// operations of its Go loop in nn in the same order, each rounded on its own (no FMA), so it
// returns the same bits; nn's tests pin each to its loop. (A build with GOAMD64=v3 lets the Go
// compiler fuse multiply-adds, which the kernels do not: build with the default, v1.)
package avx2

import "golang.org/x/sys/cpu"

// Available reports whether the CPU has AVX2, which the kernels need.
var Available = cpu.X86.HasAVX2

// GELU sets y[k] = x[k] Phi(x[k]) for k < n, n a positive multiple of 4, four elements at a time,
// Phi from tab, package nn's table of cubic coefficients (4 per interval of width 1/32 on
// [-10, 10)): nn's normalCDF. It stops at the first group of four with an element outside
// (-10, 10) (NaN included) and returns how many elements it wrote, a multiple of 4, so that the
// caller does that group itself. x, y and tab must hold n, n and 2,560 values.
//
//go:noescape
func GELU(x, y *float32, n int, tab *float64) int

// ExpShifted sets s[k] = nn.Expf(s[k] - mx) for k < n, n a positive multiple of 8, eight elements
// at a time: the softmax's exponentials. It stops at the first group of eight with an element
// whose s[k] - mx is NaN or takes one of Expf's rare paths (a result below 2^-125 but above 0, or
// above 2^127) and returns how many elements it wrote, a multiple of 8, so that the caller does
// that group itself. Arguments below -87.33654 (-Inf included) give 0, as in Expf.
//
//go:noescape
func ExpShifted(s *float32, n int, mx float32) int
