// Command standin builds the CUDA stand-in libraries (package cudaemu) and
// prints their directory, for NVDP_CUDA_LIB_DIR and NVDP_EMU_INCLUDE in a
// dry run of scripts/gpu-check.sh on a machine without a GPU.
package main

import (
	"fmt"
	"os"

	"github.com/nvdp-project/nvdp/internal/cudaemu"
)

func main() {
	dir, err := cudaemu.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		os.Exit(1)
	}
	fmt.Println(dir)
}
