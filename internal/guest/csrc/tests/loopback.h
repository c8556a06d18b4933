/*
 * loopback.h: what the C tests that move data through a real daemon share
 * (the Go test TestCUnits starts one and passes its socket in
 * VRDMA_SOCKET): the first device, a PD, a registered buffer, and an RC
 * pair of two QPs of that device connected to each other, each with the
 * CQ the test gives it. Include check.h first.
 */
#ifndef VRDMA_TESTS_LOOPBACK_H
#define VRDMA_TESTS_LOOPBACK_H

#include <infiniband/verbs.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A completion that does not come within this long is a hang, not slowness. */
#define HANG_GUARD_SECONDS 30
#define LB_BUF_SIZE 65536
#define LB_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid0;
static enum ibv_mtu mtu;
static uint8_t *buf;
static struct ibv_mr *buf_mr;

static inline double lb_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* lb_open opens the first device, a PD and the registered buffer: 0, or
 * -1 after saying why. */
static inline int lb_open(void)
{
	if (!getenv("VRDMA_SOCKET")) {
		fprintf(stderr, "set VRDMA_SOCKET to a daemon's socket (the Go test TestCUnits starts one)\n");
		return -1;
	}
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		fprintf(stderr, "no device at %s\n", getenv("VRDMA_SOCKET"));
		return -1;
	}
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (pd && posix_memalign((void **)&buf, 4096, LB_BUF_SIZE) == 0)
		buf_mr = ibv_reg_mr(pd, buf, LB_BUF_SIZE, LB_ACCESS);
	struct ibv_port_attr pa;
	if (!buf_mr || ibv_query_gid(ctx, 1, 0, &gid0) || ibv_query_port(ctx, 1, &pa)) {
		fprintf(stderr, "setting up: %s\n", strerror(errno));
		return -1;
	}
	mtu = pa.active_mtu;
	return 0;
}

static inline void lb_close(void)
{
	CHECK(ibv_dereg_mr(buf_mr) == 0, "ibv_dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	free(buf);
}

static inline int lb_connect(struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = LB_ACCESS};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* lb_pair connects two new RC QPs, *a completing into cqa and *b into
 * cqb, with room for depth send and receive requests each: 0 or -1. */
static inline int lb_pair(struct ibv_cq *cqa, struct ibv_cq *cqb, uint32_t depth, struct ibv_qp **a, struct ibv_qp **b)
{
	struct ibv_qp_init_attr ia = {.send_cq = cqa, .recv_cq = cqa, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1, .max_recv_sge = 1}};
	*a = ibv_create_qp(pd, &ia);
	ia.send_cq = ia.recv_cq = cqb;
	*b = ibv_create_qp(pd, &ia);
	int ok = *a && *b && !lb_connect(*a, (*b)->qp_num) && !lb_connect(*b, (*a)->qp_num);
	CHECK(ok, "connecting an RC pair: %s", strerror(errno));
	return ok ? 0 : -1;
}

static inline void lb_unpair(struct ibv_qp *a, struct ibv_qp *b)
{
	if (a)
		CHECK(ibv_destroy_qp(a) == 0, "ibv_destroy_qp");
	if (b)
		CHECK(ibv_destroy_qp(b) == 0, "ibv_destroy_qp");
}

/* lb_write posts a signaled RDMA WRITE of len bytes from the buffer to its
 * second half, with wr_id and imm (WRITE_WITH_IMM when imm is not 0). */
static inline int lb_write(struct ibv_qp *qp, uint64_t wr_id, uint32_t len, uint32_t imm)
{
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = len, .lkey = buf_mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sg, .num_sge = 1,
				 .opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(imm)};
	wr.wr.rdma.remote_addr = (uintptr_t)buf + LB_BUF_SIZE / 2;
	wr.wr.rdma.rkey = buf_mr->rkey;
	struct ibv_send_wr *bad = NULL;
	return ibv_post_send(qp, &wr, &bad);
}

static inline int lb_recv(struct ibv_qp *qp, uint64_t wr_id)
{
	struct ibv_sge sg = {.addr = (uintptr_t)buf + LB_BUF_SIZE / 2, .length = LB_BUF_SIZE / 2, .lkey = buf_mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sg, .num_sge = 1}, *bad = NULL;
	return ibv_post_recv(qp, &wr, &bad);
}

/* lb_rdma_once posts one signaled RDMA op (opcode op, len bytes of buf) to
 * raddr under rkey through a new connected pair and returns the
 * completion's status, or -1 when there is none within the hang guard. */
static inline int lb_rdma_once(enum ibv_wr_opcode op, void *raddr, uint32_t rkey, uint32_t len)
{
	struct ibv_cq *ca = ibv_create_cq(ctx, 4, NULL, NULL, 0), *cb = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *a = NULL, *b = NULL;
	int status = -1;
	if (ca && cb && !lb_pair(ca, cb, 4, &a, &b)) {
		struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = len, .lkey = buf_mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = op,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		wr.wr.rdma.remote_addr = (uintptr_t)raddr;
		wr.wr.rdma.rkey = rkey;
		if (ibv_post_send(a, &wr, &bad) == 0) {
			struct ibv_wc wc;
			double t0 = lb_now();
			int n;
			while ((n = ibv_poll_cq(ca, 1, &wc)) == 0 && lb_now() - t0 < HANG_GUARD_SECONDS)
				;
			if (n == 1)
				status = wc.status;
		}
	}
	lb_unpair(a, b);
	if (ca)
		ibv_destroy_cq(ca);
	if (cb)
		ibv_destroy_cq(cb);
	return status;
}

#endif
