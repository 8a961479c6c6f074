//go:build amd64 && !amd64.v3

package fma

// Fuses is false: amd64 below GOAMD64=v3 has no fused multiply-add to fuse into.
const Fuses = false
