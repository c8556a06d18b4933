/*
 * lost_peer.c: the libraries when the daemon dies mid-transfer
 * (docs/design/lost-daemon.md). Not a standalone test: the Go test
 * TestVerbsWhenTheDaemonDies runs it against a daemon in a process of its
 * own, which it SIGKILLs when this program prints "kill", and checks its
 * exit status.
 *
 * Before the kill: QPs a and b (RC, connected, one CQ with a completion
 * channel) and c (on an SRQ); four receives on a, three on the SRQ; b
 * sends two to a, whose four completions wait in the CQ, unpolled; a sends
 * two to b (one signalled, one not), which has no receive: they wait for
 * ever (RNR, retried without end). A thread sleeps in ibv_get_cq_event on
 * the armed CQ, another in rdma_get_cm_event on an id bound to the device.
 *
 * What must happen after the kill, with nothing but this program running:
 * the sleeping threads return (EIO; DEVICE_REMOVAL); ibv_poll_cq delivers
 * the four completions it holds, then IBV_WC_WR_FLUSH_ERR for each of the
 * seven requests still outstanding (a's two receives and two sends, the
 * SRQ's three), once each, then fails with EIO, again and again; posts fail
 * with EIO; the async fd is readable and ibv_get_async_event says
 * IBV_EVENT_DEVICE_FATAL once, then EIO; rdma_get_cm_event then fails with
 * EIO instead of blocking.
 */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "verbs_int.h" /* to see completions wait in the ring without polling them */

#include "check.h"

#define DIE(...)                                      \
	do {                                          \
		fprintf(stderr, "lost_peer: " __VA_ARGS__); \
		fputc('\n', stderr);                  \
		exit(2);                              \
	} while (0)

static struct ibv_context *ctx;
static union ibv_gid gid0;
static enum ibv_mtu mtu;

static struct ibv_qp *new_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.srq = srq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = srq ? 0 : 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (qp == NULL)
		DIE("ibv_create_qp: %s", strerror(errno));
	return qp;
}

static void connect_to(struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("to INIT: %s", strerror(errno));
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dest;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("to RTR: %s", strerror(errno));
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7; /* retried without end: the send waits until the daemon dies */
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("to RTS: %s", strerror(errno));
}

static void post_recv(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t id, struct ibv_sge *sg)
{
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = sg, .num_sge = 1 }, *bad;
	int rc = srq ? ibv_post_srq_recv(srq, &w, &bad) : ibv_post_recv(qp, &w, &bad);
	if (rc)
		DIE("posting receive %llu: %s", (unsigned long long)id, strerror(rc));
}

static void post_send(struct ibv_qp *qp, uint64_t id, int signaled, struct ibv_sge *sg)
{
	struct ibv_send_wr w = { .wr_id = id, .sg_list = sg, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = signaled ? IBV_SEND_SIGNALED : 0 },
			   *bad;
	int rc = ibv_post_send(qp, &w, &bad);
	if (rc)
		DIE("posting send %llu: %s", (unsigned long long)id, strerror(rc));
}

/* Completions waiting in cq's ring (not yet polled). */
static uint32_t held(struct ibv_cq *cq)
{
	struct vrdma_cq *q = (struct vrdma_cq *)cq;
	return vrdma_load32(q->mem, VRDMA_RING_PROD_OFF) - q->cons;
}

struct waiter {
	pthread_t t;
	struct ibv_comp_channel *ch;
	struct rdma_event_channel *cm;
	int rc, err, event;
};

static void *wait_cq(void *arg)
{
	struct waiter *w = arg;
	struct ibv_cq *cq;
	void *cqctx;
	w->rc = ibv_get_cq_event(w->ch, &cq, &cqctx);
	w->err = errno;
	return NULL;
}

static void *wait_cm(void *arg)
{
	struct waiter *w = arg;
	struct rdma_cm_event *ev;
	w->rc = rdma_get_cm_event(w->cm, &ev);
	w->err = errno;
	if (w->rc == 0) {
		w->event = ev->event;
		rdma_ack_cm_event(ev);
	}
	return NULL;
}

/* The outstanding requests, by wr_id, and the QP each belongs to. */
struct want {
	uint64_t id;
	struct ibv_qp **qp;
	int seen;
};

int main(void)
{
	alarm(120); /* a hang guard: every wait below must end on its own */
	setvbuf(stdout, NULL, _IONBF, 0);
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (list == NULL || n == 0)
		DIE("no device: %s", strerror(errno));
	ctx = ibv_open_device(list[0]);
	struct ibv_port_attr pa;
	if (ctx == NULL || ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, 0, &gid0))
		DIE("opening %s: %s", ibv_get_device_name(list[0]), strerror(errno));
	mtu = pa.active_mtu;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *buf = NULL;
	if (pd == NULL || posix_memalign(&buf, page, page))
		DIE("ibv_alloc_pd: %s", strerror(errno));
	memset(buf, 0, page);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ch ? ibv_create_cq(ctx, 64, NULL, ch, 0) : NULL;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = pd ? ibv_create_srq(pd, &sa) : NULL;
	if (mr == NULL || cq == NULL || srq == NULL)
		DIE("making the objects: %s", strerror(errno));
	struct ibv_qp *a = new_qp(pd, cq, NULL), *b = new_qp(pd, cq, NULL), *c = new_qp(pd, cq, srq);
	connect_to(a, b->qp_num);
	connect_to(b, a->qp_num);
	struct ibv_sge sg = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };

	struct rdma_event_channel *cm = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct sockaddr_in lo = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (cm == NULL || rdma_create_id(cm, &id, NULL, RDMA_PS_TCP) || rdma_bind_addr(id, (struct sockaddr *)&lo) ||
	    rdma_listen(id, 1))
		DIE("an rdma_cm id on the device: %s", strerror(errno));

	for (uint64_t i = 100; i < 104; i++)
		post_recv(a, NULL, i, &sg);
	for (uint64_t i = 300; i < 303; i++)
		post_recv(c, srq, i, &sg);
	post_send(b, 200, 1, &sg);
	post_send(b, 201, 1, &sg);
	for (time_t end = time(NULL) + 60; held(cq) < 4;) {
		if (time(NULL) > end)
			DIE("the first four completions did not come (%u in the CQ)", held(cq));
		usleep(1000);
	}
	post_send(a, 104, 1, &sg); /* b has no receive: RNR, retried for ever */
	post_send(a, 105, 0, &sg);
	if (ibv_req_notify_cq(cq, 0))
		DIE("ibv_req_notify_cq");
	struct waiter cqw = { .ch = ch }, cmw = { .cm = cm };
	if (pthread_create(&cqw.t, NULL, wait_cq, &cqw) || pthread_create(&cmw.t, NULL, wait_cm, &cmw))
		DIE("pthread_create");
	usleep(100000); /* most likely asleep by now; they must wake wherever they are */
	CHECK(held(cq) == 4, "%u completions in the CQ before the kill, want 4", held(cq));
	printf("kill\n");

	pthread_join(cqw.t, NULL);
	CHECK(cqw.rc == -1 && cqw.err == EIO, "ibv_get_cq_event asleep at the kill: %d (%s), want -1 (EIO)", cqw.rc,
	      strerror(cqw.err));
	pthread_join(cmw.t, NULL);
	CHECK(cmw.rc == 0 && cmw.event == RDMA_CM_EVENT_DEVICE_REMOVAL,
	      "rdma_get_cm_event asleep at the kill: %d (%s), event %s, want DEVICE_REMOVAL", cmw.rc,
	      strerror(cmw.err), cmw.rc == 0 ? rdma_event_str((enum rdma_cm_event_type)cmw.event) : "none");
	struct rdma_cm_event *ev;
	errno = 0;
	CHECK(rdma_get_cm_event(cm, &ev) == -1 && errno == EIO, "rdma_get_cm_event after DEVICE_REMOVAL: errno %d, "
								"want EIO (blocking for ever)",
	      errno);

	/* The CQ: what it holds, then the flushes, then EIO. */
	struct want want[] = {
		{ 102, &a, 0 }, { 103, &a, 0 }, { 104, &a, 0 }, { 105, &a, 0 },
		{ 300, &c, 0 }, { 301, &c, 0 }, { 302, &c, 0 },
	};
	const size_t nwant = sizeof want / sizeof want[0];
	int success = 0, flushed = 0, rc;
	struct ibv_wc wc[3];
	while ((rc = ibv_poll_cq(cq, 3, wc)) >= 0) {
		for (int i = 0; i < rc; i++) {
			if (wc[i].status == IBV_WC_SUCCESS) {
				CHECK(flushed == 0, "completion %llu (success) after a flush", (unsigned long long)wc[i].wr_id);
				CHECK(wc[i].wr_id == 100 || wc[i].wr_id == 101 || wc[i].wr_id == 200 || wc[i].wr_id == 201,
				      "a successful completion of %llu", (unsigned long long)wc[i].wr_id);
				success++;
				continue;
			}
			CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR, "completion %llu: %s, want WR_FLUSH_ERR",
			      (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
			flushed++;
			size_t j = 0;
			while (j < nwant && want[j].id != wc[i].wr_id)
				j++;
			CHECK(j < nwant, "a flush of %llu, which was not outstanding", (unsigned long long)wc[i].wr_id);
			if (j == nwant)
				continue;
			want[j].seen++;
			CHECK(wc[i].qp_num == (*want[j].qp)->qp_num, "the flush of %llu names QP %u, want %u",
			      (unsigned long long)wc[i].wr_id, wc[i].qp_num, (*want[j].qp)->qp_num);
			CHECK(wc[i].opcode == (wc[i].wr_id >= 104 && wc[i].wr_id <= 105 ? IBV_WC_SEND : IBV_WC_RECV),
			      "the flush of %llu has opcode %d", (unsigned long long)wc[i].wr_id, wc[i].opcode);
		}
	}
	CHECK(errno == EIO, "ibv_poll_cq ended with %d (%s), want -1 (EIO)", rc, strerror(errno));
	CHECK(success == 4, "%d successful completions, want the 4 the CQ held", success);
	for (size_t j = 0; j < nwant; j++)
		CHECK(want[j].seen == 1, "request %llu flushed %d times, want once", (unsigned long long)want[j].id,
		      want[j].seen);
	errno = 0;
	CHECK(ibv_poll_cq(cq, 1, wc) == -1 && errno == EIO, "polling again: errno %d, want EIO", errno);

	/* Posts fail at once. */
	struct ibv_send_wr sw = { .wr_id = 900, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND }, *sbad = NULL;
	struct ibv_recv_wr rw = { .wr_id = 901, .sg_list = &sg, .num_sge = 1 }, *rbad = NULL;
	CHECK(ibv_post_send(a, &sw, &sbad) == EIO && sbad == &sw, "ibv_post_send on a lost device");
	CHECK(ibv_post_recv(a, &rw, &rbad) == EIO && rbad == &rw, "ibv_post_recv on a lost device");
	rbad = NULL;
	CHECK(ibv_post_srq_recv(srq, &rw, &rbad) == EIO && rbad == &rw, "ibv_post_srq_recv on a lost device");
	errno = 0;
	CHECK(ibv_poll_cq(cq, 1, wc) == -1 && errno == EIO, "the refused posts were flushed: errno %d", errno);

	/* The async fd: readable, DEVICE_FATAL once, then EIO. */
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	CHECK(poll(&p, 1, 0) == 1, "the async fd is not readable after the loss");
	struct ibv_async_event ae;
	CHECK(ibv_get_async_event(ctx, &ae) == 0 && ae.event_type == IBV_EVENT_DEVICE_FATAL,
	      "ibv_get_async_event: want DEVICE_FATAL");
	ibv_ack_async_event(&ae);
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &ae) == -1 && errno == EIO, "a second ibv_get_async_event: errno %d, want EIO",
	      errno);

	/* Cleaning up after the loss succeeds, as after DEVICE_FATAL. */
	rdma_destroy_id(id);
	rdma_destroy_event_channel(cm);
	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0 && ibv_destroy_qp(c) == 0, "ibv_destroy_qp");
	CHECK(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq");
	CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	ibv_free_device_list(list);
	free(buf);
	if (failures) {
		fprintf(stderr, "lost_peer: %d failures\n", failures);
		return 1;
	}
	printf("lost_peer: ok\n");
	return 0;
}
