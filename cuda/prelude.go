package cuda

// Prelude is prepended to every kernel source before it is compiled. A kernel source uses its
// macros so that the same text compiles as CUDA C++ with NVRTC and as plain C against the CPU
// stand-in, internal/cudaemu, which defines NVDP_EMU and supplies threadIdx, blockIdx, blockDim,
// gridDim, __syncthreads, atomicAdd and the math functions:
//
//	KERNEL void name(float *out, const float *in, int n) { ... }  // a __global__ function with C linkage
//	DEVICE float helper(float x) { ... }                          // a device function
//	__shared__ float tile[256];                                   // static shared memory
//	SHARED_DYN(float, buf);                                       // dynamic shared memory, the launch's bytes
//
// Kernels use no warp-level primitives such as shuffles and votes: block reductions go through
// shared memory and __syncthreads, which the stand-in runs with one thread per CUDA thread and a
// barrier.
const Prelude = `#ifdef NVDP_EMU
#include "nvdp_emu.h"
#else
#define KERNEL extern "C" __global__
#define DEVICE static __device__ __forceinline__
#define SHARED_DYN(type, name) extern __shared__ type name[]
#endif
`
