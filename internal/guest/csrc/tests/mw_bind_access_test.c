/*
 * mw_bind_access_test.c: ibv_reg_mr takes IBV_ACCESS_MW_BIND, as rdma_rxe
 * does (pyverbs' MWTest registers its regions so): the region registers
 * with the flag, keeps it in its access, and serves a peer's RDMA WRITE
 * under its rkey as any region does. Flags vrdma does not serve (here
 * IBV_ACCESS_ZERO_BASED) stay refused.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "loopback.h"

/* rwrite RDMA WRITEs len bytes of the buffer (filled with v) to raddr
 * under rkey through a new connected pair: the completion's status, or -1. */
static int rwrite(void *raddr, uint32_t rkey, uint32_t len, uint8_t v)
{
	memset(buf, v, len);
	return lb_rdma_once(IBV_WR_RDMA_WRITE, raddr, rkey, len);
}

static void test_registers(void)
{
	/* pyverbs' MWTest asks for these two (17 and 19). */
	const int asks[] = {IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND, LB_ACCESS | IBV_ACCESS_MW_BIND};
	for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
		static uint8_t target[256];
		struct ibv_mr *mr = ibv_reg_mr(pd, target, sizeof target, asks[i]);
		CHECK(mr, "ibv_reg_mr(access 0x%x): %s; want the region", (unsigned)asks[i], strerror(errno));
		if (!mr)
			continue;
		if (asks[i] & IBV_ACCESS_REMOTE_WRITE) {
			memset(target, 0, sizeof target);
			int st = rwrite(target, mr->rkey, sizeof target, 0x5a);
			CHECK(st == IBV_WC_SUCCESS, "RDMA WRITE to a region with MW_BIND access: status %d, want success", st);
			CHECK(target[0] == 0x5a && target[sizeof target - 1] == 0x5a, "the write did not land");
		}
		CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr: %s", strerror(errno));
	}
}

static void test_unsupported_still_refused(void)
{
	static uint8_t target[64];
	errno = 0;
	struct ibv_mr *mr = ibv_reg_mr(pd, target, sizeof target, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED);
	CHECK(!mr && errno == EINVAL, "ibv_reg_mr with IBV_ACCESS_ZERO_BASED: %p, errno %d; want NULL, EINVAL", (void *)mr,
	      errno);
	if (mr)
		ibv_dereg_mr(mr);
}

int main(void)
{
	if (lb_open())
		return 1;
	static const struct test_case cases[] = {
		{"registers", test_registers},
		{"unsupported_still_refused", test_unsupported_still_refused},
	};
	RUN_CASES(cases);
	lb_close();
	printf("mw_bind_access_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
