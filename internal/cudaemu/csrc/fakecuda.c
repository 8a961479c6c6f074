/* fakecuda.c: a CPU stand-in of the subset of the CUDA driver API that
 * package cuda calls (libcuda.so.1), for tests on machines without a GPU.
 * Device memory is host memory, each allocation ending against an
 * inaccessible guard page so that a kernel reading or writing past its end
 * faults; copies check that they stay inside one allocation. A module is a
 * shared object built by the stand-in NVRTC (fakenvrtc.c) from the kernel
 * source as C, carried in the image and opened from a file removed at once; a launch runs the blocks one after the other, and the
 * threads of a block one after the other, or, for a kernel that
 * synchronises its block, as coroutines that meet at each __syncthreads. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
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
/* The CUDA version the stand-in's driver supports: 13.0, or $NVDP_EMU_DRIVER_VERSION
 * (cuDriverGetVersion's 1000*major + 10*minor), for the tests of the libraries' choice. */
CUresult cuDriverGetVersion(int *v) {
	const char *e = getenv("NVDP_EMU_DRIVER_VERSION");
	*v = e && *e ? atoi(e) : 13000;
	return CUDA_SUCCESS;
}
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

#define IMAGE_PREFIX "NVDPEMU:"   /* then the shared object's path (older stand-ins' cubins) */
#define IMAGE2_PREFIX "NVDPEMU2:" /* then "<size>\n" and the shared object's bytes */

/* load2 loads the shared object embedded in a NVDPEMU2 image: written to a
 * temporary file ($TMPDIR, else /tmp), opened, and the file removed at once
 * (the mapping stays): nothing is left behind. */
static void *load2(const char *s) {
	char *end;
	long n = strtol(s, &end, 10);
	if (end == s || *end != '\n' || n <= 0) return NULL;
	const char *bytes = end + 1;
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp) tmp = "/tmp";
	char path[4096];
	if (snprintf(path, sizeof path, "%s/nvdp-emu-XXXXXX.so", tmp) >= (int)sizeof path) return NULL;
	int fd = mkstemps(path, 3);
	if (fd < 0) return NULL;
	ssize_t w = 0;
	while (w < n) {
		ssize_t k = write(fd, bytes + w, (size_t)(n - w));
		if (k <= 0) break;
		w += k;
	}
	close(fd);
	void *so = w == n ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
	unlink(path);
	return so;
}

CUresult cuModuleLoadData(module_t **mod, const void *image) {
	const char *s = image;
	void *so;
	if (strncmp(s, IMAGE2_PREFIX, strlen(IMAGE2_PREFIX)) == 0) {
		so = load2(s + strlen(IMAGE2_PREFIX));
	} else if (strncmp(s, IMAGE_PREFIX, strlen(IMAGE_PREFIX)) == 0) {
		const char *path = s + strlen(IMAGE_PREFIX);
		char *nl = strchr(path, '\n');
		if (!nl) return CUDA_ERROR_INVALID_IMAGE;
		char p[4096];
		snprintf(p, sizeof p, "%.*s", (int)(nl - path), path);
		so = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	} else {
		return CUDA_ERROR_INVALID_IMAGE;
	}
	if (!so) {
		const char *e = dlerror();
		fprintf(stderr, "cudaemu: cannot load the module: %s\n", e ? e : "cannot write its shared object");
		return CUDA_ERROR_INVALID_IMAGE;
	}
	module_t *m = calloc(1, sizeof *m);
	m->so = so;
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

/* Coroutines: co_t is a suspended coroutine's stack pointer. On x86-64 a
 * switch saves the callee-saved registers on the running stack and swaps
 * stack pointers (no system call: glibc's swapcontext saves the signal mask
 * with one, which made a launch of many blocks cost seconds); elsewhere
 * ucontext does it. */
#if defined(__x86_64__) && !defined(NVDP_EMU_UCONTEXT) /* NVDP_EMU_UCONTEXT: the portable way, for checking it */
typedef struct {
	void *sp;
} co_t;
/* co_switch(from, to): suspend into from, resume to. */
void co_switch(co_t *from, co_t *to);
__asm__(".text\n"
        ".globl co_switch\n"
        ".type co_switch, @function\n"
        "co_switch:\n"
        "\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
        "\tmovq %rsp, (%rdi)\n"
        "\tmovq (%rsi), %rsp\n"
        "\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
        "\tret\n"
        ".size co_switch, .-co_switch\n");
/* co_boot is where a new coroutine starts: the entry function is in %r12,
 * its argument in %r13 (set up by co_make); the entry never returns. */
void co_boot(void);
__asm__(".text\n"
        ".globl co_boot\n"
        ".type co_boot, @function\n"
        "co_boot:\n"
        "\tmovq %r13, %rdi\n"
        "\tcallq *%r12\n"
        "\tud2\n"
        ".size co_boot, .-co_boot\n");
/* co_make prepares c to run fn(arg) on the stack [stack, stack+size). */
static void co_make(co_t *c, void *stack, size_t size, void (*fn)(void *), void *arg) {
	uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
	void **sp = (void **)top;
	*--sp = 0;            /* alignment: after co_boot's call the callee sees a 16-aligned frame */
	*--sp = (void *)co_boot; /* co_switch's ret */
	*--sp = 0;            /* rbp */
	*--sp = 0;            /* rbx */
	*--sp = (void *)fn;   /* r12 */
	*--sp = arg;          /* r13 */
	*--sp = 0;            /* r14 */
	*--sp = 0;            /* r15 */
	c->sp = sp;
}
#else
typedef struct {
	ucontext_t uc;
} co_t;
static void co_switch(co_t *from, co_t *to) { swapcontext(&from->uc, &to->uc); }
static void co_main(void *arg);
/* co_trampoline gets the thread's pointer in two ints (makecontext passes
 * int arguments); every coroutine runs co_main. */
static void co_trampoline(unsigned hi, unsigned lo) { co_main((void *)(((uintptr_t)hi << 32) | (uintptr_t)lo)); }
static void co_make(co_t *c, void *stack, size_t size, void (*fn)(void *), void *arg) {
	(void)fn; /* always co_main */
	getcontext(&c->uc);
	c->uc.uc_stack.ss_sp = stack;
	c->uc.uc_stack.ss_size = size;
	c->uc.uc_link = NULL;
	uintptr_t p = (uintptr_t)arg;
	makecontext(&c->uc, (void (*)(void))co_trampoline, 2, (unsigned)(p >> 32), (unsigned)(p & 0xffffffffu));
}
#endif

/* A CUDA thread of a launch: its context, and the launch it runs. The
 * threads of a block that synchronises run as coroutines of one OS thread:
 * __syncthreads returns to the scheduler, which runs every unfinished
 * thread of the block up to its next __syncthreads (or its end) in turn, so
 * the block's threads meet there as on a GPU, deterministically; a thread
 * that has returned no longer takes part (as on Volta and later). */
typedef struct launch launch_t;
typedef struct {
	nvdp_emu_ctx ctx;
	launch_t *l;
	unsigned tx, ty, tz;
	co_t co;
	int done;
} thread_t;

struct launch {
	function_t *f;
	void **params;
	unsigned gx, gy, gz, bx, by, bz;
	void *dyn;
	co_t sched;
};

static void no_sync(nvdp_emu_ctx *c) { (void)c; }

/* co_sync is __syncthreads of a coroutine: back to the scheduler. */
static void co_sync(nvdp_emu_ctx *c) {
	thread_t *t = (thread_t *)c; /* ctx is the thread's first field */
	co_switch(&t->co, &t->l->sched);
}

/* set_block gives thread t the indices of block (x, y, z). */
static void set_block(thread_t *t, unsigned x, unsigned y, unsigned z) {
	launch_t *l = t->l;
	t->ctx.tid = (nvdp_dim3){t->tx, t->ty, t->tz};
	t->ctx.bid = (nvdp_dim3){x, y, z};
	t->ctx.bdim = (nvdp_dim3){l->bx, l->by, l->bz};
	t->ctx.gdim = (nvdp_dim3){l->gx, l->gy, l->gz};
	t->ctx.dyn_smem = l->dyn;
}

/* co_main is a coroutine's body: thread t runs the kernel, then hands back
 * for good. */
static void co_main(void *arg) {
	thread_t *t = arg;
	t->l->f->wrap(t->l->params);
	t->done = 1;
	co_switch(&t->co, &t->l->sched);
}

#define CO_STACK (64 << 10)

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
				ts[i].ctx.sync = f->syncs ? co_sync : no_sync;
			}
	char *stacks = f->syncs ? malloc((size_t)nt * CO_STACK) : NULL;
	for (unsigned z = 0; z < gz; z++)
		for (unsigned y = 0; y < gy; y++)
			for (unsigned x = 0; x < gx; x++) {
				if (!f->syncs) { /* no thread waits for another: each runs to its end in turn */
					for (i = 0; i < nt; i++) {
						set_block(&ts[i], x, y, z);
						f->set_self(&ts[i].ctx);
						f->wrap(params);
					}
					continue;
				}
				for (i = 0; i < nt; i++) {
					thread_t *t = &ts[i];
					set_block(t, x, y, z);
					t->done = 0;
					co_make(&t->co, stacks + (size_t)i * CO_STACK, CO_STACK, co_main, t);
				}
				for (int running = 1; running;) { /* one round: every unfinished thread to its next barrier */
					running = 0;
					for (i = 0; i < nt; i++) {
						if (ts[i].done) continue;
						f->set_self(&ts[i].ctx);
						co_switch(&l.sched, &ts[i].co);
						running |= !ts[i].done;
					}
				}
			}
	free(stacks);
	free(ts);
	free(l.dyn);
	return CUDA_SUCCESS;
}
