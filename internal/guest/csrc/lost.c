/*
 * lost.c: a lost daemon (docs/design/lost-daemon.md).
 *
 * When the daemon goes away (its end of the command socket closes: it
 * exited, was killed, or refused the session), nothing will execute a
 * posted request or complete one again. As a device that resets, the
 * context then fails every post with EIO, and each CQ delivers what its
 * ring already holds, then one IBV_WC_WR_FLUSH_ERR completion for every
 * request still outstanding on the queues that complete to it, then fails
 * with EIO; the async fd reports IBV_EVENT_DEVICE_FATAL (device.c).
 *
 * Whoever notices first records the loss (vrdma_note_lost): a command that
 * finds the socket closed, a doorbell write that finds its pipe closed,
 * ibv_get_cq_event finding a doorbell ended, and ibv_poll_cq, which looks
 * at the socket (one poll(2), no read) once every VRDMA_LOST_CHECK_EVERY
 * polls in a row that found nothing. The data path pays one load of the
 * flag otherwise. Recording it also shuts the command socket down
 * (vrdma_chan_end): the daemon's descriptors close one by one as it dies,
 * and the async fd must be readable, with IBV_EVENT_DEVICE_FATAL, as soon
 * as any call has reported the loss, not only once the socket's own end
 * arrives.
 *
 * Outstanding is what the daemon had not finished: the send requests from
 * the send queue's done index (every request before it has its completion
 * in the CQ, abi/qpheader.go) to the library's producer index, and the
 * receives from the receive ring's consumer index (the daemon had not
 * taken them) to the producer index. They are read once, on the first
 * poll after the loss, with each CQ's producer index: a daemon that is
 * still running (the session ended on a protocol fault) may write more, but
 * the library reads no further, so no request is both flushed and
 * completed after it flushed.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "verbs_int.h"

void vrdma_note_lost(struct vrdma_context *ctx)
{
	int zero = 0;
	if (!__atomic_compare_exchange_n(&ctx->lost, &zero, 1, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		return;
	vrdma_debug("%s: the vrdma daemon went away: the device is lost (DEVICE_FATAL)", ctx->dev->dev.name);
	/* The async fd must say so now, not when the command socket's own end
	 * comes: a dying daemon's descriptors close one by one, and a program
	 * that saw a CQ fail with EIO may poll the async fd at once. */
	vrdma_chan_end(&ctx->chan);
}

int vrdma_check_lost(struct vrdma_context *ctx)
{
	if (vrdma_is_lost(ctx))
		return 1;
	if (__atomic_load_n(&ctx->chan.dead, __ATOMIC_ACQUIRE)) {
		vrdma_note_lost(ctx);
		return 1;
	}
	struct pollfd p = {.fd = __atomic_load_n(&ctx->chan.fd, __ATOMIC_RELAXED), .events = POLLRDHUP};
	if (p.fd < 0 || poll(&p, 1, 0) <= 0 || !(p.revents & (POLLHUP | POLLRDHUP | POLLERR)))
		return 0;
	vrdma_note_lost(ctx);
	return 1;
}

/* The work completion opcode of a send request's opcode. */
static enum ibv_wc_opcode send_wc_opcode(uint8_t op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
	default:
		return IBV_WC_SEND;
	}
}

static void flushed(struct ibv_wc *w, uint64_t wr_id, enum ibv_wc_opcode op, uint32_t qpn)
{
	memset(w, 0, sizeof *w);
	w->wr_id = wr_id;
	w->status = IBV_WC_WR_FLUSH_ERR;
	w->opcode = op;
	w->qp_num = qpn;
}

/* The first index to flush of a ring whose producer is prod: from, unless
 * the daemon's word (not trusted) is impossible: ahead of prod (more
 * finished than was posted) or more than a ring behind it. Nothing is
 * outstanding then, rather than a whole ring of finished requests. */
static uint32_t flush_start(uint32_t from, uint32_t prod, uint32_t entries)
{
	return prod - from > entries ? prod : from;
}

/* Sets every queue's cursor where the daemon left it, and freezes every
 * CQ at its producer index: a completion written after that (a daemon
 * still running after a protocol fault or a refusal) is never read, as its
 * request may be flushed already. The queues' indices are read first, so
 * the completions of the requests before them are in the frozen rings.
 * objs_mu held. */
static void set_cursors(struct vrdma_context *ctx)
{
	for (struct vrdma_qp *q = ctx->qps; q; q = q->next) {
		pthread_spin_lock(&q->slock);
		q->flush_sq = flush_start(vrdma_load32(q->mem, VRDMA_SQ_DONE_OFF), q->sq_prod, q->sq.entries);
		pthread_spin_unlock(&q->slock);
		if (!q->qpx.qp_base.srq) {
			pthread_spin_lock(&q->rlock);
			q->flush_rq = flush_start(vrdma_load32(q->mem, q->rq.off + VRDMA_RING_CONS_OFF), q->rq_prod,
						  q->rq.entries);
			pthread_spin_unlock(&q->rlock);
		}
	}
	for (struct vrdma_srq *s = ctx->srqs; s; s = s->next) {
		pthread_spin_lock(&s->lock);
		s->flush = flush_start(vrdma_load32(s->mem, s->ring.off + VRDMA_RING_CONS_OFF), s->prod, s->ring.entries);
		pthread_spin_unlock(&s->lock);
	}
	for (struct vrdma_cq *c = ctx->cqs; c; c = c->next) {
		pthread_spin_lock(&c->lock);
		c->lost_prod = vrdma_load32(c->mem, VRDMA_RING_PROD_OFF);
		c->frozen = 1;
		pthread_spin_unlock(&c->lock);
	}
	ctx->flush_ready = 1;
}

void vrdma_freeze(struct vrdma_context *ctx)
{
	pthread_mutex_lock(&ctx->objs_mu);
	if (!ctx->flush_ready)
		set_cursors(ctx);
	pthread_mutex_unlock(&ctx->objs_mu);
}

/* Flushes q's send queue into wc (room for num); returns how many. */
static int flush_sq(struct vrdma_qp *q, int num, struct ibv_wc *wc)
{
	int n = 0;
	pthread_spin_lock(&q->slock);
	for (; n < num && q->flush_sq != q->sq_prod; q->flush_sq++, n++) {
		const uint8_t *s = vrdma_slot(q->mem, &q->sq, q->flush_sq);
		flushed(&wc[n], get_le64(s + VRDMA_SWQE_WR_ID), send_wc_opcode(s[VRDMA_SWQE_OPCODE]),
			q->qpx.qp_base.qp_num);
	}
	pthread_spin_unlock(&q->slock);
	return n;
}

/* Flushes a receive ring from *cursor to prod, as completions of QP qpn. */
static int flush_rq(uint8_t *mem, const struct vrdma_ring *r, uint32_t *cursor, uint32_t prod, uint32_t qpn, int num,
		    struct ibv_wc *wc)
{
	int n = 0;
	for (; n < num && *cursor != prod; (*cursor)++, n++)
		flushed(&wc[n], get_le64(vrdma_slot(mem, r, *cursor) + VRDMA_RWQE_WR_ID), IBV_WC_RECV, qpn);
	return n;
}

int vrdma_flush_cq(struct vrdma_cq *cq, int num, struct ibv_wc *wc)
{
	struct vrdma_context *ctx = to_vctx(cq->ibcq.context);
	int n = 0;
	pthread_mutex_lock(&ctx->objs_mu);
	if (!ctx->flush_ready)
		set_cursors(ctx);
	for (struct vrdma_qp *q = ctx->qps; q && n < num; q = q->next) {
		struct ibv_qp *qp = &q->qpx.qp_base;
		if (qp->send_cq == &cq->ibcq)
			n += flush_sq(q, num - n, wc + n);
		if (qp->recv_cq != &cq->ibcq || n == num)
			continue;
		if (qp->srq) {
			/* An SRQ's requests belong to no QP: they flush, once,
			 * to whichever receive CQ of its QPs is polled first,
			 * in the name of the first of its QPs found there. */
			struct vrdma_srq *s = (struct vrdma_srq *)qp->srq;
			pthread_spin_lock(&s->lock);
			n += flush_rq(s->mem, &s->ring, &s->flush, s->prod, qp->qp_num, num - n, wc + n);
			pthread_spin_unlock(&s->lock);
		} else {
			pthread_spin_lock(&q->rlock);
			n += flush_rq(q->mem, &q->rq, &q->flush_rq, q->rq_prod, qp->qp_num, num - n, wc + n);
			pthread_spin_unlock(&q->rlock);
		}
	}
	/* An XRC SRQ's requests flush to its own CQ, in the name of no QP
	 * (the target a request would have come through is not known). */
	for (struct vrdma_srq *s = ctx->srqs; s && n < num; s = s->next) {
		if (s->xcq != &cq->ibcq)
			continue;
		pthread_spin_lock(&s->lock);
		n += flush_rq(s->mem, &s->ring, &s->flush, s->prod, 0, num - n, wc + n);
		pthread_spin_unlock(&s->lock);
	}
	pthread_mutex_unlock(&ctx->objs_mu);
	return n;
}
