/* regcount: an LD_PRELOAD library for bench/stacks.sh that counts the
 * memory registrations a process makes through libibverbs (ibv_reg_mr,
 * ibv_reg_mr_iova, ibv_reg_mr_iova2, ibv_dereg_mr) and, when it exits
 * having made any, appends "regcount: PID reg N dereg M" to the file
 * $REGCOUNT_FILE (stderr without it). Each call goes on to the library
 * the program would have called.
 *
 * cc -std=c11 -Wall -Wextra -O2 -shared -fPIC -o regcount.so regcount.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static atomic_ulong regs, deregs;

/* real finds the library's own NAME@VERSION: UCX loads libibverbs with
 * dlopen from a module of its own, out of the global scope that
 * dlsym(RTLD_NEXT) searches. */
static void *real(const char *name, const char *version)
{
	void *lib = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *f = lib ? dlvsym(lib, name, version) : NULL;
	if (!f)
		f = dlsym(RTLD_NEXT, name);
	if (!f) {
		fprintf(stderr, "regcount: no %s@%s in libibverbs.so.1\n", name, version);
		abort();
	}
	return f;
}

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	static struct ibv_mr *(*next)(struct ibv_pd *, void *, size_t, int);
	if (!next)
		*(void **)&next = real("ibv_reg_mr", "IBVERBS_1.1");
	atomic_fetch_add(&regs, 1);
	return next(pd, addr, length, access);
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	static struct ibv_mr *(*next)(struct ibv_pd *, void *, size_t, uint64_t, int);
	if (!next)
		*(void **)&next = real("ibv_reg_mr_iova", "IBVERBS_1.7");
	atomic_fetch_add(&regs, 1);
	return next(pd, addr, length, iova, access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	static struct ibv_mr *(*next)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int);
	if (!next)
		*(void **)&next = real("ibv_reg_mr_iova2", "IBVERBS_1.8");
	atomic_fetch_add(&regs, 1);
	return next(pd, addr, length, iova, access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	static int (*next)(struct ibv_mr *);
	if (!next)
		*(void **)&next = real("ibv_dereg_mr", "IBVERBS_1.1");
	atomic_fetch_add(&deregs, 1);
	return next(mr);
}

__attribute__((destructor)) static void report(void)
{
	unsigned long r = atomic_load(&regs), d = atomic_load(&deregs);
	if (r == 0 && d == 0)
		return;
	const char *path = getenv("REGCOUNT_FILE");
	FILE *f = path ? fopen(path, "a") : NULL;
	fprintf(f ? f : stderr, "regcount: %d reg %lu dereg %lu\n", (int)getpid(), r, d);
	if (f)
		fclose(f);
}
