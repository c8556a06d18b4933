/*
 * send_inv_pingpong.c: SEND_WITH_INV between two hosts, as an rdma-core
 * program uses it. Run as the server with "-d DEV -g GID_INDEX" and as the
 * client with the same and the server's address; they exchange QP numbers
 * and GIDs over TCP port 18515, as ibv_rc_pingpong does.
 *
 * The server binds a type 2 memory window on its RC QP and tells the
 * client its rkey. The client sends a 3000-byte SEND_WITH_INV of that rkey
 * (three packets at MTU 1024): it completes successfully and the server's
 * receive has IBV_WC_WITH_INV and the rkey. The client then sends a
 * SEND_WITH_INV of the same rkey, now invalidated: it completes
 * IBV_WC_REM_INV_REQ_ERR, and so does the server's receive.
 * Exits 0 when every check held, 1 otherwise.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PORT 18515
#define BIG 3000
#define SMALL 100

struct conn {
	uint32_t qpn, psn;
	uint8_t gid[16];
};

static int fails;

#define CHECK(c, ...)                                              \
	do {                                                       \
		if (!(c)) {                                        \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);              \
			fputc('\n', stderr);                       \
			fails++;                                   \
		}                                                  \
	} while (0)

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int full(int fd, void *buf, size_t n, int out)
{
	uint8_t *p = buf;
	while (n > 0) {
		ssize_t k = out ? write(fd, p, n) : read(fd, p, n);
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int tcp(const char *server)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PORT)};
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		die("socket");
	if (server) {
		if (inet_pton(AF_INET, server, &a.sin_addr) != 1)
			die("inet_pton");
		if (connect(s, (struct sockaddr *)&a, sizeof a) < 0)
			die("connect");
		return s;
	}
	int one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 1) < 0)
		die("bind/listen");
	int c = accept(s, NULL, NULL);
	if (c < 0)
		die("accept");
	close(s);
	return c;
}

/* poll1 waits for one completion (a 30 s hang guard). */
static int poll1(struct ibv_cq *cq, struct ibv_wc *wc)
{
	time_t t0 = time(NULL);
	int n;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && time(NULL) - t0 < 30)
		;
	if (n != 1)
		memset(wc, 0, sizeof *wc);
	return n == 1 ? 0 : -1;
}

static void connect_qp(struct ibv_qp *qp, const struct conn *me, const struct conn *peer, int gidx)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)gidx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me->psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				       IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *server = NULL;
	int gidx = 0, o;
	while ((o = getopt(argc, argv, "d:g:")) != -1) {
		if (o == 'd')
			dev = optarg;
		else if (o == 'g')
			gidx = atoi(optarg);
		else
			return 2;
	}
	if (optind < argc)
		server = argv[optind];

	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	for (int i = 0; list && list[i]; i++)
		if (!dev || !strcmp(ibv_get_device_name(list[i]), dev))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = cq ? ibv_create_qp(pd, &ia) : NULL;
	static uint8_t buf[4096], target[4096];
	struct ibv_mr *mr = qp ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_mr *tmr = mr ? ibv_reg_mr(pd, target, sizeof target,
					      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND)
				: NULL;
	if (!tmr)
		die("setting up");

	struct conn me = {.qpn = qp->qp_num, .psn = server ? 0x123 : 0x456}, peer;
	union ibv_gid g;
	if (ibv_query_gid(ctx, 1, gidx, &g))
		die("ibv_query_gid");
	memcpy(me.gid, g.raw, 16);
	int s = tcp(server);
	if (full(s, &me, sizeof me, 1) || full(s, &peer, sizeof peer, 0))
		die("exchanging QPs");
	connect_qp(qp, &me, &peer, gidx);

	struct ibv_wc wc;
	uint32_t rkey;
	if (!server) {
		/* The window's owner: bind a type 2 window, post two receives. */
		struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
		if (!mw)
			die("ibv_alloc_mw");
		rkey = ibv_inc_rkey(mw->rkey);
		struct ibv_send_wr bw = {.wr_id = 1, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED}, *bad;
		bw.bind_mw.mw = mw;
		bw.bind_mw.rkey = rkey;
		bw.bind_mw.bind_info = (struct ibv_mw_bind_info){.mr = tmr, .addr = (uintptr_t)target, .length = 1024,
								 .mw_access_flags = IBV_ACCESS_REMOTE_WRITE};
		if (ibv_post_send(qp, &bw, &bad))
			die("posting BIND_MW");
		CHECK(poll1(cq, &wc) == 0 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
		      "bind: status %s", ibv_wc_status_str(wc.status));
		for (int i = 0; i < 2; i++) {
			struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = sizeof buf, .lkey = mr->lkey};
			struct ibv_recv_wr rw = {.wr_id = 10 + (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *rbad;
			if (ibv_post_recv(qp, &rw, &rbad))
				die("ibv_post_recv");
		}
		if (full(s, &rkey, sizeof rkey, 1))
			die("sending the rkey");
		CHECK(poll1(cq, &wc) == 0, "no receive completion");
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_INV) &&
			      wc.invalidated_rkey == rkey && wc.byte_len == BIG,
		      "receive 1: status %s opcode %d flags %#x rkey %#x bytes %u, want WITH_INV of %#x, %d bytes",
		      ibv_wc_status_str(wc.status), wc.opcode, wc.wc_flags, wc.invalidated_rkey, wc.byte_len, rkey, BIG);
		if (!fails)
			printf("receive 1: WITH_INV rkey %#x, %u bytes\n", wc.invalidated_rkey, wc.byte_len);
		CHECK(poll1(cq, &wc) == 0 && wc.status == IBV_WC_REM_INV_REQ_ERR, "receive 2: status %s, want %s",
		      ibv_wc_status_str(wc.status), ibv_wc_status_str(IBV_WC_REM_INV_REQ_ERR));
		printf("receive 2: %s\n", ibv_wc_status_str(wc.status));
	} else {
		if (full(s, &rkey, sizeof rkey, 0))
			die("reading the rkey");
		uint32_t lens[2] = {BIG, SMALL};
		enum ibv_wc_status want[2] = {IBV_WC_SUCCESS, IBV_WC_REM_INV_REQ_ERR};
		for (int i = 0; i < 2; i++) {
			struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = lens[i], .lkey = mr->lkey};
			struct ibv_send_wr w = {.wr_id = 20 + (uint64_t)i, .sg_list = &sge, .num_sge = 1,
						.opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED},
					   *bad;
			w.invalidate_rkey = rkey;
			if (ibv_post_send(qp, &w, &bad))
				die("posting SEND_WITH_INV");
			CHECK(poll1(cq, &wc) == 0 && wc.status == want[i], "SEND_WITH_INV %d: status %s, want %s", i + 1,
			      ibv_wc_status_str(wc.status), ibv_wc_status_str(want[i]));
			printf("send %d: %s\n", i + 1, ibv_wc_status_str(wc.status));
		}
	}
	char done = 'd';
	if (full(s, &done, 1, 1) || full(s, &done, 1, 0))
		die("the closing handshake");
	close(s);
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
