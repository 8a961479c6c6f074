/* nvdp_emu.h: what a kernel source of nvdp (package cuda's Prelude) needs to
 * compile as plain C against the CPU stand-in of the CUDA driver
 * (fakecuda.c). Each CUDA thread of a launch runs with its indices in
 * nvdp_emu_self, one after the other, or as a coroutine for a kernel that
 * calls __syncthreads (directly or through its helpers); the blocks of a
 * grid run one after the other, so a static variable is the block's shared
 * memory. */
#ifndef NVDP_EMU_H
#define NVDP_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdbool.h>

typedef struct { unsigned int x, y, z; } nvdp_dim3;

typedef struct nvdp_emu_ctx {
	nvdp_dim3 tid, bid, bdim, gdim; /* threadIdx, blockIdx, blockDim, gridDim */
	void *dyn_smem;
	void (*sync)(struct nvdp_emu_ctx *);
	void *barrier;
} nvdp_emu_ctx;

extern __thread nvdp_emu_ctx *nvdp_emu_self;

#define threadIdx (nvdp_emu_self->tid)
#define blockIdx (nvdp_emu_self->bid)
#define blockDim (nvdp_emu_self->bdim)
#define gridDim (nvdp_emu_self->gdim)
#define __syncthreads() nvdp_emu_self->sync(nvdp_emu_self)

#define KERNEL
#define DEVICE static inline
#define __device__
#define __forceinline__
#define __restrict__ restrict
#define __shared__ static
#define SHARED_DYN(type, name) type *name = (type *)nvdp_emu_self->dyn_smem

#ifndef max
#define max(a, b) ((a) > (b) ? (a) : (b))
#endif
#ifndef min
#define min(a, b) ((a) < (b) ? (a) : (b))
#endif

static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
#define __expf expf
#define __logf logf
static inline unsigned int __float_as_uint(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned int)(((uint64_t)a * b) >> 32); }

static inline float nvdp_atomic_add_f(float *p, float v) {
	unsigned int expect, want;
	float old;
	do {
		old = *p;
		memcpy(&expect, &old, 4);
		float sum = old + v;
		memcpy(&want, &sum, 4);
	} while (!__atomic_compare_exchange_n((unsigned int *)p, &expect, want, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	return old;
}
static inline double nvdp_atomic_add_d(double *p, double v) {
	uint64_t expect, want;
	double old;
	do {
		old = *p;
		memcpy(&expect, &old, 8);
		double sum = old + v;
		memcpy(&want, &sum, 8);
	} while (!__atomic_compare_exchange_n((uint64_t *)p, &expect, want, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	return old;
}
static inline int nvdp_atomic_add_i(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned int nvdp_atomic_add_u(unsigned int *p, unsigned int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
#define atomicAdd(p, v) _Generic((p), float *: nvdp_atomic_add_f, double *: nvdp_atomic_add_d, int *: nvdp_atomic_add_i, unsigned int *: nvdp_atomic_add_u)(p, v)

#endif
