/*
 * mcast_test.c: ibv_attach_mcast and ibv_detach_mcast against a real
 * daemon, with rdma_rxe's semantics: a GID that is not multicast, a QP
 * that is not UD, and detaching from a group the QP is not in fail with
 * EINVAL; attaching twice is not an error; ibv_query_device reports rxe's
 * multicast limits. A datagram sent to the group (DQPN 0xFFFFFF) reaches
 * both QPs attached to it, each with the GRH in front, and not the sender,
 * which is attached too; after a detach, only the other QP gets the next.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "loopback.h"

#define QKEY 0x01234567u
#define SLOT 512 /* a receive: the GRH and the payload */

static const union ibv_gid mgid = {.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3}};

static struct ibv_qp *ud_qp(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		return NULL;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return NULL;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return NULL;
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return NULL;
	return qp;
}

static void post_recv(struct ibv_qp *qp, int slot)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(buf + slot * SLOT), .length = SLOT, .lkey = buf_mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1}, *bad;
	CHECK(ibv_post_recv(qp, &wr, &bad) == 0, "ibv_post_recv");
}

/* poll_one waits for one completion on cq: 1, or 0 after the guard. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, double guard)
{
	double t0 = lb_now();
	int n;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && lb_now() - t0 < guard)
		;
	return n == 1;
}

static void test_errors(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *ud = ud_qp(cq);
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *rc = ibv_create_qp(pd, &ia);
	CHECK(cq && ud && rc, "setting up: %s", strerror(errno));
	if (!cq || !ud || !rc)
		return;
	int e = ibv_attach_mcast(rc, &mgid, 0);
	CHECK(e == EINVAL, "attach an RC QP: %d, want EINVAL", e);
	e = ibv_attach_mcast(ud, &gid0, 0);
	CHECK(e == EINVAL, "attach to a unicast GID: %d, want EINVAL", e);
	e = ibv_detach_mcast(ud, &mgid, 0);
	CHECK(e == EINVAL, "detach from a group not attached: %d, want EINVAL", e);
	CHECK(ibv_attach_mcast(ud, &mgid, 0) == 0, "attach");
	CHECK(ibv_attach_mcast(ud, &mgid, 0) == 0, "attach again");
	CHECK(ibv_detach_mcast(ud, &mgid, 0) == 0, "detach");
	e = ibv_detach_mcast(ud, &mgid, 0);
	CHECK(e == EINVAL, "detach twice: %d, want EINVAL", e);
	CHECK(ibv_attach_mcast(ud, &mgid, 0) == 0, "attach before destroy");
	CHECK(ibv_destroy_qp(ud) == 0 && ibv_destroy_qp(rc) == 0 && ibv_destroy_cq(cq) == 0, "destroy");
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0, "ibv_query_device");
	CHECK(da.max_mcast_grp == 8192 && da.max_mcast_qp_attach == 56 && da.max_total_mcast_qp_attach > 0,
	      "max_mcast_grp %d max_mcast_qp_attach %d max_total_mcast_qp_attach %d", da.max_mcast_grp,
	      da.max_mcast_qp_attach, da.max_total_mcast_qp_attach);
}

static void test_delivery(void)
{
	struct ibv_cq *cs = ibv_create_cq(ctx, 16, NULL, NULL, 0), *c1 = ibv_create_cq(ctx, 16, NULL, NULL, 0),
		      *c2 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *s = ud_qp(cs), *r1 = ud_qp(c1), *r2 = ud_qp(c2);
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = mgid, .hop_limit = 1}};
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK(cs && c1 && c2 && s && r1 && r2 && ah, "setting up: %s", strerror(errno));
	if (!s || !r1 || !r2 || !ah)
		return;
	CHECK(ibv_attach_mcast(s, &mgid, 0) == 0 && ibv_attach_mcast(r1, &mgid, 0) == 0 &&
		      ibv_attach_mcast(r2, &mgid, 0) == 0,
	      "attach");
	post_recv(s, 0);
	post_recv(r1, 1);
	post_recv(r2, 2);
	post_recv(r2, 3);
	static const char msg[] = "to the group";
	uint8_t *src = buf + 8 * SLOT;
	memcpy(src, msg, sizeof msg);
	struct ibv_sge sge = {.addr = (uintptr_t)src, .length = sizeof msg, .lkey = buf_mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 9, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.ud = {.ah = ah, .remote_qpn = 0xFFFFFF, .remote_qkey = QKEY}},
			   *bad;
	CHECK(ibv_post_send(s, &wr, &bad) == 0, "ibv_post_send");
	struct ibv_wc wc;
	CHECK(poll_one(cs, &wc, HANG_GUARD_SECONDS) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9,
	      "the send's completion");
	struct ibv_cq *rcq[2] = {c1, c2};
	for (int i = 0; i < 2; i++) {
		int got = poll_one(rcq[i], &wc, HANG_GUARD_SECONDS);
		CHECK(got && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
			      wc.byte_len == 40 + sizeof msg && (wc.wc_flags & IBV_WC_GRH) && wc.wr_id == (uint64_t)(i + 1),
		      "receiver %d: got %d status %d byte_len %u flags %#x", i + 1, got, wc.status, wc.byte_len,
		      wc.wc_flags);
		CHECK(got && memcmp(buf + (i + 1) * SLOT + 40, msg, sizeof msg) == 0, "receiver %d: the payload", i + 1);
		/* The GRH is an IPv6 header whose destination is the group. */
		CHECK(got && memcmp(buf + (i + 1) * SLOT + 24, mgid.raw, 16) == 0, "receiver %d: the GRH's DGID",
		      i + 1);
	}
	CHECK(!poll_one(cs, &wc, 0.2), "the sender received its own datagram");
	/* Detached, r1 gets nothing more; r2 does. */
	CHECK(ibv_detach_mcast(r1, &mgid, 0) == 0, "detach r1");
	post_recv(r1, 4);
	CHECK(ibv_post_send(s, &wr, &bad) == 0, "ibv_post_send");
	CHECK(poll_one(cs, &wc, HANG_GUARD_SECONDS) && wc.status == IBV_WC_SUCCESS, "the second send's completion");
	CHECK(poll_one(c2, &wc, HANG_GUARD_SECONDS) && wc.status == IBV_WC_SUCCESS, "r2 gets the second datagram");
	CHECK(!poll_one(c1, &wc, 0.2), "r1 received after it detached");
	CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
	CHECK(ibv_destroy_qp(s) == 0 && ibv_destroy_qp(r1) == 0 && ibv_destroy_qp(r2) == 0, "ibv_destroy_qp");
	CHECK(ibv_destroy_cq(cs) == 0 && ibv_destroy_cq(c1) == 0 && ibv_destroy_cq(c2) == 0, "ibv_destroy_cq");
}

/* A sender that is not attached (rdma_cm's send-only member) reaches the group. */
static void test_unattached_sender(void)
{
	struct ibv_cq *cs = ibv_create_cq(ctx, 16, NULL, NULL, 0), *c1 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *s = ud_qp(cs), *r1 = ud_qp(c1);
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = mgid, .hop_limit = 1}};
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK(cs && c1 && s && r1 && ah, "setting up: %s", strerror(errno));
	if (!s || !r1 || !ah)
		return;
	CHECK(ibv_attach_mcast(r1, &mgid, 0) == 0, "attach");
	for (int i = 0; i < 4; i++)
		post_recv(r1, i);
	struct ibv_sge sge = {.addr = (uintptr_t)(buf + 8 * SLOT), .length = 16, .lkey = buf_mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 9, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.ud = {.ah = ah, .remote_qpn = 0xFFFFFF, .remote_qkey = QKEY}},
			   *bad;
	struct ibv_wc wc;
	for (int i = 0; i < 4; i++) {
		CHECK(ibv_post_send(s, &wr, &bad) == 0, "ibv_post_send");
		CHECK(poll_one(cs, &wc, HANG_GUARD_SECONDS) && wc.status == IBV_WC_SUCCESS, "send %d", i);
		CHECK(poll_one(c1, &wc, HANG_GUARD_SECONDS) && wc.status == IBV_WC_SUCCESS, "receive %d", i);
	}
	CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
	CHECK(ibv_destroy_qp(s) == 0 && ibv_destroy_qp(r1) == 0, "ibv_destroy_qp");
	CHECK(ibv_destroy_cq(cs) == 0 && ibv_destroy_cq(c1) == 0, "ibv_destroy_cq");
}

int main(void)
{
	if (lb_open())
		return 1;
	static const struct test_case cases[] = {
		{"errors", test_errors},
		{"delivery", test_delivery},
		{"unattached_sender", test_unattached_sender},
	};
	RUN_CASES(cases);
	lb_close();
	printf("mcast_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
