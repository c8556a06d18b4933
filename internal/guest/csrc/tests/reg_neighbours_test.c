/*
 * reg_neighbours_test.c: registering and deregistering a buffer loses no
 * write another thread makes meanwhile to bytes that merely share a page
 * with it. ibv_reg_mr copies the buffer's whole pages into a memfd and
 * maps the memfd over them; ibv_dereg_mr copies them back into private
 * memory (docs/design/registration-move.md). A write that lands on the
 * old pages after their copy and before the remap was lost: a counter
 * beside a registered buffer fell behind its increments, a mutex beside
 * it stayed locked (rping's hang).
 *
 * One thread registers and deregisters buffers in a loop; the others
 * write, all the while, to bytes on the buffers' first and last pages
 * but outside them:
 *  - counters incremented from user mode (a plain increment and an
 *    atomic one), each by one thread: at the end each must equal the
 *    number of its increments;
 *  - a slot written by the kernel (read(2) from a pipe into it), checked
 *    right after each read: it must hold what was read, and the read must
 *    not fail (reg_neighbours_usermode_test.c defines
 *    KERNEL_WRITES_MAY_FAIL: with a userfaultfd of user-mode faults only
 *    it may fail with EFAULT, but not be lost).
 * Three layouts: a buffer of whole pages but for a few bytes at either
 * end, a one-page buffer in the middle of a page, and malloc'd buffers
 * among the counters' own malloc'd chunks.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

#ifndef ROUNDS
#define ROUNDS 800
#endif
#define WRITERS 3

static size_t page;
static struct ibv_pd *pd;

/* Where the writers write, and what they did. */
struct target {
	volatile uint64_t *plain;  /* incremented with ++ by writer 0 */
	uint64_t *atomic;          /* incremented atomically by writer 1 */
	uint64_t *kernel;          /* read(2) into by writer 2 */
};

static struct target tgt;
static int stop;
static uint64_t done_plain, done_atomic, plain_total, plain_losses;
static uint64_t kernel_reads, kernel_wrong, kernel_failed;
static pthread_barrier_t start;

static void *writer(void *arg)
{
	int id = (int)(intptr_t)arg;
	int p[2] = {-1, -1};
	if (id == 2 && pipe(p)) {
		perror("pipe");
		exit(2);
	}
	pthread_barrier_wait(&start);
	uint64_t n = 0;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		switch (id) {
		case 0: {
			/* A value below this thread's own last one: a lost write. */
			uint64_t v = *tgt.plain;
			if (v != n)
				plain_losses++;
			*tgt.plain = v + 1;
			n = v + 1;
			plain_total++;
			break;
		}
		case 1:
			__atomic_fetch_add(tgt.atomic, 1, __ATOMIC_RELAXED);
			n++;
			break;
		default: {
			uint64_t v = ++n;
			if (write(p[1], &v, sizeof v) != sizeof v) {
				perror("write");
				exit(2);
			}
			ssize_t r = read(p[0], tgt.kernel, sizeof v);
			kernel_reads++;
			if (r != sizeof v) {
				kernel_failed++;
				/* drain what the failed read left */
				uint64_t junk;
				if (read(p[0], &junk, sizeof junk) < 0)
					exit(2);
			} else if (__atomic_load_n(tgt.kernel, __ATOMIC_RELAXED) != v) {
				kernel_wrong++;
			}
		}
		}
	}
	if (id == 0)
		done_plain = plain_total;
	if (id == 1)
		done_atomic = n;
	if (p[0] >= 0) {
		close(p[0]);
		close(p[1]);
	}
	return NULL;
}

/* run registers [buf, buf+len) and deregisters it ROUNDS times while the
 * writers write tgt, then checks nothing they wrote was lost. */
static void run(const char *name, void *buf, size_t len)
{
	*tgt.plain = 0;
	*tgt.atomic = 0;
	stop = 0;
	done_plain = done_atomic = plain_total = plain_losses = kernel_reads = kernel_wrong = kernel_failed = 0;
	pthread_t th[WRITERS];
	pthread_barrier_init(&start, NULL, WRITERS + 1);
	for (int i = 0; i < WRITERS; i++)
		if (pthread_create(&th[i], NULL, writer, (void *)(intptr_t)i)) {
			fprintf(stderr, "pthread_create failed\n");
			exit(2);
		}
	pthread_barrier_wait(&start);
	int failed = 0;
	for (int i = 0; i < ROUNDS && !failed; i++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (!mr) {
			CHECK(0, "%s: ibv_reg_mr: %s", name, strerror(errno));
			failed = 1;
			break;
		}
		if (ibv_dereg_mr(mr)) {
			CHECK(0, "%s: ibv_dereg_mr: %s", name, strerror(errno));
			failed = 1;
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);
	uint64_t lost = (done_plain - *tgt.plain) + (done_atomic - *tgt.atomic);
	printf("%s: %d registrations; the plain counter went back %llu times; user-mode increments %llu, lost %llu (plain %llu of %llu, atomic %llu of %llu); "
	       "kernel-mode reads %llu, lost %llu, failed %llu\n",
	       name, ROUNDS, (unsigned long long)plain_losses, (unsigned long long)(done_plain + done_atomic), (unsigned long long)lost,
	       (unsigned long long)(done_plain - *tgt.plain), (unsigned long long)done_plain,
	       (unsigned long long)(done_atomic - *tgt.atomic), (unsigned long long)done_atomic,
	       (unsigned long long)kernel_reads, (unsigned long long)kernel_wrong, (unsigned long long)kernel_failed);
	CHECK(plain_losses == 0, "%s: the plain counter went back %llu times", name, (unsigned long long)plain_losses);
	CHECK(*tgt.plain == done_plain, "%s: the plain counter is %llu after %llu increments", name,
	      (unsigned long long)*tgt.plain, (unsigned long long)done_plain);
	CHECK(*tgt.atomic == done_atomic, "%s: the atomic counter is %llu after %llu increments", name,
	      (unsigned long long)*tgt.atomic, (unsigned long long)done_atomic);
	CHECK(kernel_wrong == 0, "%s: %llu of %llu reads into the page were lost", name, (unsigned long long)kernel_wrong,
	      (unsigned long long)kernel_reads);
#ifndef KERNEL_WRITES_MAY_FAIL
	CHECK(kernel_failed == 0, "%s: %llu of %llu reads into the page failed", name,
	      (unsigned long long)kernel_failed, (unsigned long long)kernel_reads);
#endif
}

/* Whole pages but for 64 bytes at either end: the counters sit there. */
static void test_page_edges(void)
{
	size_t len = 4 * page;
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		CHECK(0, "mmap: %s", strerror(errno));
		return;
	}
	tgt.plain = (volatile uint64_t *)m;
	tgt.atomic = (uint64_t *)(m + len - 64);
	tgt.kernel = (uint64_t *)(m + 32);
	run("page edges", m + 64, len - 128);
	munmap(m, len);
}

/* A page's worth of buffer in the middle of two pages: both pages hold
 * the counters too. */
static void test_mid_page(void)
{
	size_t len = 2 * page;
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		CHECK(0, "mmap: %s", strerror(errno));
		return;
	}
	tgt.plain = (volatile uint64_t *)(m + 8);
	tgt.atomic = (uint64_t *)(m + len - 8);
	tgt.kernel = (uint64_t *)(m + 16);
	run("mid page", m + page / 2, page);
	munmap(m, len);
}

/* malloc'd: the counters are chunks of their own next to the buffer's,
 * as an application's heap has them. */
static void test_malloc(void)
{
	/* Chunks of one size, so that the allocator (glibc's, or a
	 * sanitizer's by size class) puts them side by side: the counters
	 * are the last bytes of the chunk before the buffer and the first of
	 * the one after. */
	enum { SZ = 3000 };
	uint8_t *a = malloc(SZ), *b = malloc(SZ), *c = malloc(SZ), *k = malloc(SZ);
	if (!a || !b || !c || !k) {
		CHECK(0, "malloc failed");
		return;
	}
	uint64_t *ca = (uint64_t *)(a + SZ - 8), *cc = (uint64_t *)c, *ck = (uint64_t *)(k + SZ - 8);
	uintptr_t bp = (uintptr_t)b & ~(page - 1), be = ((uintptr_t)b + SZ + page - 1) & ~(page - 1);
	int near = ((uintptr_t)ca >= bp && (uintptr_t)ca < be) + ((uintptr_t)cc >= bp && (uintptr_t)cc < be);
	CHECK(near > 0, "malloc: the counters (%p, %p) share no page with the buffer (%p): the case tests nothing",
	      (void *)ca, (void *)cc, (void *)b);
	tgt.plain = ca;
	tgt.atomic = cc;
	tgt.kernel = ck;
	run("malloc", b, SZ);
	free(k);
	free(c);
	free(b);
	free(a);
}

int main(void)
{
	page = (size_t)sysconf(_SC_PAGESIZE);
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = list && n > 0 ? ibv_open_device(list[0]) : NULL;
	if (list)
		ibv_free_device_list(list);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd) {
		fprintf(stderr, "no device or PD (VRDMA_SOCKET=%s): %s\n", getenv("VRDMA_SOCKET"), strerror(errno));
		return 2;
	}
	static const struct test_case cases[] = {
		{"page_edges", test_page_edges},
		{"mid_page", test_mid_page},
		{"malloc", test_malloc},
	};
	RUN_CASES(cases);
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	return failures ? 1 : 0;
}
