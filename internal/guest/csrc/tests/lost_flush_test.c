/*
 * lost_flush_test.c: ibv_poll_cq on a lost device (lost.c,
 * docs/design/lost-daemon.md) against rings in memory, with a daemon that
 * is not trusted and may still be running (the session ended on a
 * protocol fault): a completion it writes after the loss is never
 * delivered, and a done index ahead of the producer flushes nothing. An
 * XRC SRQ's receives flush to the SRQ's own CQ.
 */
#include "verbs_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "no_daemon.h"

#include "check.h"

#define RING_ENTRIES 4
#define SQ_STRIDE (VRDMA_SEND_WQE_HEADER + VRDMA_SGE_SIZE)
#define RQ_STRIDE (VRDMA_RECV_WQE_HEADER + VRDMA_SGE_SIZE)
#define SQ_OFF 0
#define RQ_OFF (VRDMA_RING_HEADER_SIZE + RING_ENTRIES * SQ_STRIDE)
#define ROUND64(n) (((n) + 63) / 64 * 64)
#define QP_MEM ROUND64(RQ_OFF + VRDMA_RING_HEADER_SIZE + RING_ENTRIES * RQ_STRIDE)
#define CQ_MEM ROUND64(VRDMA_RING_HEADER_SIZE + RING_ENTRIES * VRDMA_CQE_SIZE)

static struct vrdma_context ctx = { .chan = { .fd = -1 } };
static struct vrdma_qp qp;
static struct vrdma_cq cq;

/* A lost context with one QP whose queues complete to one CQ, and nsends
 * sends posted (wr_id 100, 101, ...). */
static void setup(uint32_t nsends)
{
	memset(&ctx, 0, sizeof ctx);
	memset(&qp, 0, sizeof qp);
	memset(&cq, 0, sizeof cq);
	ctx.chan.fd = -1;
	ctx.lost = 1;
	pthread_mutex_init(&ctx.objs_mu, NULL);
	qp.qpx.qp_base.context = &ctx.vctx.context;
	cq.ibcq.context = &ctx.vctx.context;
	qp.mem = aligned_alloc(64, QP_MEM);
	cq.mem = aligned_alloc(64, CQ_MEM);
	if (!qp.mem || !cq.mem) {
		perror("setup");
		exit(2);
	}
	memset(qp.mem, 0, QP_MEM);
	memset(cq.mem, 0, CQ_MEM);
	qp.qpx.qp_base.qp_type = IBV_QPT_RC;
	qp.qpx.qp_base.qp_num = 7;
	qp.qpx.qp_base.send_cq = qp.qpx.qp_base.recv_cq = &cq.ibcq;
	qp.sq = (struct vrdma_ring){ .off = SQ_OFF, .entries = RING_ENTRIES, .stride = SQ_STRIDE };
	qp.rq = (struct vrdma_ring){ .off = RQ_OFF, .entries = RING_ENTRIES, .stride = RQ_STRIDE };
	pthread_spin_init(&qp.slock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp.rlock, PTHREAD_PROCESS_PRIVATE);
	cq.ring = (struct vrdma_ring){ .off = 0, .entries = RING_ENTRIES, .stride = VRDMA_CQE_SIZE };
	pthread_spin_init(&cq.lock, PTHREAD_PROCESS_PRIVATE);
	for (uint32_t i = 0; i < nsends; i++) {
		uint8_t *s = vrdma_slot(qp.mem, &qp.sq, i);
		put_le64(s + VRDMA_SWQE_WR_ID, 100 + i);
		s[VRDMA_SWQE_OPCODE] = IBV_WR_SEND;
	}
	qp.sq_prod = nsends;
	ctx.qps = &qp;
	ctx.cqs = &cq;
}

static void teardown(void)
{
	pthread_spin_destroy(&qp.slock);
	pthread_spin_destroy(&qp.rlock);
	pthread_spin_destroy(&cq.lock);
	pthread_mutex_destroy(&ctx.objs_mu);
	free(qp.mem);
	free(cq.mem);
}

/* The daemon completes send wr_id successfully. */
static void complete(uint64_t wr_id)
{
	uint32_t prod = vrdma_load32(cq.mem, VRDMA_RING_PROD_OFF);
	uint8_t *e = vrdma_slot(cq.mem, &cq.ring, prod);
	memset(e, 0, VRDMA_CQE_SIZE);
	put_le64(e + VRDMA_CQE_WR_ID, wr_id);
	put_le32(e + VRDMA_CQE_QP_NUM, 7);
	e[VRDMA_CQE_OPCODE] = IBV_WC_SEND;
	e[VRDMA_CQE_STATUS] = IBV_WC_SUCCESS;
	vrdma_store32(cq.mem, VRDMA_RING_PROD_OFF, prod + 1);
}

/* A completion written after the library flushed its request is not
 * delivered: each request ends once. */
static void test_no_completion_after_the_flush(void)
{
	struct ibv_wc wc[8];

	setup(2);
	complete(100); /* held when the loss is noticed: delivered */
	vrdma_store32(qp.mem, VRDMA_SQ_DONE_OFF, 1);
	int n = vrdma_poll_cq(&cq.ibcq, 8, wc);
	CHECK(n == 2, "poll on a lost device = %d, want the held completion and one flush", n);
	CHECK(n < 1 || (wc[0].wr_id == 100 && wc[0].status == IBV_WC_SUCCESS), "first: wr_id %llu status %d",
	      (unsigned long long)wc[0].wr_id, wc[0].status);
	CHECK(n < 2 || (wc[1].wr_id == 101 && wc[1].status == IBV_WC_WR_FLUSH_ERR), "second: wr_id %llu status %d",
	      (unsigned long long)wc[1].wr_id, wc[1].status);
	/* The daemon, still running, completes the flushed request. */
	complete(101);
	vrdma_store32(qp.mem, VRDMA_SQ_DONE_OFF, 2);
	errno = 0;
	n = vrdma_poll_cq(&cq.ibcq, 8, wc);
	CHECK(n == -1 && errno == EIO, "poll after the flushes = %d (wr_id %llu), errno %d: want -1, EIO; a request "
				       "flushed is completed again",
	      n, n > 0 ? (unsigned long long)wc[0].wr_id : 0ULL, errno);
	teardown();
}

/* A done index ahead of the producer index (hostile, or stale) flushes
 * nothing, not a ring of finished requests. */
static void test_done_ahead_of_prod(void)
{
	struct ibv_wc wc[8];

	setup(2);
	vrdma_store32(qp.mem, VRDMA_SQ_DONE_OFF, 5);
	errno = 0;
	int n = vrdma_poll_cq(&cq.ibcq, 8, wc);
	CHECK(n == -1 && errno == EIO, "done index 5 ahead of producer 2: poll = %d (errno %d), want -1, EIO", n,
	      errno);
	teardown();
}

/* An XRC SRQ's receives, which belong to no QP of the CQ, flush to the
 * SRQ's own CQ: each once, from where the daemon stopped. */
static void test_xrc_srq(void)
{
	struct ibv_wc wc[8];
	struct vrdma_srq srq;

	setup(0);
	memset(&srq, 0, sizeof srq);
	srq.mem = aligned_alloc(64, ROUND64(VRDMA_RING_HEADER_SIZE + RING_ENTRIES * RQ_STRIDE));
	if (!srq.mem) {
		perror("srq");
		exit(2);
	}
	memset(srq.mem, 0, ROUND64(VRDMA_RING_HEADER_SIZE + RING_ENTRIES * RQ_STRIDE));
	srq.ring = (struct vrdma_ring){ .off = 0, .entries = RING_ENTRIES, .stride = RQ_STRIDE };
	pthread_spin_init(&srq.lock, PTHREAD_PROCESS_PRIVATE);
	srq.srqn = 5;
	srq.xcq = &cq.ibcq;
	for (uint32_t i = 0; i < 3; i++)
		put_le64(vrdma_slot(srq.mem, &srq.ring, i) + VRDMA_RWQE_WR_ID, 200 + i);
	srq.prod = 3;
	vrdma_store32(srq.mem, VRDMA_RING_CONS_OFF, 1); /* the daemon took the first */
	qp.qpx.qp_base.recv_cq = NULL; /* the context's QP is an initiator: no receive CQ */
	ctx.srqs = &srq;
	int n = vrdma_poll_cq(&cq.ibcq, 8, wc);
	CHECK(n == 2, "poll on a lost device = %d, want the XRC SRQ's two requests flushed", n);
	for (int i = 0; i < n && i < 2; i++)
		CHECK(wc[i].wr_id == 201 + (uint64_t)i && wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].opcode == IBV_WC_RECV,
		      "flush %d: wr_id %llu status %d", i, (unsigned long long)wc[i].wr_id, wc[i].status);
	errno = 0;
	n = vrdma_poll_cq(&cq.ibcq, 8, wc);
	CHECK(n == -1 && errno == EIO, "poll after the flushes = %d, errno %d: want -1, EIO", n, errno);
	pthread_spin_destroy(&srq.lock);
	free(srq.mem);
	teardown();
}

int main(void)
{
	test_no_completion_after_the_flush();
	test_done_ahead_of_prod();
	test_xrc_srq();
	if (failures) {
		fprintf(stderr, "lost_flush_test: %d failures\n", failures);
		return 1;
	}
	printf("lost_flush_test: ok\n");
	return 0;
}
