//go:build tools

// Package tools pins dependencies that packages adopt progressively, so that
// `go mod tidy` keeps them while parallel work lands. Remove entries as real
// imports appear.
package tools

import (
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/sugarme/tokenizer"
	_ "gonum.org/v1/gonum/blas/blas32"
	_ "gonum.org/v1/gonum/mathext"
	_ "gonum.org/v1/netlib/blas/netlib"
	_ "gonum.org/v1/plot"
)
