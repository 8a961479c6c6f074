// Package dnn is the device twin of package nn: the same layers with the same forward and backward
// contract and the same parameter names, on a GPU through package cuda; see "The CUDA backend" in
// docs/engine.md.
//
// As train_gpt2.cu stands beside train_gpt2.c in llm.c, each layer of nn has a twin here whose
// kernels are CUDA C in kernels/*.cu, compiled once per card by NVRTC, and whose GEMMs go to
// cuBLAS. Each twin is tested against its nn layer on the same inputs and parameters, with the
// tolerance stated per layer: on the CPU stand-in of internal/cudaemu in CI, and on a GPU with
// NVDP_CUDA_REAL=1.
//
// Everything here runs on the device goroutine, inside [cuda.Device.Do], and a training step runs
// whole there. A failed launch or allocation is a panic with the [*cuda.Error], which Do returns
// as an error. Shape mismatches are programmer errors, as in nn.
//
// Parameters, gradients and optimizer moments are allocated once, by [Engine.Param]. A step's
// activations come from the Engine's arena, by [Engine.New], and are released together by
// [Engine.Reset] at the start of the next step, so that a step makes no cuMemAlloc once the arena
// has grown to it.
package dnn
