/*
 * verbs_test.c: the verbs as an application calls them, against a real
 * daemon (the Go test starts one and passes its socket in VRDMA_SOCKET).
 * The program includes rdma-core's <infiniband/verbs.h> and links the
 * library's sources directly, so the inline verbs (ibv_post_send,
 * ibv_poll_cq, ibv_wr_*...) reach them through the context's tables as in
 * any program, and the sanitizers see both sides.
 *
 * Each case asserts the return value, errno or completion status that
 * rdma-core documents (rdma_rxe's behaviour where the documentation leaves
 * it open): devices and queries, asynchronous events, ibv_reg_mr on the
 * application's own memory, fork, bad work requests, object lifetimes and
 * ibv_close_device, completion channels, the ibv_wr_* API.
 *
 * Two QPs of one device connected to each other (a loopback pair) carry
 * the data. `verbs_test NAME...` runs the cases whose names contain NAME.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

#include "verbs_int.h" /* a white-box look here and there */

static int failures;
static const char *current = "setup";

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			failures++;                                                        \
			fprintf(stderr, "%s:%d: [%s] %s: ", __FILE__, __LINE__, current, #cond); \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
		}                                                                          \
	} while (0)

/* REQUIRE is a CHECK that ends the case: what follows depends on it. */
#define REQUIRE(cond, ...)                      \
	do {                                    \
		if (!(cond)) {                  \
			CHECK(cond, __VA_ARGS__); \
			return;                 \
		}                               \
	} while (0)

/* A completion that does not come within this long is a hang, not slowness. */
#define HANG_GUARD_SECONDS 30
#define QKEY 0x11111111u
#define MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* What every case shares: the device, a PD, and a source buffer the
 * requester sends from and READs into. */
static struct ibv_device *dev;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid0;
static enum ibv_mtu mtu;
static size_t page;
static uint8_t *src; /* SRC_PAGES pages, registered as src_mr */
static struct ibv_mr *src_mr;
#define SRC_PAGES 8

/* ---- helpers ---- */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* wait_wc waits for one completion of cq; -1 (and a failure) if none comes. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double start = now();
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n == 1)
			return 0;
		if (n < 0) {
			CHECK(n >= 0, "ibv_poll_cq returned %d", n);
			return -1;
		}
		if (now() - start > HANG_GUARD_SECONDS) {
			CHECK(0, "no completion in %d s", HANG_GUARD_SECONDS);
			return -1;
		}
	}
}

/* readable polls fd for input for at most ms milliseconds (-1: the hang guard). */
static int readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n = poll(&p, 1, ms < 0 ? HANG_GUARD_SECONDS * 1000 : ms);
	return n == 1 && (p.revents & POLLIN);
}

static uint8_t *page_alloc(size_t pages)
{
	void *p = NULL;
	if (posix_memalign(&p, page, pages * page))
		return NULL;
	return p;
}

static int all_are(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

struct qp_opts {
	uint32_t max_send_wr;
	struct ibv_srq *srq;
	int rnr_retry;
};

struct pair {
	struct ibv_cq *cqa, *cqb;
	struct ibv_qp *a, *b; /* a is the requester in the cases */
	struct ibv_qp_cap cap; /* a's, as granted */
};

static struct ibv_qp *new_qp(enum ibv_qp_type type, struct ibv_cq *cq, const struct qp_opts *o, struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.srq = o ? o->srq : NULL,
		.qp_type = type,
		.cap = {.max_send_wr = o && o->max_send_wr ? o->max_send_wr : 16,
			.max_recv_wr = o && o->srq ? 0 : 16,
			.max_send_sge = 2,
			.max_recv_sge = 2,
			.max_inline_data = 64},
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	CHECK(qp != NULL, "ibv_create_qp (type %d): %s", type, strerror(errno));
	if (qp && cap)
		*cap = a.cap;
	return qp;
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return ibv_modify_qp(qp, &a, mask);
}

static int to_rtr(struct ibv_qp *qp, uint32_t dest_qpn)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
	int mask = IBV_QP_STATE;
	if (qp->qp_type != IBV_QPT_UD) {
		a.path_mtu = mtu;
		a.dest_qp_num = dest_qpn;
		a.rq_psn = 0;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = gid0;
		a.ah_attr.grh.sgid_index = 0;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (qp->qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 12; /* 0.64 ms */
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	return ibv_modify_qp(qp, &a, mask);
}

static int to_rts(struct ibv_qp *qp, int rnr_retry)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS, .sq_psn = 0};
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = (uint8_t)rnr_retry;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(qp, &a, mask);
}

/* pair_up makes a loopback pair of type t, both QPs in state st (RESET,
 * INIT, RTR or RTS). 0, or -1 after reporting why. */
static int pair_up(struct pair *p, enum ibv_qp_type t, enum ibv_qp_state st, const struct qp_opts *o)
{
	memset(p, 0, sizeof *p);
	p->cqa = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	p->cqb = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(p->cqa && p->cqb, "ibv_create_cq: %s", strerror(errno));
	if (!p->cqa || !p->cqb)
		return -1;
	p->a = new_qp(t, p->cqa, o, &p->cap);
	p->b = new_qp(t, p->cqb, NULL, NULL);
	if (!p->a || !p->b)
		return -1;
	int rnr = o && o->rnr_retry ? o->rnr_retry : 7;
	int rc = 0;
	if (st >= IBV_QPS_INIT && !rc && !(rc = to_init(p->a)))
		rc = to_init(p->b);
	if (st >= IBV_QPS_RTR && !rc && !(rc = to_rtr(p->a, p->b->qp_num)))
		rc = to_rtr(p->b, p->a->qp_num);
	if (st >= IBV_QPS_RTS && !rc && !(rc = to_rts(p->a, rnr)))
		rc = to_rts(p->b, rnr);
	CHECK(rc == 0, "bringing a type %d pair to state %d: %s", t, st, strerror(rc));
	return rc ? -1 : 0;
}

static void pair_down(struct pair *p)
{
	if (p->a)
		CHECK(ibv_destroy_qp(p->a) == 0, "ibv_destroy_qp");
	if (p->b)
		CHECK(ibv_destroy_qp(p->b) == 0, "ibv_destroy_qp");
	if (p->cqa)
		CHECK(ibv_destroy_cq(p->cqa) == 0, "ibv_destroy_cq");
	if (p->cqb)
		CHECK(ibv_destroy_cq(p->cqb) == 0, "ibv_destroy_cq");
	memset(p, 0, sizeof *p);
}

/* post1 posts one signaled work request from qp. */
static int post1(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey,
		 void *raddr, uint32_t rkey)
{
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sg, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr *bad = NULL;
	wr.wr.rdma.remote_addr = (uintptr_t)raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* rdma runs one signaled op from p->a (local bytes in src_mr) and returns
 * its completion's status, or -1. */
static int rdma(struct pair *p, enum ibv_wr_opcode op, void *local, uint32_t len, void *raddr, uint32_t rkey)
{
	int rc = post1(p->a, op, 42, local, len, src_mr->lkey, raddr, rkey);
	CHECK(rc == 0, "ibv_post_send: %s", strerror(rc));
	if (rc)
		return -1;
	struct ibv_wc wc;
	if (wait_wc(p->cqa, &wc))
		return -1;
	CHECK(wc.wr_id == 42 && wc.qp_num == p->a->qp_num, "completion of wr %llu on QP %u",
	      (unsigned long long)wc.wr_id, wc.qp_num);
	return wc.status;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &i))
		return (enum ibv_qp_state)-1;
	return a.qp_state;
}

static void post_recv1(struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sg, .num_sge = 1}, *bad = NULL;
	int rc = ibv_post_recv(qp, &wr, &bad);
	CHECK(rc == 0, "ibv_post_recv: %s", strerror(rc));
}

/* drain_async_events reads and acknowledges the events queued so far. */
static void drain_async_events(void)
{
	int fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	struct ibv_async_event ev;
	while (ibv_get_async_event(ctx, &ev) == 0)
		ibv_ack_async_event(&ev);
	fcntl(ctx->async_fd, F_SETFL, fl);
}

/* ---- devices and queries ---- */

static void test_devices(void)
{
	int n = -1;
	struct ibv_device **list = ibv_get_device_list(&n);
	REQUIRE(list != NULL, "ibv_get_device_list: %s", strerror(errno));
	CHECK(n >= 1, "%d devices, want the daemon's adapters", n);
	CHECK(n < 0 || list[n] == NULL, "the list does not end with NULL");
	int found = 0;
	for (int i = 0; i < n; i++)
		if (list[i] == dev)
			found = 1; /* devices live as long as the process: the same object */
	CHECK(found, "a second ibv_get_device_list does not list the device opened from the first");
	CHECK(strcmp(ibv_get_device_name(dev), "vrdma0") == 0, "the first device is %s", ibv_get_device_name(dev));

	/* The program's name goes to the daemon for its logs only: a long
	 * one (a build system's test binary) is cut, not a reason to see no
	 * devices. */
	char *name = program_invocation_short_name, longname[300];
	memset(longname, 'n', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	program_invocation_short_name = longname;
	int nlong = -1;
	struct ibv_device **llist = ibv_get_device_list(&nlong);
	struct ibv_context *lctx = nlong >= 1 ? ibv_open_device(llist[0]) : NULL;
	program_invocation_short_name = name;
	CHECK(nlong >= 1, "a program named by %zu characters sees %d devices", strlen(longname), nlong);
	CHECK(lctx != NULL, "a program named by %zu characters cannot open a device: %s", strlen(longname), strerror(errno));
	if (lctx)
		CHECK(ibv_close_device(lctx) == 0, "ibv_close_device");
	if (llist)
		ibv_free_device_list(llist);
	CHECK(dev->node_type == IBV_NODE_CA && dev->transport_type == IBV_TRANSPORT_IB, "node %d transport %d",
	      dev->node_type, dev->transport_type);
	ibv_free_device_list(list);

	struct ibv_device_attr da;
	REQUIRE(ibv_query_device(ctx, &da) == 0, "ibv_query_device");
	CHECK(da.phys_port_cnt >= 1, "%u ports", da.phys_port_cnt);
	CHECK(da.max_qp > 0 && da.max_qp_wr > 0 && da.max_sge > 0 && da.max_cq > 0 && da.max_cqe > 0 && da.max_mr > 0 &&
		      da.max_pd > 0 && da.max_mr_size > 0,
	      "limits qp %d wr %d sge %d cq %d cqe %d mr %d pd %d mr_size %llu", da.max_qp, da.max_qp_wr, da.max_sge,
	      da.max_cq, da.max_cqe, da.max_mr, da.max_pd, (unsigned long long)da.max_mr_size);
	CHECK(da.node_guid == ibv_get_device_guid(dev) && da.node_guid != 0, "node_guid %llx, device guid %llx",
	      (unsigned long long)da.node_guid, (unsigned long long)ibv_get_device_guid(dev));

	struct ibv_port_attr pa;
	REQUIRE(ibv_query_port(ctx, 1, &pa) == 0, "ibv_query_port 1");
	CHECK(pa.state == IBV_PORT_ACTIVE, "port state %s", ibv_port_state_str(pa.state));
	CHECK(pa.gid_tbl_len >= 1 && pa.pkey_tbl_len >= 1, "gid_tbl_len %d pkey_tbl_len %u", pa.gid_tbl_len,
	      pa.pkey_tbl_len);
	CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET, "link layer %u", pa.link_layer);
	CHECK(pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= pa.max_mtu, "active_mtu %d max_mtu %d", pa.active_mtu,
	      pa.max_mtu);
	int prc = ibv_query_port(ctx, (uint8_t)(da.phys_port_cnt + 1), &pa);
	CHECK(prc == EINVAL, "a port past phys_port_cnt: %d, want EINVAL", prc);

	union ibv_gid g;
	static const union ibv_gid zero;
	CHECK(ibv_query_gid(ctx, 1, 0, &g) == 0 && memcmp(&g, &zero, sizeof g) != 0, "GID 0 is missing or zero");
	errno = 0;
	CHECK(ibv_query_gid(ctx, 1, -1, &g) == -1 && errno == EINVAL, "GID index -1: errno %d", errno);

	__be16 pkey = 0;
	CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0 && pkey == htobe16(0xffff), "P_Key 0 is %#x", be16toh(pkey));
	errno = 0;
	CHECK(ibv_query_pkey(ctx, 1, 0x7fff, &pkey) == -1 && errno == EINVAL, "P_Key index past the table: errno %d",
	      errno);
	CHECK(ibv_get_pkey_index(ctx, 1, htobe16(0xffff)) == 0, "the default P_Key's index");

	/* A non-blocking async_fd with nothing queued: EAGAIN, and it does not poll readable. */
	drain_async_events();
	int fl = fcntl(ctx->async_fd, F_GETFL);
	REQUIRE(fl >= 0 && fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK on async_fd: %s",
		strerror(errno));
	struct ibv_async_event ev;
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN, "ibv_get_async_event with none: errno %d", errno);
	CHECK(!readable(ctx->async_fd, 0), "async_fd is readable with no event");
	fcntl(ctx->async_fd, F_SETFL, fl);
}

/* ---- asynchronous events, and the requester's side of a bad rkey ---- */

/* expect_qp_event waits for qp's next asynchronous event on async_fd and
 * checks its type. */
static void expect_qp_event(struct ibv_qp *qp, enum ibv_event_type want)
{
	CHECK(readable(ctx->async_fd, -1), "async_fd does not poll readable after %s", ibv_event_type_str(want));
	struct ibv_async_event ev;
	memset(&ev, 0, sizeof ev);
	int rc = ibv_get_async_event(ctx, &ev);
	CHECK(rc == 0, "ibv_get_async_event: %s", strerror(errno));
	if (rc)
		return;
	CHECK(ev.event_type == want && ev.element.qp == qp, "event %s on %p, want %s on QP %p",
	      ibv_event_type_str(ev.event_type), (void *)ev.element.qp, ibv_event_type_str(want), (void *)qp);
	unsigned before = qp->events_completed;
	ibv_ack_async_event(&ev);
	CHECK(qp->events_completed == before + 1, "ibv_ack_async_event did not count: %u", qp->events_completed);
}

static void test_bad_rkey(void)
{
	uint8_t *buf = page_alloc(1);
	REQUIRE(buf != NULL, "posix_memalign");
	memset(buf, 'b', page);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, page, MR_ACCESS);
	struct ibv_mr *ro = ibv_reg_mr(pd, buf + 100, 100, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	REQUIRE(mr && ro, "ibv_reg_mr: %s", strerror(errno));
	drain_async_events();
	memset(src, 'w', page);

	struct {
		const char *what;
		enum ibv_wr_opcode op;
		uint8_t *addr;
		uint32_t len, rkey;
	} cases[] = {
		{"WRITE with an rkey nobody has", IBV_WR_RDMA_WRITE, buf, 8, mr->rkey ^ 0x5a5a0000u},
		{"READ with an rkey nobody has", IBV_WR_RDMA_READ, buf, 8, mr->rkey ^ 0x5a5a0000u},
		{"WRITE to a region without remote write", IBV_WR_RDMA_WRITE, buf + 100, 8, ro->rkey},
		{"WRITE one byte past the region", IBV_WR_RDMA_WRITE, buf + 100, 101, ro->rkey},
		{"READ one byte before the region", IBV_WR_RDMA_READ, buf + 99, 8, ro->rkey},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct pair p;
		if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL) == 0) {
			int st = rdma(&p, cases[i].op, src, cases[i].len, cases[i].addr, cases[i].rkey);
			CHECK(st == IBV_WC_REM_ACCESS_ERR, "%s: status %s, want remote access error", cases[i].what,
			      st < 0 ? "none" : ibv_wc_status_str((enum ibv_wc_status)st));
			/* The requester's QP is in ERR; the responder's too (IBTA class C), with an event. */
			CHECK(qp_state(p.a) == IBV_QPS_ERR, "%s: requester in state %d", cases[i].what, qp_state(p.a));
			expect_qp_event(p.b, IBV_EVENT_QP_ACCESS_ERR);
			CHECK(qp_state(p.b) == IBV_QPS_ERR, "%s: responder in state %d", cases[i].what, qp_state(p.b));
			/* What is posted after the error is flushed. */
			int rc = post1(p.a, IBV_WR_RDMA_WRITE, 7, src, 8, src_mr->lkey, buf, mr->rkey);
			struct ibv_wc wc;
			CHECK(rc == 0, "post_send in ERR: %s", strerror(rc));
			if (!rc && !wait_wc(p.cqa, &wc))
				CHECK(wc.wr_id == 7 && wc.status == IBV_WC_WR_FLUSH_ERR, "after the error: wr %llu %s",
				      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		}
		pair_down(&p);
	}
	CHECK(all_are(buf, page, 'b'), "a refused WRITE changed the target");
	/* Nothing more queued: the non-blocking read says EAGAIN. */
	int fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	struct ibv_async_event ev;
	memset(&ev, 0, sizeof ev);
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN, "an event too many: errno %d type %d", errno,
	      ev.event_type);
	fcntl(ctx->async_fd, F_SETFL, fl);
	CHECK(ibv_dereg_mr(ro) == 0 && ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	free(buf);
}

/* ---- ibv_reg_mr on the application's own memory ---- */

static uint8_t guard_byte(const uint8_t *p) { return (uint8_t)(0xa5 ^ (uint8_t)(uintptr_t)p); }

/* check_region registers [buf, buf+len) of memory whose bytes [lo, hi)
 * the test owns, and checks that the registration keeps the bytes and
 * their address, that a peer's WRITE lands exactly there and READ returns
 * them, and that the rest of [lo, hi) never changes. */
static void check_region(const char *what, uint8_t *lo, uint8_t *buf, size_t len, uint8_t *hi)
{
	struct pair p;
	REQUIRE(len <= SRC_PAGES / 2 * page, "%s: too long for the source buffer", what);
	for (uint8_t *q = lo; q < hi; q++)
		*q = guard_byte(q);
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, MR_ACCESS);
	REQUIRE(mr != NULL, "%s: ibv_reg_mr: %s", what, strerror(errno));
	CHECK(mr->addr == buf && mr->length == len && mr->pd == pd && mr->context == ctx, "%s: the MR says %p+%zu",
	      what, mr->addr, mr->length);
	int kept = 1, guards = 1;
	for (size_t i = 0; i < len; i++)
		kept &= buf[i] == (uint8_t)(i * 7 + 1);
	for (uint8_t *q = lo; q < hi; q++)
		if (q < buf || q >= buf + len)
			guards &= *q == guard_byte(q);
	CHECK(kept, "%s: registering changed the registered bytes", what);
	CHECK(guards, "%s: registering changed bytes around the region", what);

	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL) == 0) {
		for (size_t i = 0; i < len; i++)
			src[i] = (uint8_t)(i * 13 + 5);
		int st = rdma(&p, IBV_WR_RDMA_WRITE, src, (uint32_t)len, buf, mr->rkey);
		CHECK(st == IBV_WC_SUCCESS, "%s: WRITE: %s", what, st < 0 ? "none" : ibv_wc_status_str(st));
		CHECK(memcmp(buf, src, len) == 0, "%s: the WRITE did not land at the registered address", what);
		guards = 1;
		for (uint8_t *q = lo; q < hi; q++)
			if (q < buf || q >= buf + len)
				guards &= *q == guard_byte(q);
		CHECK(guards, "%s: the WRITE changed bytes outside the region", what);

		uint8_t *back = src + SRC_PAGES / 2 * page;
		memset(back, 0, len);
		buf[0] ^= 0xff; /* the application's own store is what READ returns */
		st = rdma(&p, IBV_WR_RDMA_READ, back, (uint32_t)len, buf, mr->rkey);
		CHECK(st == IBV_WC_SUCCESS, "%s: READ: %s", what, st < 0 ? "none" : ibv_wc_status_str(st));
		CHECK(memcmp(back, buf, len) == 0, "%s: READ did not return the registered bytes", what);
	}
	pair_down(&p);
	uint8_t first = buf[0];
	CHECK(ibv_dereg_mr(mr) == 0, "%s: ibv_dereg_mr", what);
	CHECK(buf[0] == first && memcmp(buf + 1, src + 1, len - 1) == 0, "%s: deregistering changed the bytes", what);
}

static void test_reg_mr_malloc(void)
{
	uint8_t *m = malloc(64);
	REQUIRE(m != NULL, "malloc");
	check_region("malloc, 13 bytes at an odd address", m, m + 3, 13, m + 64);
	free(m); /* the allocator's own bytes on the page survived */
	m = malloc(100000);
	REQUIRE(m != NULL, "malloc");
	check_region("malloc, 100000 bytes", m, m, 16000, m + 100000);
	free(m);
}

/* check_stack registers a buffer on this thread's stack: its pages hold
 * the frames of the calls that move them. */
static __attribute__((noinline)) void check_stack(void)
{
	uint8_t st[256];
	check_region("stack", st, st + 5, 100, st + sizeof st);
}

/* check_stack_at calls check_stack pad bytes further down the stack, so
 * that over several pads the library's own frames share pages with the
 * registered bytes. */
static __attribute__((noinline)) void check_stack_at(size_t pad)
{
	volatile uint8_t room[pad + 1];
	room[0] = 0;
	check_stack();
	room[pad] = room[0];
}

static void test_reg_mr_stack(void)
{
	for (size_t pad = 0; pad < 4096; pad += 512)
		check_stack_at(pad);
}

static void test_reg_mr_mmap(void)
{
	uint8_t *m = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(m != MAP_FAILED, "mmap");
	check_region("mmap, three whole pages", m, m, 3 * page, m + 4 * page);
	check_region("mmap, an odd offset within a page", m, m + page + 777, 100, m + 4 * page);
	munmap(m, 4 * page);
	m = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(m != MAP_FAILED, "mmap");
	check_region("mmap, spanning two pages", m, m + page - 100, 200, m + 3 * page);
	munmap(m, 3 * page);
}

static void test_reg_mr_posix_memalign(void)
{
	uint8_t *p = page_alloc(2);
	REQUIRE(p != NULL, "posix_memalign");
	check_region("posix_memalign, two pages", p, p, 2 * page, p + 2 * page);
	free(p);
	p = page_alloc(2);
	REQUIRE(p != NULL, "posix_memalign");
	check_region("posix_memalign, one byte", p, p + page - 1, 1, p + 2 * page);
	free(p);
}

/* write_lands WRITEs len bytes of fill at dst through rkey on a new pair
 * and returns the completion status. */
static int write_with(uint8_t fill, void *dst, uint32_t len, uint32_t rkey)
{
	struct pair p;
	int st = -1;
	memset(src, fill, len);
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL) == 0)
		st = rdma(&p, IBV_WR_RDMA_WRITE, src, len, dst, rkey);
	pair_down(&p);
	return st;
}

static void test_reg_mr_twice(void)
{
	uint8_t *p = page_alloc(1);
	REQUIRE(p != NULL, "posix_memalign");
	memset(p, 'x', page);
	struct ibv_mr *m1 = ibv_reg_mr(pd, p, 100, MR_ACCESS);
	struct ibv_mr *m2 = ibv_reg_mr(pd, p, 100, MR_ACCESS);
	REQUIRE(m1 && m2, "registering a buffer twice: %s", strerror(errno));
	CHECK(m1->lkey != m2->lkey && m1->rkey != m2->rkey, "two registrations share keys %#x/%#x", m1->lkey, m1->rkey);
	CHECK(write_with('1', p, 100, m1->rkey) == IBV_WC_SUCCESS && all_are(p, 100, '1'), "WRITE through the first");
	CHECK(write_with('2', p, 100, m2->rkey) == IBV_WC_SUCCESS && all_are(p, 100, '2'), "WRITE through the second");
	uint32_t gone = m1->rkey;
	CHECK(ibv_dereg_mr(m1) == 0, "ibv_dereg_mr");
	CHECK(write_with('3', p, 100, m2->rkey) == IBV_WC_SUCCESS && all_are(p, 100, '3'),
	      "the second registration stopped working when the first went");
	CHECK(write_with('4', p, 100, gone) == IBV_WC_REM_ACCESS_ERR, "the deregistered rkey still works");
	CHECK(all_are(p, 100, '3') && all_are(p + 100, page - 100, 'x'), "the bytes changed");
	CHECK(ibv_dereg_mr(m2) == 0, "ibv_dereg_mr");
	free(p);
}

static void test_reg_mr_same_page(void)
{
	uint8_t *p = page_alloc(1);
	REQUIRE(p != NULL, "posix_memalign");
	memset(p, 'x', page);
	struct ibv_mr *a = ibv_reg_mr(pd, p + 100, 50, MR_ACCESS);
	struct ibv_mr *b = ibv_reg_mr(pd, p + 1000, 50, MR_ACCESS);
	REQUIRE(a && b, "two buffers on one page: %s", strerror(errno));
	CHECK(write_with('a', p + 100, 50, a->rkey) == IBV_WC_SUCCESS, "WRITE to the first");
	CHECK(write_with('b', p + 1000, 50, b->rkey) == IBV_WC_SUCCESS, "WRITE to the second");
	/* One region's rkey does not reach the other's bytes on the same page. */
	CHECK(write_with('!', p + 1000, 50, a->rkey) == IBV_WC_REM_ACCESS_ERR, "the first rkey reaches the second");
	CHECK(write_with('!', p + 150, 1, a->rkey) == IBV_WC_REM_ACCESS_ERR, "the first rkey reaches past its end");
	CHECK(all_are(p, 100, 'x') && all_are(p + 100, 50, 'a') && all_are(p + 150, 850, 'x') &&
		      all_are(p + 1000, 50, 'b') && all_are(p + 1050, page - 1050, 'x'),
	      "the page does not hold exactly the two WRITEs");
	CHECK(ibv_dereg_mr(a) == 0 && ibv_dereg_mr(b) == 0, "ibv_dereg_mr");
	free(p);
}

/* read_with READs len bytes of [from, +len) (rkey) into src; its status. */
static int read_with(void *from, uint32_t len, uint32_t rkey)
{
	struct pair p;
	int st = -1;
	memset(src, 0, len);
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL) == 0)
		st = rdma(&p, IBV_WR_RDMA_READ, src, len, from, rkey);
	pair_down(&p);
	return st;
}

/* round_trip WRITEs fill into [at, +len) through rkey, READs it back
 * through rkey2 and checks both the memory and what came back. */
static int round_trip(uint8_t fill, uint8_t *at, uint32_t len, uint32_t rkey, uint32_t rkey2)
{
	return write_with(fill, at, len, rkey) == IBV_WC_SUCCESS && all_are(at, len, fill) &&
	       read_with(at, len, rkey2) == IBV_WC_SUCCESS && all_are(src, len, fill);
}

/* Registrations that share pages with earlier ones without being inside
 * them: rdma-core registers any range, overlapping or not. */
static void test_reg_mr_partial_overlap(void)
{
	uint8_t *p = page_alloc(3);
	REQUIRE(p != NULL, "posix_memalign");
	memset(p, 'x', 3 * page);
	struct ibv_mr *m1 = ibv_reg_mr(pd, p, 100, MR_ACCESS);
	REQUIRE(m1 != NULL, "ibv_reg_mr: %s", strerror(errno));
	struct ibv_mr *m2 = ibv_reg_mr(pd, p + page - 50, 100, MR_ACCESS); /* m1's page and the next */
	struct ibv_mr *m3 = ibv_reg_mr(pd, p + 2 * page + 10, 10, MR_ACCESS);
	struct ibv_mr *all = ibv_reg_mr(pd, p, 3 * page, MR_ACCESS); /* over all three */
	REQUIRE(m2 && m3 && all, "registrations partly over earlier ones: %s", strerror(errno));
	CHECK(all_are(p, 3 * page, 'x'), "registering changed the memory");
	CHECK(round_trip('1', p, 100, m1->rkey, all->rkey), "m1 WRITE, READ through the whole");
	CHECK(round_trip('2', p + page - 50, 100, m2->rkey, all->rkey), "m2 WRITE across its two pages");
	CHECK(round_trip('3', p + 2 * page + 10, 10, m3->rkey, m3->rkey), "m3");
	CHECK(round_trip('4', p + page - 10, 2 * page, all->rkey, all->rkey) && all_are(p + 100, page - 150, 'x'),
	      "the whole, across the pages of the others");
	CHECK(read_with(p + page - 50, 40, m2->rkey) == IBV_WC_SUCCESS && all_are(src, 40, '2'),
	      "m2 does not see what the whole left of its bytes");
	CHECK(ibv_dereg_mr(all) == 0, "ibv_dereg_mr");
	CHECK(round_trip('5', p + page - 50, 100, m2->rkey, m2->rkey), "m2 after the whole went");
	CHECK(ibv_dereg_mr(m1) == 0 && ibv_dereg_mr(m3) == 0, "ibv_dereg_mr");
	CHECK(round_trip('6', p + page - 50, 100, m2->rkey, m2->rkey), "m2 after the others went");
	CHECK(ibv_dereg_mr(m2) == 0, "ibv_dereg_mr");
	CHECK(all_are(p, 100, '1') && all_are(p + 100, page - 150, 'x') && all_are(p + page - 50, 100, '6') &&
		      all_are(p + page + 50, 2 * page - 60, '4') && all_are(p + 3 * page - 10, 10, 'x'),
	      "the bytes did not stay when the last registration went");
	free(p);
}

/* fio's rdma engine registers two members of one struct separately; here
 * they cross page boundaries, the second starting on the first's last
 * page. Both then carry real RDMA WRITEs and READs. */
static void test_reg_mr_fio_members(void)
{
	struct members {
		uint8_t send[200];
		uint8_t recv[4096 + 200];
	};
	uint8_t *base = page_alloc(4);
	REQUIRE(base != NULL, "posix_memalign");
	memset(base, 'x', 4 * page);
	struct members *m = (struct members *)(base + page - 100);
	struct ibv_mr *s = ibv_reg_mr(pd, m->send, sizeof m->send, MR_ACCESS);
	REQUIRE(s != NULL, "ibv_reg_mr of the first member: %s", strerror(errno));
	struct ibv_mr *r = ibv_reg_mr(pd, m->recv, sizeof m->recv, MR_ACCESS);
	CHECK(r != NULL, "ibv_reg_mr of the second member, on the first's page: %s", strerror(errno));
	if (r) {
		CHECK(round_trip('s', m->send, sizeof m->send, s->rkey, s->rkey), "WRITE/READ the first member");
		CHECK(round_trip('r', m->recv, sizeof m->recv, r->rkey, r->rkey), "WRITE/READ the second member");
		CHECK(all_are(m->send, sizeof m->send, 's') && all_are(base, page - 100, 'x') &&
			      all_are(m->recv + sizeof m->recv, 3 * page - 100 - sizeof m->recv, 'x'),
		      "bytes outside the members changed");
		CHECK(ibv_dereg_mr(r) == 0, "ibv_dereg_mr");
	}
	CHECK(ibv_dereg_mr(s) == 0, "ibv_dereg_mr");
	CHECK(all_are(m->send, sizeof m->send, 's') && (!r || all_are(m->recv, sizeof m->recv, 'r')),
	      "the members lost their bytes when deregistered");
	free(base);
}

/* UCX registers both halves of one buffer, then the whole (malloc'd: at
 * no particular alignment), and deregisters in its own order. */
static void test_reg_mr_ucx_halves(void)
{
	static const int orders[][3] = {{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {2, 0, 1}};
	for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
		size_t len = 4 * page + 300;
		uint8_t *raw = malloc(len + 100);
		REQUIRE(raw != NULL, "malloc");
		uint8_t *buf = raw + 77;
		memset(raw, 'x', len + 100);
		struct ibv_mr *mr[3];
		mr[0] = ibv_reg_mr(pd, buf, len / 2, MR_ACCESS);
		mr[1] = ibv_reg_mr(pd, buf + len / 2, len - len / 2, MR_ACCESS);
		mr[2] = ibv_reg_mr(pd, buf, len, MR_ACCESS);
		REQUIRE(mr[0] && mr[1] && mr[2], "order %zu: halves, then the whole: %s", o, strerror(errno));
		CHECK(round_trip('a', buf, (uint32_t)(len / 2), mr[0]->rkey, mr[2]->rkey), "the first half");
		CHECK(round_trip('b', buf + len / 2, (uint32_t)(len - len / 2), mr[1]->rkey, mr[2]->rkey),
		      "the second half");
		CHECK(read_with(buf, (uint32_t)len, mr[2]->rkey) == IBV_WC_SUCCESS && all_are(src, len / 2, 'a') &&
			      all_are(src + len / 2, len - len / 2, 'b'),
		      "the whole does not read both halves");
		for (int k = 0; k < 3; k++) {
			int gone = orders[o][k];
			CHECK(ibv_dereg_mr(mr[gone]) == 0, "ibv_dereg_mr");
			mr[gone] = NULL;
			CHECK(all_are(raw, 77, 'x') && all_are(buf, len / 2, 'a') && all_are(buf + len / 2, len - len / 2, 'b') &&
				      all_are(buf + len, 23, 'x'),
			      "order %zu: the buffer changed when registration %d went", o, gone);
			for (int j = 0; j < 3; j++)
				if (mr[j]) {
					uint8_t *at = j == 1 ? buf + len / 2 : buf;
					CHECK(read_with(at, 64, mr[j]->rkey) == IBV_WC_SUCCESS && all_are(src, 64, j == 1 ? 'b' : 'a'),
					      "order %zu: registration %d stopped working when %d went", o, j, gone);
				}
		}
		free(raw);
	}
}

/* probe_writable reports whether the byte at p can be written, by writing
 * it back with process_vm_writev, which honours the page's protection. */
static int probe_writable(uint8_t *p)
{
	uint8_t b = 0;
	struct iovec l = {.iov_base = &b, .iov_len = 1}, r = {.iov_base = p, .iov_len = 1};
	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != 1)
		return -1;
	return process_vm_writev(getpid(), &l, 1, &r, 1, 0) == 1;
}

/* Read-only memory registered for reading: works, and stays read-only in
 * the application; registered for writing, it is refused as the kernel's
 * ibv_reg_mr refuses it. */
static void test_reg_mr_read_only(void)
{
	uint8_t *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(p != MAP_FAILED, "mmap");
	memset(p, 'r', 2 * page);
	REQUIRE(mprotect(p, 2 * page, PROT_READ) == 0, "mprotect");
	errno = 0;
	struct ibv_mr *w = ibv_reg_mr(pd, p + 10, 100, MR_ACCESS);
	CHECK(w == NULL && (errno == EFAULT || errno == EACCES), "write access to read-only memory: %p, errno %d",
	      (void *)w, errno);
	if (w)
		ibv_dereg_mr(w);
	struct ibv_mr *mr = ibv_reg_mr(pd, p + 10, page, IBV_ACCESS_REMOTE_READ);
	REQUIRE(mr != NULL, "ibv_reg_mr of read-only memory for reading: %s", strerror(errno));
	CHECK(probe_writable(p) == 0 && probe_writable(p + page + 10) == 0, "registering made read-only memory writable");
	CHECK(read_with(p + 10, (uint32_t)page, mr->rkey) == IBV_WC_SUCCESS && all_are(src, page, 'r'), "READ from it");
	CHECK(write_with('w', p + 10, 10, mr->rkey) == IBV_WC_REM_ACCESS_ERR && all_are(p, 2 * page, 'r'),
	      "a WRITE into the read-only region");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	CHECK(probe_writable(p) == 0 && all_are(p, 2 * page, 'r'), "deregistering made read-only memory writable");
	munmap(p, 2 * page);
}

/* Memory registered, unmapped without deregistering, and mapped again at
 * the same address (a free and a malloc): a new registration reaches the
 * new memory, and deregistering the old one leaves the new one alone. */
static void test_reg_mr_realloc(void)
{
	uint8_t *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(p != MAP_FAILED, "mmap");
	memset(p, 'o', 2 * page);
	struct ibv_mr *old = ibv_reg_mr(pd, p, 2 * page, MR_ACCESS);
	REQUIRE(old != NULL, "ibv_reg_mr: %s", strerror(errno));
	munmap(p, 2 * page);
	uint8_t *q = mmap(p, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	REQUIRE(q == p, "mmap at the same address: %s", strerror(errno));
	memset(q, 'n', 2 * page);
	struct ibv_mr *mr = ibv_reg_mr(pd, q + 100, page, MR_ACCESS);
	REQUIRE(mr != NULL, "ibv_reg_mr of the new memory: %s", strerror(errno));
	CHECK(all_are(q, 2 * page, 'n'), "registering the new memory changed it");
	CHECK(round_trip('N', q + 100, (uint32_t)page, mr->rkey, mr->rkey), "WRITE/READ the new memory");
	CHECK(ibv_dereg_mr(old) == 0, "ibv_dereg_mr of the old registration");
	CHECK(all_are(q, 100, 'n') && all_are(q + 100, page, 'N') && all_are(q + 100 + page, page - 100, 'n'),
	      "deregistering the old registration changed the new memory");
	CHECK(write_with('M', q + 100, 10, mr->rkey) == IBV_WC_SUCCESS && all_are(q + 100, 10, 'M'),
	      "the new registration stopped working when the old one went");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	CHECK(all_are(q + 100, 10, 'M') && all_are(q + 110, page - 10, 'N'), "the new memory lost its bytes");
	munmap(q, 2 * page);
}

/* maps_perms copies the permissions ("rw-p", "rw-s") of the mapping that
 * holds addr, from /proc/self/maps; 0 if found. */
static int maps_perms(const void *addr, char perms[5])
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (f == NULL)
		return -1;
	char line[512];
	int rc = -1;
	while (rc != 0 && fgets(line, sizeof line, f) != NULL) {
		unsigned long start, end;
		if (sscanf(line, "%lx-%lx %4s", &start, &end, perms) == 3 && (uintptr_t)addr >= start &&
		    (uintptr_t)addr < end)
			rc = 0;
	}
	fclose(f);
	return rc;
}

/* Registered pages whose tail the application unmaps without
 * deregistering, as a heap shrinking with brk does under a registration
 * cache: deregistering gives the pages still there back as ordinary
 * private memory with their bytes, and they can be registered again (the
 * library once forgot them, shared with the daemon, and refused the next
 * registration of them as "a shared mapping": Open MPI over UCX). */
static void test_reg_mr_tail_unmapped(void)
{
	uint8_t *p = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(p != MAP_FAILED, "mmap");
	memset(p, 'a', 4 * page);
	struct ibv_mr *mr = ibv_reg_mr(pd, p + 100, 4 * page - 200, MR_ACCESS);
	REQUIRE(mr != NULL, "ibv_reg_mr: %s", strerror(errno));
	REQUIRE(munmap(p + 2 * page, 2 * page) == 0, "munmap of the tail");
	memset(p + 10, 'b', 10);
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	char perms[5] = "";
	CHECK(maps_perms(p, perms) == 0 && perms[3] == 'p', "the pages left are %s after deregistration, want private",
	      perms);
	CHECK(all_are(p, 10, 'a') && all_are(p + 10, 10, 'b') && all_are(p + 20, 2 * page - 20, 'a'),
	      "the pages left lost their bytes");
	mr = ibv_reg_mr(pd, p + 50, page, MR_ACCESS);
	CHECK(mr != NULL, "registering the pages left again: %s", strerror(errno));
	if (mr) {
		CHECK(round_trip('T', p + 50, (uint32_t)page, mr->rkey, mr->rkey), "WRITE/READ the pages left");
		CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	}
	munmap(p, 2 * page);
}

/* Registered pages whose tail the application unmapped, registered again
 * while the first registration still holds them (a registration cache
 * that deregisters the old region later, when its last user is done):
 * the new registration is accepted, as rdma-core accepts it, and both
 * reach the same bytes; the pages become private again only when neither
 * holds them. The library refused it as "a shared mapping". */
static void test_reg_mr_tail_unmapped_again(void)
{
	uint8_t *p = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(p != MAP_FAILED, "mmap");
	memset(p, 'a', 4 * page);
	struct ibv_mr *old = ibv_reg_mr(pd, p, 4 * page, MR_ACCESS);
	REQUIRE(old != NULL, "ibv_reg_mr: %s", strerror(errno));
	REQUIRE(munmap(p + 2 * page, 2 * page) == 0, "munmap of the tail");
	struct ibv_mr *mr = ibv_reg_mr(pd, p + 100, page, MR_ACCESS);
	CHECK(mr != NULL, "registering pages still registered, after the tail was unmapped: %s", strerror(errno));
	if (!mr) {
		ibv_dereg_mr(old);
		munmap(p, 2 * page);
		return;
	}
	CHECK(all_are(p, 2 * page, 'a'), "registering again changed the memory");
	CHECK(round_trip('N', p + 100, (uint32_t)page, mr->rkey, old->rkey), "WRITE with the new region, READ with the old");
	CHECK(round_trip('O', p + 200, 100, old->rkey, mr->rkey), "WRITE with the old region, READ with the new");
	CHECK(ibv_dereg_mr(old) == 0, "ibv_dereg_mr of the old region");
	char perms[5] = "";
	CHECK(maps_perms(p + page, perms) == 0 && perms[3] == 's',
	      "the new region's pages are %s once the old region is gone, want still shared", perms);
	CHECK(round_trip('M', p + 100, (uint32_t)page, mr->rkey, mr->rkey), "the new region after the old one is gone");
	memset(p + 50, 'z', 10);
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	CHECK(maps_perms(p, perms) == 0 && perms[3] == 'p' && maps_perms(p + page, perms) == 0 && perms[3] == 'p',
	      "the pages are %s after both deregistrations, want private", perms);
	CHECK(all_are(p + 50, 10, 'z') && all_are(p + 100, (size_t)page, 'M'), "the pages lost their bytes");
	munmap(p, 2 * page);
}

/* Executable memory (a JIT's buffer, an executable stack's trampolines)
 * stays executable while registered and after: registration must not
 * change what the application sees of its memory. The library kept only
 * read and write, and code on the registered pages faulted. Both writable
 * (rwx) and read-only (r-x) pages, registered for what they allow. */
static void test_reg_mr_exec(void)
{
	static const struct {
		const char *name;
		int prot;
		int access;
	} cases[] = {
	    {"rwx", PROT_READ | PROT_WRITE | PROT_EXEC, MR_ACCESS},
	    {"r-x", PROT_READ | PROT_EXEC, IBV_ACCESS_REMOTE_READ},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint8_t *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		REQUIRE(p != MAP_FAILED, "mmap");
		memset(p, 'x', 2 * page);
		REQUIRE(mprotect(p, 2 * page, cases[i].prot) == 0, "mprotect %s: %s", cases[i].name, strerror(errno));
		struct ibv_mr *mr = ibv_reg_mr(pd, p + 10, page, cases[i].access);
		REQUIRE(mr != NULL, "ibv_reg_mr of %s memory: %s", cases[i].name, strerror(errno));
		char perms[5] = "";
		CHECK(maps_perms(p, perms) == 0 && strncmp(perms, cases[i].name, 3) == 0 && maps_perms(p + page, perms) == 0 &&
			  strncmp(perms, cases[i].name, 3) == 0,
		      "%s memory is %s once registered", cases[i].name, perms);
		CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
		CHECK(maps_perms(p, perms) == 0 && strncmp(perms, cases[i].name, 3) == 0,
		      "%s memory is %s once deregistered", cases[i].name, perms);
		CHECK(all_are(p, 2 * page, 'x'), "%s memory lost its bytes", cases[i].name);
		munmap(p, 2 * page);
	}
}

/* vmlck_kib returns the process's locked memory (VmLck of
 * /proc/self/status) in KiB, or -1. */
static long vmlck_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	char line[256];
	long kib = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmLck: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Registered pages are locked, and deregistration unlocks them all
 * (the private pages that replace them are not locked), also when the
 * registration shared pages with another one deregistered first. */
static void test_reg_mr_unlocks(void)
{
#ifdef __SANITIZE_ADDRESS__
	return; /* AddressSanitizer makes mlock a no-op */
#endif
	uint8_t *p = page_alloc(8);
	REQUIRE(p != NULL, "posix_memalign");
	memset(p, 'u', 8 * page);
	long before = vmlck_kib();
	REQUIRE(before >= 0, "no VmLck in /proc/self/status");
	struct ibv_mr *a = ibv_reg_mr(pd, p, 8 * page, MR_ACCESS);
	REQUIRE(a != NULL, "ibv_reg_mr: %s", strerror(errno));
	struct ibv_mr *b = ibv_reg_mr(pd, p + 100, 2 * page, MR_ACCESS);
	REQUIRE(b != NULL, "ibv_reg_mr inside: %s", strerror(errno));
	long during = vmlck_kib();
	CHECK(during - before >= (long)(8 * page / 1024), "VmLck %ld kB while registered, %ld kB before: the pages are not locked",
	      during, before);
	CHECK(ibv_dereg_mr(a) == 0, "ibv_dereg_mr");
	CHECK(ibv_dereg_mr(b) == 0, "ibv_dereg_mr inside");
	long after = vmlck_kib();
	CHECK(after == before, "VmLck %ld kB after deregistration, %ld kB before: pages stay locked", after, before);
	CHECK(all_are(p, 8 * page, 'u'), "deregistration changed the memory");
	free(p);
}

/* A MAP_SHARED file mapping is refused with a clear error and stays the
 * file's: moving its pages into a memfd of the library's would cut it off
 * from the file (docs/design/guest-memory.md). Huge pages, where the system
 * has any, are registered, their contents kept (reg_huge_test moves data
 * through them). */
static void test_reg_mr_shared_and_huge(void)
{
	char path[] = "/tmp/vrdma-verbs-test-XXXXXX";
	int fd = mkstemp(path);
	REQUIRE(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	REQUIRE(ftruncate(fd, (off_t)(2 * page)) == 0, "ftruncate");
	uint8_t *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	REQUIRE(m != MAP_FAILED, "mmap of a file");
	memset(m, 'f', 2 * page);
	errno = 0;
	struct ibv_mr *mr = ibv_reg_mr(pd, m + 100, page, MR_ACCESS);
	CHECK(mr == NULL && errno == EINVAL, "registering a shared file mapping: %p, errno %d", (void *)mr, errno);
	if (mr)
		ibv_dereg_mr(mr);
	memset(m + 10, 'g', 10);
	uint8_t got[10] = {0};
	CHECK(pread(fd, got, sizeof got, 10) == (ssize_t)sizeof got && all_are(got, sizeof got, 'g'),
	      "the mapping no longer reaches its file");
	munmap(m, 2 * page);
	close(fd);

	size_t huge = 2 << 20;
	uint8_t *h = mmap(NULL, huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (h == MAP_FAILED)
		return; /* no huge pages reserved here */
	memset(h, 'h', huge);
	errno = 0;
	mr = ibv_reg_mr(pd, h + 100, 1000, MR_ACCESS);
	CHECK(mr != NULL, "registering huge pages: %s", strerror(errno));
	CHECK(all_are(h, huge, 'h'), "registering changed the huge pages");
	if (mr)
		ibv_dereg_mr(mr);
	CHECK(all_are(h, huge, 'h'), "deregistering changed the huge pages");
	munmap(h, huge);
}

/* One registration spans at most VRDMA_PROTO_MAX_FDS pieces (backings):
 * over pages registered one by one with gaps between them, 15 pieces
 * work and 17 are refused with EINVAL, leaving the memory and the earlier
 * registrations as they were. */
static void test_reg_mr_many_pieces(void)
{
	uint8_t *p = page_alloc(18);
	REQUIRE(p != NULL, "posix_memalign");
	memset(p, 'x', 18 * page);
	struct ibv_mr *one[9];
	for (int i = 0; i < 9; i++) {
		one[i] = ibv_reg_mr(pd, p + 2 * (size_t)i * page + 7, 10, MR_ACCESS);
		REQUIRE(one[i] != NULL, "ibv_reg_mr of page %d: %s", 2 * i, strerror(errno));
	}
	struct ibv_mr *fifteen = ibv_reg_mr(pd, p + 1, 15 * page - 2, MR_ACCESS);
	CHECK(fifteen != NULL, "a registration over 15 pieces: %s", strerror(errno));
	if (fifteen) {
		CHECK(round_trip('f', p + 4 * page, (uint32_t)(6 * page), fifteen->rkey, fifteen->rkey),
		      "WRITE/READ over 6 of its 15 pieces");
		CHECK(ibv_dereg_mr(fifteen) == 0, "ibv_dereg_mr");
	}
	errno = 0;
	struct ibv_mr *seventeen = ibv_reg_mr(pd, p, 17 * page, MR_ACCESS);
	CHECK(seventeen == NULL && errno == EINVAL, "a registration over 17 pieces: %p, errno %d", (void *)seventeen, errno);
	if (seventeen)
		ibv_dereg_mr(seventeen);
	CHECK(all_are(p, 4 * page, 'x') && all_are(p + 4 * page, 6 * page, 'f') && all_are(p + 10 * page, 8 * page, 'x'),
	      "the memory changed");
	CHECK(round_trip('o', p + 16 * page + 7, 10, one[8]->rkey, one[8]->rkey), "the last single page after the refusal");
	for (int i = 0; i < 9; i++)
		CHECK(ibv_dereg_mr(one[i]) == 0, "ibv_dereg_mr");
	free(p);
}

static void test_reg_mr_bad_arguments(void)
{
	uint8_t *p = page_alloc(1);
	REQUIRE(p != NULL, "posix_memalign");
	struct {
		const char *what;
		void *addr;
		size_t len;
		int access;
		int want;
	} cases[] = {
		{"length 0", p, 0, MR_ACCESS, EINVAL},
		{"NULL", NULL, 100, MR_ACCESS, EINVAL},
		{"remote write without local write", p, 100, IBV_ACCESS_REMOTE_WRITE, EINVAL},
		{"remote atomic without local write", p, 100, IBV_ACCESS_REMOTE_ATOMIC, EINVAL},
		{"an access bit vrdma does not know", p, 100, IBV_ACCESS_LOCAL_WRITE | (1 << 12), EINVAL},
		{"zero-based", p, 100, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED, EINVAL},
		{"wrapping around the address space", p, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE, EINVAL},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		errno = 0;
		struct ibv_mr *mr = ibv_reg_mr(pd, cases[i].addr, cases[i].len, cases[i].access);
		CHECK(mr == NULL && errno == cases[i].want, "%s: %p errno %d, want errno %d", cases[i].what, (void *)mr,
		      errno, cases[i].want);
		if (mr)
			ibv_dereg_mr(mr);
	}
	/* Memory the process may not touch: EFAULT, as the kernel's pinning
	 * says. (PROT_NONE rather than unmapped: an unmapped address may be
	 * mapped again by anyone before the call.) */
	uint8_t *none = mmap(NULL, 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(none != MAP_FAILED, "mmap");
	errno = 0;
	struct ibv_mr *mr = ibv_reg_mr(pd, none, 100, MR_ACCESS);
	CHECK(mr == NULL && errno == EFAULT, "PROT_NONE memory: %p errno %d", (void *)mr, errno);
	if (mr)
		ibv_dereg_mr(mr);
	CHECK(mprotect(none, page, PROT_READ | PROT_WRITE) == 0, "mprotect");
	memset(none, 'n', page);
	errno = 0;
	mr = ibv_reg_mr(pd, none + page - 10, 20, MR_ACCESS);
	CHECK(mr == NULL && errno == EFAULT, "half PROT_NONE: %p errno %d", (void *)mr, errno);
	if (mr)
		ibv_dereg_mr(mr);
	CHECK(all_are(none, page, 'n'), "a refused registration changed the memory");
	munmap(none, 2 * page);
	/* An optional access flag vrdma does not have is ignored, as rdma-core says. */
	mr = ibv_reg_mr(pd, p, 100, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);
	CHECK(mr != NULL, "IBV_ACCESS_RELAXED_ORDERING: %s", strerror(errno));
	if (mr)
		ibv_dereg_mr(mr);
	free(p);
}

static void test_reg_mr_again(void)
{
	uint8_t *p = page_alloc(1);
	REQUIRE(p != NULL, "posix_memalign");
	memset(p, 'x', page);
	struct ibv_mr *mr = ibv_reg_mr(pd, p, page, MR_ACCESS);
	REQUIRE(mr != NULL, "ibv_reg_mr: %s", strerror(errno));
	CHECK(write_with('1', p + 10, 10, mr->rkey) == IBV_WC_SUCCESS, "WRITE");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	p[0] = 'y'; /* the application's memory is its own again */
	mr = ibv_reg_mr(pd, p, page, MR_ACCESS);
	REQUIRE(mr != NULL, "registering again: %s", strerror(errno));
	CHECK(p[0] == 'y' && all_are(p + 10, 10, '1') && all_are(p + 20, page - 20, 'x'),
	      "registering again changed the bytes");
	CHECK(write_with('2', p + 30, 10, mr->rkey) == IBV_WC_SUCCESS && all_are(p + 30, 10, '2'), "WRITE again");
	CHECK(all_are(p + 10, 10, '1') && all_are(p + 20, 10, 'x'), "the second WRITE went elsewhere");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	free(p);
}

/* ---- fork ---- */

static void wait_byte(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
}

static void send_byte(int fd)
{
	char c = 1;
	while (write(fd, &c, 1) < 0 && errno == EINTR)
		;
}

/* fork_hold_child, when not -1, is a pipe the child reads one byte from
 * in its first fork handler, before the library's: the parent writes the
 * byte once it has written into its memory after the fork, so the child's
 * view is checked for those writes whenever the library would copy. */
static int fork_hold_child = -1;

static void hold_child(void)
{
	if (fork_hold_child >= 0)
		wait_byte(fork_hold_child);
}

/* fork_child runs in the child: what it sees of the parent's memory, which
 * the parent changed after the fork (hold_child), then its own writes. */
static __attribute__((noreturn)) void fork_child(uint8_t *buf, uint8_t *st, uint8_t *old, int out)
{
	current = "fork (child)";
	CHECK(all_are(buf, 100, 'w') && all_are(buf + 100, 2 * page - 100, 'p'),
	      "the child does not see the registered memory as it was at fork");
	CHECK(all_are(st, 64, 's'), "the child does not see the registered stack buffer as it was at fork");
	CHECK(all_are(old, page, 'o'), "the child does not see the deregistered memory as it was at fork");
	memset(buf, 'c', 2 * page);
	memset(st, 'c', 64);
	memset(old, 'c', page);
	send_byte(out);
	_exit(failures ? 1 : 0); /* no exit handlers: the parent's objects are the parent's */
}

static __attribute__((noinline)) void fork_with_stack(uint8_t *buf, struct ibv_mr *mr, uint8_t *old)
{
	uint8_t st[64];
	memset(st, 's', sizeof st);
	struct ibv_mr *smr = ibv_reg_mr(pd, st, sizeof st, MR_ACCESS);
	REQUIRE(smr != NULL, "ibv_reg_mr on the stack: %s", strerror(errno));
	int to_child[2], to_parent[2];
	REQUIRE(pipe(to_child) == 0 && pipe(to_parent) == 0, "pipe");
	fflush(stdout);
	fflush(stderr);
	fork_hold_child = to_child[0];
	pid_t pid = fork();
	fork_hold_child = -1;
	REQUIRE(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		fork_child(buf, st, old, to_parent[1]);
	close(to_child[0]); /* a child that dies is an end of file, not a hang */
	close(to_parent[1]);

	/* The child waits in hold_child meanwhile. */
	memset(buf + 100, 'P', 100);
	memset(st, 'P', sizeof st);
	memset(old, 'P', page);
	CHECK(write_with('x', buf + 1000, 50, mr->rkey) == IBV_WC_SUCCESS, "a peer's WRITE into the parent after fork");
	send_byte(to_child[1]);
	wait_byte(to_parent[0]); /* the child wrote */
	CHECK(all_are(buf, 100, 'w') && all_are(buf + 100, 100, 'P') && all_are(buf + 200, 800, 'p') &&
		      all_are(buf + 1000, 50, 'x') && all_are(buf + 1050, 2 * page - 1050, 'p'),
	      "the parent's registered memory is not its own after fork");
	CHECK(all_are(st, sizeof st, 'P'), "the child's writes to the stack buffer appear in the parent");
	CHECK(all_are(old, page, 'P'), "the child's writes to deregistered memory appear in the parent");
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child failed (status %#x): its messages are above", status);
	/* The parent's MRs still work after the fork. */
	CHECK(write_with('y', st, sizeof st, smr->rkey) == IBV_WC_SUCCESS && all_are(st, sizeof st, 'y'),
	      "WRITE to the stack buffer after fork");
	CHECK(ibv_dereg_mr(smr) == 0, "ibv_dereg_mr");
	close(to_child[1]);
	close(to_parent[0]);
}

/* fork needs no initialisation, as with rdma-core on a kernel that copies
 * pinned pages for a child (5.12 and later): ibv_is_fork_initialized says
 * IBV_FORK_UNNEEDED before and after ibv_fork_init, which returns 0 at any
 * time, and RDMAV_FORK_SAFE / IBV_FORK_SAFE change nothing. */
static void test_fork_status(void)
{
	CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED, "before ibv_fork_init: %d, want IBV_FORK_UNNEEDED",
	      (int)ibv_is_fork_initialized());
	CHECK(ibv_fork_init() == 0, "ibv_fork_init after resources exist");
	CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED, "after ibv_fork_init: %d, want IBV_FORK_UNNEEDED",
	      (int)ibv_is_fork_initialized());
	static const char *vars[] = {"RDMAV_FORK_SAFE", "IBV_FORK_SAFE"};
	for (size_t i = 0; i < 2; i++) {
		setenv(vars[i], "1", 1);
		int n = 0;
		struct ibv_device **list = ibv_get_device_list(&n);
		CHECK(list && n > 0, "ibv_get_device_list with %s=1: %s", vars[i], strerror(errno));
		if (list)
			ibv_free_device_list(list);
		CHECK(ibv_fork_init() == 0 && ibv_is_fork_initialized() == IBV_FORK_UNNEEDED, "with %s=1", vars[i]);
		unsetenv(vars[i]);
	}
}

/* A fork after the application unmapped part of a registration without
 * deregistering (a heap trimmed under a registration cache), and mapped
 * memory of its own in the hole: the child gets a copy of the registered
 * pages still in place, not the parent's pages (its writes must not appear
 * in the parent), and the application's new mapping in the hole stays
 * what it was (here shared with the parent: the child's writes to it do
 * appear there). The library once left the pages shared with the child
 * when the copy before the fork failed over the hole, or replaced the new
 * mapping with a private copy when it did not. */
static void fork_part_unmapped(int hole)
{
	uint8_t *p = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(p != MAP_FAILED, "mmap");
	memset(p, 'a', 4 * page);
	struct ibv_mr *mr = ibv_reg_mr(pd, p, 4 * page, MR_ACCESS);
	REQUIRE(mr != NULL, "ibv_reg_mr: %s", strerror(errno));
	REQUIRE(munmap(p + 3 * page, page) == 0, "munmap of the last page");
	uint8_t *shared = mmap(p + 3 * page, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	REQUIRE(shared == p + 3 * page, "mmap of shared memory in the hole");
	memset(shared, 's', page);
	if (hole)
		REQUIRE(munmap(p + 2 * page, page) == 0, "munmap of a page before it (a hole)");
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	REQUIRE(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		memset(p, 'c', 2 * page);
		memset(shared, 'C', page);
		_exit(0);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child: status %#x",
	      status);
	CHECK(all_are(p, 2 * page, 'a'), "a child's writes appear in the parent's registered memory");
	CHECK(all_are(shared, page, 'C'), "the child's shared mapping in the hole was replaced by a private copy");
	CHECK(round_trip('R', p + 10, (uint32_t)page, mr->rkey, mr->rkey), "WRITE/READ the pages in place after fork");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	munmap(p, 3 * page);
	munmap(shared, page);
}

static void test_fork_part_unmapped(void)
{
	fork_part_unmapped(1);
	fork_part_unmapped(0);
}

/* As fork_part_unmapped, but the hole is registered again before the fork
 * (the heap grew back and a registration cache registered the new memory):
 * the old registration's pages still in place must still become the
 * child's own. The library forgot the old backing when the new
 * registration found it not wholly in place, and a fork left its pages
 * shared between parent and child. */
static void test_fork_part_reregistered(void)
{
	uint8_t *p = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(p != MAP_FAILED, "mmap");
	memset(p, 'a', 4 * page);
	struct ibv_mr *mr = ibv_reg_mr(pd, p, 4 * page, MR_ACCESS);
	REQUIRE(mr != NULL, "ibv_reg_mr: %s", strerror(errno));
	REQUIRE(munmap(p + 2 * page, 2 * page) == 0, "munmap of the tail");
	uint8_t *tail = mmap(p + 2 * page, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	REQUIRE(tail == p + 2 * page, "mmap in the hole");
	memset(tail, 't', 2 * page);
	struct ibv_mr *again = ibv_reg_mr(pd, tail, 2 * page, MR_ACCESS);
	REQUIRE(again != NULL, "ibv_reg_mr of the new memory: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	REQUIRE(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		memset(p, 'c', 4 * page);
		_exit(0);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child: status %#x",
	      status);
	CHECK(all_are(p, 2 * page, 'a'), "a child's writes appear in the parent's first registration");
	CHECK(all_are(tail, 2 * page, 't'), "a child's writes appear in the parent's second registration");
	CHECK(round_trip('R', p + 10, (uint32_t)page, mr->rkey, mr->rkey), "WRITE/READ the old pages in place");
	CHECK(round_trip('S', tail + 10, (uint32_t)page, again->rkey, again->rkey), "WRITE/READ the new memory");
	CHECK(ibv_dereg_mr(again) == 0 && ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	char perms[5] = "";
	CHECK(maps_perms(p, perms) == 0 && perms[3] == 'p' && maps_perms(tail, perms) == 0 && perms[3] == 'p',
	      "the memory is not private again after deregistration");
	munmap(p, 4 * page);
}

/* A fork after the application changed the protection of registered pages
 * (mprotect, without deregistering): the child's copy has the protection
 * the pages have at the fork, page by page. The library gave the child
 * the protection the pages had when registered: read-only memory made
 * writable since faulted at the child's first write, and a page made
 * read-only since was writable in the child. */
static void test_fork_mprotected(void)
{
	static const struct {
		const char *name;
		int at_reg, access, first, second; /* protection at registration, then of each page */
		const char *want[2];               /* perms in the child */
	} cases[] = {
	    {"read-only made writable", PROT_READ, IBV_ACCESS_REMOTE_READ, PROT_READ | PROT_WRITE,
	     PROT_READ | PROT_WRITE, {"rw-p", "rw-p"}},
	    {"writable, one page made read-only", PROT_READ | PROT_WRITE, MR_ACCESS, PROT_READ, PROT_READ | PROT_WRITE,
	     {"r--p", "rw-p"}},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint8_t *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		REQUIRE(p != MAP_FAILED, "mmap");
		memset(p, 'a', 2 * page);
		REQUIRE(mprotect(p, 2 * page, cases[i].at_reg) == 0, "mprotect");
		struct ibv_mr *mr = ibv_reg_mr(pd, p, 2 * page, cases[i].access);
		REQUIRE(mr != NULL, "ibv_reg_mr: %s", strerror(errno));
		REQUIRE(mprotect(p, page, cases[i].first) == 0 && mprotect(p + page, page, cases[i].second) == 0,
			"mprotect after registration");
		fflush(stdout);
		fflush(stderr);
		pid_t pid = fork();
		REQUIRE(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			char perms[5] = "";
			for (int k = 0; k < 2; k++)
				if (maps_perms(p + (size_t)k * page, perms) != 0 || strcmp(perms, cases[i].want[k]) != 0)
					_exit(10 + k);
			memset(p + page, 'c', page);
			_exit(0);
		}
		int status = 0;
		CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: the child: status %#x (exit 10/11: page 0/1 has the wrong protection; a signal: it faulted)",
		      cases[i].name, status);
		CHECK(all_are(p, 2 * page, 'a'), "%s: the child's writes appear in the parent", cases[i].name);
		CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
		munmap(p, 2 * page);
	}
}

static void test_fork(void)
{
	uint8_t *buf = page_alloc(2), *old = page_alloc(1);
	REQUIRE(buf && old, "posix_memalign");
	memset(buf, 'p', 2 * page);
	memset(old, 'o', page);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 2 * page, MR_ACCESS);
	struct ibv_mr *omr = ibv_reg_mr(pd, old, page, MR_ACCESS);
	REQUIRE(mr && omr, "ibv_reg_mr: %s", strerror(errno));
	CHECK(ibv_dereg_mr(omr) == 0, "ibv_dereg_mr"); /* registered once, ordinary memory again */
	CHECK(write_with('w', buf, 100, mr->rkey) == IBV_WC_SUCCESS, "WRITE before fork");
	fork_with_stack(buf, mr, old);
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	free(buf);
	free(old);
}

/* A registration refused because the pages cannot be locked (RLIMIT_MEMLOCK)
 * leaves them as they were: private memory, which a child gets a copy of.
 * The library had already moved them into a shared memfd when mlock said
 * no; left so, a fork shared them (malloc's own bytes, too) between parent
 * and child. Checked in a child of the test without the right to lock
 * anything: the refusal comes before the daemon is asked. */
static __attribute__((noreturn)) void memlock_refused_child(uint8_t *buf)
{
	current = "reg_mr_memlock_refused (child)";
	struct rlimit none = {0, 0};
	if (getuid() == 0)
		CHECK(setgid(65534) == 0 && setuid(65534) == 0, "dropping root (and CAP_IPC_LOCK): %s", strerror(errno));
	CHECK(setrlimit(RLIMIT_MEMLOCK, &none) == 0, "RLIMIT_MEMLOCK 0: %s", strerror(errno));
	if (failures)
		_exit(1);
	errno = 0;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 2 * page, MR_ACCESS);
	CHECK(mr == NULL && errno == ENOMEM, "ibv_reg_mr without the right to lock memory: %p, errno %d", (void *)mr,
	      errno);
	CHECK(all_are(buf, 2 * page, 'm'), "the refused registration changed the buffer");
	pid_t pid = fork();
	if (pid == 0) {
		memset(buf, 'g', 2 * page);
		_exit(0);
	}
	int status = 0;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status), "the grandchild: status %#x", status);
	CHECK(all_are(buf, 2 * page, 'm'), "a child's writes appear in its parent's memory that a registration refused");
	_exit(failures ? 1 : 0);
}

static void test_reg_mr_memlock_refused(void)
{
#ifdef __SANITIZE_ADDRESS__
	/* AddressSanitizer makes mlock a no-op that succeeds: the plain build
	 * of this test checks the refusal. */
	return;
#endif
	uint8_t *buf = page_alloc(2);
	REQUIRE(buf != NULL, "posix_memalign");
	memset(buf, 'm', 2 * page);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	REQUIRE(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		memlock_refused_child(buf);
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child failed (status %#x): its messages are above", status);
	free(buf);
}

/* ---- addressing by LID ---- */

/* An address vector without a GRH (is_global 0) names the port by its LID
 * alone, as InfiniBand programs do; its grh fields mean nothing then, and
 * programs leave them as they are (rdma-core and the kernel ignore them).
 * Here they hold garbage, a GID index past the table above all: the QPs
 * connect and a WRITE goes, and an address handle is made. */
/* test_lid_without_grh: on a RoCE port an address vector needs a GRH, as
 * on rdma_rxe: the port (the default instance's, not configured for LID
 * routing) refuses a QP's or an address handle's that names its
 * destination by LID alone, or names none, with EINVAL. (A port configured
 * for LID routing takes the first: TestToolQperf, TestConformanceLID.) */
static void test_lid_without_grh(void)
{
	struct ibv_port_attr pa;
	REQUIRE(ibv_query_port(ctx, 1, &pa) == 0, "ibv_query_port");
	REQUIRE(pa.lid != 0, "port 1 has no LID");
	struct pair p;
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_INIT, NULL))
		goto out;
	const int lids[2] = {pa.lid, 0}; /* by LID, and with no destination at all */
	for (int i = 0; i < 2; i++) {
		int lid = lids[i];
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = p.b->qp_num,
					.max_dest_rd_atomic = 1, .min_rnr_timer = 12};
		memset(&a.ah_attr.grh, 0xEE, sizeof a.ah_attr.grh);
		a.ah_attr.is_global = 0;
		a.ah_attr.dlid = (uint16_t)lid;
		a.ah_attr.port_num = 1;
		int rc = ibv_modify_qp(p.a, &a,
				       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
		CHECK(rc == EINVAL, "modify_qp to RTR by LID 0x%x without a GRH: %s, want EINVAL", lid, strerror(rc));
		struct ibv_ah_attr aa;
		memset(&aa, 0xEE, sizeof aa);
		aa.is_global = 0;
		aa.dlid = (uint16_t)lid;
		aa.sl = 0;
		aa.src_path_bits = 0;
		aa.static_rate = 0;
		aa.port_num = 1;
		errno = 0;
		struct ibv_ah *ah = ibv_create_ah(pd, &aa);
		CHECK(ah == NULL && errno == EINVAL, "ibv_create_ah by LID 0x%x without a GRH: %s, want EINVAL", lid,
		      strerror(errno));
		if (ah)
			ibv_destroy_ah(ah);
	}
out:
	pair_down(&p);
}

/* ---- bad work requests ---- */

/* ibv_init_ah_from_wc reads the GRH area of a UD receive in both layouts
 * RoCEv2 gives it: an IPv6 header, or (rxe's and the NICs' IPv4 packets)
 * an IPv4 header in its last 20 bytes, the first 20 zero. */
static void test_ah_from_wc(void)
{
	struct ibv_wc wc = {.wc_flags = IBV_WC_GRH};
	struct ibv_grh grh;
	struct ibv_ah_attr a;
	union ibv_gid peer = {.raw = {0xfe, 0x80, [8] = 0x02, [15] = 0x42}};

	memset(&grh, 0, sizeof grh);
	grh.version_tclass_flow = htobe32(6u << 28 | 0x12u << 20 | 0x345);
	grh.sgid = peer;
	grh.dgid = gid0;
	REQUIRE(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &a) == 0, "IPv6 layout: %s", strerror(errno));
	CHECK(a.is_global && memcmp(&a.grh.dgid, &peer, sizeof peer) == 0, "IPv6 layout: the AH's dgid is not the sender's GID");
	CHECK(a.grh.sgid_index == 0, "IPv6 layout: sgid_index %u, want 0 (the GID addressed)", a.grh.sgid_index);
	CHECK(a.grh.flow_label == 0x345 && a.grh.traffic_class == 0x12, "IPv6 layout: flow label %#x, class %#x",
	      a.grh.flow_label, a.grh.traffic_class);

	/* An IPv4 packet (the test's device has no IPv4 address: the GRH's
	 * reading is checked, then that it names no GID of ours). */
	uint8_t *ip = (uint8_t *)&grh + 20;
	memset(&grh, 0, sizeof grh);
	ip[0] = 0x45; /* version 4, 5 words */
	ip[1] = 0x08; /* DSCP/ECN */
	ip[8] = 64;   /* TTL */
	ip[9] = 17;   /* UDP */
	static const uint8_t src4[4] = {10, 47, 91, 1}, dst4[4] = {10, 47, 91, 254};
	memcpy(ip + 12, src4, 4);
	memcpy(ip + 16, dst4, 4);
	union ibv_gid from, to;
	uint32_t flow = 1;
	uint8_t tclass = 0;
	REQUIRE(vrdma_grh_addrs(&grh, &from, &to, &flow, &tclass) == 0, "IPv4 layout: %s", strerror(errno));
	static const uint8_t want_from[16] = {[10] = 0xff, [11] = 0xff, 10, 47, 91, 1};
	static const uint8_t want_to[16] = {[10] = 0xff, [11] = 0xff, 10, 47, 91, 254};
	CHECK(memcmp(from.raw, want_from, 16) == 0, "IPv4 layout: the sender is not ::ffff:10.47.91.1");
	CHECK(memcmp(to.raw, want_to, 16) == 0, "IPv4 layout: the address is not ::ffff:10.47.91.254");
	CHECK(flow == 0 && tclass == 0x08, "IPv4 layout: flow label %#x, class %#x, want 0 and the TOS byte", flow,
	      tclass);
	errno = 0;
	CHECK(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &a) == -1 && errno == ENOENT,
	      "IPv4 layout to an address not ours: errno %d, want ENOENT", errno);

	memset(&grh, 0, sizeof grh);
	errno = 0;
	CHECK(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &a) == -1 && errno == EPROTONOSUPPORT,
	      "neither layout: errno %d, want EPROTONOSUPPORT", errno);
}

static void test_post_send_states(void)
{
	struct pair p;
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RESET, NULL))
		goto out;
	struct ibv_sge sg = {.addr = (uintptr_t)src, .length = 8, .lkey = src_mr->lkey};
	struct ibv_send_wr w2 = {.wr_id = 2, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND};
	struct ibv_send_wr w1 = {.wr_id = 1, .next = &w2, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND};
	struct ibv_send_wr *bad = NULL;
	struct ibv_recv_wr r = {.wr_id = 3, .sg_list = &sg, .num_sge = 1}, *rbad = NULL;
	CHECK(ibv_post_send(p.a, &w1, &bad) == EINVAL && bad == &w1, "post_send in RESET: bad_wr %p", (void *)bad);
	CHECK(ibv_post_recv(p.a, &r, &rbad) == EINVAL && rbad == &r, "post_recv in RESET");
	CHECK(to_init(p.a) == 0 && to_init(p.b) == 0, "to INIT");
	bad = NULL;
	CHECK(ibv_post_send(p.a, &w1, &bad) == EINVAL && bad == &w1, "post_send in INIT: bad_wr %p", (void *)bad);
	rbad = NULL;
	CHECK(ibv_post_recv(p.b, &r, &rbad) == 0, "post_recv in INIT"); /* receives may be posted from INIT */
	CHECK(to_rtr(p.a, p.b->qp_num) == 0 && to_rtr(p.b, p.a->qp_num) == 0, "to RTR");
	bad = NULL;
	CHECK(ibv_post_send(p.a, &w1, &bad) == EINVAL && bad == &w1, "post_send in RTR: bad_wr %p", (void *)bad);
	CHECK(to_rts(p.a, 7) == 0 && to_rts(p.b, 7) == 0, "to RTS");
	/* In RTS the SEND goes, and meets the receive posted in INIT. */
	w1.next = NULL;
	w1.send_flags = IBV_SEND_SIGNALED;
	CHECK(ibv_post_send(p.a, &w1, &bad) == 0, "post_send in RTS");
	struct ibv_wc wc;
	if (!wait_wc(p.cqa, &wc))
		CHECK(wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "send: wr %llu %s",
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	if (!wait_wc(p.cqb, &wc))
		CHECK(wc.wr_id == 3 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == 8,
		      "receive: wr %llu %s", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
out:
	pair_down(&p);
}

static void test_too_many_sges(void)
{
	struct pair p;
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL))
		goto out;
	struct ibv_sge sg[32];
	for (int i = 0; i < 32; i++)
		sg[i] = (struct ibv_sge){.addr = (uintptr_t)src + (uintptr_t)i, .length = 1, .lkey = src_mr->lkey};
	REQUIRE(p.cap.max_send_sge < 32 && p.cap.max_recv_sge < 32, "max_send_sge %u", p.cap.max_send_sge);
	/* The first request of the list is fine and goes; the second is bad. */
	struct ibv_send_wr w2 = {.wr_id = 2, .sg_list = sg, .num_sge = (int)p.cap.max_send_sge + 1,
				 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr w1 = {.wr_id = 1, .next = &w2, .sg_list = sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED};
	w1.wr.rdma.remote_addr = w2.wr.rdma.remote_addr = (uintptr_t)src + page;
	w1.wr.rdma.rkey = w2.wr.rdma.rkey = src_mr->rkey;
	struct ibv_send_wr *bad = NULL;
	CHECK(ibv_post_send(p.a, &w1, &bad) == EINVAL && bad == &w2, "too many SGEs: bad_wr %p", (void *)bad);
	/* Inline data is bounded by max_inline_data, and the SGE count still by max_send_sge. */
	w2.send_flags |= IBV_SEND_INLINE;
	bad = NULL;
	CHECK(ibv_post_send(p.a, &w2, &bad) == EINVAL && bad == &w2, "too many inline SGEs: bad_wr %p", (void *)bad);
	struct ibv_wc wc;
	if (!wait_wc(p.cqa, &wc))
		CHECK(wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS, "the good request: wr %llu %s",
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	CHECK(ibv_poll_cq(p.cqa, 1, &wc) == 0, "the bad request completed: wr %llu", (unsigned long long)wc.wr_id);
	struct ibv_recv_wr r = {.wr_id = 3, .sg_list = sg, .num_sge = (int)p.cap.max_recv_sge + 1}, *rbad = NULL;
	CHECK(ibv_post_recv(p.b, &r, &rbad) == EINVAL && rbad == &r, "post_recv with too many SGEs");
	struct ibv_send_wr neg = w1;
	neg.next = NULL;
	neg.num_sge = -1;
	CHECK(ibv_post_send(p.a, &neg, &bad) == EINVAL && bad == &neg, "num_sge -1");
out:
	pair_down(&p);
}

static void test_opcode_not_allowed(void)
{
	struct pair uc, ud;
	struct ibv_send_wr *bad = NULL;
	struct ibv_sge sg = {.addr = (uintptr_t)src, .length = 8, .lkey = src_mr->lkey};
	if (pair_up(&uc, IBV_QPT_UC, IBV_QPS_RTS, NULL) == 0) {
		/* Memory-window operations are UC's too, as rxe's (mw_test.c). */
		enum ibv_wr_opcode ops[] = {IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
					    IBV_WR_TSO, (enum ibv_wr_opcode)200};
		for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
			struct ibv_send_wr w = {.wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = ops[i]};
			w.wr.rdma.remote_addr = (uintptr_t)src;
			w.wr.rdma.rkey = src_mr->rkey;
			bad = NULL;
			CHECK(ibv_post_send(uc.a, &w, &bad) == EINVAL && bad == &w, "opcode %d on UC", ops[i]);
		}
		/* WRITE is a UC operation. */
		CHECK(post1(uc.a, IBV_WR_RDMA_WRITE, 9, src, 8, src_mr->lkey, src + page, src_mr->rkey) == 0, "UC WRITE");
		struct ibv_wc wc;
		if (!wait_wc(uc.cqa, &wc))
			CHECK(wc.wr_id == 9 && wc.status == IBV_WC_SUCCESS, "UC WRITE: %s", ibv_wc_status_str(wc.status));
	}
	pair_down(&uc);

	if (pair_up(&ud, IBV_QPT_UD, IBV_QPS_RTS, NULL) == 0) {
		struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid0, .hop_limit = 1}};
		struct ibv_ah *ah = ibv_create_ah(pd, &aa);
		CHECK(ah != NULL, "ibv_create_ah: %s", strerror(errno));
		enum ibv_wr_opcode ops[] = {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ,
					    IBV_WR_ATOMIC_FETCH_AND_ADD};
		for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
			struct ibv_send_wr w = {.wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = ops[i]};
			w.wr.ud.ah = ah;
			w.wr.ud.remote_qpn = ud.b->qp_num;
			w.wr.ud.remote_qkey = QKEY;
			bad = NULL;
			CHECK(ibv_post_send(ud.a, &w, &bad) == EINVAL && bad == &w, "opcode %d on UD", ops[i]);
		}
		/* A UD SEND needs an address handle. */
		struct ibv_send_wr w = {.wr_id = 5, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
					.send_flags = IBV_SEND_SIGNALED};
		w.wr.ud.remote_qpn = ud.b->qp_num;
		w.wr.ud.remote_qkey = QKEY;
		bad = NULL;
		CHECK(ibv_post_send(ud.a, &w, &bad) == EINVAL && bad == &w, "UD SEND without an address handle");
		/* With one it goes: the receive gets the GRH and the data. */
		post_recv1(ud.b, 6, src + page, 40 + 8, src_mr->lkey);
		memset(src, 'u', 8);
		w.wr.ud.ah = ah;
		CHECK(ibv_post_send(ud.a, &w, &bad) == 0, "UD SEND");
		struct ibv_wc wc;
		if (!wait_wc(ud.cqa, &wc))
			CHECK(wc.wr_id == 5 && wc.status == IBV_WC_SUCCESS, "UD SEND: %s", ibv_wc_status_str(wc.status));
		if (!wait_wc(ud.cqb, &wc))
			CHECK(wc.wr_id == 6 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 48 && (wc.wc_flags & IBV_WC_GRH) &&
				      wc.src_qp == ud.a->qp_num && all_are(src + page + 40, 8, 'u'),
			      "UD receive: %s, %u bytes from QP %u", ibv_wc_status_str(wc.status), wc.byte_len, wc.src_qp);
		/* sl says what the GRH area holds, as on mlx5 (UCX's ud_verbs
		 * reads it to find the destination GID): 0x9, a RoCEv2 IPv6
		 * header, here on the same host. */
		CHECK(wc.sl == 0x9 && src[page] == 0x60, "UD receive: sl 0x%x with GRH version byte 0x%02x, want 0x9 and 0x60",
		      wc.sl, src[page]);
		if (ah)
			CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
	}
	pair_down(&ud);
}

static void test_atomics(void)
{
	struct pair p;
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL))
		goto out;
	uint64_t *target = (uint64_t *)(void *)(src + page), *orig = (uint64_t *)(void *)src;
	*target = 40;
	*orig = 0;
	struct ibv_sge sg = {.addr = (uintptr_t)orig, .length = 8, .lkey = src_mr->lkey};
	struct ibv_send_wr w = {.wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				.send_flags = IBV_SEND_SIGNALED},
			   *bad = NULL;
	w.wr.atomic.rkey = src_mr->rkey;
	w.wr.atomic.compare_add = 2;
	/* An atomic's remote address is 8-byte aligned (rxe checks it when posting). */
	w.wr.atomic.remote_addr = (uintptr_t)target + 4;
	CHECK(ibv_post_send(p.a, &w, &bad) == EINVAL && bad == &w, "an atomic at a misaligned address");
	/* Its local buffer is one SGE of 8 bytes. */
	w.wr.atomic.remote_addr = (uintptr_t)target;
	sg.length = 4;
	bad = NULL;
	CHECK(ibv_post_send(p.a, &w, &bad) == EINVAL && bad == &w, "an atomic into 4 bytes");
	sg.length = 8;
	CHECK(ibv_post_send(p.a, &w, &bad) == 0, "FETCH_AND_ADD");
	struct ibv_wc wc;
	if (!wait_wc(p.cqa, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD && *orig == 40 && *target == 42,
		      "FETCH_AND_ADD: %s, got %llu, target %llu", ibv_wc_status_str(wc.status), (unsigned long long)*orig,
		      (unsigned long long)*target);
out:
	pair_down(&p);
}

static void test_inline_too_long(void)
{
	struct pair p;
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL))
		goto out;
	uint32_t max = p.cap.max_inline_data;
	REQUIRE(max >= 64 && max < 4096, "max_inline_data %u, asked for 64", max);
	uint8_t data[4096]; /* inline data needs no registration */
	memset(data, 'i', sizeof data);
	memset(src + page, 0, page);
	struct ibv_sge sg = {.addr = (uintptr_t)data, .length = max + 1, .lkey = 0};
	struct ibv_send_wr w = {.wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED},
			   *bad = NULL;
	w.wr.rdma.remote_addr = (uintptr_t)src + page;
	w.wr.rdma.rkey = src_mr->rkey;
	CHECK(ibv_post_send(p.a, &w, &bad) == EINVAL && bad == &w, "inline data of max_inline_data+1 bytes");
	struct ibv_sge two[2] = {{.addr = (uintptr_t)data, .length = max, .lkey = 0},
				 {.addr = (uintptr_t)data, .length = 1, .lkey = 0}};
	w.sg_list = two;
	w.num_sge = 2;
	bad = NULL;
	CHECK(ibv_post_send(p.a, &w, &bad) == EINVAL && bad == &w, "inline data over two SGEs past max_inline_data");
	w.sg_list = &sg;
	w.num_sge = 1;
	sg.length = max;
	CHECK(ibv_post_send(p.a, &w, &bad) == 0, "inline data of max_inline_data bytes");
	struct ibv_wc wc;
	if (!wait_wc(p.cqa, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && all_are(src + page, max, 'i') && src[page + max] == 0,
		      "inline WRITE: %s", ibv_wc_status_str(wc.status));
out:
	pair_down(&p);
}

static void test_send_queue_full(void)
{
	struct pair p;
	struct qp_opts o = {.max_send_wr = 4, .rnr_retry = 7};
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, &o))
		goto out;
	uint32_t n = p.cap.max_send_wr;
	REQUIRE(n >= 4 && n <= 64, "max_send_wr %u", n);
	/* b has no receive: the first SEND waits for one (RNR, retried for
	 * ever) and keeps its slot, so the queue fills deterministically. */
	CHECK(post1(p.a, IBV_WR_SEND, 100, src, 8, src_mr->lkey, NULL, 0) == 0, "the first SEND");
	struct ibv_sge sg = {.addr = (uintptr_t)src, .length = 8, .lkey = src_mr->lkey};
	struct ibv_send_wr w[65], *bad = NULL;
	for (uint32_t i = 0; i < n; i++)
		w[i] = (struct ibv_send_wr){.wr_id = i, .next = i + 1 < n ? &w[i + 1] : NULL, .sg_list = &sg, .num_sge = 1,
					    .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
	int rc = ibv_post_send(p.a, &w[0], &bad);
	CHECK(rc == ENOMEM && bad == &w[n - 1], "a list one longer than the room left: %s, bad_wr is #%ld", strerror(rc),
	      bad ? (long)(bad - w) : -1L);
	/* Exactly the ones before bad_wr were posted: receives let them all go, in order. */
	for (uint32_t i = 0; i < n; i++)
		post_recv1(p.b, 1000 + i, src + page + i * 8, 8, src_mr->lkey);
	struct ibv_wc wc;
	uint64_t want[65];
	want[0] = 100;
	for (uint32_t i = 1; i < n; i++)
		want[i] = i - 1;
	for (uint32_t i = 0; i < n; i++)
		if (!wait_wc(p.cqa, &wc))
			CHECK(wc.wr_id == want[i] && wc.status == IBV_WC_SUCCESS, "completion %u: wr %llu %s, want wr %llu", i,
			      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), (unsigned long long)want[i]);
	for (uint32_t i = 0; i < n; i++)
		wait_wc(p.cqb, &wc);
	CHECK(ibv_poll_cq(p.cqa, 1, &wc) == 0, "a request past bad_wr completed: wr %llu", (unsigned long long)wc.wr_id);
out:
	pair_down(&p);
}

static void test_post_recv_with_srq(void)
{
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	REQUIRE(srq != NULL, "ibv_create_srq: %s", strerror(errno));
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct qp_opts o = {.srq = srq};
	struct ibv_qp *qp = cq ? new_qp(IBV_QPT_RC, cq, &o, NULL) : NULL;
	if (qp) {
		struct ibv_sge sg = {.addr = (uintptr_t)src, .length = 8, .lkey = src_mr->lkey};
		struct ibv_recv_wr r = {.wr_id = 1, .sg_list = &sg, .num_sge = 1}, *bad = NULL;
		CHECK(to_init(qp) == 0, "to INIT");
		CHECK(ibv_post_recv(qp, &r, &bad) == EINVAL && bad == &r, "post_recv on a QP with an SRQ");
		bad = NULL;
		CHECK(ibv_post_srq_recv(srq, &r, &bad) == 0, "post_srq_recv");
		CHECK(ibv_destroy_srq(srq) == EBUSY, "destroying an SRQ a QP uses");
		CHECK(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	}
	if (cq)
		CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq");
}

static void test_wrong_lkey(void)
{
	struct pair p;
	struct ibv_wc wc;
	/* The requester's own SGE. */
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL) == 0) {
		CHECK(post1(p.a, IBV_WR_RDMA_WRITE, 1, src, 8, src_mr->lkey ^ 0x5a5a0000u, src + page, src_mr->rkey) == 0,
		      "post_send");
		if (!wait_wc(p.cqa, &wc))
			CHECK(wc.wr_id == 1 && wc.status == IBV_WC_LOC_PROT_ERR, "wrong lkey: %s", ibv_wc_status_str(wc.status));
		CHECK(qp_state(p.a) == IBV_QPS_ERR, "the QP is in state %d after a local protection error", qp_state(p.a));
	}
	pair_down(&p);
	/* An SGE past the end of its region is a protection error too. */
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL) == 0) {
		CHECK(post1(p.a, IBV_WR_RDMA_WRITE, 1, src + SRC_PAGES * page - 4, 8, src_mr->lkey, src, src_mr->rkey) == 0,
		      "post_send");
		if (!wait_wc(p.cqa, &wc))
			CHECK(wc.status == IBV_WC_LOC_PROT_ERR, "an SGE past its region: %s", ibv_wc_status_str(wc.status));
	}
	pair_down(&p);
	/* The responder's receive: its completion has the local error, the requester a remote one. */
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL) == 0) {
		post_recv1(p.b, 2, src + page, 8, src_mr->lkey ^ 0x5a5a0000u);
		CHECK(post1(p.a, IBV_WR_SEND, 1, src, 8, src_mr->lkey, NULL, 0) == 0, "post_send");
		if (!wait_wc(p.cqb, &wc))
			CHECK(wc.wr_id == 2 && wc.status == IBV_WC_LOC_PROT_ERR, "the receive with a wrong lkey: %s",
			      ibv_wc_status_str(wc.status));
		if (!wait_wc(p.cqa, &wc))
			CHECK(wc.wr_id == 1 && wc.status == IBV_WC_REM_OP_ERR, "the SEND to it: %s", ibv_wc_status_str(wc.status));
	}
	pair_down(&p);
	/* Memory the device writes locally needs IBV_ACCESS_LOCAL_WRITE: a READ's
	 * destination and a receive buffer. */
	uint8_t *ro = page_alloc(1);
	REQUIRE(ro != NULL, "posix_memalign");
	memset(ro, 'r', page);
	struct ibv_mr *rmr = ibv_reg_mr(pd, ro, page, IBV_ACCESS_REMOTE_READ);
	REQUIRE(rmr != NULL, "ibv_reg_mr without local write: %s", strerror(errno));
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL) == 0) {
		CHECK(post1(p.a, IBV_WR_RDMA_READ, 1, ro, 8, rmr->lkey, src, src_mr->rkey) == 0, "post_send");
		if (!wait_wc(p.cqa, &wc))
			CHECK(wc.wr_id == 1 && wc.status == IBV_WC_LOC_PROT_ERR, "a READ into memory without local write: %s",
			      ibv_wc_status_str(wc.status));
	}
	pair_down(&p);
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL) == 0) {
		post_recv1(p.b, 2, ro, 8, rmr->lkey);
		CHECK(post1(p.a, IBV_WR_SEND, 1, src, 8, src_mr->lkey, NULL, 0) == 0, "post_send");
		if (!wait_wc(p.cqb, &wc))
			CHECK(wc.wr_id == 2 && wc.status == IBV_WC_LOC_PROT_ERR, "a receive into memory without local write: %s",
			      ibv_wc_status_str(wc.status));
		if (!wait_wc(p.cqa, &wc))
			CHECK(wc.wr_id == 1 && wc.status == IBV_WC_REM_OP_ERR, "the SEND to it: %s", ibv_wc_status_str(wc.status));
	}
	pair_down(&p);
	CHECK(all_are(ro, page, 'r'), "memory without local write was written");
	CHECK(ibv_dereg_mr(rmr) == 0, "ibv_dereg_mr");
	free(ro);
	drain_async_events();
}

/* ---- object lifetimes ---- */

static void test_busy_objects(void)
{
	struct ibv_pd *p2 = ibv_alloc_pd(ctx);
	REQUIRE(p2 != NULL, "ibv_alloc_pd: %s", strerror(errno));
	uint8_t *buf = page_alloc(1);
	REQUIRE(buf != NULL, "posix_memalign");
	struct ibv_mr *mr = ibv_reg_mr(p2, buf, 64, MR_ACCESS);
	REQUIRE(mr != NULL, "ibv_reg_mr: %s", strerror(errno));
	CHECK(ibv_dealloc_pd(p2) == EBUSY, "ibv_dealloc_pd with an MR");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");

	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	REQUIRE(ch != NULL, "ibv_create_comp_channel: %s", strerror(errno));
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	REQUIRE(cq != NULL, "ibv_create_cq: %s", strerror(errno));
	CHECK(ibv_destroy_comp_channel(ch) == EBUSY, "ibv_destroy_comp_channel with a CQ");
	struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(p2, &qa);
	REQUIRE(qp != NULL, "ibv_create_qp: %s", strerror(errno));
	CHECK(ibv_destroy_cq(cq) == EBUSY, "ibv_destroy_cq with a QP");
	CHECK(ibv_dealloc_pd(p2) == EBUSY, "ibv_dealloc_pd with a QP");
	CHECK(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid0, .hop_limit = 1}};
	struct ibv_ah *ah = ibv_create_ah(p2, &aa);
	REQUIRE(ah != NULL, "ibv_create_ah: %s", strerror(errno));
	CHECK(ibv_dealloc_pd(p2) == EBUSY, "ibv_dealloc_pd with an AH");
	CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
	CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
	CHECK(ibv_dealloc_pd(p2) == 0, "ibv_dealloc_pd");
	free(buf);
}

/* A doorbell the daemon no longer reads (its session ended: the device
 * closed, or the daemon gone) is a pipe without a reader: ringing it must
 * not raise SIGPIPE, whose default action ends the program. Here the QP
 * is in ERR, where every post_recv rings (the daemon flushes what is
 * posted), when its device is closed. */
static volatile sig_atomic_t sigpipes;

static void count_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static void no_sigpipe_after_close(int bell_nosignal)
{
	vrdma_bell_nosignal = bell_nosignal;
	struct ibv_context *c = ibv_open_device(dev);
	REQUIRE(c != NULL, "ibv_open_device: %s", strerror(errno));
	struct ibv_pd *p2 = ibv_alloc_pd(c);
	struct ibv_cq *cq = ibv_create_cq(c, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = p2 && cq ? ibv_create_qp(p2, &qa) : NULL;
	REQUIRE(qp != NULL, "making the objects: %s", strerror(errno));
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "modify_qp to ERR");
	CHECK(ibv_close_device(c) == 0, "ibv_close_device with live objects");
	/* The daemon ends the session after the close returns: wait (a hang
	 * guard) until it has let go of the QP's doorbell, whose write end
	 * then polls as an error (a white-box look at the library's QP). */
	struct pollfd bell = {.fd = ((struct vrdma_qp *)qp)->bell, .events = POLLOUT};
	double start = now();
	while (poll(&bell, 1, 10) >= 0 && !(bell.revents & POLLERR) && now() - start < HANG_GUARD_SECONDS)
		;
	REQUIRE(bell.revents & POLLERR, "the daemon kept the doorbell of a closed device's QP %d s", HANG_GUARD_SECONDS);
	struct sigaction sa = {.sa_handler = count_sigpipe}, old;
	sigaction(SIGPIPE, &sa, &old);
	sigpipes = 0;
	struct ibv_sge sg = {.addr = (uintptr_t)src, .length = 8, .lkey = src_mr->lkey};
	struct ibv_recv_wr r = {.wr_id = 1, .sg_list = &sg, .num_sge = 1}, *rbad = NULL;
	struct ibv_send_wr w = {.wr_id = 2, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND}, *bad = NULL;
	ibv_post_recv(qp, &r, &rbad); /* any result: the device is gone */
	ibv_post_send(qp, &w, &bad);
	CHECK(sigpipes == 0, "posting on a QP of a closed device raised SIGPIPE %d times", (int)sigpipes);
	CHECK(bell_nosignal >= 0 || vrdma_bell_nosignal == -1, "the doorbell left the masked write");
	sigaction(SIGPIPE, &old, NULL);
	vrdma_bell_nosignal = 0;
	int rc = ibv_destroy_qp(qp);
	CHECK(rc == 0 || rc == EIO, "ibv_destroy_qp after close: %d", rc);
	rc = ibv_destroy_cq(cq);
	CHECK(rc == 0 || rc == EIO, "ibv_destroy_cq after close: %d", rc);
	rc = ibv_dealloc_pd(p2);
	CHECK(rc == 0 || rc == EIO, "ibv_dealloc_pd after close: %d", rc);
}

/* As the kernel allows: with RWF_NOSIGNAL where it has it. */
static void test_no_sigpipe_after_close(void) { no_sigpipe_after_close(0); }

/* As on a kernel without RWF_NOSIGNAL: SIGPIPE blocked around the write. */
static void test_no_sigpipe_after_close_masked(void) { no_sigpipe_after_close(-1); }

/* A program asleep on a completion channel learns that the device is gone
 * (the daemon ended the session: it died, or here the device was closed):
 * the channel wakes and ibv_get_cq_event fails with EIO, as rdma-core's
 * does on a disassociated device, instead of sleeping for ever. */
static void test_comp_channel_after_close(void)
{
	struct ibv_context *c = ibv_open_device(dev);
	REQUIRE(c != NULL, "ibv_open_device: %s", strerror(errno));
	struct ibv_comp_channel *ch = ibv_create_comp_channel(c);
	struct ibv_cq *cq = ch ? ibv_create_cq(c, 16, NULL, ch, 0) : NULL;
	REQUIRE(cq != NULL, "making the objects: %s", strerror(errno));
	/* Destroying another CQ of the channel is not the end of the session. */
	struct ibv_cq *other = ibv_create_cq(c, 16, NULL, ch, 0);
	REQUIRE(other != NULL, "ibv_create_cq: %s", strerror(errno));
	CHECK(ibv_req_notify_cq(other, 0) == 0, "ibv_req_notify_cq");
	CHECK(ibv_destroy_cq(other) == 0, "ibv_destroy_cq");
	CHECK(!readable(ch->fd, 0), "destroying a CQ wakes its completion channel");
	CHECK(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq");
	CHECK(ibv_close_device(c) == 0, "ibv_close_device with live objects");
	CHECK(readable(ch->fd, -1), "the completion channel sleeps on after the device's session ended");
	struct ibv_cq *ecq = NULL;
	void *ectx = NULL;
	int fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK); /* a hang guard */
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &ecq, &ectx) == -1 && errno == EIO, "ibv_get_cq_event after the session ended: errno %d",
	      errno);
	fcntl(ch->fd, F_SETFL, fl);
	int rc = ibv_destroy_cq(cq);
	CHECK(rc == 0 || rc == EIO, "ibv_destroy_cq after close: %d", rc);
	rc = ibv_destroy_comp_channel(ch);
	CHECK(rc == 0 || rc == EIO, "ibv_destroy_comp_channel after close: %d", rc);
}

static void test_close_with_live_objects(void)
{
	struct ibv_context *c = ibv_open_device(dev);
	REQUIRE(c != NULL, "ibv_open_device: %s", strerror(errno));
	struct ibv_pd *p2 = ibv_alloc_pd(c);
	uint8_t *buf = page_alloc(1);
	struct ibv_mr *mr = p2 && buf ? ibv_reg_mr(p2, buf, 64, MR_ACCESS) : NULL;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(c);
	struct ibv_cq *cq = ch ? ibv_create_cq(c, 16, NULL, ch, 0) : NULL;
	struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = cq ? ibv_create_qp(p2, &qa) : NULL;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct ibv_srq *srq = p2 ? ibv_create_srq(p2, &sa) : NULL;
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid0, .hop_limit = 1}};
	struct ibv_ah *ah = p2 ? ibv_create_ah(p2, &aa) : NULL;
	REQUIRE(p2 && mr && ch && cq && qp && srq && ah, "making the objects: %s", strerror(errno));

	CHECK(ibv_close_device(c) == 0, "ibv_close_device with live objects");
	/* Verbs on the objects of a closed context fail with EIO. */
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS) == EIO,
	      "ibv_modify_qp after close");
	struct ibv_qp_init_attr ia;
	CHECK(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == EIO, "ibv_query_qp after close");
	errno = 0;
	struct ibv_mr *mr2 = ibv_reg_mr(p2, buf + 100, 64, MR_ACCESS);
	CHECK(mr2 == NULL && errno == EIO, "ibv_reg_mr after close: errno %d", errno);
	errno = 0;
	struct ibv_pd *p3 = ibv_alloc_pd(c);
	CHECK(p3 == NULL && errno == EIO, "ibv_alloc_pd after close: errno %d", errno);
	errno = 0;
	struct ibv_cq *cq2 = ibv_create_cq(c, 16, NULL, NULL, 0);
	CHECK(cq2 == NULL && errno == EIO, "ibv_create_cq after close: errno %d", errno);
	struct ibv_wc wc;
	CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "polling a CQ of a closed context");
	CHECK(ibv_destroy_comp_channel(ch) == EBUSY, "ibv_destroy_comp_channel with a CQ, after close");
	/* Destroying them succeeds (0, or EIO as rdma-core says for a
	 * disassociated device), in any order; the last one frees the context
	 * and nothing leaks (the sanitizer checks at exit). The comp channel
	 * goes last: the context must outlive it too. */
	int rc;
	rc = ibv_dealloc_pd(p2); /* before its MR, QP, SRQ and AH */
	CHECK(rc == 0 || rc == EIO, "ibv_dealloc_pd after close: %d", rc);
	rc = ibv_destroy_cq(cq); /* before its QP */
	CHECK(rc == 0 || rc == EIO, "ibv_destroy_cq after close: %d", rc);
	rc = ibv_destroy_qp(qp);
	CHECK(rc == 0 || rc == EIO, "ibv_destroy_qp after close: %d", rc);
	rc = ibv_destroy_srq(srq);
	CHECK(rc == 0 || rc == EIO, "ibv_destroy_srq after close: %d", rc);
	rc = ibv_destroy_ah(ah);
	CHECK(rc == 0 || rc == EIO, "ibv_destroy_ah after close: %d", rc);
	rc = ibv_dereg_mr(mr);
	CHECK(rc == 0 || rc == EIO, "ibv_dereg_mr after close: %d", rc);
#ifdef __SANITIZE_ADDRESS__
	/* ibv_destroy_comp_channel locks the context's mutex, in libc, where
	 * the sanitizer does not look: ask it whether the memory is still live. */
	CHECK(!__asan_address_is_poisoned(&c->mutex), "the context was freed before its completion channel");
#endif
	rc = ibv_destroy_comp_channel(ch);
	CHECK(rc == 0 || rc == EIO, "ibv_destroy_comp_channel after close: %d", rc);
	free(buf);

	/* A context closed with nothing in it is freed at once. */
	c = ibv_open_device(dev);
	REQUIRE(c != NULL, "ibv_open_device: %s", strerror(errno));
	CHECK(ibv_close_device(c) == 0, "ibv_close_device");
}

/* ---- completion channels ---- */

static void test_completion_channel(void)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	REQUIRE(ch != NULL, "ibv_create_comp_channel: %s", strerror(errno));
	int marker = 0;
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, &marker, ch, 0);
	REQUIRE(cq != NULL, "ibv_create_cq: %s", strerror(errno));
	struct pair p;
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RESET, NULL))
		goto out;
	/* a completes into the channel's CQ instead of its own. */
	CHECK(ibv_destroy_qp(p.a) == 0, "ibv_destroy_qp");
	p.a = new_qp(IBV_QPT_RC, cq, NULL, NULL);
	if (!p.a || to_init(p.a) || to_init(p.b) || to_rtr(p.a, p.b->qp_num) || to_rtr(p.b, p.a->qp_num) ||
	    to_rts(p.a, 7) || to_rts(p.b, 7)) {
		CHECK(0, "connecting the pair");
		goto out;
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ee = {.events = EPOLLIN}, got;
	CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ee) == 0, "epoll on the channel: %s", strerror(errno));
	struct ibv_wc wc;
	struct ibv_cq *ecq = NULL;
	void *ectx = NULL;

	/* Not armed: a completion does not make the channel readable. */
	CHECK(post1(p.a, IBV_WR_RDMA_WRITE, 1, src, 8, src_mr->lkey, src + page, src_mr->rkey) == 0, "post_send");
	wait_wc(cq, &wc);
	CHECK(!readable(ch->fd, 0), "the channel is readable without ibv_req_notify_cq");

	/* Armed: it is, under poll() and epoll, and ibv_get_cq_event names the CQ. */
	CHECK(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq");
	CHECK(!readable(ch->fd, 0), "the channel is readable before a completion");
	CHECK(post1(p.a, IBV_WR_RDMA_WRITE, 2, src, 8, src_mr->lkey, src + page, src_mr->rkey) == 0, "post_send");
	CHECK(readable(ch->fd, -1), "the channel does not poll readable after a completion");
	CHECK(epoll_wait(ep, &got, 1, HANG_GUARD_SECONDS * 1000) == 1, "epoll_wait on the channel");
	CHECK(ibv_get_cq_event(ch, &ecq, &ectx) == 0 && ecq == cq && ectx == &marker, "ibv_get_cq_event: %p %p", (void *)ecq,
	      ectx);
	ibv_ack_cq_events(cq, 1);
	CHECK(cq->comp_events_completed == 1, "ibv_ack_cq_events counted %u", cq->comp_events_completed);
	CHECK(!readable(ch->fd, 0), "the channel stays readable after ibv_get_cq_event");
	if (!wait_wc(cq, &wc))
		CHECK(wc.wr_id == 2 && wc.status == IBV_WC_SUCCESS, "the completion: wr %llu", (unsigned long long)wc.wr_id);

	/* A non-blocking channel with no event: EAGAIN. */
	int fl = fcntl(ch->fd, F_GETFL);
	CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK on the channel");
	CHECK(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq");
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &ecq, &ectx) == -1 && errno == EAGAIN, "ibv_get_cq_event with none: errno %d", errno);
	/* ... and the event when one comes. */
	CHECK(post1(p.a, IBV_WR_RDMA_WRITE, 3, src, 8, src_mr->lkey, src + page, src_mr->rkey) == 0, "post_send");
	CHECK(readable(ch->fd, -1), "the channel does not poll readable after a completion");
	ecq = NULL;
	CHECK(ibv_get_cq_event(ch, &ecq, &ectx) == 0 && ecq == cq, "ibv_get_cq_event on a non-blocking channel");
	ibv_ack_cq_events(cq, 1);
	ibv_ack_cq_events(cq, 0);
	CHECK(cq->comp_events_completed == 2, "ibv_ack_cq_events counted %u, want 2", cq->comp_events_completed);
	if (!wait_wc(cq, &wc))
		CHECK(wc.wr_id == 3, "the completion: wr %llu", (unsigned long long)wc.wr_id);
	fcntl(ch->fd, F_SETFL, fl);
	if (ep >= 0)
		close(ep);
out:
	pair_down(&p);
	CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
}

/* ---- sleeping daemon, sleeping application: the wake-ups ----
 * A daemon QP worker with nothing to do sets the ring's notify word, then
 * looks at the producer index once more before it sleeps; post_send
 * publishes the producer index, then looks at the notify word to know
 * whether to ring. Each side stores, then loads the other's word: unless
 * both order the store before the load (a full fence: x86 lets a load pass
 * an earlier store to another address), each can miss the other's store,
 * the daemon sleeps on a request nobody rings for, and the program waits
 * for ever. The completion channel has the same shape the other way:
 * ibv_req_notify_cq, then a poll that finds the CQ empty, against the
 * daemon's push of a completion, then its look at the notify word. The
 * window is a few nanoseconds: these cases go round it many times, as a
 * pingpong does (ibv_rc_pingpong, and with -e its event mode). */
#define WAKEUP_ROUNDS 100000

static void test_post_wakeup_race(void)
{
	struct pair p;
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL))
		goto out;
	for (int i = 0; i < WAKEUP_ROUNDS; i++) {
		/* One request at a time: the daemon's worker goes to sleep after
		 * each, just as the next one is posted. */
		if (rdma(&p, IBV_WR_RDMA_WRITE, src, 8, src + page, src_mr->rkey) != IBV_WC_SUCCESS) {
			CHECK(0, "round %d of %d: the WRITE did not complete (the daemon slept through its doorbell?)", i,
			      WAKEUP_ROUNDS);
			break;
		}
	}
out:
	pair_down(&p);
}

/* A sender that posts one request per call as fast as the SQ allows,
 * while the daemon's worker sleeps and wakes between bursts: the library
 * rings once per arming of the notify word (post.c, publish_sq) and skips
 * the rings a sleeping daemon does not need. Every message must still
 * arrive, with its bytes, and every completion in the order posted. */
#define BURST_MESSAGES 20000
#define BURST_WINDOW 16

/* OR_OUT is a CHECK that ends the case through its clean-up. */
#define OR_OUT(cond, ...)                         \
	do {                                      \
		if (!(cond)) {                    \
			CHECK(cond, __VA_ARGS__); \
			goto out;                 \
		}                                 \
	} while (0)

static void test_post_burst_in_order(void)
{
	struct pair p;
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, &(struct qp_opts){.max_send_wr = 64}))
		goto out;
	uint64_t *slots = (uint64_t *)(void *)(src + 4 * page); /* the receives' buffers */
	uint64_t sent = 0, sdone = 0, rdone = 0;
	for (uint64_t i = 0; i < BURST_WINDOW; i++)
		post_recv1(p.b, i, &slots[i], 8, src_mr->lkey);
	double start = now();
	while (rdone < BURST_MESSAGES || sdone < BURST_MESSAGES) {
		while (sent < BURST_MESSAGES && sent - rdone < BURST_WINDOW) {
			uint64_t v = sent ^ 0x5a5a5a5a00000000ull;
			struct ibv_sge sg = {.addr = (uintptr_t)&v, .length = 8, .lkey = 0};
			struct ibv_send_wr wr = {.wr_id = sent, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};
			struct ibv_send_wr *bad = NULL;
			int rc = ibv_post_send(p.a, &wr, &bad);
			OR_OUT(rc == 0, "post_send of message %llu: %s", (unsigned long long)sent, strerror(rc));
			sent++;
		}
		struct ibv_wc wc[8];
		int n = ibv_poll_cq(p.cqa, 8, wc);
		OR_OUT(n >= 0, "poll_cq (sender): %d", n);
		for (int k = 0; k < n; k++) {
			OR_OUT(wc[k].status == IBV_WC_SUCCESS && wc[k].opcode == IBV_WC_SEND,
				"send completion %llu: status %d opcode %d", (unsigned long long)sdone, wc[k].status,
				wc[k].opcode);
			OR_OUT(wc[k].wr_id == sdone, "send completion %llu came as the %llu-th",
				(unsigned long long)wc[k].wr_id, (unsigned long long)sdone);
			sdone++;
		}
		n = ibv_poll_cq(p.cqb, 8, wc);
		OR_OUT(n >= 0, "poll_cq (receiver): %d", n);
		for (int k = 0; k < n; k++) {
			OR_OUT(wc[k].status == IBV_WC_SUCCESS && wc[k].byte_len == 8,
				"receive %llu: status %d, %u bytes", (unsigned long long)rdone, wc[k].status,
				wc[k].byte_len);
			OR_OUT(wc[k].wr_id == rdone, "receive %llu came as the %llu-th", (unsigned long long)wc[k].wr_id,
				(unsigned long long)rdone);
			uint64_t *slot = &slots[rdone % BURST_WINDOW];
			OR_OUT(*slot == (rdone ^ 0x5a5a5a5a00000000ull), "message %llu holds %#llx",
				(unsigned long long)rdone, (unsigned long long)*slot);
			*slot = 0;
			if (rdone + BURST_WINDOW < BURST_MESSAGES)
				post_recv1(p.b, rdone + BURST_WINDOW, slot, 8, src_mr->lkey);
			rdone++;
		}
		if (now() - start > HANG_GUARD_SECONDS) {
			CHECK(0, "%llu of %d messages sent, %llu sends and %llu receives completed in %d s",
			      (unsigned long long)sent, BURST_MESSAGES, (unsigned long long)sdone, (unsigned long long)rdone,
			      HANG_GUARD_SECONDS);
			break;
		}
	}
out:
	pair_down(&p);
}

static void test_arm_wakeup_race(void)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	REQUIRE(ch != NULL, "ibv_create_comp_channel: %s", strerror(errno));
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	REQUIRE(cq != NULL, "ibv_create_cq: %s", strerror(errno));
	struct pair p;
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RESET, NULL))
		goto out;
	CHECK(ibv_destroy_qp(p.a) == 0, "ibv_destroy_qp");
	p.a = new_qp(IBV_QPT_RC, cq, NULL, NULL);
	if (!p.a || to_init(p.a) || to_init(p.b) || to_rtr(p.a, p.b->qp_num) || to_rtr(p.b, p.a->qp_num) ||
	    to_rts(p.a, 7) || to_rts(p.b, 7)) {
		CHECK(0, "connecting the pair");
		goto out;
	}
	for (int i = 0; i < WAKEUP_ROUNDS; i++) {
		/* The event loop of ibv_rc_pingpong -e: arm, then poll, and sleep
		 * on the channel only when the poll found nothing. */
		CHECK(post1(p.a, IBV_WR_RDMA_WRITE, (uint64_t)i, src, 8, src_mr->lkey, src + page, src_mr->rkey) == 0,
		      "post_send");
		struct ibv_wc wc;
		int n;
		for (;;) {
			CHECK(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq");
			if ((n = ibv_poll_cq(cq, 1, &wc)) != 0)
				break;
			if (!readable(ch->fd, -1))
				break;
			struct ibv_cq *ecq;
			void *ectx;
			if (ibv_get_cq_event(ch, &ecq, &ectx) == 0)
				ibv_ack_cq_events(ecq, 1);
		}
		if (n != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)i) {
			CHECK(0, "round %d of %d: armed, polled an empty CQ, and no completion event came (poll %d)", i,
			      WAKEUP_ROUNDS, n);
			break;
		}
	}
out:
	pair_down(&p);
	CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
}

/* ---- the ibv_wr_* API ---- */

static void test_wr_api(void)
{
	struct pair p;
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RESET, NULL))
		goto out;
	CHECK(ibv_qp_to_qp_ex(p.b) == NULL, "ibv_qp_to_qp_ex of a QP made without send_ops_flags");
	CHECK(ibv_destroy_qp(p.a) == 0, "ibv_destroy_qp");
	struct ibv_qp_init_attr_ex xa = {
		.send_cq = p.cqa,
		.recv_cq = p.cqa,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2, .max_inline_data = 64},
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND,
	};
	p.a = ibv_create_qp_ex(ctx, &xa);
	REQUIRE(p.a != NULL, "ibv_create_qp_ex: %s", strerror(errno));
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(p.a);
	REQUIRE(x != NULL && ibv_qp_to_qp_ex(p.a) == x, "ibv_qp_to_qp_ex");
	CHECK(&x->qp_base == p.a, "the qp_ex's base is not the QP");

	/* Not in RTS: the batch fails as post_send would. */
	ibv_wr_start(x);
	x->wr_id = 1;
	ibv_wr_rdma_write(x, src_mr->rkey, (uintptr_t)src + page);
	ibv_wr_set_sge(x, src_mr->lkey, (uintptr_t)src, 8);
	CHECK(ibv_wr_complete(x) == EINVAL, "a batch in RESET");
	if (to_init(p.a) || to_init(p.b) || to_rtr(p.a, p.b->qp_num) || to_rtr(p.b, p.a->qp_num) || to_rts(p.a, 7) ||
	    to_rts(p.b, 7)) {
		CHECK(0, "connecting the pair");
		goto out;
	}

	/* A WRITE and a READ in one batch. */
	uint8_t *dst = src + page, *back = src + 2 * page;
	memset(src, 'a', 16);
	memset(dst, 0, 3 * page);
	ibv_wr_start(x);
	x->wr_id = 10;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, src_mr->rkey, (uintptr_t)dst);
	ibv_wr_set_sge(x, src_mr->lkey, (uintptr_t)src, 16);
	x->wr_id = 11;
	ibv_wr_rdma_read(x, src_mr->rkey, (uintptr_t)dst);
	ibv_wr_set_sge(x, src_mr->lkey, (uintptr_t)back, 16);
	CHECK(ibv_wr_complete(x) == 0, "ibv_wr_complete");
	struct ibv_wc wc;
	for (uint64_t id = 10; id <= 11; id++)
		if (!wait_wc(p.cqa, &wc))
			CHECK(wc.wr_id == id && wc.status == IBV_WC_SUCCESS, "wr %llu: %s", (unsigned long long)wc.wr_id,
			      ibv_wc_status_str(wc.status));
	CHECK(all_are(dst, 16, 'a') && all_are(back, 16, 'a') && dst[16] == 0, "the batch's WRITE and READ");

	/* wr_abort posts nothing: the next batch's completion comes first and the bytes are untouched. */
	memset(src, 'b', 16);
	ibv_wr_start(x);
	x->wr_id = 20;
	ibv_wr_rdma_write(x, src_mr->rkey, (uintptr_t)dst + 100);
	ibv_wr_set_sge(x, src_mr->lkey, (uintptr_t)src, 16);
	ibv_wr_abort(x);
	/* An error in a batch fails ibv_wr_complete and posts none of it. */
	ibv_wr_start(x);
	x->wr_id = 30;
	ibv_wr_rdma_write(x, src_mr->rkey, (uintptr_t)dst + 200);
	ibv_wr_set_sge(x, src_mr->lkey, (uintptr_t)src, 16);
	x->wr_id = 31;
	ibv_wr_rdma_write(x, src_mr->rkey, (uintptr_t)dst + 300);
	uint8_t big[4096];
	memset(big, 'z', sizeof big);
	ibv_wr_set_inline_data(x, big, xa.cap.max_inline_data + 1);
	CHECK(ibv_wr_complete(x) == EINVAL, "a batch with inline data past max_inline_data");
	ibv_wr_start(x);
	x->wr_id = 40;
	ibv_wr_rdma_write(x, src_mr->rkey, (uintptr_t)dst + 400);
	struct ibv_sge many[8];
	for (int i = 0; i < 8; i++)
		many[i] = (struct ibv_sge){.addr = (uintptr_t)src, .length = 1, .lkey = src_mr->lkey};
	ibv_wr_set_sge_list(x, xa.cap.max_send_sge + 1, many);
	CHECK(ibv_wr_complete(x) == EINVAL, "a batch with too many SGEs");
	ibv_wr_start(x);
	x->wr_id = 50;
	ibv_wr_rdma_write(x, src_mr->rkey, (uintptr_t)dst + 500);
	ibv_wr_set_sge(x, src_mr->lkey, (uintptr_t)src, 16);
	CHECK(ibv_wr_complete(x) == 0, "ibv_wr_complete");
	if (!wait_wc(p.cqa, &wc))
		CHECK(wc.wr_id == 50 && wc.status == IBV_WC_SUCCESS, "after the aborted and failed batches: wr %llu %s",
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	CHECK(all_are(dst + 100, 400, 0) && all_are(dst + 500, 16, 'b'), "an aborted or failed batch wrote");
out:
	pair_down(&p);
}

static void test_wr_api_opcodes(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	REQUIRE(cq != NULL, "ibv_create_cq: %s", strerror(errno));
	struct ibv_qp_init_attr_ex xa = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_UC,
		.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &xa);
	REQUIRE(qp != NULL, "ibv_create_qp_ex (UC): %s", strerror(errno));
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	if (to_init(qp) || to_rtr(qp, qp->qp_num) || to_rts(qp, 0))
		CHECK(0, "UC QP to RTS");
	ibv_wr_start(x);
	ibv_wr_rdma_read(x, src_mr->rkey, (uintptr_t)src);
	ibv_wr_set_sge(x, src_mr->lkey, (uintptr_t)src + page, 8);
	CHECK(ibv_wr_complete(x) == EINVAL, "a READ on UC through ibv_wr_*");
	CHECK(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	/* An atomic at a misaligned address fails the batch, as post_send. */
	xa.qp_type = IBV_QPT_RC;
	xa.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	qp = ibv_create_qp_ex(ctx, &xa);
	REQUIRE(qp != NULL, "ibv_create_qp_ex (RC): %s", strerror(errno));
	x = ibv_qp_to_qp_ex(qp);
	if (to_init(qp) || to_rtr(qp, qp->qp_num) || to_rts(qp, 7))
		CHECK(0, "RC QP to RTS");
	ibv_wr_start(x);
	ibv_wr_atomic_fetch_add(x, src_mr->rkey, (uintptr_t)src + 4, 1);
	ibv_wr_set_sge(x, src_mr->lkey, (uintptr_t)src + page, 8);
	CHECK(ibv_wr_complete(x) == EINVAL, "a misaligned atomic through ibv_wr_*");
	/* send_ops_flags the library does not have: EOPNOTSUPP. */
	CHECK(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	xa.send_ops_flags = IBV_QP_EX_WITH_TSO;
	errno = 0;
	qp = ibv_create_qp_ex(ctx, &xa);
	CHECK(qp == NULL && errno == EOPNOTSUPP, "send_ops_flags with TSO: errno %d", errno);
	if (qp)
		ibv_destroy_qp(qp);
	CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
}

/* ---- main ---- */

/* A QP entering RESET takes its completions not yet polled out of its
 * CQs, as mlx5's provider does (pyverbs restarts a QP from ERR and then
 * expects only new completions): two receives flushed by ERR, one polled,
 * then RESET: the other is gone. */
static void test_reset_cleans_cq(void)
{
	struct pair p;
	static char buf[64];
	if (pair_up(&p, IBV_QPT_RC, IBV_QPS_RTS, NULL) != 0)
		return;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL, "ibv_reg_mr: %s", strerror(errno));
	if (mr == NULL) {
		pair_down(&p);
		return;
	}
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof buf, .lkey = mr->lkey };
	for (uint64_t id = 1; id <= 2; id++) {
		struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(p.b, &wr, &bad) == 0, "ibv_post_recv");
	}
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(p.b, &a, IBV_QP_STATE) == 0, "to ERR");
	struct ibv_wc wc;
	int got = 0;
	for (long i = 0; i < 200000000L && got == 0; i++)
		got = ibv_poll_cq(p.cqb, 1, &wc);
	CHECK(got == 1 && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 1, "the first flush: %d, status %d, wr_id %llu",
	      got, got == 1 ? (int)wc.status : -1, got == 1 ? (unsigned long long)wc.wr_id : 0ULL);
	a.qp_state = IBV_QPS_RESET;
	CHECK(ibv_modify_qp(p.b, &a, IBV_QP_STATE) == 0, "to RESET");
	got = ibv_poll_cq(p.cqb, 1, &wc);
	CHECK(got == 0, "after RESET the CQ still holds the QP's completion (wr_id %llu, status %d)",
	      got == 1 ? (unsigned long long)wc.wr_id : 0ULL, got == 1 ? (int)wc.status : -1);
	ibv_dereg_mr(mr);
	pair_down(&p);
}

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{"devices", test_devices},
	{"bad_rkey", test_bad_rkey},
	{"reg_mr_malloc", test_reg_mr_malloc},
	{"reg_mr_stack", test_reg_mr_stack},
	{"reg_mr_mmap", test_reg_mr_mmap},
	{"reg_mr_posix_memalign", test_reg_mr_posix_memalign},
	{"reg_mr_twice", test_reg_mr_twice},
	{"reg_mr_same_page", test_reg_mr_same_page},
	{"reg_mr_partial_overlap", test_reg_mr_partial_overlap},
	{"reg_mr_fio_members", test_reg_mr_fio_members},
	{"reg_mr_ucx_halves", test_reg_mr_ucx_halves},
	{"reg_mr_read_only", test_reg_mr_read_only},
	{"reg_mr_exec", test_reg_mr_exec},
	{"reg_mr_realloc", test_reg_mr_realloc},
	{"reg_mr_tail_unmapped", test_reg_mr_tail_unmapped},
	{"reg_mr_tail_unmapped_again", test_reg_mr_tail_unmapped_again},
	{"reg_mr_unlocks", test_reg_mr_unlocks},
	{"reg_mr_shared_and_huge", test_reg_mr_shared_and_huge},
	{"reg_mr_many_pieces", test_reg_mr_many_pieces},
	{"reg_mr_bad_arguments", test_reg_mr_bad_arguments},
	{"reg_mr_again", test_reg_mr_again},
	{"fork", test_fork},
	{"fork_part_unmapped", test_fork_part_unmapped},
	{"fork_part_reregistered", test_fork_part_reregistered},
	{"fork_mprotected", test_fork_mprotected},
	{"fork_status", test_fork_status},
	{"lid_without_grh", test_lid_without_grh},
	{"ah_from_wc", test_ah_from_wc},
	{"reg_mr_memlock_refused", test_reg_mr_memlock_refused},
	{"post_send_states", test_post_send_states},
	{"too_many_sges", test_too_many_sges},
	{"opcode_not_allowed", test_opcode_not_allowed},
	{"atomics", test_atomics},
	{"inline_too_long", test_inline_too_long},
	{"send_queue_full", test_send_queue_full},
	{"post_recv_with_srq", test_post_recv_with_srq},
	{"wrong_lkey", test_wrong_lkey},
	{"busy_objects", test_busy_objects},
	{"close_with_live_objects", test_close_with_live_objects},
	{"comp_channel_after_close", test_comp_channel_after_close},
	{"no_sigpipe_after_close", test_no_sigpipe_after_close},
	{"no_sigpipe_after_close_masked", test_no_sigpipe_after_close_masked},
	{"completion_channel", test_completion_channel},
	{"post_wakeup_race", test_post_wakeup_race},
	{"post_burst_in_order", test_post_burst_in_order},
	{"arm_wakeup_race", test_arm_wakeup_race},
	{"wr_api", test_wr_api},
	{"wr_api_opcodes", test_wr_api_opcodes},
	{"reset_cleans_cq", test_reset_cleans_cq},
};

static int selected(const char *name, int argc, char **argv)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strstr(name, argv[i]))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	if (!getenv("VRDMA_SOCKET")) {
		fprintf(stderr, "verbs_test: set VRDMA_SOCKET to a daemon's socket (the Go test TestCUnits starts one)\n");
		return 2;
	}
	page = (size_t)sysconf(_SC_PAGESIZE);
	/* Before the library's handlers, which it installs when it first registers memory. */
	pthread_atfork(NULL, NULL, hold_child);
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		fprintf(stderr, "verbs_test: no device at %s\n", getenv("VRDMA_SOCKET"));
		return 1;
	}
	dev = list[0];
	ibv_free_device_list(list);
	ctx = ibv_open_device(dev);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	src = page_alloc(SRC_PAGES);
	src_mr = pd && src ? ibv_reg_mr(pd, src, SRC_PAGES * page, MR_ACCESS) : NULL;
	struct ibv_port_attr pa;
	if (!src_mr || ibv_query_gid(ctx, 1, 0, &gid0) || ibv_query_port(ctx, 1, &pa)) {
		fprintf(stderr, "verbs_test: setting up on %s: %s\n", ibv_get_device_name(dev), strerror(errno));
		return 1;
	}
	mtu = pa.active_mtu;

	int ran = 0;
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
		if (!selected(tests[i].name, argc, argv))
			continue;
		current = tests[i].name;
		int before = failures;
		tests[i].fn();
		printf("%s %s\n", failures == before ? "ok  " : "FAIL", tests[i].name);
		fflush(stdout);
		ran++;
	}
	current = "teardown";
	CHECK(ibv_dereg_mr(src_mr) == 0, "ibv_dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	free(src);
	if (ran == 0) {
		fprintf(stderr, "verbs_test: no case matches the arguments\n");
		return 2;
	}
	printf("verbs_test: %d cases, %d failures\n", ran, failures);
	return failures ? 1 : 0;
}
