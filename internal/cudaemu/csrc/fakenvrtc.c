/* fakenvrtc.c: a CPU stand-in of the subset of NVRTC that package cuda
 * calls (libnvrtc.so.13). "Compiling" a program writes its source as C,
 * with NVDP_EMU defined and one wrapper per KERNEL function that unpacks a
 * launch's parameter array, and builds it into a shared object with the C
 * compiler ($NVDP_EMU_CC, else cc) and the header nvdp_emu.h of
 * $NVDP_EMU_INCLUDE, in a temporary directory ($TMPDIR, else /tmp) removed
 * once built: the "cubin" holds the object itself ("NVDPEMU2:<size>\n"
 * then its bytes; fakecuda.c loads it), so that nothing is left behind and
 * a cached cubin needs no file beside it.
 * -D options pass to the compiler; the others (the architecture,
 * --fmad=false) are ignored. The C compiler never contracts a*b+c into a
 * fused multiply-add (-ffp-contract=off, whatever CC's defaults or
 * -march): the stand-in computes what --fmad=false asks of NVRTC, whose
 * default contracts. */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvrtcResult;
enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_OUT_OF_MEMORY = 1, NVRTC_ERROR_INVALID_INPUT = 3, NVRTC_ERROR_INVALID_PROGRAM = 4, NVRTC_ERROR_COMPILATION = 6 };

typedef struct {
	char *src, *name, *log, *cubin;
	size_t cubin_len;
} program_t;

const char *nvrtcGetErrorString(nvrtcResult r) {
	switch (r) {
	case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
	case NVRTC_ERROR_OUT_OF_MEMORY: return "NVRTC_ERROR_OUT_OF_MEMORY";
	case NVRTC_ERROR_INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
	case NVRTC_ERROR_INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
	case NVRTC_ERROR_COMPILATION: return "NVRTC_ERROR_COMPILATION";
	}
	return "NVRTC_ERROR_UNKNOWN";
}

nvrtcResult nvrtcVersion(int *major, int *minor) { *major = 13; *minor = 0; return NVRTC_SUCCESS; }

nvrtcResult nvrtcCreateProgram(program_t **prog, const char *src, const char *name, int nh, const char **h, const char **inc) {
	(void)h;
	(void)inc;
	if (!src || nh != 0) return NVRTC_ERROR_INVALID_INPUT;
	program_t *p = calloc(1, sizeof *p);
	p->src = strdup(src);
	p->name = strdup(name ? name : "program");
	*prog = p;
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(program_t **prog) {
	program_t *p = *prog;
	if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
	free(p->src);
	free(p->name);
	free(p->log);
	free(p->cubin);
	free(p);
	*prog = NULL;
	return NVRTC_SUCCESS;
}

/* buf is a growing string. */
typedef struct {
	char *s;
	size_t n, cap;
} buf_t;

static void put(buf_t *b, const char *s, size_t n) {
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->s = realloc(b->s, b->cap);
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = 0;
}
static void puts_(buf_t *b, const char *s) { put(b, s, strlen(s)); }

/* A function definition of the source: its name and body. */
typedef struct {
	char name[256];
	const char *body, *end; /* from its '{' to its matching '}' */
	int syncs;              /* -1: unknown yet */
} fn_t;

/* isident reports whether c can be part of a C identifier. */
static int isident(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* functions finds the definitions "IDENT ( ... ) {" at brace depth 0 of src
 * (kernels, device helpers; prototypes end in ';' and are skipped). */
static int functions(const char *src, fn_t *fns, int max) {
	int n = 0, depth = 0;
	for (const char *p = src; *p && n < max; p++) {
		if (*p == '/' && p[1] == '/') { /* line comment */
			while (*p && *p != '\n') p++;
			if (!*p) break;
			continue;
		}
		if (*p == '/' && p[1] == '*') {
			const char *e = strstr(p + 2, "*/");
			if (!e) break;
			p = e + 1;
			continue;
		}
		if (*p == '{') { depth++; continue; }
		if (*p == '}') { depth--; continue; }
		if (depth != 0 || *p != '(' ) continue;
		const char *id = p;
		while (id > src && isspace((unsigned char)id[-1])) id--;
		const char *e = id;
		while (id > src && isident(id[-1])) id--;
		if (id == e) continue;
		int par = 0;
		const char *q = p;
		for (; *q; q++) {
			if (*q == '(') par++;
			if (*q == ')' && --par == 0) break;
		}
		if (!*q) break;
		q++;
		while (isspace((unsigned char)*q)) q++;
		if (*q != '{') { p = q - 1; continue; }
		const char *b = q;
		int d = 0;
		for (; *q; q++) {
			if (*q == '{') d++;
			if (*q == '}' && --d == 0) break;
		}
		if (!*q) break;
		snprintf(fns[n].name, sizeof fns[n].name, "%.*s", (int)(e - id), id);
		fns[n].body = b;
		fns[n].end = q;
		fns[n].syncs = -1;
		n++;
		p = q;
	}
	return n;
}

/* calls reports whether body [b, e) names the identifier name. */
static int calls(const char *b, const char *e, const char *name) {
	size_t n = strlen(name);
	for (const char *p = b; p + n <= e; p++) {
		if (strncmp(p, name, n) == 0 && (p == b || !isident(p[-1])) && (p + n == e || !isident(p[n]))) return 1;
	}
	return 0;
}

/* syncs marks each function that calls __syncthreads itself or through a
 * function of the source that does (to a fixed point). */
static void syncs(fn_t *fns, int n) {
	for (int i = 0; i < n; i++) fns[i].syncs = calls(fns[i].body, fns[i].end, "__syncthreads");
	for (int changed = 1; changed;) {
		changed = 0;
		for (int i = 0; i < n; i++) {
			if (fns[i].syncs) continue;
			for (int j = 0; j < n; j++) {
				if (fns[j].syncs && calls(fns[i].body, fns[i].end, fns[j].name)) {
					fns[i].syncs = changed = 1;
					break;
				}
			}
		}
	}
}

/* wrappers appends, for each "KERNEL void name(params)" of src, a function
 * nvdp_emu_wrap_name(void **args) calling name(*(T0 *)args[0], ...), each Ti
 * the declared type of parameter i, and int nvdp_emu_syncs_name, 1 when the
 * kernel synchronises its block (its threads must then run at once). It
 * returns 0, or -1 on a signature it cannot read. */
static int wrappers(const char *src, buf_t *out) {
	static fn_t fns[4096];
	int nfns = functions(src, fns, 4096);
	syncs(fns, nfns);
	const char *p = src;
	while ((p = strstr(p, "KERNEL")) != NULL) {
		if ((p > src && isident(p[-1])) || isident(p[6])) {
			p += 6;
			continue;
		}
		const char *q = p + 6;
		while (isspace((unsigned char)*q)) q++;
		if (strncmp(q, "void", 4) != 0) { p = q; continue; }
		q += 4;
		while (isspace((unsigned char)*q)) q++;
		const char *name = q;
		while (isident(*q)) q++;
		int nlen = (int)(q - name);
		while (isspace((unsigned char)*q)) q++;
		if (*q != '(' || nlen == 0) return -1;
		q++;
		const char *end = strchr(q, ')');
		if (!end) return -1;
		int sync = 1; /* unknown: the safe way */
		for (int i = 0; i < nfns; i++) {
			if ((int)strlen(fns[i].name) == nlen && strncmp(fns[i].name, name, nlen) == 0) sync = fns[i].syncs;
		}
		char head[640];
		snprintf(head, sizeof head, "int nvdp_emu_syncs_%.*s = %d;\nvoid nvdp_emu_wrap_%.*s(void **args) { %.*s(", nlen, name, sync, nlen, name, nlen, name);
		puts_(out, head);
		int i = 0;
		const char *s = q;
		while (s < end) {
			const char *c = memchr(s, ',', (size_t)(end - s));
			if (!c) c = end;
			const char *a = s, *b = c; /* one parameter: trim, then drop its name */
			while (a < b && isspace((unsigned char)*a)) a++;
			while (b > a && isspace((unsigned char)b[-1])) b--;
			if (a < b) {
				const char *id = b;
				while (id > a && isident(id[-1])) id--;
				if (id == a) return -1;
				char arg[512];
				snprintf(arg, sizeof arg, "%s*(%.*s *)args[%d]", i ? ", " : "", (int)(id - a), a, i);
				puts_(out, arg);
				i++;
			}
			s = c + 1;
		}
		puts_(out, "); }\n");
		p = end;
	}
	return 0;
}

/* embed sets p's cubin to the shared object at so: "NVDPEMU2:<size>\n" and its bytes. */
static nvrtcResult embed(program_t *p, const char *so) {
	FILE *f = fopen(so, "rb");
	if (!f) return NVRTC_ERROR_COMPILATION;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char head[64];
	int h = snprintf(head, sizeof head, "NVDPEMU2:%ld\n", n);
	char *img = n >= 0 ? malloc((size_t)h + (size_t)n) : NULL;
	if (!img || fread(img + h, 1, (size_t)n, f) != (size_t)n) {
		free(img);
		fclose(f);
		return NVRTC_ERROR_OUT_OF_MEMORY;
	}
	fclose(f);
	memcpy(img, head, (size_t)h);
	free(p->cubin);
	p->cubin = img;
	p->cubin_len = (size_t)h + (size_t)n;
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCompileProgram(program_t *p, int nopt, const char **opts) {
	if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
	const char *inc = getenv("NVDP_EMU_INCLUDE");
	const char *cc = getenv("NVDP_EMU_CC");
	if (!cc || !*cc) cc = "cc";
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp) tmp = "/tmp";
	char dir[4096];
	if (snprintf(dir, sizeof dir, "%s/nvdp-emu-XXXXXX", tmp) >= (int)sizeof dir) return NVRTC_ERROR_OUT_OF_MEMORY;
	if (!mkdtemp(dir)) return NVRTC_ERROR_OUT_OF_MEMORY;
	buf_t c = {0};
	puts_(&c, "#define NVDP_EMU 1\n");
	puts_(&c, p->src);
	puts_(&c, "\n__thread nvdp_emu_ctx *nvdp_emu_self;\nvoid nvdp_emu_set_self(nvdp_emu_ctx *c) { nvdp_emu_self = c; }\n");
	if (wrappers(p->src, &c) != 0) {
		free(p->log);
		p->log = strdup("nvdp cudaemu: a KERNEL signature it cannot read");
		free(c.s);
		return NVRTC_ERROR_COMPILATION;
	}
	char path[4200], so[4200];
	snprintf(path, sizeof path, "%s/%s.c", dir, "kernels");
	snprintf(so, sizeof so, "%s/%s.so", dir, "kernels");
	FILE *f = fopen(path, "w");
	if (!f) {
		rmdir(dir);
		return NVRTC_ERROR_OUT_OF_MEMORY;
	}
	fputs(c.s, f);
	fclose(f);
	buf_t cmd = {0};
	puts_(&cmd, cc);
	puts_(&cmd, " -std=gnu11 -O1 -ffp-contract=off -g -fPIC -shared -Wall -Werror=implicit-function-declaration -Wno-unused-function -Wno-unused-variable");
	if (inc) {
		puts_(&cmd, " -I'");
		puts_(&cmd, inc);
		puts_(&cmd, "'");
	}
	for (int i = 0; i < nopt; i++) {
		if (strncmp(opts[i], "-D", 2) == 0 && !strpbrk(opts[i], "'\"\\`$;&|<>")) {
			puts_(&cmd, " ");
			puts_(&cmd, opts[i]);
		}
	}
	puts_(&cmd, " -o '");
	puts_(&cmd, so);
	puts_(&cmd, "' '");
	puts_(&cmd, path);
	puts_(&cmd, "' -lm -lpthread 2>&1");
	FILE *pipe = popen(cmd.s, "r");
	buf_t log = {0};
	puts_(&log, "");
	char chunk[4096];
	size_t n;
	while (pipe && (n = fread(chunk, 1, sizeof chunk, pipe)) > 0) put(&log, chunk, n);
	int status = pipe ? pclose(pipe) : -1;
	free(p->log);
	p->log = log.s;
	free(cmd.s);
	free(c.s);
	nvrtcResult r = status != 0 ? NVRTC_ERROR_COMPILATION : embed(p, so);
	unlink(so);
	unlink(path);
	rmdir(dir);
	return r;
}

nvrtcResult nvrtcGetProgramLogSize(program_t *p, size_t *n) { *n = p->log ? strlen(p->log) + 1 : 1; return NVRTC_SUCCESS; }
nvrtcResult nvrtcGetProgramLog(program_t *p, char *log) { strcpy(log, p->log ? p->log : ""); return NVRTC_SUCCESS; }
nvrtcResult nvrtcGetCUBINSize(program_t *p, size_t *n) {
	if (!p->cubin) return NVRTC_ERROR_INVALID_PROGRAM;
	*n = p->cubin_len;
	return NVRTC_SUCCESS;
}
nvrtcResult nvrtcGetCUBIN(program_t *p, char *out) {
	if (!p->cubin) return NVRTC_ERROR_INVALID_PROGRAM;
	memcpy(out, p->cubin, p->cubin_len);
	return NVRTC_SUCCESS;
}
