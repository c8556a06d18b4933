/*
 * rereg_mr_test.c: ibv_rereg_mr against a real daemon, with rdma-core's
 * semantics and return values: IBV_REREG_MR_CHANGE_ACCESS, _CHANGE_PD and
 * _CHANGE_TRANSLATION take effect for the peer's RDMA (the new keys,
 * range, PD and access are the ones the daemon checks), the MR pointer
 * and its keys stay (as rdma_rxe's), so a peer's rkey reaches the new
 * region; rdma-core's own refusals are IBV_REREG_MR_ERR_INPUT and the
 * kernel's IBV_REREG_MR_ERR_CMD, both with errno and the MR unchanged.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "loopback.h"

static size_t page;

/* rwrite RDMA WRITEs len bytes of the buffer (filled with v) to raddr
 * under rkey through a new connected pair: the completion's status, or -1. */
static int rwrite(void *raddr, uint32_t rkey, uint32_t len, uint8_t v)
{
	memset(buf, v, len);
	return lb_rdma_once(IBV_WR_RDMA_WRITE, raddr, rkey, len);
}

static int all_are(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static uint8_t *pages(size_t n)
{
	void *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void test_change_access(void)
{
	uint8_t *t = pages(1);
	struct ibv_mr *mr = t ? ibv_reg_mr(pd, t, page, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr) {
		CHECK(0, "ibv_reg_mr: %s", strerror(errno));
		return;
	}
	CHECK(rwrite(t, mr->rkey, 64, 1) == IBV_WC_REM_ACCESS_ERR, "a WRITE into an MR without remote write succeeded");
	uint32_t lkey = mr->lkey, rkey = mr->rkey;
	int rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(rc == 0, "ibv_rereg_mr(CHANGE_ACCESS) = %d: %s", rc, strerror(errno));
	CHECK(mr->addr == t && mr->length == page && mr->pd == pd, "the MR's range or PD changed");
	CHECK(mr->lkey == lkey && mr->rkey == rkey, "the keys changed: 0x%x/0x%x, were 0x%x/0x%x", mr->lkey, mr->rkey, lkey, rkey);
	CHECK(rwrite(t, mr->rkey, 64, 2) == IBV_WC_SUCCESS && all_are(t, 64, 2), "a WRITE after granting remote write");
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE) == 0, "taking it back");
	CHECK(rwrite(t, mr->rkey, 64, 3) == IBV_WC_REM_ACCESS_ERR && all_are(t, 64, 2),
	      "a WRITE after remote write was taken back");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	munmap(t, page);
}

static void test_change_pd(void)
{
	struct ibv_pd *other = ibv_alloc_pd(ctx);
	uint8_t *t = pages(1);
	struct ibv_mr *mr = other && t ? ibv_reg_mr(other, t, page, LB_ACCESS) : NULL;
	if (!mr) {
		CHECK(0, "setting up: %s", strerror(errno));
		return;
	}
	CHECK(rwrite(t, mr->rkey, 64, 1) == IBV_WC_REM_ACCESS_ERR, "a WRITE into an MR of another PD succeeded");
	uint32_t rkey = mr->rkey;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, 0) == 0, "ibv_rereg_mr(CHANGE_PD): %s", strerror(errno));
	CHECK(mr->pd == pd && mr->rkey == rkey, "mr->pd is not the new PD, or the key changed");
	CHECK(ibv_dealloc_pd(other) == 0, "the old PD is still used after the MR moved away");
	CHECK(rwrite(t, mr->rkey, 64, 4) == IBV_WC_SUCCESS && all_are(t, 64, 4), "a WRITE after the MR moved to the QPs' PD");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	munmap(t, page);
}

static void test_change_translation(void)
{
	uint8_t *old = pages(2), *nu = pages(3);
	struct ibv_mr *mr = old && nu ? ibv_reg_mr(pd, old, 2 * page, LB_ACCESS) : NULL;
	if (!mr) {
		CHECK(0, "setting up: %s", strerror(errno));
		return;
	}
	memset(nu, 0, 3 * page);
	uint32_t old_rkey = mr->rkey;
	int rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, nu + 100, 3 * page - 200, 0);
	CHECK(rc == 0, "ibv_rereg_mr(CHANGE_TRANSLATION) = %d: %s", rc, strerror(errno));
	CHECK(mr->addr == nu + 100 && mr->length == 3 * page - 200, "the MR covers %p+%zu, want %p+%zu", mr->addr, mr->length,
	      (void *)(nu + 100), 3 * page - 200);
	CHECK(rwrite(nu + 2 * page, mr->rkey, 512, 5) == IBV_WC_SUCCESS && all_are(nu + 2 * page, 512, 5),
	      "a WRITE into the new range");
	CHECK(mr->rkey == old_rkey, "the key changed: 0x%x, was 0x%x", mr->rkey, old_rkey);
	CHECK(rwrite(old, mr->rkey, 64, 6) == IBV_WC_REM_ACCESS_ERR, "a WRITE into the old range succeeded");
	CHECK(rwrite(nu, mr->rkey, 64, 8) == IBV_WC_REM_ACCESS_ERR, "a WRITE before the new range's start succeeded");
	/* The old pages are the application's again, and its writes stay there. */
	memset(old, 9, 2 * page);
	CHECK(all_are(old, 2 * page, 9), "the old range");
	/* Back to where it was, with another change at the same time. */
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, NULL, old, page,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(rc == 0 && mr->addr == old && mr->length == page, "moving it back: %d %s", rc, strerror(errno));
	CHECK(rwrite(old, mr->rkey, 64, 10) == IBV_WC_SUCCESS && all_are(old, 64, 10) && all_are(old + 64, page - 64, 9),
	      "a WRITE after moving back");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	CHECK(all_are(nu + 2 * page, 512, 5) && all_are(old, 64, 10), "the pages after deregistration");
	munmap(old, 2 * page);
	munmap(nu, 3 * page);
}

static void test_misuse(void)
{
	uint8_t *t = pages(1), *ro = pages(1);
	struct ibv_mr *mr = t && ro ? ibv_reg_mr(pd, t, page, LB_ACCESS) : NULL;
	if (!mr || mprotect(ro, page, PROT_READ)) {
		CHECK(0, "setting up: %s", strerror(errno));
		return;
	}
	struct ibv_mr before = *mr;
	const struct {
		const char *what;
		int flags;
		struct ibv_pd *pd;
		void *addr;
		size_t length;
		int access, ret, err;
	} cases[] = {
		{"an unknown flag", IBV_REREG_MR_FLAGS_SUPPORTED << 1, NULL, NULL, 0, 0, IBV_REREG_MR_ERR_INPUT, EINVAL},
		{"a translation without an address", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, page, 0, IBV_REREG_MR_ERR_INPUT, EINVAL},
		{"a translation of 0 bytes", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, t, 0, 0, IBV_REREG_MR_ERR_INPUT, EINVAL},
		{"access without CHANGE_ACCESS", IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, IBV_ACCESS_LOCAL_WRITE, IBV_REREG_MR_ERR_INPUT, EINVAL},
		{"no change", 0, NULL, NULL, 0, 0, IBV_REREG_MR_ERR_CMD, EINVAL},
		{"remote write without local write", IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE, IBV_REREG_MR_ERR_CMD, EINVAL},
		{"an unknown access bit", IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 1 << 15, IBV_REREG_MR_ERR_CMD, EINVAL},
		{"no PD", IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0, IBV_REREG_MR_ERR_CMD, EINVAL},
		{"read-only pages with local write", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, ro, page, 0, IBV_REREG_MR_ERR_CMD, EFAULT},
		{"a range that wraps", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, t, SIZE_MAX - 10, 0, IBV_REREG_MR_ERR_CMD, EINVAL},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		errno = 0;
		int rc = ibv_rereg_mr(mr, cases[i].flags, cases[i].pd, cases[i].addr, cases[i].length, cases[i].access);
		CHECK(rc == cases[i].ret && errno == cases[i].err, "%s: %d errno %d (%s), want %d errno %d", cases[i].what, rc,
		      errno, strerror(errno), cases[i].ret, cases[i].err);
		CHECK(memcmp(&before, mr, sizeof before) == 0, "%s: the MR changed", cases[i].what);
	}
	CHECK(rwrite(t, mr->rkey, 64, 11) == IBV_WC_SUCCESS && all_are(t, 64, 11), "a WRITE into the MR after the refusals");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	munmap(t, page);
	munmap(ro, page);
}

int main(void)
{
	page = (size_t)sysconf(_SC_PAGESIZE);
	if (lb_open())
		return 1;
	static const struct test_case cases[] = {
		{"change_access", test_change_access},
		{"change_pd", test_change_pd},
		{"change_translation", test_change_translation},
		{"misuse", test_misuse},
	};
	RUN_CASES(cases);
	lb_close();
	printf("rereg_mr_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
