/*
 * odp_implicit_test.c: implicit on-demand MRs against a real daemon
 * (docs/design/odp-implicit.md). ibv_query_device_ex says
 * IBV_ODP_SUPPORT_IMPLICIT; ibv_reg_mr(pd, NULL, SIZE_MAX, ON_DEMAND | ...)
 * gives an MR of the whole address space (addr NULL, length SIZE_MAX),
 * without ON_DEMAND it is EINVAL. Its lkey serves memory never registered:
 * a SEND from one fresh buffer into a RECV of another, an RDMA WRITE's
 * local side, the ibv_wr_* builder's SGEs and an SRQ's receives; memory
 * that is not mapped completes with a local protection error; an
 * ibv_advise_mr prefetch through it registers and populates; ibv_rereg_mr
 * is refused; deregistering it frees what it registered.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "loopback.h"

#define IMPLICIT_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND)

static size_t page;

/* poll_one waits for one completion of cq: its status, or -1. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double t0 = lb_now();
	while (lb_now() - t0 < HANG_GUARD_SECONDS) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -1;
		if (n == 1)
			return wc->status;
	}
	return -1;
}

/* fresh returns len bytes of anonymous memory no MR covers, filled with c. */
static uint8_t *fresh(size_t len, int c)
{
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memset(p, c, len);
	return p;
}

static void test_caps_and_refusals(void)
{
	struct ibv_device_attr_ex ax;
	CHECK(ibv_query_device_ex(ctx, NULL, &ax) == 0, "ibv_query_device_ex");
	CHECK(ax.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT, "general_caps 0x%llx lacks IBV_ODP_SUPPORT_IMPLICIT",
	      (unsigned long long)ax.odp_caps.general_caps);
	errno = 0;
	struct ibv_mr *mr = ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE);
	CHECK(!mr && errno == EINVAL, "the whole address space without ON_DEMAND: %p, errno %d, want EINVAL",
	      (void *)mr, errno);
	if (mr)
		ibv_dereg_mr(mr);
	mr = ibv_reg_mr(pd, NULL, SIZE_MAX, IMPLICIT_ACCESS);
	CHECK(mr && mr->addr == NULL && mr->length == SIZE_MAX, "the implicit MR: %p (%s)", (void *)mr,
	      mr ? "addr/length" : strerror(errno));
	if (!mr)
		return;
	errno = 0;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE) != 0 && errno == EOPNOTSUPP,
	      "ibv_rereg_mr of an implicit MR: errno %d, want EOPNOTSUPP", errno);
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr of the implicit MR");
}

/* A SEND from one fresh buffer to a RECV into another, both named by the
 * implicit MR's lkey, then an RDMA WRITE from a third; an SGE on unmapped
 * memory completes with a local protection error. */
static void test_traffic(void)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, NULL, SIZE_MAX, IMPLICIT_ACCESS);
	struct ibv_cq *ca = ibv_create_cq(ctx, 8, NULL, NULL, 0), *cb = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_qp *a = NULL, *b = NULL;
	size_t len = 3 * page;
	uint8_t *src = fresh(len, 0x5a), *dst = fresh(len, 0), *wsrc = fresh(page, 0x77);
	CHECK(mr && ca && cb && src && dst && wsrc, "setting up: %s", strerror(errno));
	if (mr && ca && cb && src && dst && wsrc && !lb_pair(ca, cb, 8, &a, &b)) {
		/* Across a page boundary, not page-aligned. */
		struct ibv_sge rs = {.addr = (uintptr_t)dst + 100, .length = (uint32_t)(2 * page), .lkey = mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1}, *rbad;
		CHECK(ibv_post_recv(b, &rwr, &rbad) == 0, "post_recv through the implicit MR");
		struct ibv_sge ss = {.addr = (uintptr_t)src + 50, .length = (uint32_t)(2 * page), .lkey = mr->lkey};
		struct ibv_send_wr swr = {.wr_id = 2, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED},
				   *sbad;
		CHECK(ibv_post_send(a, &swr, &sbad) == 0, "post_send through the implicit MR");
		struct ibv_wc wc;
		int st = poll_one(ca, &wc);
		CHECK(st == IBV_WC_SUCCESS, "the SEND: status %d", st);
		st = poll_one(cb, &wc);
		CHECK(st == IBV_WC_SUCCESS && wc.byte_len == 2 * page, "the RECV: status %d, %u bytes", st, wc.byte_len);
		int same = 1;
		for (size_t i = 0; i < 2 * page; i++)
			same &= dst[100 + i] == 0x5a;
		CHECK(same && dst[99] == 0 && dst[100 + 2 * page] == 0, "the received bytes are not the sent ones");

		/* An RDMA WRITE whose local side is the implicit MR's. */
		struct ibv_sge ws = {.addr = (uintptr_t)wsrc, .length = 64, .lkey = mr->lkey};
		struct ibv_send_wr wwr = {.wr_id = 3, .sg_list = &ws, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED};
		wwr.wr.rdma.remote_addr = (uintptr_t)buf;
		wwr.wr.rdma.rkey = buf_mr->rkey;
		memset(buf, 0, 64);
		CHECK(ibv_post_send(a, &wwr, &sbad) == 0, "post RDMA WRITE");
		st = poll_one(ca, &wc);
		CHECK(st == IBV_WC_SUCCESS && buf[0] == 0x77 && buf[63] == 0x77, "the WRITE: status %d, byte 0x%x", st, buf[0]);

		/* Unmapped memory: no child can hold it. */
		uint8_t *gone = fresh(page, 0);
		munmap(gone, page);
		struct ibv_sge gs = {.addr = (uintptr_t)gone, .length = 16, .lkey = mr->lkey};
		struct ibv_send_wr gwr = {.wr_id = 4, .sg_list = &gs, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED};
		gwr.wr.rdma.remote_addr = (uintptr_t)buf;
		gwr.wr.rdma.rkey = buf_mr->rkey;
		CHECK(ibv_post_send(a, &gwr, &sbad) == 0, "post a WRITE from unmapped memory");
		st = poll_one(ca, &wc);
		CHECK(st == IBV_WC_LOC_PROT_ERR, "a WRITE from unmapped memory: status %d (%s), want a local protection error",
		      st, st >= 0 ? ibv_wc_status_str((enum ibv_wc_status)st) : "none");
	}
	lb_unpair(a, b);
	CHECK(!ca || ibv_destroy_cq(ca) == 0, "ibv_destroy_cq");
	CHECK(!cb || ibv_destroy_cq(cb) == 0, "ibv_destroy_cq");
	CHECK(!mr || ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	if (src)
		munmap(src, len);
	if (dst)
		munmap(dst, len);
	if (wsrc)
		munmap(wsrc, page);
}

/* The ibv_wr_* builder and an SRQ take the implicit MR's lkey too. */
static void test_builder_and_srq(void)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, NULL, SIZE_MAX, IMPLICIT_ACCESS);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_qp_init_attr_ex ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .pd = pd,
					 .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					 .send_ops_flags = IBV_QP_EX_WITH_SEND,
					 .cap = {.max_send_wr = 4, .max_send_sge = 1}};
	struct ibv_qp *a = ibv_create_qp_ex(ctx, &ia);
	ia.srq = srq;
	struct ibv_qp *b = ibv_create_qp_ex(ctx, &ia);
	uint8_t *src = fresh(page, 0x3c), *dst = fresh(page, 0);
	CHECK(mr && cq && srq && a && b && src && dst, "setting up: %s", strerror(errno));
	if (mr && cq && srq && a && b && src && dst && !lb_connect(a, b->qp_num) && !lb_connect(b, a->qp_num)) {
		struct ibv_sge rs = {.addr = (uintptr_t)dst, .length = (uint32_t)page, .lkey = mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = 10, .sg_list = &rs, .num_sge = 1}, *rbad;
		CHECK(ibv_post_srq_recv(srq, &rwr, &rbad) == 0, "post_srq_recv through the implicit MR");
		struct ibv_qp_ex *x = ibv_qp_to_qp_ex(a);
		ibv_wr_start(x);
		x->wr_id = 11;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(x);
		ibv_wr_set_sge(x, mr->lkey, (uintptr_t)src, 256);
		CHECK(ibv_wr_complete(x) == 0, "ibv_wr_complete");
		int got = 0;
		double t0 = lb_now();
		while (got < 2 && lb_now() - t0 < HANG_GUARD_SECONDS) {
			struct ibv_wc wc;
			int n = ibv_poll_cq(cq, 1, &wc);
			if (n < 0)
				break;
			if (n == 1) {
				CHECK(wc.status == IBV_WC_SUCCESS, "wr %llu: status %d", (unsigned long long)wc.wr_id, wc.status);
				got++;
			}
		}
		CHECK(got == 2 && dst[0] == 0x3c && dst[255] == 0x3c && dst[256] == 0, "%d of 2 completions, byte 0x%x", got,
		      dst[0]);
	} else {
		CHECK(0, "connecting: %s", strerror(errno));
	}
	lb_unpair(a, b);
	CHECK(!srq || ibv_destroy_srq(srq) == 0, "ibv_destroy_srq");
	CHECK(!cq || ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(!mr || ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	if (src)
		munmap(src, page);
	if (dst)
		munmap(dst, page);
}

/* ibv_advise_mr through the implicit MR's lkey registers the range and
 * faults it in; unmapped memory is EFAULT; NO_FAULT only checks. */
static void test_advise(void)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, NULL, SIZE_MAX, IMPLICIT_ACCESS);
	uint8_t *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(mr && p != MAP_FAILED, "setting up: %s", strerror(errno));
	if (mr && p != MAP_FAILED) {
		struct ibv_sge sg = {.addr = (uintptr_t)p, .length = (uint32_t)(2 * page), .lkey = mr->lkey};
		int rc = ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &sg, 1);
		CHECK(rc == 0, "PREFETCH_NO_FAULT through the implicit MR: %d (%s)", rc, strerror(rc));
		rc = ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1);
		CHECK(rc == 0, "PREFETCH_WRITE through the implicit MR: %d (%s)", rc, strerror(rc));
		munmap(p, 2 * page);
		uint8_t *q = fresh(page, 0);
		munmap(q, page);
		struct ibv_sge gone = {.addr = (uintptr_t)q, .length = 8, .lkey = mr->lkey};
		rc = ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &gone, 1);
		CHECK(rc == EFAULT, "PREFETCH of unmapped memory through the implicit MR: %d (%s), want EFAULT", rc,
		      strerror(rc));
	}
	CHECK(!mr || ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
}

int main(void)
{
	page = (size_t)sysconf(_SC_PAGESIZE);
	if (lb_open())
		return 1;
	static const struct test_case cases[] = {
		{"caps and refusals", test_caps_and_refusals},
		{"traffic", test_traffic},
		{"builder and srq", test_builder_and_srq},
		{"advise", test_advise},
	};
	RUN_CASES(cases);
	lb_close();
	printf("odp_implicit_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
