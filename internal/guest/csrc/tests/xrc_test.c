/*
 * xrc_test.c: XRC against a real daemon, with the kernel's semantics.
 * Domains: opened with a file they are shared by inode (the second open
 * without O_CREAT finds the first's), O_EXCL refuses an existing one
 * (EINVAL), no O_CREAT and none open is EAGAIN, fd -1 a private domain;
 * closing a handle with an XRC SRQ or XRC_RECV QP made through it is EBUSY.
 * Data: an XRC_SEND QP's SEND and RDMA WRITE reach the XRC SRQ its work
 * request names through the XRC_RECV QP it is connected to, completing on
 * the SRQ's CQ with the target's QP number; the SRQ may be of another
 * handle of the same shared domain; a number of no SRQ of the target's
 * domain is a remote invalid request error. Refusals: post_send on a
 * target and post_recv on an initiator (EINVAL), get_srq_num of a basic
 * SRQ (EINVAL), an XRC_RECV QP without a domain (EINVAL). ibv_open_qp: a
 * second handle of a target through a handle of the same domain keeps it
 * alive after its creator's handle is gone.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "loopback.h"

static char path[64];

static struct ibv_xrcd *open_x(int fd, int oflags)
{
	struct ibv_xrcd_init_attr a = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
				       .fd = fd, .oflags = oflags};
	return ibv_open_xrcd(ctx, &a);
}

static struct ibv_srq *xsrq(struct ibv_xrcd *x, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a = {.attr = {.max_wr = 8, .max_sge = 1},
					 .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
						      IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD,
					 .srq_type = IBV_SRQT_XRC, .xrcd = x, .cq = cq, .pd = pd};
	return ibv_create_srq_ex(ctx, &a);
}

static struct ibv_qp *tgt(struct ibv_xrcd *x)
{
	struct ibv_qp_init_attr_ex a = {.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = x};
	return ibv_create_qp_ex(ctx, &a);
}

static struct ibv_qp *ini(struct ibv_cq *cq, int ex)
{
	struct ibv_qp_init_attr_ex a = {.qp_type = IBV_QPT_XRC_SEND, .send_cq = cq,
					.cap = {.max_send_wr = 8, .max_send_sge = 1},
					.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd};
	if (ex) {
		a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.send_ops_flags = IBV_QP_EX_WITH_SEND;
	}
	return ibv_create_qp_ex(ctx, &a);
}

/* connect_x moves the initiator i and the target g to RTS, each other's
 * peers, with the masks ibv_xsrq_pingpong gives. */
static int connect_x(struct ibv_qp *i, struct ibv_qp *g)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = LB_ACCESS};
	int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	if (ibv_modify_qp(g, &a, init) || ibv_modify_qp(i, &a, init))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.min_rnr_timer = 12;
	a.max_dest_rd_atomic = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	a.dest_qp_num = i->qp_num;
	if (ibv_modify_qp(g, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	a.dest_qp_num = g->qp_num;
	if (ibv_modify_qp(i, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	if (ibv_modify_qp(g, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN))
		return -1;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(i, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					    IBV_QP_MAX_QP_RD_ATOMIC);
}

static int wait1(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double t0 = lb_now();
	int n;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && lb_now() - t0 < HANG_GUARD_SECONDS)
		;
	CHECK(n == 1, "no completion");
	return n == 1 ? 0 : -1;
}

static int post_srq_recv(struct ibv_srq *s, uint64_t id)
{
	struct ibv_sge sg = {.addr = (uintptr_t)buf + LB_BUF_SIZE / 2, .length = LB_BUF_SIZE / 2, .lkey = buf_mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1}, *bad;
	return ibv_post_srq_recv(s, &wr, &bad);
}

static int send_x(struct ibv_qp *i, enum ibv_wr_opcode op, uint32_t srqn, uint32_t len)
{
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = len, .lkey = buf_mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 5, .sg_list = &sg, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
				 .imm_data = htobe32(0x1234)},
			   *bad;
	wr.qp_type.xrc.remote_srqn = srqn;
	wr.wr.rdma.remote_addr = (uintptr_t)buf + LB_BUF_SIZE / 2;
	wr.wr.rdma.rkey = buf_mr->rkey;
	return ibv_post_send(i, &wr, &bad);
}

static void test_domains(void)
{
	int fd = open(path, O_RDONLY | O_CREAT, 0600);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	errno = 0;
	struct ibv_xrcd *none = open_x(fd, 0);
	CHECK(!none && errno == EAGAIN, "no domain, no O_CREAT: %p errno %d, want EAGAIN", (void *)none, errno);
	struct ibv_xrcd *x1 = open_x(fd, O_CREAT);
	CHECK(x1 != NULL, "O_CREAT: %s", strerror(errno));
	errno = 0;
	struct ibv_xrcd *ex = open_x(fd, O_CREAT | O_EXCL);
	CHECK(!ex && errno == EINVAL, "O_EXCL on an open domain: %p errno %d, want EINVAL", (void *)ex, errno);
	int fd2 = open(path, O_RDONLY); /* another descriptor, the same inode */
	struct ibv_xrcd *x2 = open_x(fd2, 0);
	CHECK(x2 != NULL, "the second open of the file's domain: %s", strerror(errno));
	struct ibv_xrcd *priv = open_x(-1, 0);
	CHECK(priv != NULL, "a private domain (fd -1): %s", strerror(errno));
	errno = 0;
	struct ibv_xrcd *bad = open_x(fd, 0x40000);
	CHECK(!bad && errno == EINVAL, "oflags beyond O_CREAT|O_EXCL: errno %d, want EINVAL", errno);
	struct ibv_xrcd_init_attr a = {.comp_mask = IBV_XRCD_INIT_ATTR_FD, .fd = fd};
	errno = 0;
	bad = ibv_open_xrcd(ctx, &a);
	CHECK(!bad && errno == EINVAL, "no IBV_XRCD_INIT_ATTR_OFLAGS: errno %d, want EINVAL", errno);

	/* Shared: an SRQ through x1 and a target through x2 are one domain. */
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0), *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_srq *s = xsrq(x1, cq), *sp = xsrq(priv, cq);
	struct ibv_qp *g = tgt(x2), *i = ini(scq, 0);
	CHECK(s && sp && g && i, "creating the XRC SRQs and QPs: %s", strerror(errno));
	uint32_t n = 0, np = 0;
	CHECK(ibv_get_srq_num(s, &n) == 0 && n > 0 && ibv_get_srq_num(sp, &np) == 0 && np != n, "SRQ numbers %u %u", n, np);
	CHECK(connect_x(i, g) == 0, "connecting: %s", strerror(errno));
	CHECK(post_srq_recv(s, 41) == 0, "ibv_post_srq_recv");
	memset(buf, 0x5a, 300);
	memset(buf + LB_BUF_SIZE / 2, 0, 300);
	struct ibv_wc wc;
	CHECK(send_x(i, IBV_WR_SEND, n, 300) == 0, "ibv_post_send");
	if (!wait1(scq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "send: %s", ibv_wc_status_str(wc.status));
	if (!wait1(cq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 41 && wc.byte_len == 300 && wc.qp_num == g->qp_num &&
			      wc.opcode == IBV_WC_RECV,
		      "receive: %s id %lu len %u qp 0x%x (target 0x%x)", ibv_wc_status_str(wc.status),
		      (unsigned long)wc.wr_id, wc.byte_len, wc.qp_num, g->qp_num);
	CHECK(buf[LB_BUF_SIZE / 2] == 0x5a && buf[LB_BUF_SIZE / 2 + 299] == 0x5a, "the data did not arrive");

	/* RDMA WRITE with immediate: the data to memory, the immediate to
	 * a receive of the SRQ named. */
	CHECK(post_srq_recv(s, 42) == 0, "ibv_post_srq_recv");
	memset(buf, 0x6b, 64);
	CHECK(send_x(i, IBV_WR_RDMA_WRITE_WITH_IMM, n, 64) == 0, "ibv_post_send WRITE_WITH_IMM");
	if (!wait1(scq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS, "write: %s", ibv_wc_status_str(wc.status));
	if (!wait1(cq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 42 && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
			      (wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) == 0x1234,
		      "write's receive: %s opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
	CHECK(buf[LB_BUF_SIZE / 2] == 0x6b, "the written data did not arrive");

	/* Busy handles: x1 has the SRQ, x2 the target; priv its SRQ. */
	CHECK(ibv_close_xrcd(x1) == EBUSY, "closing a handle with an XRC SRQ: want EBUSY");
	CHECK(ibv_close_xrcd(x2) == EBUSY, "closing a handle with an XRC_RECV QP: want EBUSY");

	/* A number of an SRQ of another domain (the private one's): a
	 * remote invalid request, and the target goes to ERR. */
	CHECK(post_srq_recv(sp, 43) == 0, "ibv_post_srq_recv");
	CHECK(send_x(i, IBV_WR_SEND, np, 16) == 0, "ibv_post_send");
	if (!wait1(scq, &wc))
		CHECK(wc.status == IBV_WC_REM_INV_REQ_ERR, "a SEND naming another domain's SRQ: %s, want REM_INV_REQ_ERR",
		      ibv_wc_status_str(wc.status));
	CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "the other domain's SRQ received something");
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(g, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_ERR, "target state %d, want ERR",
	      qa.qp_state);

	CHECK(ibv_destroy_qp(i) == 0 && ibv_destroy_qp(g) == 0, "ibv_destroy_qp");
	CHECK(ibv_close_xrcd(x2) == 0, "closing x2 with nothing in it");
	CHECK(ibv_destroy_srq(s) == 0 && ibv_destroy_srq(sp) == 0, "ibv_destroy_srq");
	CHECK(ibv_close_xrcd(x1) == 0 && ibv_close_xrcd(priv) == 0, "ibv_close_xrcd");
	/* The last handle closed: the file's domain is gone. */
	errno = 0;
	none = open_x(fd, 0);
	CHECK(!none && errno == EAGAIN, "after the last close: %p errno %d, want EAGAIN", (void *)none, errno);
	CHECK(ibv_destroy_cq(cq) == 0 && ibv_destroy_cq(scq) == 0, "ibv_destroy_cq");
	close(fd2);
	close(fd);
}

/* The extended post API: ibv_wr_set_xrc_srqn names the SRQ. */
static void test_wr_api(void)
{
	struct ibv_xrcd *x = open_x(-1, 0);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0), *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_srq *s = x ? xsrq(x, cq) : NULL;
	struct ibv_qp *g = x ? tgt(x) : NULL, *i = ini(scq, 1);
	uint32_t n = 0;
	if (!s || !g || !i || ibv_get_srq_num(s, &n) || connect_x(i, g)) {
		CHECK(0, "setting up: %s", strerror(errno));
		return;
	}
	CHECK(post_srq_recv(s, 51) == 0, "ibv_post_srq_recv");
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(i);
	CHECK(qx != NULL, "ibv_qp_to_qp_ex");
	ibv_wr_start(qx);
	qx->wr_id = 9;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_xrc_srqn(qx, n);
	ibv_wr_set_sge(qx, buf_mr->lkey, (uintptr_t)buf, 32);
	CHECK(ibv_wr_complete(qx) == 0, "ibv_wr_complete");
	struct ibv_wc wc;
	if (!wait1(scq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 9, "send: %s", ibv_wc_status_str(wc.status));
	if (!wait1(cq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 51 && wc.byte_len == 32, "receive: %s",
		      ibv_wc_status_str(wc.status));
	CHECK(ibv_destroy_qp(i) == 0 && ibv_destroy_qp(g) == 0 && ibv_destroy_srq(s) == 0, "destroying");
	CHECK(ibv_close_xrcd(x) == 0, "ibv_close_xrcd");
	CHECK(ibv_destroy_cq(cq) == 0 && ibv_destroy_cq(scq) == 0, "ibv_destroy_cq");
}

/* ibv_open_qp: a second handle of a target, through another handle of
 * the same domain; the QP lives until its last handle is destroyed. A
 * handle of another domain finds no such target (EINVAL, as the kernel). */
static void test_open_qp(void)
{
	int fd = open(path, O_RDONLY | O_CREAT, 0600);
	struct ibv_xrcd *x1 = open_x(fd, O_CREAT), *x2 = open_x(fd, 0), *priv = open_x(-1, 0);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0), *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_srq *s = x1 ? xsrq(x1, cq) : NULL;
	struct ibv_qp *g = x1 ? tgt(x1) : NULL, *i = ini(scq, 0);
	uint32_t n = 0;
	if (!x2 || !priv || !s || !g || !i || ibv_get_srq_num(s, &n) || connect_x(i, g)) {
		CHECK(0, "setting up: %s", strerror(errno));
		return;
	}
	struct ibv_qp_open_attr oa = {.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE,
				      .qp_num = g->qp_num, .xrcd = x2, .qp_type = IBV_QPT_XRC_RECV};
	struct ibv_qp *o = ibv_open_qp(ctx, &oa);
	CHECK(o && o->qp_num == g->qp_num && o->qp_type == IBV_QPT_XRC_RECV, "ibv_open_qp: %s", strerror(errno));
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(o && ibv_query_qp(o, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_RTS,
	      "the opened QP's state %d, want RTS", qa.qp_state);
	oa.xrcd = priv;
	errno = 0;
	struct ibv_qp *other = ibv_open_qp(ctx, &oa);
	CHECK(!other && errno == EINVAL, "opening through another domain: errno %d, want EINVAL", errno);
	oa.xrcd = x2;
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD;
	errno = 0;
	other = ibv_open_qp(ctx, &oa);
	CHECK(!other && errno == EINVAL, "without IBV_QP_OPEN_ATTR_TYPE: errno %d, want EINVAL", errno);
	/* The creator's handle goes; the opened one keeps the target. */
	CHECK(ibv_destroy_qp(g) == 0, "destroying the creator's handle");
	CHECK(ibv_close_xrcd(x2) == EBUSY, "closing the handle the QP was opened through: want EBUSY");
	CHECK(post_srq_recv(s, 61) == 0, "ibv_post_srq_recv");
	CHECK(send_x(i, IBV_WR_SEND, n, 8) == 0, "ibv_post_send");
	struct ibv_wc wc;
	if (!wait1(scq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS, "send through the opened target: %s", ibv_wc_status_str(wc.status));
	if (!wait1(cq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 61 && o && wc.qp_num == o->qp_num, "receive: %s",
		      ibv_wc_status_str(wc.status));
	CHECK(o && ibv_destroy_qp(o) == 0, "destroying the opened handle");
	CHECK(ibv_destroy_qp(i) == 0 && ibv_destroy_srq(s) == 0, "destroying");
	CHECK(ibv_close_xrcd(x2) == 0 && ibv_close_xrcd(x1) == 0 && ibv_close_xrcd(priv) == 0, "ibv_close_xrcd");
	CHECK(ibv_destroy_cq(cq) == 0 && ibv_destroy_cq(scq) == 0, "ibv_destroy_cq");
	close(fd);
}

static void test_refusals(void)
{
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0 && (da.device_cap_flags & IBV_DEVICE_XRC), "IBV_DEVICE_XRC not advertised");
	struct ibv_xrcd *x = open_x(-1, 0);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *g = tgt(x), *i = ini(cq, 0);
	CHECK(x && g && i, "setting up: %s", strerror(errno));
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = 8, .lkey = buf_mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND}, *bad;
	CHECK(ibv_post_send(g, &wr, &bad) == EINVAL, "post_send on an XRC_RECV QP: want EINVAL");
	struct ibv_recv_wr rw = {.sg_list = &sg, .num_sge = 1}, *rbad;
	CHECK(ibv_post_recv(i, &rw, &rbad) == EINVAL, "post_recv on an XRC_SEND QP: want EINVAL");
	CHECK(ibv_post_recv(g, &rw, &rbad) == EINVAL, "post_recv on an XRC_RECV QP: want EINVAL");
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct ibv_srq *basic = ibv_create_srq(pd, &sa);
	uint32_t n = 0;
	CHECK(basic && ibv_get_srq_num(basic, &n) == EINVAL, "get_srq_num of a basic SRQ: want EINVAL");
	struct ibv_qp_init_attr_ex a = {.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd};
	errno = 0;
	struct ibv_qp *q = ibv_create_qp_ex(ctx, &a);
	CHECK(!q && errno == EINVAL, "an XRC_RECV QP without a domain: errno %d, want EINVAL", errno);
	struct ibv_srq_init_attr_ex se = {.attr = {.max_wr = 4, .max_sge = 1},
					  .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD,
					  .srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = x};
	errno = 0;
	struct ibv_srq *nocq = ibv_create_srq_ex(ctx, &se);
	CHECK(!nocq && errno == EINVAL, "an XRC SRQ without a CQ: errno %d, want EINVAL", errno);
	CHECK(ibv_destroy_srq(basic) == 0 && ibv_destroy_qp(g) == 0 && ibv_destroy_qp(i) == 0, "destroying");
	CHECK(ibv_close_xrcd(x) == 0 && ibv_destroy_cq(cq) == 0, "closing");
}

int main(void)
{
	snprintf(path, sizeof path, "/tmp/vrdma-xrc-test-%d", (int)getpid());
	if (lb_open())
		return 1;
	static const struct test_case cases[] = {
		{"domains", test_domains},
		{"wr_api", test_wr_api},
		{"open_qp", test_open_qp},
		{"refusals", test_refusals},
	};
	RUN_CASES(cases);
	unlink(path);
	lb_close();
	printf("xrc_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
