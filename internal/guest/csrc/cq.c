/*
 * cq.c: completion queues, completion channels and polling.
 *
 * A CQ is a ring the daemon produces and we consume; polling touches only
 * shared memory. Arming (ibv_req_notify_cq) sets the ring's notify word;
 * the daemon then writes the CQ's doorbell pipe on the next completion. A
 * completion channel is an epoll set of its CQs' doorbells, so its fd is
 * pollable like the kernel's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "verbs_int.h"

VRDMA_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct ibv_comp_channel *ch = calloc(1, sizeof *ch);
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->fd = epoll_create1(EPOLL_CLOEXEC);
	if (ch->fd < 0) {
		free(ch);
		return NULL;
	}
	ch->context = context;
	ch->refcnt = 0;
	vrdma_live(to_vctx(context), 1); /* the context outlives it: destroying it locks context->mutex */
	return ch;
}

VRDMA_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct ibv_context *context = channel->context;
	pthread_mutex_lock(&context->mutex);
	if (channel->refcnt) {
		pthread_mutex_unlock(&context->mutex);
		return EBUSY;
	}
	pthread_mutex_unlock(&context->mutex);
	close(channel->fd);
	free(channel);
	vrdma_live(to_vctx(context), -1); /* after ibv_close_device, the last object frees the context */
	return 0;
}

/* new_cq makes the CQ of ibv_create_cq and ibv_create_cq_ex (ts: with
 * timestamped entries): NULL with errno. */
static struct vrdma_cq *new_cq(struct ibv_context *context, int cqe, void *cq_context, struct ibv_comp_channel *channel,
			       int comp_vector, int ts)
{
	struct vrdma_context *ctx = to_vctx(context);
	if (cqe <= 0 || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	struct vrdma_cq *cq = vrdma_own_zalloc(sizeof *cq); /* own.h */
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	struct vj_doc doc = {0};
	int fds[3] = {-1, -1, -1}, nfds = 3;
	int rc = vrdma_cmd(ctx, VRDMA_CMD_CREATE_CQ, &doc, NULL, 0, fds, &nfds,
			   ts ? "{\"cqe\":%d,\"timestamps\":true}" : "{\"cqe\":%d}", cqe);
	if (rc) {
		vrdma_own_free(cq);
		errno = rc;
		return NULL;
	}
	uint64_t h = 0;
	int64_t n = 0, size = 0, entries = 0, stride = VRDMA_CQE_SIZE;
	if (nfds != 3 || vj_get_u64(&doc, 0, "handle", &h) || vj_get_i64(&doc, 0, "cqe", &n) ||
	    vj_get_i64(&doc, 0, "size", &size) || vj_get_i64(&doc, 0, "entries", &entries))
		rc = EPROTO;
	vj_get_i64(&doc, 0, "stride", &stride); /* a daemon before timestamps says none: 32 */
	vrdma_doc_free(&doc);
	if (!rc && stride != (ts ? VRDMA_CQE_TS_SIZE : VRDMA_CQE_SIZE))
		rc = ts && stride == VRDMA_CQE_SIZE ? EOPNOTSUPP : EPROTO; /* a daemon without timestamps */
	cq->ring = (struct vrdma_ring){.off = 0, .entries = (uint32_t)entries, .stride = (uint32_t)stride};
	if (!rc && (entries <= 0 || entries > VRDMA_MAX_RING_ENTRIES || (entries & (entries - 1)) || size <= 0 ||
		    (uint64_t)size < VRDMA_RING_HEADER_SIZE + (uint64_t)entries * (uint64_t)stride))
		rc = EPROTO;
	cq->size = (size_t)size;
	rc = vrdma_take_region(ctx, rc, fds, nfds, cq->size, &cq->mem, VRDMA_CMD_DESTROY_CQ, (uint32_t)h);
	if (rc) {
		vrdma_own_free(cq);
		errno = rc;
		return NULL;
	}
	cq->rfd = fds[1];
	/* The daemon's end is the only writer: when the session ends (the
	 * daemon gone), the pipe reads as ended and the channel wakes. */
	close(fds[2]);
	fcntl(cq->rfd, F_SETFL, O_NONBLOCK);
	cq->handle = (uint32_t)h;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	cq->ibcq.context = context;
	cq->ibcq.channel = channel;
	cq->ibcq.cq_context = cq_context;
	cq->ibcq.handle = cq->handle;
	cq->ibcq.cqe = (int)n;
	pthread_mutex_init(&cq->ibcq.mutex, NULL);
	pthread_cond_init(&cq->ibcq.cond, NULL);
	if (channel) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = cq};
		if (epoll_ctl(channel->fd, EPOLL_CTL_ADD, cq->rfd, &ev)) {
			rc = errno;
			vrdma_cmd_simple(ctx, VRDMA_CMD_DESTROY_CQ, cq->handle);
			munmap(cq->mem, cq->size);
			close(cq->rfd);
			vrdma_own_free(cq);
			errno = rc;
			return NULL;
		}
		pthread_mutex_lock(&context->mutex);
		channel->refcnt++;
		pthread_mutex_unlock(&context->mutex);
	}
	vrdma_track(ctx, cq, VRDMA_OBJ_CQ);
	vrdma_live(ctx, 1);
	return cq;
}

VRDMA_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
					  struct ibv_comp_channel *channel, int comp_vector)
{
	struct vrdma_cq *cq = new_cq(context, cqe, cq_context, channel, comp_vector, 0);
	return cq ? &cq->ibcq : NULL;
}

VRDMA_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct vrdma_cq *cq = (struct vrdma_cq *)ibcq;
	struct vrdma_context *ctx = to_vctx(ibcq->context);
	/* Off the channel first: the daemon's end of the doorbell closes with
	 * the CQ, and a thread asleep on the channel must not take that for the
	 * end of the session. */
	if (ibcq->channel)
		epoll_ctl(ibcq->channel->fd, EPOLL_CTL_DEL, cq->rfd, NULL);
	int rc = vrdma_cmd_simple(ctx, VRDMA_CMD_DESTROY_CQ, cq->handle);
	if (vrdma_destroy_kept(ctx, rc)) {
		if (ibcq->channel) {
			struct epoll_event ev = {.events = EPOLLIN, .data.ptr = cq};
			epoll_ctl(ibcq->channel->fd, EPOLL_CTL_ADD, cq->rfd, &ev);
		}
		return rc; /* EBUSY while a QP uses it */
	}
	vrdma_untrack(ctx, cq, VRDMA_OBJ_CQ);
	if (ibcq->channel) {
		pthread_mutex_lock(&ibcq->context->mutex);
		ibcq->channel->refcnt--;
		pthread_mutex_unlock(&ibcq->context->mutex);
	}
	munmap(cq->mem, cq->size);
	close(cq->rfd);
	pthread_spin_destroy(&cq->lock);
	vrdma_own_free(cq);
	vrdma_live(ctx, -1);
	return 0;
}

/* ibv_resize_cq: the daemon makes a ring of the new size, copies the
 * completions not yet polled to the same indices in it and hands it over
 * (docs/design/cq-resize.md). The CQ's lock is held throughout, as rxe
 * does: no poll reads the old ring and no arming writes it while the daemon
 * copies it; the consumer index carries over unchanged. */
VRDMA_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct vrdma_cq *cq = (struct vrdma_cq *)ibcq;
	struct vrdma_context *ctx = to_vctx(ibcq->context);
	if (cqe <= 0)
		return EINVAL;
	pthread_spin_lock(&cq->lock);
	if (cq->frozen) {
		pthread_spin_unlock(&cq->lock);
		return EIO; /* the daemon is gone */
	}
	struct vj_doc doc = {0};
	int fds[1] = {-1}, nfds = 1;
	int rc = vrdma_cmd(ctx, VRDMA_CMD_RESIZE_CQ, &doc, NULL, 0, fds, &nfds, "{\"handle\":%u,\"cqe\":%d}",
			   cq->handle, cqe);
	if (rc) {
		pthread_spin_unlock(&cq->lock);
		return rc;
	}
	int64_t n = 0, size = 0, entries = 0;
	if (nfds != 1 || vj_get_i64(&doc, 0, "cqe", &n) || vj_get_i64(&doc, 0, "size", &size) ||
	    vj_get_i64(&doc, 0, "entries", &entries) || entries <= 0 || entries > VRDMA_MAX_RING_ENTRIES ||
	    (entries & (entries - 1)) || n < cqe || n > entries || size <= 0 ||
	    (uint64_t)size < VRDMA_RING_HEADER_SIZE + (uint64_t)entries * cq->ring.stride)
		rc = EPROTO;
	vrdma_doc_free(&doc);
	uint8_t *mem = NULL;
	rc = vrdma_take_region(ctx, rc, fds, nfds, (size_t)size, &mem, 0, 0); /* closes the descriptors */
	if (rc) {
		/* The daemon writes the new ring now, which we do not have:
		 * the CQ is lost to this process, as its completions. */
		pthread_spin_unlock(&cq->lock);
		vrdma_log("ibv_resize_cq: the daemon's new ring could not be taken (%s): the CQ no longer completes", strerror(rc));
		return rc;
	}
	munmap(cq->mem, cq->size);
	cq->mem = mem;
	cq->size = (size_t)size;
	cq->ring.entries = (uint32_t)entries;
	cq->ibcq.cqe = (int)n;
	pthread_spin_unlock(&cq->lock);
	return 0;
}

/* Takes up to num completions from cq's ring into wc: how many, or -1 when
 * the ring is corrupt or overran. */
static int poll_ring(struct vrdma_cq *cq, int num, struct ibv_wc *wc)
{
	int n = 0;
	pthread_spin_lock(&cq->lock);
	uint32_t prod = cq->frozen ? cq->lost_prod : vrdma_load32(cq->mem, VRDMA_RING_PROD_OFF);
	uint32_t avail = prod - cq->cons;
	if (avail > cq->ring.entries) {
		pthread_spin_unlock(&cq->lock);
		vrdma_debug("poll_cq: completion ring indices are corrupt");
		return -1;
	}
	while (n < num && (uint32_t)n < avail) {
		const uint8_t *e = vrdma_slot(cq->mem, &cq->ring, cq->cons);
		struct ibv_wc *w = &wc[n];
		memset(w, 0, sizeof *w);
		w->wr_id = get_le64(e + VRDMA_CQE_WR_ID);
		w->qp_num = get_le32(e + VRDMA_CQE_QP_NUM);
		w->byte_len = get_le32(e + VRDMA_CQE_BYTE_LEN);
		w->wc_flags = e[VRDMA_CQE_FLAGS];
		if (w->wc_flags & IBV_WC_WITH_INV)
			w->invalidated_rkey = get_le32(e + VRDMA_CQE_IMM); /* host order, unlike imm_data */
		else
			w->imm_data = htonl(get_le32(e + VRDMA_CQE_IMM));
		w->src_qp = get_le32(e + VRDMA_CQE_SRC_QP);
		w->opcode = (enum ibv_wc_opcode)e[VRDMA_CQE_OPCODE];
		w->status = (enum ibv_wc_status)e[VRDMA_CQE_STATUS];
		w->sl = e[VRDMA_CQE_SL];
		w->pkey_index = get_le16(e + VRDMA_CQE_PKEY_INDEX);
		if (cq->ring.stride >= VRDMA_CQE_TS_SIZE) {
			cq->cur_ts = get_le64(e + VRDMA_CQE_TIMESTAMP);
			cq->cur_wallclock = get_le64(e + VRDMA_CQE_WALLCLOCK);
			cq->cur_stamped = 1;
		}
		cq->cons++;
		n++;
	}
	if (n) {
		vrdma_store32(cq->mem, VRDMA_RING_CONS_OFF, cq->cons);
		cq->empty_polls = 0;
	} else if (vrdma_load32(cq->mem, VRDMA_RING_ERR_OFF)) {
		pthread_spin_unlock(&cq->lock);
		vrdma_debug("poll_cq: completions were lost because the CQ was full: create a larger CQ or poll more often");
		return -1;
	}
	pthread_spin_unlock(&cq->lock);
	return n;
}

void vrdma_cq_clean(struct ibv_cq *ibcq, uint32_t qpn)
{
	struct vrdma_cq *cq = (struct vrdma_cq *)ibcq;
	if (cq == NULL)
		return;
	pthread_spin_lock(&cq->lock);
	uint32_t prod = cq->frozen ? cq->lost_prod : vrdma_load32(cq->mem, VRDMA_RING_PROD_OFF);
	uint32_t avail = prod - cq->cons;
	if (cq->frozen || avail == 0 || avail > cq->ring.entries) {
		pthread_spin_unlock(&cq->lock);
		return;
	}
	/* As mlx5's cq clean: from the newest down, keep the other QPs'
	 * completions packed towards the producer and move the consumer
	 * past the removed ones. Only slots the daemon has written and not
	 * yet been given back are touched; it may write more at prod meanwhile. */
	uint32_t removed = 0;
	for (uint32_t i = prod; i != cq->cons;) {
		i--;
		uint8_t *e = vrdma_slot(cq->mem, &cq->ring, i);
		if (get_le32(e + VRDMA_CQE_QP_NUM) == qpn)
			removed++;
		else if (removed)
			memcpy(vrdma_slot(cq->mem, &cq->ring, i + removed), e, cq->ring.stride);
	}
	if (removed) {
		cq->cons += removed;
		vrdma_store32(cq->mem, VRDMA_RING_CONS_OFF, cq->cons);
	}
	pthread_spin_unlock(&cq->lock);
}

/* poll_lost is poll_cq on a lost device (lost.c): what the ring held when
 * the loss was recorded (read again, up to the producer index then), then
 * flushes, then EIO. n completions are in wc already. */
static int poll_lost(struct vrdma_cq *cq, int n, int num, struct ibv_wc *wc)
{
	vrdma_freeze(to_vctx(cq->ibcq.context));
	int r = poll_ring(cq, num - n, wc + n);
	if (r < 0)
		return n ? n : -1;
	n += r;
	if (n < num)
		n += vrdma_flush_cq(cq, num - n, wc + n);
	if (n == 0) {
		errno = EIO;
		return -1;
	}
	return n;
}

int vrdma_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
	struct vrdma_cq *cq = (struct vrdma_cq *)ibcq;
	struct vrdma_context *ctx = to_vctx(ibcq->context);
	int n = poll_ring(cq, num, wc);
	if (n < 0 || n == num)
		return n;
	if (vrdma_is_lost(ctx))
		return poll_lost(cq, n, num, wc);
	/* Applications spin on an empty CQ; the daemon that fills it needs a
	 * core too. With every core busy a spinner that never yields costs
	 * the daemon a whole scheduler slice per hand-off; a yield with
	 * nobody waiting costs well under a microsecond. Now and then the
	 * spinner also looks whether the daemon is still there: a dead one
	 * completes nothing, and the program would spin for ever.
	 *
	 * The yield can last a scheduler slice, milliseconds, while the peer
	 * and the daemon run: the ring is read again after it, so that "empty"
	 * is what the CQ held when the call returns, not before the yield. A
	 * program reads its CQ, then its other sources: libfabric's ofi_rxm
	 * polls the CQ and, finding it empty, reads its rdma_cm events; a
	 * stale empty let it see the peer's disconnection before a receive
	 * completed ahead of it, and libfabric 1.17 then reposted that
	 * receive on the endpoint it had just closed (SIGSEGV at fi_close,
	 * TestToolFiPingpong; poll_yield_test.c). */
	if (n == 0 && ++cq->empty_polls % VRDMA_POLL_YIELD_EVERY == 0) {
		if (cq->empty_polls % VRDMA_LOST_CHECK_EVERY == 0 && vrdma_check_lost(ctx))
			return poll_lost(cq, 0, num, wc);
		sched_yield();
		n = poll_ring(cq, num, wc);
	}
	return n;
}

int vrdma_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct vrdma_cq *cq = (struct vrdma_cq *)ibcq;
	(void)solicited_only; /* any completion wakes: a superset of solicited-only */
	pthread_spin_lock(&cq->lock); /* the ring, not one ibv_resize_cq is replacing */
	vrdma_publish32(cq->mem, VRDMA_RING_NOTIFY_OFF, 1); /* before the poll that follows */
	pthread_spin_unlock(&cq->lock);
	return 0;
}

/* restarts reports whether a wait that a signal interrupted goes on, as a
 * read() of the kernel's completion channel does when the signal's handler
 * has SA_RESTART; without it the read fails with EINTR (qperf ends its timed
 * tests so). epoll_wait never restarts and does not say which signal came:
 * the wait goes on when every caught signal's handler has SA_RESTART (so a
 * stop and continue, which interrupts epoll_wait but not read(), goes on
 * too). The faults' signals do not count: they come from an instruction, not
 * to a process waiting (sanitizers catch them without SA_RESTART). Only
 * interrupted waits pay for the look; errno is kept. */
static int restarts(void)
{
	int saved = errno, all = 1;
	for (int sig = 1; sig < NSIG && all; sig++) {
		struct sigaction sa;
		switch (sig) {
		case SIGKILL:
		case SIGSTOP:
		case SIGSEGV:
		case SIGBUS:
		case SIGFPE:
		case SIGILL:
		case SIGTRAP:
		case SIGSYS:
			continue;
		}
		if (sigaction(sig, NULL, &sa) < 0)
			continue;
		int caught = (sa.sa_flags & SA_SIGINFO) || (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN);
		if (caught && !(sa.sa_flags & SA_RESTART))
			all = 0;
	}
	errno = saved;
	return all;
}

VRDMA_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	int flags = fcntl(channel->fd, F_GETFL);
	int timeout = flags >= 0 && (flags & O_NONBLOCK) ? 0 : -1;
	struct epoll_event ev;
	int n;
	do
		n = epoll_wait(channel->fd, &ev, 1, timeout);
	while (n < 0 && errno == EINTR && restarts());
	if (n < 0)
		return -1;
	if (n == 0) {
		errno = EAGAIN;
		return -1;
	}
	struct vrdma_cq *q = ev.data.ptr;
	char buf[64];
	ssize_t r;
	while ((r = read(q->rfd, buf, sizeof buf)) > 0)
		;
	if (r == 0) {
		/* The daemon closed its end: the session is over (the daemon
		 * is gone), as a disassociated device's channel says; polls
		 * then deliver what the CQ holds and the flushes (lost.c). */
		vrdma_note_lost(to_vctx(q->ibcq.context));
		errno = EIO;
		return -1;
	}
	*cq = &q->ibcq;
	*cq_context = q->ibcq.cq_context;
	return 0;
}

VRDMA_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* ---- extended CQs (ibv_create_cq_ex) ----
 * An extended CQ is an ordinary one whose ibv_cq_ex carries the polling
 * functions: ibv_start_poll and ibv_next_poll take one completion with
 * ibv_poll_cq's own code (lost daemon, yields and all) into cq->cur, which
 * the ibv_wc_read_* functions read. No lock is held between start and end,
 * so ibv_end_poll has nothing to do; the consumer index moves with each
 * completion taken. The fields are rdma_rxe's (rdma-core v44) and the
 * completion timestamps (docs/design/cq-timestamps.md): no VLANs, flow
 * tags or tag matching. */
#define VRDMA_CQ_EX_TS_FLAGS (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
#define VRDMA_CQ_EX_WC_FLAGS                                                                                  \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |       \
	 IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS | VRDMA_CQ_EX_TS_FLAGS)

/* vrdma_clock_ns reads clock in nanoseconds: the device's free-running
 * clock is CLOCK_MONOTONIC at 1 GHz (hca_core_clock), its wall clock
 * CLOCK_REALTIME. */
uint64_t vrdma_clock_ns(clockid_t clock)
{
	struct timespec t;
	if (clock_gettime(clock, &t))
		return 0;
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static inline struct vrdma_cq *to_vcqx(struct ibv_cq_ex *cqx) { return vrdma_container_of(cqx, struct vrdma_cq, cqx); }

/* cqx_take takes the next completion into cq->cur: 0, ENOENT when there is
 * none, EIO when the CQ failed (overrun, corrupt ring, daemon gone). */
static int cqx_take(struct vrdma_cq *cq)
{
	cq->cur_stamped = 0;
	int n = vrdma_poll_cq(&cq->ibcq, 1, &cq->cur);
	if (n == 0)
		return ENOENT;
	if (n < 0)
		return EIO;
	if (!cq->cur_stamped && cq->ring.stride >= VRDMA_CQE_TS_SIZE) {
		/* A flush the library made (lost.c): completed now. */
		cq->cur_ts = vrdma_clock_ns(CLOCK_MONOTONIC);
		cq->cur_wallclock = vrdma_clock_ns(CLOCK_REALTIME);
	}
	cq->cqx.status = cq->cur.status;
	cq->cqx.wr_id = cq->cur.wr_id;
	return 0;
}

static int cqx_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	if (attr && attr->comp_mask)
		return EINVAL; /* "must be 0" */
	return cqx_take(to_vcqx(cqx));
}

static int cqx_next_poll(struct ibv_cq_ex *cqx) { return cqx_take(to_vcqx(cqx)); }
static void cqx_end_poll(struct ibv_cq_ex *cqx) { (void)cqx; }
static enum ibv_wc_opcode cqx_read_opcode(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur.opcode; }
static uint32_t cqx_read_vendor_err(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur.vendor_err; }
static uint32_t cqx_read_byte_len(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur.byte_len; }
static __be32 cqx_read_imm_data(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur.imm_data; }
static uint32_t cqx_read_qp_num(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur.qp_num; }
static uint32_t cqx_read_src_qp(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur.src_qp; }
static unsigned int cqx_read_wc_flags(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur.wc_flags; }
static uint32_t cqx_read_slid(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur.slid; }
static uint8_t cqx_read_sl(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur.sl; }
static uint8_t cqx_read_dlid_path_bits(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur.dlid_path_bits; }
static uint64_t cqx_read_completion_ts(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur_ts; }
static uint64_t cqx_read_completion_wallclock_ns(struct ibv_cq_ex *cqx) { return to_vcqx(cqx)->cur_wallclock; }

/* vrdma_create_cq_ex is the context's create_cq_ex (ibv_create_cq_ex).
 * As rxe, wc_flags it cannot fill, comp_mask bits rdma-core's
 * ibv_cmd_create_cq_ex does not know and create flags but SINGLE_THREADED
 * (rxe's kernel refuses IGNORE_OVERRUN) are EOPNOTSUPP. A parent domain
 * (IBV_CQ_INIT_ATTR_MASK_PD) is accepted and changes nothing: its
 * allocators are never called (mem.c, docs/design/parent-domain.md). */
struct ibv_cq_ex *vrdma_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
	if ((attr->wc_flags & ~(uint64_t)VRDMA_CQ_EX_WC_FLAGS) ||
	    (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		vrdma_debug("ibv_create_cq_ex: wc_flags 0x%llx (supported 0x%x), comp_mask 0x%x, flags 0x%x: not supported",
			    (unsigned long long)attr->wc_flags, VRDMA_CQ_EX_WC_FLAGS, attr->comp_mask, attr->flags);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->cqe > INT_MAX) {
		errno = EINVAL;
		return NULL;
	}
	struct vrdma_cq *cq = new_cq(context, (int)attr->cqe, attr->cq_context, attr->channel, (int)attr->comp_vector,
				     (attr->wc_flags & VRDMA_CQ_EX_TS_FLAGS) != 0);
	if (!cq)
		return NULL;
	struct ibv_cq_ex *x = &cq->cqx;
	x->comp_mask = 0;
	x->start_poll = cqx_start_poll;
	x->next_poll = cqx_next_poll;
	x->end_poll = cqx_end_poll;
	x->read_opcode = cqx_read_opcode;
	x->read_vendor_err = cqx_read_vendor_err;
	x->read_byte_len = cqx_read_byte_len;
	x->read_imm_data = cqx_read_imm_data;
	x->read_qp_num = cqx_read_qp_num;
	x->read_src_qp = cqx_read_src_qp;
	x->read_wc_flags = cqx_read_wc_flags;
	x->read_slid = cqx_read_slid;
	x->read_sl = cqx_read_sl;
	x->read_dlid_path_bits = cqx_read_dlid_path_bits;
	if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		x->read_completion_ts = cqx_read_completion_ts;
	if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		x->read_completion_wallclock_ns = cqx_read_completion_wallclock_ns;
	return x;
}
