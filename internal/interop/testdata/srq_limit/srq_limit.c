/* srq_limit: a bound instance's SRQ on the device, through the guest
 * library, on device argv[1] with GID index argv[2]. A receiver QP on the
 * SRQ and a sender with its own queues are connected to each other through
 * the device (it loops back).
 *   limit: eight receives posted, the limit armed at 4 and read back; five
 *     SENDs consume five, each completing with its own wr_id on the
 *     receiver's QPN, and the context's async event says
 *     IBV_EVENT_SRQ_LIMIT_REACHED for this SRQ; the limit reads back 0
 *     (disarmed by the event, as rdma-core's devices do);
 *   err-keeps: the receiver moved to ERR flushes none of the SRQ's three
 *     receives left (an SRQ's receives are no QP's until one takes them);
 *     a second receiver made on the SRQ takes one of them;
 *   destroy: the QPs, then the SRQ, are destroyed.
 * Prints one "ok" line per check and exits 0, or says what failed. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid;
static int gidx;

static void die(const char *what, int err)
{
	fprintf(stderr, "srq_limit: %s: %s\n", what, strerror(err));
	exit(1);
}

static struct ibv_qp *make_qp(struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 16, .max_recv_wr = srq ? 0 : 16, .max_send_sge = 1,
					      .max_recv_sge = srq ? 0 : 1}};
	struct ibv_qp *q = ibv_create_qp(pd, &ia);
	if (!q)
		die("ibv_create_qp", errno);
	return q;
}

static void connect_qp(struct ibv_qp *q, uint32_t dest)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
	int err = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		die("to INIT", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 0x100;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = (uint8_t)gidx;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	err = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		die("to RTR", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x100;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	err = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					   IBV_QP_MAX_QP_RD_ATOMIC);
	if (err)
		die("to RTS", err);
}

/* poll_wc waits for one completion; 0 when none came within secs (a hang
 * guard, or the absence a check wants). */
static int poll_wc(struct ibv_wc *wc, int secs)
{
	for (int i = 0; i < secs * 100; i++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			die("ibv_poll_cq", EIO);
		if (n == 1)
			return 1;
		poll(NULL, 0, 10);
	}
	return 0;
}

static void send1(struct ibv_qp *q, char *buf, struct ibv_mr *mr, uint64_t id)
{
	struct ibv_sge s = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
	struct ibv_send_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	int err = ibv_post_send(q, &w, &bad);
	if (err)
		die("ibv_post_send", err);
}

int main(int argc, char **argv)
{
	int n, err;
	if (argc != 3) {
		fprintf(stderr, "usage: srq_limit DEVICE GID-INDEX\n");
		return 2;
	}
	gidx = atoi(argv[2]);
	struct ibv_device **l = ibv_get_device_list(&n);
	for (int i = 0; l && i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), argv[1]))
			ctx = ibv_open_device(l[i]);
	if (!ctx)
		die(argv[1], ENODEV);
	if ((err = ibv_query_gid(ctx, 1, gidx, &gid)))
		die("ibv_query_gid", err);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !cq)
		die("pd/cq", errno);
	char *buf = aligned_alloc(4096, 4096);
	if (!buf)
		die("aligned_alloc", ENOMEM);
	memset(buf, 0x5a, 4096);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr", errno);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	if (!srq)
		die("ibv_create_srq", errno);

	/* limit */
	struct ibv_qp *r1 = make_qp(srq), *s1 = make_qp(NULL);
	connect_qp(r1, s1->qp_num);
	connect_qp(s1, r1->qp_num);
	for (uint64_t i = 0; i < 8; i++) {
		struct ibv_sge rs = {.addr = (uintptr_t)buf + 1024 + i * 64, .length = 64, .lkey = mr->lkey};
		struct ibv_recv_wr rw = {.wr_id = 100 + i, .sg_list = &rs, .num_sge = 1}, *bad;
		if ((err = ibv_post_srq_recv(srq, &rw, &bad)))
			die("ibv_post_srq_recv", err);
	}
	struct ibv_srq_attr at = {.srq_limit = 4};
	if ((err = ibv_modify_srq(srq, &at, IBV_SRQ_LIMIT)))
		die("ibv_modify_srq (arm the limit)", err);
	memset(&at, 0, sizeof(at));
	if ((err = ibv_query_srq(srq, &at)) || at.srq_limit != 4) {
		fprintf(stderr, "srq_limit: the armed limit reads back %u (%s), want 4\n", at.srq_limit, strerror(err));
		return 1;
	}
	int recvs = 0, sends = 0, seen[8] = {0};
	for (uint64_t i = 0; i < 5; i++)
		send1(s1, buf, mr, 1 + i);
	while (recvs < 5 || sends < 5) {
		struct ibv_wc wc;
		if (!poll_wc(&wc, 60))
			die("the SENDs' completions", ETIMEDOUT);
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "srq_limit: completion wr_id %llu: %s\n", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
			return 1;
		}
		if (wc.opcode == IBV_WC_SEND) {
			sends++;
			continue;
		}
		if (wc.opcode != IBV_WC_RECV || wc.wr_id < 100 || wc.wr_id >= 108 || seen[wc.wr_id - 100]++ ||
		    wc.qp_num != r1->qp_num || wc.byte_len != 64) {
			fprintf(stderr, "srq_limit: receive completion wr_id %llu opcode %d on QPN %u, %u bytes; want one of 100-107 once on %u, 64 bytes\n",
				(unsigned long long)wc.wr_id, wc.opcode, wc.qp_num, wc.byte_len, r1->qp_num);
			return 1;
		}
		recvs++;
	}
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
	if (poll(&p, 1, 60000) != 1)
		die("no async event after the SRQ fell below its limit", ETIMEDOUT);
	struct ibv_async_event ev;
	if ((err = ibv_get_async_event(ctx, &ev)))
		die("ibv_get_async_event", errno);
	if (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED || ev.element.srq != srq) {
		fprintf(stderr, "srq_limit: async event %s (%d) for %p, want SRQ limit reached for the SRQ %p\n",
			ibv_event_type_str(ev.event_type), ev.event_type, (void *)ev.element.srq, (void *)srq);
		return 1;
	}
	ibv_ack_async_event(&ev);
	memset(&at, 0, sizeof(at));
	if ((err = ibv_query_srq(srq, &at)) || at.srq_limit != 0) {
		fprintf(stderr, "srq_limit: after the event the limit reads %u (%s), want 0\n", at.srq_limit, strerror(err));
		return 1;
	}
	printf("limit ok: 5 of 8 receives taken, the limit event for the SRQ\n");

	/* err-keeps */
	struct ibv_qp_attr ea = {.qp_state = IBV_QPS_ERR};
	if ((err = ibv_modify_qp(r1, &ea, IBV_QP_STATE)))
		die("to ERR", err);
	struct ibv_wc wc;
	if (poll_wc(&wc, 2)) {
		fprintf(stderr, "srq_limit: the receiver's move to ERR completed wr_id %llu (%s): an SRQ's receives are not the QP's\n",
			(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		return 1;
	}
	struct ibv_qp *r2 = make_qp(srq), *s2 = make_qp(NULL);
	connect_qp(r2, s2->qp_num);
	connect_qp(s2, r2->qp_num);
	send1(s2, buf, mr, 9);
	for (int got = 0; got < 2; got++) {
		if (!poll_wc(&wc, 60))
			die("the second receiver's SEND", ETIMEDOUT);
		if (wc.status != IBV_WC_SUCCESS || (wc.opcode == IBV_WC_RECV && (wc.qp_num != r2->qp_num || wc.wr_id < 100 ||
										  wc.wr_id >= 108 || seen[wc.wr_id - 100]))) {
			fprintf(stderr, "srq_limit: after ERR: completion wr_id %llu %s on QPN %u\n", (unsigned long long)wc.wr_id,
				ibv_wc_status_str(wc.status), wc.qp_num);
			return 1;
		}
	}
	printf("err-keeps ok: the SRQ's receives outlived a QP's ERR\n");

	/* destroy */
	if ((err = ibv_destroy_qp(r1)) || (err = ibv_destroy_qp(r2)) || (err = ibv_destroy_qp(s1)) || (err = ibv_destroy_qp(s2)))
		die("ibv_destroy_qp", err);
	if ((err = ibv_destroy_srq(srq)))
		die("ibv_destroy_srq", err);
	printf("destroy ok\n");
	return 0;
}
