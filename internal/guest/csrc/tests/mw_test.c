/*
 * mw_test.c: memory windows against a real daemon, with rdma_rxe's
 * semantics. On a connected pair (a the requester, b the window's owner):
 * a type 1 window bound by ibv_bind_mw and a type 2 window bound by a
 * BIND_MW work request grant a's RDMA WRITE inside their range and access
 * only; each bind changes the rkey's low 8 bits and the old rkey grants
 * nothing; a bind needs a region with IBV_ACCESS_MW_BIND; a local
 * invalidate (LOCAL_INV), a SEND_WITH_INV from the peer, an unbind (type
 * 1, length 0) and ibv_dealloc_mw each leave the rkey a remote access
 * error. Completions are IBV_WC_BIND_MW and IBV_WC_LOCAL_INV; the
 * receive of a SEND_WITH_INV has IBV_WC_WITH_INV and the rkey.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "loopback.h"

#define TSIZE 4096
static uint8_t target[TSIZE], plain[TSIZE];
static struct ibv_mr *tmr, *pmr; /* with MW_BIND, without */

struct scene {
	struct ibv_cq *ca, *cb;
	struct ibv_qp *a, *b;
};

static int up(struct scene *s)
{
	memset(s, 0, sizeof *s);
	s->ca = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	s->cb = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	return s->ca && s->cb ? lb_pair(s->ca, s->cb, 8, &s->a, &s->b) : -1;
}

static void down(struct scene *s)
{
	lb_unpair(s->a, s->b);
	if (s->ca)
		ibv_destroy_cq(s->ca);
	if (s->cb)
		ibv_destroy_cq(s->cb);
}

/* wait polls one completion of cq into wc: 0, or -1 after the guard. */
static int wait(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double t0 = lb_now();
	int n;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && lb_now() - t0 < HANG_GUARD_SECONDS)
		;
	CHECK(n == 1, "no completion");
	return n == 1 ? 0 : -1;
}

/* rwrite WRITEs len bytes of v from a to addr under rkey: the status. */
static int rwrite(struct scene *s, void *addr, uint32_t rkey, uint32_t len, uint8_t v)
{
	memset(buf, v, len);
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = len, .lkey = buf_mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 77, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)addr;
	wr.wr.rdma.rkey = rkey;
	struct ibv_wc wc;
	if (ibv_post_send(s->a, &wr, &bad) || wait(s->ca, &wc))
		return -1;
	return wc.status;
}

/* bind1 binds a type 1 window with ibv_bind_mw on b: the completion's
 * status, or -1. */
static int bind1(struct scene *s, struct ibv_mw *mw, struct ibv_mr *mr, void *addr, size_t len, unsigned access)
{
	struct ibv_mw_bind mb = {.wr_id = 5, .send_flags = IBV_SEND_SIGNALED,
				 .bind_info = {.mr = mr, .addr = (uintptr_t)addr, .length = len, .mw_access_flags = access}};
	int rc = ibv_bind_mw(s->b, mw, &mb);
	CHECK(rc == 0, "ibv_bind_mw: %s", strerror(rc));
	struct ibv_wc wc;
	if (rc || wait(s->cb, &wc))
		return -1;
	CHECK(wc.wr_id == 5 && wc.opcode == IBV_WC_BIND_MW, "bind completion: wr_id %llu opcode %d",
	      (unsigned long long)wc.wr_id, wc.opcode);
	return wc.status;
}

/* bind2 binds a type 2 window with a BIND_MW work request on b, under the
 * window's next rkey, which *rkey gets: the completion's status, or -1. */
static int bind2(struct scene *s, struct ibv_mw *mw, void *addr, size_t len, unsigned access, uint32_t *rkey)
{
	struct ibv_send_wr wr = {.wr_id = 6, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED}, *bad;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = *rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = tmr, .addr = (uintptr_t)addr, .length = len, .mw_access_flags = access};
	int rc = ibv_post_send(s->b, &wr, &bad);
	CHECK(rc == 0, "ibv_post_send(BIND_MW): %s", strerror(rc));
	struct ibv_wc wc;
	if (rc || wait(s->cb, &wc))
		return -1;
	CHECK(wc.opcode == IBV_WC_BIND_MW, "BIND_MW completion opcode %d", wc.opcode);
	return wc.status;
}

#define RW (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static void test_type1(void)
{
	struct scene s = {0};
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK(mw && mw->type == IBV_MW_TYPE_1 && mw->pd == pd, "ibv_alloc_mw(TYPE_1): %s", strerror(errno));
	if (!mw || up(&s))
		goto out;
	uint32_t first = mw->rkey;
	CHECK(rwrite(&s, target, first, 8, 1) == IBV_WC_REM_ACCESS_ERR, "WRITE through an unbound window");
	down(&s);
	if (up(&s))
		goto out;
	CHECK(bind1(&s, mw, tmr, target + 256, 512, RW) == IBV_WC_SUCCESS, "bind");
	uint32_t k1 = mw->rkey;
	CHECK(k1 != first && (k1 & ~0xffu) == (first & ~0xffu), "rkey 0x%x after the bind, was 0x%x: want the low 8 bits changed",
	      k1, first);
	memset(target, 0, sizeof target);
	CHECK(rwrite(&s, target + 256, k1, 512, 0x3c) == IBV_WC_SUCCESS, "WRITE inside the window");
	CHECK(target[256] == 0x3c && target[767] == 0x3c && target[255] == 0 && target[768] == 0, "the WRITE did not land as asked");
	CHECK(bind1(&s, mw, tmr, target + 256, 512, RW) == IBV_WC_SUCCESS, "rebind");
	uint32_t k2 = mw->rkey;
	CHECK(k2 != k1, "a rebind kept the rkey 0x%x", k2);
	CHECK(rwrite(&s, target + 256, k2, 8, 4) == IBV_WC_SUCCESS, "WRITE under the new rkey");
	CHECK(rwrite(&s, target + 256, k1, 8, 5) == IBV_WC_REM_ACCESS_ERR, "WRITE under the rkey before the rebind");
	down(&s);
	if (up(&s))
		goto out;
	CHECK(rwrite(&s, target + 700, mw->rkey, 100, 6) == IBV_WC_REM_ACCESS_ERR, "WRITE past the window's end");
	down(&s);
	if (up(&s))
		goto out;
	CHECK(rwrite(&s, target + 255, mw->rkey, 2, 6) == IBV_WC_REM_ACCESS_ERR, "WRITE before the window's start");
	down(&s);
	if (up(&s))
		goto out;
	CHECK(bind1(&s, mw, tmr, target, 512, IBV_ACCESS_REMOTE_READ) == IBV_WC_SUCCESS, "read-only bind");
	CHECK(rwrite(&s, target, mw->rkey, 8, 7) == IBV_WC_REM_ACCESS_ERR, "WRITE through a read-only window");
	down(&s);
	if (up(&s))
		goto out;
	/* Unbinding: length 0 (pyverbs' invalidation of a type 1 window). */
	CHECK(bind1(&s, mw, tmr, target, 512, RW) == IBV_WC_SUCCESS, "bind");
	CHECK(bind1(&s, mw, tmr, target, 0, 0) == IBV_WC_SUCCESS, "unbind");
	CHECK(rwrite(&s, target, mw->rkey, 8, 8) == IBV_WC_REM_ACCESS_ERR, "WRITE through an unbound window");
	down(&s);
	if (up(&s))
		goto out;
	CHECK(bind1(&s, mw, pmr, plain, 512, RW) == IBV_WC_MW_BIND_ERR, "bind to a region without MW_BIND");
	down(&s);
	if (up(&s))
		goto out;
	CHECK(bind1(&s, mw, tmr, target + TSIZE - 256, 512, RW) == IBV_WC_MW_BIND_ERR, "bind past the region's end");
out:
	down(&s);
	if (mw)
		CHECK(ibv_dealloc_mw(mw) == 0, "ibv_dealloc_mw");
}

static void test_type2_local_inv(void)
{
	struct scene s = {0};
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw && mw->type == IBV_MW_TYPE_2, "ibv_alloc_mw(TYPE_2): %s", strerror(errno));
	uint32_t rkey = 0;
	if (!mw || up(&s))
		goto out;
	CHECK(bind2(&s, mw, target, 1024, RW, &rkey) == IBV_WC_SUCCESS, "BIND_MW");
	CHECK(rwrite(&s, target + 8, rkey, 8, 9) == IBV_WC_SUCCESS && target[8] == 9, "WRITE through a type 2 window");
	struct ibv_send_wr inv = {.wr_id = 8, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED}, *bad;
	inv.invalidate_rkey = rkey;
	struct ibv_wc wc;
	CHECK(ibv_post_send(s.b, &inv, &bad) == 0, "ibv_post_send(LOCAL_INV)");
	if (!wait(s.cb, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV && wc.wr_id == 8, "LOCAL_INV: status %s opcode %d",
		      ibv_wc_status_str(wc.status), wc.opcode);
	CHECK(rwrite(&s, target + 8, rkey, 8, 10) == IBV_WC_REM_ACCESS_ERR, "WRITE after LOCAL_INV");
out:
	down(&s);
	if (mw)
		CHECK(ibv_dealloc_mw(mw) == 0, "ibv_dealloc_mw");
}

static void test_type2_send_inv(void)
{
	struct scene s = {0};
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	uint32_t rkey = 0;
	if (!mw || up(&s))
		goto out;
	CHECK(bind2(&s, mw, target, 1024, RW, &rkey) == IBV_WC_SUCCESS, "BIND_MW");
	CHECK(lb_recv(s.b, 21) == 0, "ibv_post_recv");
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = 16, .lkey = buf_mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 22, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.invalidate_rkey = rkey;
	CHECK(ibv_post_send(s.a, &wr, &bad) == 0, "ibv_post_send(SEND_WITH_INV)");
	struct ibv_wc wc;
	if (!wait(s.ca, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "SEND_WITH_INV: %s", ibv_wc_status_str(wc.status));
	if (!wait(s.cb, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_INV) &&
			      !(wc.wc_flags & IBV_WC_WITH_IMM) && wc.invalidated_rkey == rkey,
		      "the receive: %s opcode %d flags 0x%x rkey 0x%x, want WITH_INV and 0x%x", ibv_wc_status_str(wc.status),
		      wc.opcode, wc.wc_flags, wc.invalidated_rkey, rkey);
	CHECK(rwrite(&s, target, rkey, 8, 11) == IBV_WC_REM_ACCESS_ERR, "WRITE after SEND_WITH_INV");
out:
	down(&s);
	if (mw)
		CHECK(ibv_dealloc_mw(mw) == 0, "ibv_dealloc_mw");
}

static void test_dealloc(void)
{
	struct scene s = {0};
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	uint32_t rkey = 0;
	if (!mw || up(&s))
		goto out;
	CHECK(bind2(&s, mw, target, 1024, RW, &rkey) == IBV_WC_SUCCESS, "BIND_MW");
	CHECK(ibv_dealloc_mw(mw) == 0, "ibv_dealloc_mw");
	mw = NULL;
	CHECK(rwrite(&s, target, rkey, 8, 12) == IBV_WC_REM_ACCESS_ERR, "WRITE through a deallocated window");
out:
	down(&s);
	if (mw)
		ibv_dealloc_mw(mw);
}

static void test_refusals(void)
{
	errno = 0;
	struct ibv_mw *mw = ibv_alloc_mw(pd, (enum ibv_mw_type)3);
	CHECK(!mw && errno == EINVAL, "ibv_alloc_mw(type 3): %p errno %d, want EINVAL", (void *)mw, errno);
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0 && da.max_mw > 0, "max_mw %d, want the daemon's limit", da.max_mw);
}

int main(void)
{
	if (lb_open())
		return 1;
	tmr = ibv_reg_mr(pd, target, TSIZE, LB_ACCESS | IBV_ACCESS_MW_BIND);
	pmr = ibv_reg_mr(pd, plain, TSIZE, LB_ACCESS);
	if (!tmr || !pmr) {
		fprintf(stderr, "ibv_reg_mr: %s\n", strerror(errno));
		return 1;
	}
	static const struct test_case cases[] = {
		{"type1", test_type1},
		{"type2_local_inv", test_type2_local_inv},
		{"type2_send_inv", test_type2_send_inv},
		{"dealloc", test_dealloc},
		{"refusals", test_refusals},
	};
	RUN_CASES(cases);
	CHECK(ibv_dereg_mr(tmr) == 0 && ibv_dereg_mr(pmr) == 0, "ibv_dereg_mr");
	lb_close();
	printf("mw_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
