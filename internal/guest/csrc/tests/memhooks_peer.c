/*
 * memhooks_peer.c: ibv_reg_mr and ibv_dereg_mr make no call to mmap,
 * munmap, mremap, madvise, mprotect, mlock or munlock that a memory hook
 * sees (UCX's UCM, Open MPI's and libfabric's memhooks interpose on them
 * and take a remap for the application unmapping its memory: UCX's
 * registration cache then deregisters everything on every message). Run
 * by TestRegMRCallsNoMemoryHooks with csrc/tests/memhooks.c preloaded,
 * which counts those calls through the dynamic linker, against a daemon
 * (VRDMA_SOCKET): aligned, unaligned, overlapping and stack buffers,
 * registered and deregistered.
 */
#include <infiniband/verbs.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static volatile int *counting, *calls;
static struct ibv_pd *pd;
static int failures;

/* reg registers [p, +len) with the hooks counting; NULL after reporting. */
static struct ibv_mr *reg(const char *what, void *p, size_t len)
{
	*calls = 0;
	*counting = 1;
	struct ibv_mr *mr = ibv_reg_mr(pd, p, len, ACCESS);
	*counting = 0;
	if (!mr) {
		fprintf(stderr, "%s: ibv_reg_mr: %s\n", what, strerror(errno));
		failures++;
		return NULL;
	}
	if (*calls) {
		fprintf(stderr, "%s: ibv_reg_mr made %d calls a memory hook sees\n", what, *calls);
		failures++;
	}
	return mr;
}

static void dereg(const char *what, struct ibv_mr *mr)
{
	if (!mr)
		return;
	*calls = 0;
	*counting = 1;
	int rc = ibv_dereg_mr(mr);
	*counting = 0;
	if (rc) {
		fprintf(stderr, "%s: ibv_dereg_mr: %s\n", what, strerror(rc));
		failures++;
	}
	if (*calls) {
		fprintf(stderr, "%s: ibv_dereg_mr made %d calls a memory hook sees\n", what, *calls);
		failures++;
	}
}

static __attribute__((noinline)) void on_stack(void)
{
	char buf[300];
	memset(buf, 's', sizeof buf);
	dereg("stack", reg("stack", buf, sizeof buf));
	for (size_t i = 0; i < sizeof buf; i++)
		if (buf[i] != 's') {
			fprintf(stderr, "stack: the buffer changed\n");
			failures++;
			break;
		}
}

int main(void)
{
	counting = dlsym(RTLD_DEFAULT, "memhooks_counting");
	calls = dlsym(RTLD_DEFAULT, "memhooks_calls");
	if (!counting || !calls) {
		fprintf(stderr, "memhooks_peer: run it with memhooks.so in LD_PRELOAD\n");
		return 2;
	}
	/* The hooks see the program's own calls. */
	*calls = 0;
	*counting = 1;
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(m, 4096);
	*counting = 0;
	if (*calls != 2) {
		fprintf(stderr, "memhooks_peer: the hooks counted %d of the program's 2 calls\n", *calls);
		return 1;
	}
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = list && n > 0 ? ibv_open_device(list[0]) : NULL;
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd) {
		fprintf(stderr, "memhooks_peer: no device at %s\n", getenv("VRDMA_SOCKET"));
		return 1;
	}
	long page = sysconf(_SC_PAGESIZE);
	void *aligned = NULL;
	if (posix_memalign(&aligned, (size_t)page, 4 * (size_t)page))
		return 1;
	memset(aligned, 'a', 4 * (size_t)page);
	dereg("aligned", reg("aligned", aligned, 4 * (size_t)page));

	char *un = malloc(10000);
	memset(un, 'u', 10000);
	dereg("unaligned", reg("unaligned", un + 3, 9000));

	struct ibv_mr *h1 = reg("first half", un + 3, 4500);
	struct ibv_mr *h2 = reg("second half", un + 4503, 4500);
	struct ibv_mr *all = reg("the whole", un + 3, 9000);
	dereg("first half", h1);
	dereg("the whole", all);
	dereg("second half", h2);
	on_stack();

	free(un);
	free(aligned);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("memhooks_peer: %s\n", failures ? "FAIL" : "ok");
	return failures ? 1 : 0;
}
