//go:build !amd64 || amd64.v3

package fma

// Fuses is true: this architecture, or GOAMD64=v3 and above, lets the
// compiler fuse x*y + z.
const Fuses = true
