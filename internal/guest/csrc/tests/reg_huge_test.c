/*
 * reg_huge_test.c: ibv_reg_mr of memory on 2 MiB huge pages (mmap
 * MAP_HUGETLB), as rdma-core's pyverbs tests register it (with
 * IBV_ACCESS_HUGETLB or without): the registration keeps the contents
 * (while registered they are on ordinary pages: docs/design/guest-memory.md),
 * a peer's RDMA WRITE across the boundary of two huge pages lands in it and
 * an RDMA READ takes it back, a fork gives the child its own copy (on huge
 * pages) while the parent's MR goes on serving, and deregistering leaves
 * the memory as it was: on huge pages again, with the bytes written. Where no huge page can be had, it says so and passes; as
 * root it reserves a few itself (vm.nr_hugepages) and gives them back.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "loopback.h"

#define HUGE (2UL << 20)
#define NR_PATH "/proc/sys/vm/nr_hugepages"

static long nr_before = -1; /* vm.nr_hugepages before this test raised it, -1: not raised */

static long nr_hugepages(void)
{
	FILE *f = fopen(NR_PATH, "r");
	long n = -1;
	if (f) {
		if (fscanf(f, "%ld", &n) != 1)
			n = -1;
		fclose(f);
	}
	return n;
}

static int set_nr_hugepages(long n)
{
	FILE *f = fopen(NR_PATH, "w");
	if (!f)
		return -1;
	int ok = fprintf(f, "%ld\n", n) > 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static void restore_nr_hugepages(void)
{
	if (nr_before >= 0 && set_nr_hugepages(nr_before))
		fprintf(stderr, "reg_huge_test: could not set %s back to %ld: %s\n", NR_PATH, nr_before, strerror(errno));
}

/* map_huge maps len bytes of private anonymous huge pages, reserving a
 * few more as root when there are none free: the mapping or MAP_FAILED. */
static void *map_huge(size_t len)
{
	void *h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (h != MAP_FAILED || geteuid() != 0)
		return h;
	long n = nr_hugepages();
	if (n < 0 || set_nr_hugepages(n + 8))
		return MAP_FAILED;
	nr_before = n;
	atexit(restore_nr_hugepages);
	return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
}

/* kernel_page_kb is the page size, in KiB, of the mapping that holds
 * addr (smaps' KernelPageSize), or -1. */
static long kernel_page_kb(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	long kb = -1;
	int in = 0;
	while (f && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char perms[5];
		if (sscanf(line, "%lx-%lx %4s ", &lo, &hi, perms) == 3) { /* a mapping's first line */
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && sscanf(line, "KernelPageSize: %ld kB", &kb) == 1)
			break;
	}
	if (f)
		fclose(f);
	return kb;
}

static int all_are(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

int main(void)
{
	uint8_t *h = map_huge(2 * HUGE);
	if (h == MAP_FAILED) {
		printf("skip: no 2 MiB huge page can be allocated here (%s; as root: echo 8 > %s)\n", strerror(errno),
		       NR_PATH);
		return 0;
	}
	if (lb_open())
		return 1;
	memset(h, 'h', 2 * HUGE);

	/* A buffer inside the two huge pages, not on their boundaries. */
	uint8_t *m = h + 100;
	size_t len = HUGE + 4096;
	struct ibv_mr *mr = ibv_reg_mr(pd, m, len, LB_ACCESS | IBV_ACCESS_HUGETLB);
	CHECK(mr != NULL, "ibv_reg_mr of memory on huge pages: %s", strerror(errno));
	if (!mr) {
		lb_close();
		return 1;
	}
	CHECK(all_are(h, 2 * HUGE, 'h'), "registering changed the huge pages' contents");

	/* A peer's WRITE across the boundary of the two huge pages. */
	uint8_t *at = h + HUGE - 1000;
	memset(buf, 'w', 4096);
	CHECK(lb_rdma_once(IBV_WR_RDMA_WRITE, at, mr->rkey, 4096) == IBV_WC_SUCCESS, "RDMA WRITE into huge pages");
	CHECK(all_are(at, 4096, 'w'), "the WRITE did not land in the huge pages");
	CHECK(all_are(h, (size_t)(at - h), 'h') && all_are(at + 4096, 2 * HUGE - (size_t)(at - h) - 4096, 'h'),
	      "the WRITE changed bytes beside it");

	/* The application writes; a READ takes it. */
	memset(at, 'a', 2048);
	memset(buf, 0, 4096);
	CHECK(lb_rdma_once(IBV_WR_RDMA_READ, at, mr->rkey, 4096) == IBV_WC_SUCCESS, "RDMA READ from huge pages");
	CHECK(all_are(buf, 2048, 'a') && all_are(buf + 2048, 2048, 'w'), "the READ did not see the huge pages' bytes");

	/* A fork: the child's copy is its own, on huge pages; the parent's
	 * MR still reaches the parent's bytes. */
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int ok = all_are(at, 2048, 'a') && all_are(at + 2048, 2048, 'w') && kernel_page_kb(h) == 2048;
		memset(h, 'c', 2 * HUGE);
		_exit(ok && all_are(h, 2 * HUGE, 'c') ? 0 : 1);
	}
	int st = -1;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the child of a fork did not find the registered bytes on huge pages of its own (status %d)", st);
	CHECK(all_are(at, 2048, 'a') && all_are(h, (size_t)(at - h), 'h'), "the child's writes reached the parent");
	memset(buf, 0, 4096);
	CHECK(lb_rdma_once(IBV_WR_RDMA_READ, at, mr->rkey, 4096) == IBV_WC_SUCCESS, "RDMA READ after a fork");
	CHECK(all_are(buf, 2048, 'a') && all_are(buf + 2048, 2048, 'w'), "the READ after a fork did not see the bytes");

	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr: %s", strerror(errno));
	CHECK(all_are(at, 2048, 'a') && all_are(at + 2048, 2048, 'w') && all_are(h, (size_t)(at - h), 'h'),
	      "deregistering changed the huge pages' contents");
	CHECK(kernel_page_kb(h) == 2048 && kernel_page_kb(h + HUGE) == 2048,
	      "deregistered memory is no longer on huge pages: %ld kB and %ld kB pages", kernel_page_kb(h),
	      kernel_page_kb(h + HUGE));
	memset(h, 'z', 2 * HUGE);
	CHECK(all_are(h, 2 * HUGE, 'z'), "deregistered huge pages cannot be written");
	munmap(h, 2 * HUGE);
	lb_close();
	if (failures)
		return 1;
	printf("ok   reg_huge\n");
	return 0;
}
