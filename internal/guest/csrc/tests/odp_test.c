/*
 * odp_test.c: on-demand paging against a real daemon (docs/design/odp.md):
 * ibv_query_device_ex's odp_caps say explicit on-demand MRs serve every
 * operation (implicit ones: odp_implicit_test.c); an MR registered with IBV_ACCESS_ON_DEMAND
 * locks none of its pages (VmLck stays) and serves a peer's RDMA WRITE and
 * READ; an ordinary MR over the same pages then locks them; ibv_advise_mr
 * prefetches ranges of on-demand MRs and refuses what the kernel refuses
 * (a key of no on-demand MR of the PD: ENOENT; bytes outside the MR, bad
 * flags or no SGE: EINVAL; an unknown advice: EOPNOTSUPP).
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "loopback.h"

static size_t page;

/* vm_locked is the process's VmLck in bytes, from /proc/self/status. */
static long vm_locked(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

static uint8_t *pages(size_t n)
{
	void *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* rdma posts one RDMA op of len bytes between buf and raddr under rkey
 * through a new connected pair: the completion's status, or -1. */
static int rdma(enum ibv_wr_opcode op, void *raddr, uint32_t rkey, uint32_t len)
{
	return lb_rdma_once(op, raddr, rkey, len);
}

static void test_caps(void)
{
	struct ibv_device_attr_ex ax;
	CHECK(ibv_query_device_ex(ctx, NULL, &ax) == 0, "ibv_query_device_ex");
	CHECK(ax.odp_caps.general_caps == (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT),
	      "general_caps 0x%llx, want IBV_ODP_SUPPORT and _IMPLICIT (odp_implicit_test.c)",
	      (unsigned long long)ax.odp_caps.general_caps);
	uint32_t all = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
		       IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	CHECK(ax.odp_caps.per_transport_caps.rc_odp_caps == all, "rc_odp_caps 0x%x, want 0x%x",
	      ax.odp_caps.per_transport_caps.rc_odp_caps, all);
	CHECK(ax.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_SEND, "ud_odp_caps 0x%x lack SEND",
	      ax.odp_caps.per_transport_caps.ud_odp_caps);
}

static void test_unlocked(void)
{
	enum { N = 16 };
	uint8_t *t = pages(N);
	long before = vm_locked();
	struct ibv_mr *mr = t ? ibv_reg_mr(pd, t, N * page, LB_ACCESS | IBV_ACCESS_ON_DEMAND) : NULL;
	if (!mr || before < 0) {
		CHECK(0, "ibv_reg_mr(ON_DEMAND): %s (VmLck %ld)", strerror(errno), before);
		return;
	}
	CHECK(vm_locked() == before, "an on-demand MR locked %ld bytes", vm_locked() - before);
	memset(buf, 7, 2 * page);
	CHECK(rdma(IBV_WR_RDMA_WRITE, t + 3 * page, mr->rkey, (uint32_t)(2 * page)) == IBV_WC_SUCCESS,
	      "a peer's WRITE into the on-demand MR");
	CHECK(t[3 * page] == 7 && t[5 * page - 1] == 7 && t[5 * page] == 0, "the WRITE did not land where it was sent");
	memset(t + 8 * page, 9, page);
	memset(buf, 0, page);
	CHECK(rdma(IBV_WR_RDMA_READ, t + 8 * page, mr->rkey, (uint32_t)page) == IBV_WC_SUCCESS && buf[0] == 9 &&
		      buf[page - 1] == 9,
	      "a READ from the on-demand MR");
	/* An ordinary MR over the same pages pins them; the on-demand one
	 * still reaches them. */
	struct ibv_mr *pinned = ibv_reg_mr(pd, t, N * page, IBV_ACCESS_LOCAL_WRITE);
	CHECK(pinned && vm_locked() - before == (long)(N * page), "an ordinary MR over them: %s, %ld bytes locked",
	      pinned ? "ok" : strerror(errno), vm_locked() - before);
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr(on demand)");
	if (pinned)
		CHECK(ibv_dereg_mr(pinned) == 0, "ibv_dereg_mr(ordinary)");
	CHECK(vm_locked() == before, "after both: %ld bytes still locked", vm_locked() - before);
	CHECK(t[3 * page] == 7 && t[8 * page] == 9, "the pages lost their contents at deregistration");
	munmap(t, N * page);
}

static void test_advise(void)
{
	uint8_t *t = pages(4);
	struct ibv_mr *odp = t ? ibv_reg_mr(pd, t, 4 * page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND) : NULL;
	struct ibv_mr *ro = t ? ibv_reg_mr(pd, t, page, IBV_ACCESS_ON_DEMAND) : NULL;
	struct ibv_pd *other = ibv_alloc_pd(ctx);
	if (!odp || !ro || !other) {
		CHECK(0, "setting up: %s", strerror(errno));
		if (odp)
			ibv_dereg_mr(odp);
		if (ro)
			ibv_dereg_mr(ro);
		if (other)
			ibv_dealloc_pd(other);
		return;
	}
	struct ibv_sge sg[2] = {{.addr = (uintptr_t)t, .length = (uint32_t)page, .lkey = odp->lkey},
				{.addr = (uintptr_t)t + 2 * page + 10, .length = (uint32_t)page, .lkey = odp->lkey}};
	static const enum ibv_advise_mr_advice advices[] = {IBV_ADVISE_MR_ADVICE_PREFETCH,
							    IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
							    IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT};
	for (size_t i = 0; i < sizeof advices / sizeof advices[0]; i++) {
		CHECK(ibv_advise_mr(pd, advices[i], IBV_ADVISE_MR_FLAG_FLUSH, sg, 2) == 0, "advice %d, flush", (int)advices[i]);
		CHECK(ibv_advise_mr(pd, advices[i], 0, sg, 1) == 0, "advice %d", (int)advices[i]);
	}
	struct {
		const char *name;
		struct ibv_pd *pd;
		int advice;
		uint32_t flags, lkey, num;
		uint64_t addr;
		uint32_t length;
		int want;
	} cases[] = {
		{"another PD's", other, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, odp->lkey, 1, (uintptr_t)t, 8, ENOENT},
		{"an ordinary MR's", pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, buf_mr->lkey, 1, (uintptr_t)buf, 8, ENOENT},
		{"no MR's", pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, 0xdead00, 1, (uintptr_t)t, 8, ENOENT},
		{"write to a read-only MR", pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, ro->lkey, 1, (uintptr_t)t, 8, ENOENT},
		{"past the end", pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, odp->lkey, 1, (uintptr_t)t + 4 * page - 4, 8, EINVAL},
		{"before the start", pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, odp->lkey, 1, (uintptr_t)t - 1, 8, EINVAL},
		{"unknown flags", pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, odp->lkey, 1, (uintptr_t)t, 8, EINVAL},
		{"no SGE", pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, odp->lkey, 0, (uintptr_t)t, 8, EINVAL},
		{"an unknown advice", pd, 7, 0, odp->lkey, 1, (uintptr_t)t, 8, EOPNOTSUPP},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct ibv_sge s = {.addr = cases[i].addr, .length = cases[i].length, .lkey = cases[i].lkey};
		int rc = ibv_advise_mr(cases[i].pd, (enum ibv_advise_mr_advice)cases[i].advice, cases[i].flags, &s,
				       cases[i].num);
		CHECK(rc == cases[i].want, "%s: %d, want %d", cases[i].name, rc, cases[i].want);
	}
	ibv_dereg_mr(ro);
	ibv_dereg_mr(odp);
	/* A deregistered MR's key is no MR's. */
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sg, 1) == ENOENT, "a deregistered MR's key");
	ibv_dealloc_pd(other);
	munmap(t, 4 * page);
}

int main(void)
{
	page = (size_t)sysconf(_SC_PAGESIZE);
	if (lb_open())
		return 1;
	static const struct test_case cases[] = {
		{"caps", test_caps},
		{"unlocked", test_unlocked},
		{"advise", test_advise},
	};
	RUN_CASES(cases);
	lb_close();
	printf("odp_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
