// Package fma says whether the Go compiler may fuse a multiply and an add
// (x*y + z) into one fused multiply-add, with one rounding instead of two,
// in this build. The Go specification allows it on any architecture; the
// compiler does it on arm64, ppc64, s390x, riscv64 and loong64, and on amd64
// from GOAMD64=v3 (whose CPUs have FMA). Numbers pinned bit for bit by the
// tests are those of unfused arithmetic on amd64 (the default GOAMD64=v1):
// a test that pins bits checks Fuses and compares with a tolerance, or
// skips, where it is true. Code that must give the same bits everywhere
// rounds explicitly (float64(x*y) + z), as the Go specification provides.
package fma
