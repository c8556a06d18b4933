/*
 * xrc_tenant.c: the two tenants of xrc_test.go, through the guest library.
 *
 *   xrc_tenant victim FILE
 *     opens the XRC domain of FILE (O_CREAT), makes an XRC SRQ in it with
 *     four receives posted, prints "srqn: N", waits for stdin to close,
 *     then prints "received: K", the completions its SRQ's CQ holds.
 *   xrc_tenant attacker FILE SRQN
 *     opens FILE's domain without O_CREAT ("open: ok" or the errno's
 *     name), then with O_CREAT, connects an XRC_SEND QP to an XRC_RECV QP
 *     of that domain, and sends a SEND naming SRQ number SRQN, printing
 *     "send: " and the completion's status.
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static char buf[4096];

static int die(const char *what)
{
	printf("error: %s: %s\n", what, strerror(errno));
	return 1;
}

static struct ibv_xrcd *open_x(int fd, int oflags)
{
	struct ibv_xrcd_init_attr a = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
				       .fd = fd, .oflags = oflags};
	return ibv_open_xrcd(ctx, &a);
}

static int victim(const char *file)
{
	int fd = open(file, O_RDONLY);
	struct ibv_xrcd *x = fd >= 0 ? open_x(fd, O_CREAT) : NULL;
	if (!x)
		return die("ibv_open_xrcd");
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_srq_init_attr_ex a = {.attr = {.max_wr = 4, .max_sge = 1},
					 .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
						      IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD,
					 .srq_type = IBV_SRQT_XRC, .xrcd = x, .cq = cq, .pd = pd};
	struct ibv_srq *srq = cq ? ibv_create_srq_ex(ctx, &a) : NULL;
	uint32_t n = 0;
	if (!srq || ibv_get_srq_num(srq, &n))
		return die("the XRC SRQ");
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = sizeof buf, .lkey = mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sg, .num_sge = 1}, *bad;
		if (ibv_post_srq_recv(srq, &wr, &bad))
			return die("ibv_post_srq_recv");
	}
	printf("srqn: %u\n", n);
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0)
		;
	struct ibv_wc wc[4];
	int k = ibv_poll_cq(cq, 4, wc);
	printf("received: %d\n", k);
	return 0;
}

static int attacker(const char *file, uint32_t srqn)
{
	int fd = open(file, O_RDONLY);
	if (fd < 0)
		return die("open");
	errno = 0;
	struct ibv_xrcd *x = open_x(fd, 0);
	printf("open: %s\n", x ? "ok" : errno == EAGAIN ? "EAGAIN" : strerror(errno));
	if (!x)
		x = open_x(fd, O_CREAT);
	if (!x)
		return die("ibv_open_xrcd O_CREAT");
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr_ex ta = {.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = x};
	struct ibv_qp *g = ibv_create_qp_ex(ctx, &ta);
	struct ibv_qp_init_attr_ex ia = {.qp_type = IBV_QPT_XRC_SEND, .send_cq = cq,
					 .cap = {.max_send_wr = 4, .max_send_sge = 1},
					 .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd};
	struct ibv_qp *i = ibv_create_qp_ex(ctx, &ia);
	union ibv_gid gid;
	if (!cq || !g || !i || ibv_query_gid(ctx, 1, 0, &gid))
		return die("the XRC QPs");
	struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	if (ibv_modify_qp(g, &m, init) || ibv_modify_qp(i, &m, init))
		return die("INIT");
	memset(&m, 0, sizeof m);
	m.qp_state = IBV_QPS_RTR;
	m.path_mtu = IBV_MTU_1024;
	m.min_rnr_timer = 12;
	m.ah_attr.is_global = 1;
	m.ah_attr.grh.dgid = gid;
	m.ah_attr.grh.hop_limit = 1;
	m.ah_attr.port_num = 1;
	m.dest_qp_num = i->qp_num;
	if (ibv_modify_qp(g, &m, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return die("target RTR");
	m.dest_qp_num = g->qp_num;
	if (ibv_modify_qp(i, &m, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
		return die("initiator RTR");
	memset(&m, 0, sizeof m);
	m.qp_state = IBV_QPS_RTS;
	m.timeout = 14;
	if (ibv_modify_qp(g, &m, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN))
		return die("target RTS");
	m.retry_cnt = 1;
	m.rnr_retry = 1;
	m.max_rd_atomic = 1;
	if (ibv_modify_qp(i, &m, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					 IBV_QP_MAX_QP_RD_ATOMIC))
		return die("initiator RTS");
	memset(buf, 0x41, 64);
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.qp_type.xrc.remote_srqn = srqn;
	if (ibv_post_send(i, &wr, &bad))
		return die("ibv_post_send");
	struct ibv_wc wc;
	time_t t0 = time(NULL);
	int k;
	while ((k = ibv_poll_cq(cq, 1, &wc)) == 0 && time(NULL) - t0 < 20)
		;
	printf("send: %s\n", k == 1 ? ibv_wc_status_str(wc.status) : "no completion");
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	mr = pd ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr)
		return die("opening the device");
	if (argc == 3 && strcmp(argv[1], "victim") == 0)
		return victim(argv[2]);
	if (argc == 4 && strcmp(argv[1], "attacker") == 0)
		return attacker(argv[2], (uint32_t)strtoul(argv[3], NULL, 0));
	fprintf(stderr, "usage: xrc_tenant victim FILE | attacker FILE SRQN\n");
	return 2;
}
