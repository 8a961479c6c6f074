/* fakecuda.c: a CPU stand-in of the subset of the CUDA driver API that
 * package cuda calls (libcuda.so.1), for tests on machines without a GPU.
 * Device memory is host memory, each allocation ending against an
 * inaccessible guard page so that a kernel reading or writing past its end
 * faults; copies check that they stay inside one allocation. A module is a
 * shared object built by the stand-in NVRTC (fakenvrtc.c) from the kernel
 * source as C; a launch runs the blocks one after the other, the threads of
 * a block as OS threads with a barrier for __syncthreads (or one after the
 * other when the module never synchronises). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nvdp_emu.h"

typedef int CUresult;
enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
};

static int initialized;

/* The allocations: start, size and the mapping around them. */
typedef struct {
	char *ptr;
	size_t size;
	char *map;
	size_t maplen;
} alloc_t;

static alloc_t *allocs;
static size_t nallocs, capallocs;
static pthread_mutex_t allocs_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t live_bytes;

/* nvdp_emu_live_bytes and nvdp_emu_live_allocs report what is allocated,
 * for the tests' leak checks. */
size_t nvdp_emu_live_bytes(void) { return live_bytes; }
size_t nvdp_emu_live_allocs(void) { return nallocs; }

const char *err_name(CUresult e) {
	switch (e) {
	case CUDA_SUCCESS: return "CUDA_SUCCESS";
	case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
	case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
	case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
	case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
	case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
	case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
	}
	return "CUDA_ERROR_UNKNOWN";
}

CUresult cuGetErrorName(CUresult e, const char **s) { *s = err_name(e); return CUDA_SUCCESS; }
CUresult cuGetErrorString(CUresult e, const char **s) {
	*s = e == CUDA_SUCCESS ? "no error" : "error of the CPU stand-in of the CUDA driver (nvdp internal/cudaemu)";
	return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags) { (void)flags; initialized = 1; return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *n) { if (!initialized) return CUDA_ERROR_NOT_INITIALIZED; *n = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(int *dev, int ordinal) { if (ordinal != 0) return CUDA_ERROR_INVALID_VALUE; *dev = 0; return CUDA_SUCCESS; }
CUresult cuDeviceGetName(char *name, int n, int dev) { (void)dev; snprintf(name, n, "CPU stand-in (nvdp cudaemu)"); return CUDA_SUCCESS; }
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
	(void)dev;
	switch (attr) {
	case 75: *v = 9; break;  /* compute capability major */
	case 76: *v = 0; break;  /* minor */
	case 16: *v = 2; break;  /* multiprocessors */
	case 1: *v = 1024; break; /* max threads per block */
	default: *v = 0;
	}
	return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) { (void)dev; *bytes = (size_t)1 << 32; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)dev; *ctx = (void *)&initialized; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; return CUDA_SUCCESS; }
CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) { *total = (size_t)1 << 32; *free_ = *total - live_bytes; return CUDA_SUCCESS; }

CUresult cuMemAlloc_v2(uintptr_t *dptr, size_t size) {
	if (size == 0) return CUDA_ERROR_INVALID_VALUE;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t body = (size + 15) & ~(size_t)15;
	size_t span = (body + page - 1) / page * page;
	char *map = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
	mprotect(map + span, page, PROT_NONE); /* the guard page */
	alloc_t a = {map + span - body, size, map, span + page};
	memset(a.ptr, 0xA5, body); /* device memory is not zeroed: neither is this */
	pthread_mutex_lock(&allocs_mu);
	if (nallocs == capallocs) {
		capallocs = capallocs ? 2 * capallocs : 64;
		allocs = realloc(allocs, capallocs * sizeof *allocs);
	}
	allocs[nallocs++] = a;
	live_bytes += size;
	pthread_mutex_unlock(&allocs_mu);
	*dptr = (uintptr_t)a.ptr;
	return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(uintptr_t dptr) {
	pthread_mutex_lock(&allocs_mu);
	for (size_t i = 0; i < nallocs; i++) {
		if ((uintptr_t)allocs[i].ptr == dptr) {
			munmap(allocs[i].map, allocs[i].maplen);
			live_bytes -= allocs[i].size;
			allocs[i] = allocs[--nallocs];
			pthread_mutex_unlock(&allocs_mu);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&allocs_mu);
	return CUDA_ERROR_INVALID_VALUE;
}

/* inside reports whether [p, p+n) lies inside one allocation. */
static int inside(uintptr_t p, size_t n) {
	int ok = 0;
	pthread_mutex_lock(&allocs_mu);
	for (size_t i = 0; i < nallocs && !ok; i++) {
		uintptr_t s = (uintptr_t)allocs[i].ptr;
		ok = p >= s && p + n <= s + allocs[i].size;
	}
	pthread_mutex_unlock(&allocs_mu);
	return ok;
}

CUresult cuMemcpyHtoD_v2(uintptr_t dst, const void *src, size_t n) {
	if (!inside(dst, n)) return CUDA_ERROR_INVALID_VALUE;
	memcpy((void *)dst, src, n);
	return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH_v2(void *dst, uintptr_t src, size_t n) {
	if (!inside(src, n)) return CUDA_ERROR_INVALID_VALUE;
	memcpy(dst, (void *)src, n);
	return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoD_v2(uintptr_t dst, uintptr_t src, size_t n) {
	if (!inside(dst, n) || !inside(src, n)) return CUDA_ERROR_INVALID_VALUE;
	memmove((void *)dst, (void *)src, n);
	return CUDA_SUCCESS;
}
CUresult cuMemsetD32_v2(uintptr_t dst, unsigned int v, size_t n) {
	if (!inside(dst, 4 * n)) return CUDA_ERROR_INVALID_VALUE;
	unsigned int *p = (unsigned int *)dst;
	for (size_t i = 0; i < n; i++) p[i] = v;
	return CUDA_SUCCESS;
}

/* A module: the shared object of the stand-in NVRTC. */
typedef struct {
	void *so;
} module_t;

/* A function: its wrapper (arguments from the launch's parameter array)
 * and whether it synchronises its block (the stand-in NVRTC's
 * nvdp_emu_syncs_NAME). */
typedef struct {
	module_t *mod;
	void (*wrap)(void **);
	void (*set_self)(nvdp_emu_ctx *);
	int syncs;
	int max_dyn_smem;
} function_t;

#define IMAGE_PREFIX "NVDPEMU:"

CUresult cuModuleLoadData(module_t **mod, const void *image) {
	const char *s = image;
	if (strncmp(s, IMAGE_PREFIX, strlen(IMAGE_PREFIX)) != 0) return CUDA_ERROR_INVALID_IMAGE;
	const char *path = s + strlen(IMAGE_PREFIX);
	char *nl = strchr(path, '\n');
	if (!nl) return CUDA_ERROR_INVALID_IMAGE;
	char so[4096];
	snprintf(so, sizeof so, "%.*s", (int)(nl - path), path);
	module_t *m = calloc(1, sizeof *m);
	m->so = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	if (!m->so) {
		fprintf(stderr, "cudaemu: %s\n", dlerror());
		free(m);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	*mod = m;
	return CUDA_SUCCESS;
}

CUresult cuModuleUnload(module_t *m) {
	dlclose(m->so);
	free(m);
	return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(function_t **fn, module_t *m, const char *name) {
	char sym[512];
	snprintf(sym, sizeof sym, "nvdp_emu_wrap_%s", name);
	void *w = dlsym(m->so, sym);
	void *set = dlsym(m->so, "nvdp_emu_set_self");
	snprintf(sym, sizeof sym, "nvdp_emu_syncs_%s", name);
	int *sy = dlsym(m->so, sym);
	if (!w || !set || !sy) return CUDA_ERROR_NOT_FOUND;
	function_t *f = calloc(1, sizeof *f);
	f->mod = m;
	f->syncs = *sy;
	f->wrap = (void (*)(void **))w;
	f->set_self = (void (*)(nvdp_emu_ctx *))set;
	f->max_dyn_smem = 48 << 10;
	*fn = f;
	return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(function_t *f, int attr, int v) {
	if (attr == 8) f->max_dyn_smem = v; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
	return CUDA_SUCCESS;
}

/* A CUDA thread of a launch: its context, and the launch it runs. */
typedef struct launch launch_t;
typedef struct {
	nvdp_emu_ctx ctx;
	launch_t *l;
	unsigned tx, ty, tz;
} thread_t;

struct launch {
	function_t *f;
	void **params;
	unsigned gx, gy, gz, bx, by, bz;
	void *dyn;
	pthread_barrier_t bar;
};

static void barrier_sync(nvdp_emu_ctx *c) { pthread_barrier_wait((pthread_barrier_t *)c->barrier); }
static void no_sync(nvdp_emu_ctx *c) { (void)c; }

/* run_block runs thread t of block (x, y, z). */
static void run_block(thread_t *t, unsigned x, unsigned y, unsigned z) {
	launch_t *l = t->l;
	t->ctx.tid = (nvdp_dim3){t->tx, t->ty, t->tz};
	t->ctx.bid = (nvdp_dim3){x, y, z};
	t->ctx.bdim = (nvdp_dim3){l->bx, l->by, l->bz};
	t->ctx.gdim = (nvdp_dim3){l->gx, l->gy, l->gz};
	t->ctx.dyn_smem = l->dyn;
	l->f->set_self(&t->ctx);
	l->f->wrap(l->params);
}

/* run_all is one OS thread standing for one CUDA thread of every block in
 * turn: the block's threads run at once (they meet at __syncthreads), and a
 * barrier at each block's end keeps the blocks one after the other, so
 * that static shared memory is the running block's. */
static void *run_all(void *arg) {
	thread_t *t = arg;
	launch_t *l = t->l;
	for (unsigned z = 0; z < l->gz; z++)
		for (unsigned y = 0; y < l->gy; y++)
			for (unsigned x = 0; x < l->gx; x++) {
				run_block(t, x, y, z);
				pthread_barrier_wait(&l->bar);
			}
	return NULL;
}

CUresult cuLaunchKernel(function_t *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
	(void)stream;
	(void)extra;
	unsigned nt = bx * by * bz;
	if (nt == 0 || nt > 1024 || gx == 0 || gy == 0 || gz == 0) return CUDA_ERROR_INVALID_VALUE;
	if ((int)shared > f->max_dyn_smem) return CUDA_ERROR_INVALID_VALUE;
	launch_t l = {f, params, gx, gy, gz, bx, by, bz, calloc(shared ? shared : 1, 1)};
	thread_t *ts = calloc(nt, sizeof *ts);
	unsigned i = 0;
	for (unsigned tz = 0; tz < bz; tz++)
		for (unsigned ty = 0; ty < by; ty++)
			for (unsigned tx = 0; tx < bx; tx++, i++) {
				ts[i].l = &l;
				ts[i].tx = tx, ts[i].ty = ty, ts[i].tz = tz;
				ts[i].ctx.sync = no_sync;
				ts[i].ctx.barrier = &l.bar;
			}
	if (!f->syncs || nt == 1) { /* no thread waits for another: one OS thread runs them all in turn */
		for (unsigned z = 0; z < gz; z++)
			for (unsigned y = 0; y < gy; y++)
				for (unsigned x = 0; x < gx; x++)
					for (i = 0; i < nt; i++) run_block(&ts[i], x, y, z);
		free(ts);
		free(l.dyn);
		return CUDA_SUCCESS;
	}
	pthread_barrier_init(&l.bar, NULL, nt);
	pthread_t *tids = calloc(nt, sizeof *tids);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 1 << 20);
	for (i = 0; i < nt; i++) {
		ts[i].ctx.sync = barrier_sync;
		if (pthread_create(&tids[i], &attr, run_all, &ts[i]) != 0) { /* the barrier would never open: cannot recover */
			fprintf(stderr, "cudaemu: only %u of %u threads started\n", i, nt);
			abort();
		}
	}
	for (i = 0; i < nt; i++) pthread_join(tids[i], NULL);
	pthread_barrier_destroy(&l.bar);
	pthread_attr_destroy(&attr);
	free(tids);
	free(ts);
	free(l.dyn);
	return CUDA_SUCCESS;
}
