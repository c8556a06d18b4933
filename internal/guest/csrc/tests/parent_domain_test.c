/*
 * parent_domain_test.c: parent and thread domains against a real daemon
 * (docs/design/parent-domain.md): ibv_alloc_parent_domain over a PD, with
 * a thread domain, pd_context and allocators, is a PD for every verb (an
 * MR registered on it serves a QP of its PD, and a QP, SRQ and extended CQ
 * made with it carry traffic); vrdma never calls the allocators (its
 * rings are the daemon's memfds, its objects on its own pages); the PD
 * cannot be freed while a parent domain uses it (EBUSY); bad attributes
 * are refused (EINVAL, EOPNOTSUPP for unknown comp_mask bits).
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "loopback.h"

static int alloc_calls, free_calls;

static void *count_alloc(struct ibv_pd *p, void *pd_context, size_t size, size_t alignment, uint64_t type)
{
	(void)p, (void)pd_context, (void)type;
	alloc_calls++;
	void *m = NULL;
	return posix_memalign(&m, alignment, size) ? NULL : m;
}

static void count_free(struct ibv_pd *p, void *pd_context, void *ptr, uint64_t type)
{
	(void)p, (void)pd_context, (void)type;
	free_calls++;
	free(ptr);
}

static void test_traffic(void)
{
	int cookie = 0;
	struct ibv_td_init_attr tda = {0};
	struct ibv_td *td = ibv_alloc_td(ctx, &tda);
	CHECK(td != NULL, "ibv_alloc_td: %s", strerror(errno));
	struct ibv_parent_domain_init_attr pa = {
		.pd = pd,
		.td = td,
		.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
		.alloc = count_alloc,
		.free = count_free,
		.pd_context = &cookie,
	};
	struct ibv_pd *par = ibv_alloc_parent_domain(ctx, &pa);
	if (!par) {
		CHECK(0, "ibv_alloc_parent_domain: %s", strerror(errno));
		if (td)
			ibv_dealloc_td(td);
		return;
	}
	CHECK(par != pd && par->context == ctx, "the parent domain is its own PD object of this context");
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "freeing the PD a parent domain uses");
	/* An MR on the parent domain is its PD's: a WRITE from a QP of the PD
	 * (lb_pair's) reaches it; a QP, SRQ and extended CQ on the parent
	 * domain are created. */
	uint8_t *t = calloc(1, 4096);
	struct ibv_mr *mr = t ? ibv_reg_mr(par, t, 4096, LB_ACCESS) : NULL;
	CHECK(mr && mr->pd == par, "ibv_reg_mr on the parent domain: %s", strerror(errno));
	struct ibv_cq_init_attr_ex cqa = {.cqe = 16,
					  .wc_flags = IBV_WC_STANDARD_FLAGS,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
					  .parent_domain = par};
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cqa);
	CHECK(cqx != NULL, "ibv_create_cq_ex with the parent domain: %s", strerror(errno));
	struct ibv_cq *cq = cqx ? ibv_cq_ex_to_cq(cqx) : NULL;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(par, &sa);
	CHECK(srq != NULL, "ibv_create_srq on the parent domain: %s", strerror(errno));
	struct ibv_qp_init_attr_ex qa = {.send_cq = cq, .recv_cq = cq, .srq = srq, .cap = {.max_send_wr = 4, .max_send_sge = 1},
					 .qp_type = IBV_QPT_RC, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = par};
	struct ibv_qp *qp = cq && srq ? ibv_create_qp_ex(ctx, &qa) : NULL;
	CHECK(qp && qp->pd == par, "ibv_create_qp_ex on the parent domain: %s", strerror(errno));
	if (mr && cq) {
		struct ibv_cq *ca = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		struct ibv_qp *a = NULL, *b = NULL;
		if (ca && !lb_pair(ca, cq, 4, &a, &b)) {
			memset(buf, 5, 64);
			struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = 64, .lkey = buf_mr->lkey};
			struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
						 .send_flags = IBV_SEND_SIGNALED},
					   *bad;
			wr.wr.rdma.remote_addr = (uintptr_t)t;
			wr.wr.rdma.rkey = mr->rkey;
			struct ibv_wc wc = {.status = IBV_WC_GENERAL_ERR};
			int n = 0;
			if (ibv_post_send(a, &wr, &bad) == 0) {
				double t0 = lb_now();
				while ((n = ibv_poll_cq(ca, 1, &wc)) == 0 && lb_now() - t0 < HANG_GUARD_SECONDS)
					;
			}
			CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && t[0] == 5 && t[63] == 5,
			      "a WRITE into the parent domain's MR: %d %s", n, ibv_wc_status_str(wc.status));
		} else {
			CHECK(0, "lb_pair: %s", strerror(errno));
		}
		lb_unpair(a, b);
		if (ca)
			ibv_destroy_cq(ca);
	}
	if (qp)
		ibv_destroy_qp(qp);
	if (srq)
		ibv_destroy_srq(srq);
	if (cq)
		ibv_destroy_cq(cq);
	if (mr)
		ibv_dereg_mr(mr);
	free(t);
	CHECK(alloc_calls == 0 && free_calls == 0, "the allocators were called: %d allocs, %d frees", alloc_calls, free_calls);
	CHECK(ibv_dealloc_pd(par) == 0, "ibv_dealloc_pd(parent domain)");
	if (td)
		CHECK(ibv_dealloc_td(td) == 0, "ibv_dealloc_td");
	/* The PD is free to go again: take a fresh one to show it. */
	struct ibv_pd *p2 = ibv_alloc_pd(ctx);
	pa = (struct ibv_parent_domain_init_attr){.pd = p2};
	struct ibv_pd *par2 = p2 ? ibv_alloc_parent_domain(ctx, &pa) : NULL;
	CHECK(par2 != NULL, "a parent domain without allocators or context: %s", strerror(errno));
	if (par2)
		ibv_dealloc_pd(par2);
	CHECK(p2 && ibv_dealloc_pd(p2) == 0, "the PD after its parent domain went");
}

static void test_bad(void)
{
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	struct ibv_parent_domain_init_attr ok = {.pd = pd2};
	struct ibv_pd *par = ibv_alloc_parent_domain(ctx, &ok);
	struct {
		const char *name;
		struct ibv_parent_domain_init_attr a;
		int want;
	} cases[] = {
		{"no PD", {.pd = NULL}, EINVAL},
		{"a parent domain as the PD", {.pd = par}, EINVAL},
		{"allocators without functions", {.pd = pd2, .comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS}, EINVAL},
		{"an unknown comp_mask bit", {.pd = pd2, .comp_mask = 1u << 7}, EOPNOTSUPP},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		errno = 0;
		struct ibv_pd *p = ibv_alloc_parent_domain(ctx, &cases[i].a);
		CHECK(!p && errno == cases[i].want, "%s: %p, errno %d, want %d", cases[i].name, (void *)p, errno, cases[i].want);
		if (p)
			ibv_dealloc_pd(p);
	}
	struct ibv_td_init_attr bad = {.comp_mask = 1};
	errno = 0;
	CHECK(!ibv_alloc_td(ctx, &bad) && errno == EINVAL, "a thread domain with comp_mask");
	if (par)
		ibv_dealloc_pd(par);
	if (pd2)
		ibv_dealloc_pd(pd2);
}

int main(void)
{
	if (lb_open())
		return 1;
	static const struct test_case cases[] = {
		{"traffic", test_traffic},
		{"bad", test_bad},
	};
	RUN_CASES(cases);
	lb_close();
	printf("parent_domain_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
