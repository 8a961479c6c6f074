// Package dnn is the device twin of package nn (docs/engine.md, "The CUDA
// backend"): the same layers with the same forward/backward contract and
// the same parameter names, on a GPU through package cuda. As train_gpt2.cu
// beside train_gpt2.c in llm.c, each layer of nn has a twin here whose
// kernels are CUDA C in kernels/*.cu (compiled once per card by NVRTC) and
// whose GEMMs go to cuBLAS; each twin is tested against its nn layer on the
// same inputs and parameters (on the CPU stand-in of internal/cudaemu in
// CI, on a GPU with NVDP_CUDA_REAL=1), with the tolerance stated per layer.
//
// Everything here runs on the device goroutine (inside cuda.Device.Do): a
// training step runs whole there. A failed launch or allocation is a panic
// with the *cuda.Error, which Do returns as an error; shape mismatches are
// programmer errors, as in nn.
//
// Memory: parameters, gradients and optimizer moments are allocated once
// (Engine.Param); a step's activations come from the Engine's arena
// (Engine.New), released together by Engine.Reset at the start of the next
// step, so that a step makes no cuMemAlloc once the arena has grown to it.
package dnn
