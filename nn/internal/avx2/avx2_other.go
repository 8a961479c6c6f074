//go:build !amd64 || purego

// Package avx2 holds package nn's AVX2 kernels, in a package of their own because Go assembly
// cannot live in a package that uses cgo (nn does, with the openblas tag). This build has none.
package avx2

// Available is false: no kernels on this architecture or build.
const Available = false

// GELU is never called where Available is false.
func GELU(x, y *float32, n int, tab *float64) int { panic("avx2: no kernels in this build") }

// ExpShifted is never called where Available is false.
func ExpShifted(s *float32, n int, mx float32) int { panic("avx2: no kernels in this build") }
