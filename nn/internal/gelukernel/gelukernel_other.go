//go:build !amd64 || purego

// Package gelukernel is the AVX2 kernel of package nn's inference GELU, in a package of its own
// because Go assembly cannot live in a package that uses cgo (nn does, with the openblas tag).
package gelukernel

// Available is false: no kernel on this architecture or build.
const Available = false

// AVX2 is never called where Available is false.
func AVX2(x, y *float32, n int, tab *float64) int { panic("gelukernel: no AVX2 kernel in this build") }
