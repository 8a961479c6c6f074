// Package cuda runs nvdp's engine on an NVIDIA GPU, without cgo and without CUDA at build time.
//
// The NVIDIA driver libcuda.so.1, cuBLAS (libcublas.so.13 or .12) and NVRTC (libnvrtc.so.13 or
// .12) are loaded through github.com/ebitengine/purego when a program asks for a device with
// [Open], by soname from NVDP_CUDA_LIB_DIR or the loader path. cuBLAS and NVRTC are those of the
// CUDA major version the driver runs, as cuDriverGetVersion reports it: a driver for 13.0 or later
// tries 13 then 12, a 12.x driver 12 only. NVRTC's builtins library,
// libnvrtc-builtins.so.MAJOR.MINOR, which NVRTC opens through the system loader only, is loaded
// first from NVRTC's directory. A machine without these libraries builds and runs everything else
// as before; Open then returns a [*LoadError] naming what was looked for, where, and which CUDA
// version and why.
//
// One goroutine, locked to its OS thread, owns the device's CUDA context, and [Device.Do] runs a
// function there. A training step runs whole inside one Do, so that its kernel launches and cuBLAS
// calls pay no hand-off. Memory is a [Buffer], a device allocation of bytes. Kernels are CUDA C
// source in the repository, compiled at run time by NVRTC for the card found and cached per card,
// source and NVRTC version by [Device.Compile]. GEMMs go to cuBLAS: [Device.Gemm] in the row-major
// convention of nn.Gemm, and [Device.GemmBF16] on bfloat16 operands with FP32 accumulation,
// which package dnn's layers call on a device opened with [PrecisionBF16].
//
// Kernel sources follow the conventions of [Prelude], with KERNEL, DEVICE and SHARED_DYN, so that
// the same source also compiles as plain C against the CPU stand-in of internal/cudaemu. The
// stand-in tests the Go side and the kernels' arithmetic on machines without a GPU; see "The CUDA
// backend" in docs/engine.md.
package cuda
