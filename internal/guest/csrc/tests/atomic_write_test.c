/*
 * atomic_write_test.c: IBV_WR_ATOMIC_WRITE (rdma-core v44, rdma_rxe's IBTA
 * 1.5 RDMA ATOMIC WRITE) through a real daemon: ibv_wr_atomic_write and
 * ibv_post_send store 8 bytes at an aligned remote address under an rkey
 * that grants REMOTE_WRITE, completing IBV_WC_ATOMIC_WRITE; posting
 * refuses what rxe refuses (an unaligned address, no 8-byte SGE, a QP
 * that is not RC, an SGE through the builder); a region without
 * REMOTE_WRITE completes IBV_WC_REM_ACCESS_ERR and nothing changes; the
 * device says it has the operation (device_cap_flags_ex bit 40).
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "loopback.h"

/* The target: a word in the second half of the loopback buffer. */
#define TARGET_OFF (LB_BUF_SIZE / 2 + 64)

struct xpair {
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *x;
};

/* xpair_up connects two RC QPs made by ibv_create_qp_ex with
 * ATOMIC_WRITE among their send operations: 0 or -1. */
static int xpair_up(struct xpair *p, enum ibv_qp_type type)
{
	memset(p, 0, sizeof *p);
	p->cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!p->cq)
		return -1;
	struct ibv_qp_init_attr_ex xa = {
		.qp_type = type,
		.send_cq = p->cq,
		.recv_cq = p->cq,
		.cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_RDMA_WRITE,
	};
	p->a = ibv_create_qp_ex(ctx, &xa);
	p->b = ibv_create_qp_ex(ctx, &xa);
	int ok = p->a && p->b && !lb_connect(p->a, p->b->qp_num) && !lb_connect(p->b, p->a->qp_num);
	CHECK(ok, "an RC pair with IBV_QP_EX_WITH_ATOMIC_WRITE: %s", strerror(errno));
	if (ok)
		p->x = ibv_qp_to_qp_ex(p->a);
	return ok ? 0 : -1;
}

static void xpair_down(struct xpair *p)
{
	lb_unpair(p->a, p->b);
	if (p->cq)
		CHECK(ibv_destroy_cq(p->cq) == 0, "ibv_destroy_cq");
}

/* one_wc waits for one completion of cq: 1, or 0 after the hang guard. */
static int one_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double t0 = lb_now();
	int n;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && lb_now() - t0 < HANG_GUARD_SECONDS)
		;
	CHECK(n == 1, "no completion within %d s", HANG_GUARD_SECONDS);
	return n == 1;
}

/* The builder and ibv_post_send each store their 8 bytes, one store each,
 * at the target; nothing around it changes. */
static void test_atomic_write_stores(void)
{
	struct xpair p;
	if (xpair_up(&p, IBV_QPT_RC))
		return xpair_down(&p);
	memset(buf + LB_BUF_SIZE / 2, 0x5a, LB_BUF_SIZE / 2);
	const uint8_t v1[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	ibv_wr_start(p.x);
	p.x->wr_id = 11;
	p.x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(p.x, buf_mr->rkey, (uintptr_t)buf + TARGET_OFF, v1);
	CHECK(ibv_wr_complete(p.x) == 0, "ibv_wr_complete: %s", strerror(errno));
	struct ibv_wc wc;
	if (one_wc(p.cq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_ATOMIC_WRITE && wc.wr_id == 11,
		      "builder: status %s, opcode %d, wr_id %llu", ibv_wc_status_str(wc.status), wc.opcode,
		      (unsigned long long)wc.wr_id);
	CHECK(memcmp(buf + TARGET_OFF, v1, 8) == 0, "the target does not hold the builder's 8 bytes");

	/* ibv_post_send takes the 8 bytes from its one SGE, read at post time. */
	uint8_t v2[8] = {0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87};
	memcpy(buf, v2, 8);
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = 8, .lkey = buf_mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 12, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_ATOMIC_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad = NULL;
	wr.wr.rdma.remote_addr = (uintptr_t)buf + TARGET_OFF;
	wr.wr.rdma.rkey = buf_mr->rkey;
	CHECK(ibv_post_send(p.a, &wr, &bad) == 0, "ibv_post_send ATOMIC_WRITE: %s", strerror(errno));
	if (one_wc(p.cq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_ATOMIC_WRITE && wc.wr_id == 12,
		      "post_send: status %s, opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
	CHECK(memcmp(buf + TARGET_OFF, v2, 8) == 0, "the target does not hold the SGE's 8 bytes");
	int around = 1;
	for (size_t i = LB_BUF_SIZE / 2; i < LB_BUF_SIZE; i++)
		if ((i < TARGET_OFF || i >= TARGET_OFF + 8) && buf[i] != 0x5a)
			around = 0;
	CHECK(around, "bytes around the target changed");
	xpair_down(&p);
}

/* What rxe refuses when posting is refused here, before the daemon. */
static void test_atomic_write_refused(void)
{
	struct xpair p;
	if (xpair_up(&p, IBV_QPT_RC))
		return xpair_down(&p);
	const uint64_t v = 42;
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = 8, .lkey = buf_mr->lkey};
	struct {
		const char *what;
		int num_sge;
		uint32_t length;
		uint64_t off;
	} cases[] = {
		{"an unaligned address", 1, 8, TARGET_OFF + 4},
		{"no SGE", 0, 8, TARGET_OFF},
		{"an SGE of 4 bytes", 1, 4, TARGET_OFF},
		{"an SGE of 16 bytes", 1, 16, TARGET_OFF},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		sg.length = cases[i].length;
		struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sg, .num_sge = cases[i].num_sge,
					 .opcode = IBV_WR_ATOMIC_WRITE},
				   *bad = NULL;
		wr.wr.rdma.remote_addr = (uintptr_t)buf + cases[i].off;
		wr.wr.rdma.rkey = buf_mr->rkey;
		int rc = ibv_post_send(p.a, &wr, &bad);
		CHECK(rc == EINVAL && bad == &wr, "post_send with %s: %d, want EINVAL", cases[i].what, rc);
	}
	ibv_wr_start(p.x);
	ibv_wr_atomic_write(p.x, buf_mr->rkey, (uintptr_t)buf + TARGET_OFF + 1, &v);
	CHECK(ibv_wr_complete(p.x) == EINVAL, "the builder at an unaligned address");
	ibv_wr_start(p.x);
	ibv_wr_atomic_write(p.x, buf_mr->rkey, (uintptr_t)buf + TARGET_OFF, &v);
	ibv_wr_set_sge(p.x, buf_mr->lkey, (uintptr_t)buf, 8);
	CHECK(ibv_wr_complete(p.x) == EINVAL, "the builder with an SGE: the 8 bytes are the call's");
	struct ibv_wc wc;
	CHECK(ibv_poll_cq(p.cq, 1, &wc) == 0, "a refused post completed");
	xpair_down(&p);

	/* UC has no ATOMIC WRITE (rxe: RC only). */
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UC,
				      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *uc = cq ? ibv_create_qp(pd, &ia) : NULL;
	CHECK(uc != NULL, "a UC QP: %s", strerror(errno));
	if (uc && !lb_connect(uc, uc->qp_num)) {
		sg.length = 8;
		struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_ATOMIC_WRITE},
				   *bad = NULL;
		wr.wr.rdma.remote_addr = (uintptr_t)buf + TARGET_OFF;
		wr.wr.rdma.rkey = buf_mr->rkey;
		CHECK(ibv_post_send(uc, &wr, &bad) == EINVAL, "ATOMIC_WRITE on UC was not refused");
	}
	if (uc)
		CHECK(ibv_destroy_qp(uc) == 0, "ibv_destroy_qp");
	if (cq)
		CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
}

/* A region without REMOTE_WRITE: the responder refuses (rxe: an rkey
 * violation), the request completes REM_ACCESS_ERR, the word stays. */
static void test_atomic_write_no_remote_write(void)
{
	static uint64_t word __attribute__((aligned(8))) = 7;
	struct ibv_mr *ro = ibv_reg_mr(pd, &word, sizeof word, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(ro != NULL, "ibv_reg_mr: %s", strerror(errno));
	struct xpair p;
	if (ro && !xpair_up(&p, IBV_QPT_RC)) {
		const uint64_t v = 99;
		ibv_wr_start(p.x);
		p.x->wr_id = 21;
		p.x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_atomic_write(p.x, ro->rkey, (uintptr_t)&word, &v);
		CHECK(ibv_wr_complete(p.x) == 0, "ibv_wr_complete");
		struct ibv_wc wc;
		if (one_wc(p.cq, &wc))
			CHECK(wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 21, "status %s, want REM_ACCESS_ERR",
			      ibv_wc_status_str(wc.status));
		CHECK(word == 7, "the word changed to %llu", (unsigned long long)word);
		xpair_down(&p);
	}
	if (ro)
		CHECK(ibv_dereg_mr(ro) == 0, "ibv_dereg_mr");
}

/* rdma_rxe advertises ATOMIC WRITE in device_cap_flags_ex (bit 40, the
 * kernel's IB_UVERBS_DEVICE_ATOMIC_WRITE); so does vrdma. */
static void test_atomic_write_cap(void)
{
	struct ibv_device_attr_ex ax;
	CHECK(ibv_query_device_ex(ctx, NULL, &ax) == 0, "ibv_query_device_ex");
	CHECK(ax.device_cap_flags_ex & (1ULL << 40), "device_cap_flags_ex 0x%llx lacks ATOMIC_WRITE",
	      (unsigned long long)ax.device_cap_flags_ex);
}

static const struct test_case cases[] = {
	{"atomic_write_stores", test_atomic_write_stores},
	{"atomic_write_refused", test_atomic_write_refused},
	{"atomic_write_no_remote_write", test_atomic_write_no_remote_write},
	{"atomic_write_cap", test_atomic_write_cap},
};

int main(void)
{
	if (lb_open())
		return 1;
	RUN_CASES(cases);
	lb_close();
	return failures ? 1 : 0;
}
