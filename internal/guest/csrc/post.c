/*
 * post.c: the data path. Posting writes work requests into the rings the
 * daemon shares with us and publishes the producer index; only when the
 * daemon sleeps (the ring's notify word) does a doorbell byte go out. No
 * command, no allocation, no system call otherwise.
 *
 * Both posting APIs land here: ibv_post_send's linked work requests and the
 * ibv_wr_* builder of extended QPs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "verbs_int.h"

static int allowed_on(enum ibv_qp_type t, enum ibv_wr_opcode op)
{
	if (t == IBV_QPT_XRC_RECV)
		return 0; /* an XRC target has no send queue */
	if (t == IBV_QPT_XRC_SEND)
		t = IBV_QPT_RC; /* an XRC initiator sends what RC sends */
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return 1;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return t == IBV_QPT_RC || t == IBV_QPT_UC;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_ATOMIC_WRITE:
		return t == IBV_QPT_RC;
	case IBV_WR_LOCAL_INV:
	case IBV_WR_BIND_MW:
	case IBV_WR_SEND_WITH_INV:
		return t == IBV_QPT_RC || t == IBV_QPT_UC; /* as rxe */
	default:
		return 0;
	}
}

/* 1 when pwritev2 takes RWF_NOSIGNAL (newer kernels; 6.18 has it): a
 * write to a pipe without a reader then fails with EPIPE and raises no
 * SIGPIPE. -1 when it does not, 0 until the first doorbell finds out.
 * Tests set it. */
int vrdma_bell_nosignal;

#ifndef RWF_NOSIGNAL
#define RWF_NOSIGNAL 0x00000100
#endif

/* ring_fd writes a byte into a doorbell pipe (a full pipe already
 * rings). Once the daemon no longer reads it (the device was closed, or
 * the daemon is gone) the write fails with EPIPE: a closed pipe is a lost
 * daemon, the context notes it (lost.c), and the request just posted is
 * flushed. Such a write must not raise SIGPIPE, whose default action ends
 * the program. Where the kernel has RWF_NOSIGNAL the write says so, one
 * system call; elsewhere the signal is blocked around the write and the
 * one the write raised is taken back, as libraries that write to pipes
 * they do not own do, two system calls more (a thread that blocks SIGPIPE
 * itself keeps what it gets). Only when the daemon sleeps and must be
 * woken, which costs far more; but a sender that posts faster than the
 * daemon wakes rings on every post until it does: the masking was two
 * thirds of the system calls of ib_write_bw of 8 bytes.
 *
 * Only a byte written, a full pipe (EAGAIN) or a closed one (EPIPE) is an
 * answer about the pipe; any other failure of pwritev2 says nothing about
 * it (the kernel lacks the flag: EOPNOTSUPP, EINVAL, ENOSYS; or a seccomp
 * filter refuses the call, often with EPERM) and the masked write rings
 * instead. A bell not rung is a daemon asleep on a request posted. */
static void ring_fd(struct ibv_context *c, int fd)
{
	char b = 1;
	if (__atomic_load_n(&vrdma_bell_nosignal, __ATOMIC_RELAXED) >= 0) {
		struct iovec v = {.iov_base = &b, .iov_len = 1};
		ssize_t r;
		do
			r = pwritev2(fd, &v, 1, -1, RWF_NOSIGNAL);
		while (r < 0 && errno == EINTR);
		if (r >= 0 || errno == EAGAIN || errno == EPIPE) {
			__atomic_store_n(&vrdma_bell_nosignal, 1, __ATOMIC_RELAXED);
			if (r < 0 && errno == EPIPE)
				vrdma_note_lost(to_vctx(c));
			return;
		}
		int unknown = 0; /* a kernel that took the flag before keeps it */
		__atomic_compare_exchange_n(&vrdma_bell_nosignal, &unknown, -1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	}
	sigset_t pipe_set, old;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	int own = !sigismember(&old, SIGPIPE); /* then no SIGPIPE was pending for this thread */
	ssize_t w;
	do
		w = write(fd, &b, 1);
	while (w < 0 && errno == EINTR);
	if (w < 0 && errno == EPIPE) {
		vrdma_note_lost(to_vctx(c));
		struct timespec none = {0, 0};
		while (own && sigtimedwait(&pipe_set, NULL, &none) < 0 && errno == EINTR)
			;
	}
	if (own)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ring_bell rings a QP's doorbell. */
static void ring_bell(struct vrdma_qp *q) { ring_fd(q->qpx.qp_base.context, q->bell); }

static uint8_t *sq_slot(struct vrdma_qp *q)
{
	uint32_t cons = vrdma_load32(q->mem, q->sq.off + VRDMA_RING_CONS_OFF);
	if (q->sq_prod - cons >= q->sq.entries)
		return NULL;
	uint8_t *s = vrdma_slot(q->mem, &q->sq, q->sq_prod);
	memset(s, 0, VRDMA_SEND_WQE_HEADER);
	return s;
}

/* put_sges writes the SGEs; an implicit on-demand MR's lkey becomes its
 * child's (vrdma_sge_lkey). */
static void put_sges(struct ibv_context *c, uint8_t *s, const struct ibv_sge *sg, int n)
{
	uint8_t *body = s + VRDMA_SEND_WQE_HEADER;
	for (int i = 0; i < n; i++) {
		uint8_t *e = body + (size_t)i * VRDMA_SGE_SIZE;
		put_le64(e + VRDMA_SGE_ADDR, sg[i].addr);
		put_le32(e + VRDMA_SGE_LENGTH, sg[i].length);
		put_le32(e + VRDMA_SGE_LKEY, vrdma_sge_lkey(c, &sg[i]));
	}
	s[VRDMA_SWQE_NUM_SGE] = (uint8_t)n;
}

/* put_inline gathers the buffers into the entry; EINVAL past max_inline. */
static int put_inline(struct vrdma_qp *q, uint8_t *s, const struct ibv_sge *sg, int n)
{
	size_t total = 0;
	uint8_t *body = s + VRDMA_SEND_WQE_HEADER;
	for (int i = 0; i < n; i++) {
		if (sg[i].length > q->cap.max_inline_data - total)
			return EINVAL;
		memcpy(body + total, (const void *)(uintptr_t)sg[i].addr, sg[i].length);
		total += sg[i].length;
	}
	put_le32(s + VRDMA_SWQE_INLINE_LEN, (uint32_t)total);
	s[VRDMA_SWQE_FLAGS] |= VRDMA_SEND_INLINE;
	return 0;
}

/* publish_sq makes the posted requests the daemon's and rings if it
 * sleeps. A daemon asleep is woken by the first byte; until it wakes and
 * clears the notify word, every post found the word set and rang again
 * (a sender posting small requests rang on 30-80 % of its posts, each
 * time a system call). Where the daemon arms with a new value each time
 * (notify_gen), a second ring for the same value is skipped: the daemon's
 * wait that follows that arming takes the first byte, or has taken it and
 * is about to clear the word, and it reads the producer index after that
 * (docs/design/rings.md, "Doorbell generations"). A post that finds the
 * word clear forgets the value, so that a value coming round again after
 * 2^32 armings is never taken for the one rung for. */
static void publish_sq(struct vrdma_qp *q)
{
	vrdma_publish32(q->mem, q->sq.off + VRDMA_RING_PROD_OFF, q->sq_prod);
	uint32_t armed = vrdma_load32(q->mem, q->sq.off + VRDMA_RING_NOTIFY_OFF);
	if (!armed)
		q->rung = 0;
	else if (!q->notify_gen || armed != q->rung) {
		ring_bell(q);
		q->rung = armed;
	}
}

static int send_state_ok(struct vrdma_qp *q)
{
	uint32_t st = vrdma_load32(q->mem, VRDMA_QP_STATE_OFF);
	return st != IBV_QPS_RESET && st != IBV_QPS_INIT && st != IBV_QPS_RTR;
}

/* put_bind fills a bind work request's fields (the daemon's abi.OpBindMW):
 * the window by its current rkey, the new rkey, the region by its lkey
 * (none: unbind), the range and the window's access. */
static void put_bind(uint8_t *s, uint32_t mw_rkey, uint32_t rkey, const struct ibv_mw_bind_info *b)
{
	put_le32(s + VRDMA_SWQE_IMM, mw_rkey);
	put_le32(s + VRDMA_SWQE_RKEY, rkey);
	put_le32(s + VRDMA_SWQE_AH, b->mr ? b->mr->lkey : 0);
	put_le64(s + VRDMA_SWQE_REMOTE_ADDR, b->addr);
	put_le64(s + VRDMA_SWQE_COMPARE_ADD, b->mr ? b->length : 0);
	put_le64(s + VRDMA_SWQE_SWAP, b->mw_access_flags);
}

/* put_atomic_write fills an ATOMIC_WRITE's fields: its 8 bytes travel in
 * the entry (the daemon's abi.OpAtomicWrite), read now, as inline data is. */
static void put_atomic_write(uint8_t *s, uint32_t rkey, uint64_t addr, const void *value)
{
	put_le64(s + VRDMA_SWQE_REMOTE_ADDR, addr);
	put_le32(s + VRDMA_SWQE_RKEY, rkey);
	memcpy(s + VRDMA_SWQE_COMPARE_ADD, value, 8);
}

#define SEND_FLAGS (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE)

static int put_send_wr(struct vrdma_qp *q, const struct ibv_send_wr *wr)
{
	enum ibv_qp_type t = q->qpx.qp_base.qp_type;
	if (!allowed_on(t, wr->opcode) || wr->num_sge < 0)
		return EINVAL;
	int is_atomic = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
	int inl = (wr->send_flags & IBV_SEND_INLINE) && wr->opcode != IBV_WR_RDMA_READ && !is_atomic;
	if ((uint32_t)wr->num_sge > q->cap.max_send_sge)
		return EINVAL; /* inline data too, as rxe and mlx5 say */
	if (is_atomic && (wr->num_sge != 1 || wr->sg_list[0].length != 8 || (wr->wr.atomic.remote_addr & 7)))
		return EINVAL; /* rxe checks the alignment when posting too */
	if (wr->opcode == IBV_WR_ATOMIC_WRITE &&
	    (wr->num_sge != 1 || wr->sg_list[0].length != 8 || (wr->wr.rdma.remote_addr & 7)))
		return EINVAL; /* the 8 bytes are the one SGE's, at an aligned address */
	if (t == IBV_QPT_UD && !wr->wr.ud.ah)
		return EINVAL;
	if (wr->opcode == IBV_WR_BIND_MW && !wr->bind_mw.mw)
		return EINVAL;
	uint8_t *s = sq_slot(q);
	if (!s)
		return ENOMEM;
	put_le64(s + VRDMA_SWQE_WR_ID, wr->wr_id);
	s[VRDMA_SWQE_OPCODE] = (uint8_t)wr->opcode;
	s[VRDMA_SWQE_FLAGS] = (uint8_t)(wr->send_flags & (SEND_FLAGS & ~IBV_SEND_INLINE));
	if (wr->opcode == IBV_WR_SEND_WITH_IMM || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		put_le32(s + VRDMA_SWQE_IMM, ntohl(wr->imm_data));
	if (wr->opcode == IBV_WR_LOCAL_INV || wr->opcode == IBV_WR_SEND_WITH_INV)
		put_le32(s + VRDMA_SWQE_IMM, wr->invalidate_rkey);
	if (wr->opcode == IBV_WR_BIND_MW) {
		put_bind(s, wr->bind_mw.mw->rkey, wr->bind_mw.rkey, &wr->bind_mw.bind_info);
		q->sq_prod++;
		return 0;
	}
	if (wr->opcode == IBV_WR_LOCAL_INV) {
		q->sq_prod++;
		return 0;
	}
	if (wr->opcode == IBV_WR_ATOMIC_WRITE) {
		put_atomic_write(s, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr,
				 (const void *)(uintptr_t)wr->sg_list[0].addr);
		q->sq_prod++;
		return 0;
	}
	if (is_atomic) {
		put_le64(s + VRDMA_SWQE_REMOTE_ADDR, wr->wr.atomic.remote_addr);
		put_le32(s + VRDMA_SWQE_RKEY, wr->wr.atomic.rkey);
		put_le64(s + VRDMA_SWQE_COMPARE_ADD, wr->wr.atomic.compare_add);
		put_le64(s + VRDMA_SWQE_SWAP, wr->wr.atomic.swap);
	} else if (t == IBV_QPT_UD) {
		put_le32(s + VRDMA_SWQE_AH, wr->wr.ud.ah->handle);
		put_le32(s + VRDMA_SWQE_REMOTE_QPN, wr->wr.ud.remote_qpn);
		put_le32(s + VRDMA_SWQE_REMOTE_QKEY, wr->wr.ud.remote_qkey);
	} else {
		put_le64(s + VRDMA_SWQE_REMOTE_ADDR, wr->wr.rdma.remote_addr);
		put_le32(s + VRDMA_SWQE_RKEY, wr->wr.rdma.rkey);
	}
	if (t == IBV_QPT_XRC_SEND) /* the XRC SRQ the request is for: the XRCETH */
		put_le32(s + VRDMA_SWQE_REMOTE_QPN, wr->qp_type.xrc.remote_srqn);
	if (inl) {
		if (put_inline(q, s, wr->sg_list, wr->num_sge))
			return EINVAL;
	} else {
		put_sges(q->qpx.qp_base.context, s, wr->sg_list, wr->num_sge);
	}
	q->sq_prod++;
	return 0;
}

/* Implicit on-demand MRs (verbs_int.h): mem.c counts them and sets the
 * resolver. */
atomic_int vrdma_implicit_count;
vrdma_implicit_resolver_fn *_Atomic vrdma_implicit_resolver;

/* prepare_recv and prepare_send register the implicit MRs' children the
 * requests need, before the queue's lock is taken. */
static void prepare_recv(struct ibv_context *c, const struct ibv_recv_wr *wr)
{
	if (!vrdma_implicit_any())
		return;
	for (; wr; wr = wr->next)
		if (wr->num_sge > 0)
			vrdma_implicit_prepare(c, wr->sg_list, wr->num_sge);
}

static void prepare_send(struct ibv_context *c, const struct ibv_send_wr *wr)
{
	if (!vrdma_implicit_any())
		return;
	for (; wr; wr = wr->next)
		if (wr->num_sge > 0 && !(wr->send_flags & IBV_SEND_INLINE))
			vrdma_implicit_prepare(c, wr->sg_list, wr->num_sge);
}

int vrdma_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct vrdma_qp *q = (struct vrdma_qp *)qp;
	int rc = 0;
	prepare_send(qp->context, wr);
	pthread_spin_lock(&q->slock);
	if (vrdma_is_lost(to_vctx(qp->context))) {
		rc = EIO; /* the daemon is gone (lost.c) */
		*bad = wr;
	} else if (!send_state_ok(q)) {
		rc = EINVAL;
		*bad = wr;
	} else {
		uint32_t before = q->sq_prod;
		for (; wr; wr = wr->next) {
			rc = put_send_wr(q, wr);
			if (rc) {
				*bad = wr;
				break;
			}
		}
		if (q->sq_prod != before)
			publish_sq(q);
	}
	pthread_spin_unlock(&q->slock);
	return rc;
}

/* vrdma_bind_mw binds a type 1 window as rdma-core's rxe provider does: a
 * bind work request on qp with the window's next rkey (ibv_inc_rkey),
 * which the window takes once the request is posted. ibv_bind_mw checked
 * the type, the PD and a range without a region already. */
int vrdma_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
	if (mw_bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)
		return EINVAL; /* as rxe: windows are addressed by virtual address */
	struct ibv_send_wr wr = {.wr_id = mw_bind->wr_id, .opcode = IBV_WR_BIND_MW, .send_flags = mw_bind->send_flags},
			   *bad;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	int rc = vrdma_post_send(qp, &wr, &bad);
	if (!rc)
		mw->rkey = wr.bind_mw.rkey;
	return rc;
}

/* post_recv_ring writes receive requests into ring r (a QP's or an SRQ's). */
static int post_recv_ring(struct ibv_context *c, uint8_t *mem, const struct vrdma_ring *r, uint32_t *prod,
			  uint32_t max_sge, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	uint32_t cons = vrdma_load32(mem, r->off + VRDMA_RING_CONS_OFF);
	uint32_t before = *prod;
	int rc = 0;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge) {
			rc = EINVAL;
			break;
		}
		if (*prod - cons >= r->entries) {
			cons = vrdma_load32(mem, r->off + VRDMA_RING_CONS_OFF);
			if (*prod - cons >= r->entries) {
				rc = ENOMEM;
				break;
			}
		}
		uint8_t *s = vrdma_slot(mem, r, *prod);
		put_le64(s + VRDMA_RWQE_WR_ID, wr->wr_id);
		put_le32(s + VRDMA_RWQE_NUM_SGE, (uint32_t)wr->num_sge);
		put_le32(s + VRDMA_RWQE_NUM_SGE + 4, 0);
		for (int i = 0; i < wr->num_sge; i++) {
			uint8_t *e = s + VRDMA_RECV_WQE_HEADER + (size_t)i * VRDMA_SGE_SIZE;
			put_le64(e + VRDMA_SGE_ADDR, wr->sg_list[i].addr);
			put_le32(e + VRDMA_SGE_LENGTH, wr->sg_list[i].length);
			put_le32(e + VRDMA_SGE_LKEY, vrdma_sge_lkey(c, &wr->sg_list[i]));
		}
		(*prod)++;
	}
	if (rc)
		*bad = wr;
	if (*prod != before)
		vrdma_publish32(mem, r->off + VRDMA_RING_PROD_OFF, *prod); /* a QP's: then its notify word */
	return rc;
}

int vrdma_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct vrdma_qp *q = (struct vrdma_qp *)qp;
	if (qp->srq || qp->qp_type == IBV_QPT_XRC_SEND || qp->qp_type == IBV_QPT_XRC_RECV ||
	    (vrdma_load32(q->mem, VRDMA_QP_STATE_OFF) == IBV_QPS_RESET &&
			!__atomic_load_n(&q->cm_held, __ATOMIC_ACQUIRE))) {
		/* A QP on an SRQ receives from it; RESET takes nothing, but for
		 * a QP rdma_cm holds there until the daemon connects it (its
		 * receives wait in the ring: only entering RESET discards). */
		*bad = wr;
		return EINVAL;
	}
	prepare_recv(qp->context, wr);
	pthread_spin_lock(&q->rlock);
	if (vrdma_is_lost(to_vctx(qp->context))) {
		pthread_spin_unlock(&q->rlock);
		*bad = wr;
		return EIO; /* the daemon is gone (lost.c) */
	}
	uint32_t before = q->rq_prod;
	int rc = post_recv_ring(qp->context, q->mem, &q->rq, &q->rq_prod, q->cap.max_recv_sge, wr, bad);
	if (q->rq_prod != before) {
		vrdma_fence(); /* the producer index before the notify word */
		if (vrdma_load32(q->mem, q->rq.off + VRDMA_RING_NOTIFY_OFF))
			ring_bell(q); /* the QP is in ERR: the daemon flushes what we post */
	}
	pthread_spin_unlock(&q->rlock);
	return rc;
}

int vrdma_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct vrdma_srq *s = (struct vrdma_srq *)srq;
	prepare_recv(srq->context, wr);
	pthread_spin_lock(&s->lock);
	if (vrdma_is_lost(to_vctx(srq->context))) {
		pthread_spin_unlock(&s->lock);
		*bad = wr;
		return EIO; /* the daemon is gone (lost.c) */
	}
	uint32_t before = s->prod;
	int rc = post_recv_ring(srq->context, s->mem, &s->ring, &s->prod, (uint32_t)s->max_sge, wr, bad);
	/* An SRQ on a device: its runner hands the requests to the device
	 * before a message needs them, so it must hear of them now (the
	 * software path takes them as messages arrive, and has no bell). */
	if (s->bell >= 0 && s->prod != before) {
		vrdma_fence(); /* the producer index before the notify word */
		if (vrdma_load32(s->mem, s->ring.off + VRDMA_RING_NOTIFY_OFF))
			ring_fd(srq->context, s->bell);
	}
	pthread_spin_unlock(&s->lock);
	return rc;
}

/* ---- the ibv_wr_* builder ---- */

static inline struct vrdma_qp *qx(struct ibv_qp_ex *x) { return (struct vrdma_qp *)x; }

static void wr_start(struct ibv_qp_ex *x)
{
	struct vrdma_qp *q = qx(x);
	pthread_spin_lock(&q->slock);
	q->wr_start_prod = q->sq_prod;
	q->wr_err = vrdma_is_lost(to_vctx(q->qpx.qp_base.context)) ? EIO : send_state_ok(q) ? 0 : EINVAL;
	q->wr_cur = NULL;
}

/* wr_begin opens a new entry of opcode op for the builder. */
static uint8_t *wr_begin(struct vrdma_qp *q, enum ibv_wr_opcode op)
{
	q->wr_cur = NULL;
	if (q->wr_err)
		return NULL;
	if (!allowed_on(q->qpx.qp_base.qp_type, op)) {
		q->wr_err = EINVAL;
		return NULL;
	}
	uint8_t *s = sq_slot(q);
	if (!s) {
		q->wr_err = ENOMEM;
		return NULL;
	}
	put_le64(s + VRDMA_SWQE_WR_ID, q->qpx.wr_id);
	s[VRDMA_SWQE_OPCODE] = (uint8_t)op;
	s[VRDMA_SWQE_FLAGS] = (uint8_t)(q->qpx.wr_flags & (SEND_FLAGS & ~IBV_SEND_INLINE));
	q->sq_prod++;
	q->wr_cur = s;
	return s;
}

static void wr_rdma(struct ibv_qp_ex *x, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr)
{
	uint8_t *s = wr_begin(qx(x), op);
	if (s) {
		put_le64(s + VRDMA_SWQE_REMOTE_ADDR, addr);
		put_le32(s + VRDMA_SWQE_RKEY, rkey);
	}
}

static void wr_rdma_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	wr_rdma(x, IBV_WR_RDMA_WRITE, rkey, addr);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, __be32 imm)
{
	wr_rdma(x, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr);
	if (qx(x)->wr_cur)
		put_le32(qx(x)->wr_cur + VRDMA_SWQE_IMM, ntohl(imm));
}

static void wr_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	wr_rdma(x, IBV_WR_RDMA_READ, rkey, addr);
}

static void wr_send(struct ibv_qp_ex *x) { wr_begin(qx(x), IBV_WR_SEND); }

static void wr_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
	uint8_t *s = wr_begin(qx(x), IBV_WR_SEND_WITH_IMM);
	if (s)
		put_le32(s + VRDMA_SWQE_IMM, ntohl(imm));
}

static void wr_atomic(struct ibv_qp_ex *x, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr, uint64_t cmp_add,
		      uint64_t swap)
{
	uint8_t *s = wr_begin(qx(x), op);
	if (s && (addr & 7)) {
		qx(x)->wr_err = EINVAL;
		qx(x)->wr_cur = NULL;
		return;
	}
	if (s) {
		put_le64(s + VRDMA_SWQE_REMOTE_ADDR, addr);
		put_le32(s + VRDMA_SWQE_RKEY, rkey);
		put_le64(s + VRDMA_SWQE_COMPARE_ADD, cmp_add);
		put_le64(s + VRDMA_SWQE_SWAP, swap);
	}
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap)
{
	wr_atomic(x, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t add)
{
	wr_atomic(x, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

/* wr_atomic_write: 8 bytes at value, stored at addr (8-byte aligned) as
 * one store; the builder takes no SGE or inline data for it. */
static void wr_atomic_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, const void *value)
{
	struct vrdma_qp *q = qx(x);
	if (!q->wr_err && (!value || (addr & 7))) {
		q->wr_err = EINVAL;
		return;
	}
	uint8_t *s = wr_begin(q, IBV_WR_ATOMIC_WRITE);
	if (s)
		put_atomic_write(s, rkey, addr, value);
}

static void wr_set_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct vrdma_qp *q = qx(x);
	if (!q->wr_cur)
		return;
	if (!ah) {
		q->wr_err = EINVAL;
		return;
	}
	put_le32(q->wr_cur + VRDMA_SWQE_AH, ah->handle);
	put_le32(q->wr_cur + VRDMA_SWQE_REMOTE_QPN, qpn);
	put_le32(q->wr_cur + VRDMA_SWQE_REMOTE_QKEY, qkey);
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *x, uint32_t remote_srqn)
{
	struct vrdma_qp *q = qx(x);
	if (!q->wr_cur)
		return;
	if (q->qpx.qp_base.qp_type != IBV_QPT_XRC_SEND) {
		q->wr_err = EINVAL;
		return;
	}
	put_le32(q->wr_cur + VRDMA_SWQE_REMOTE_QPN, remote_srqn);
}

static void wr_set_sge_list(struct ibv_qp_ex *x, size_t n, const struct ibv_sge *sg)
{
	struct vrdma_qp *q = qx(x);
	if (!q->wr_cur)
		return;
	uint8_t op = q->wr_cur[VRDMA_SWQE_OPCODE];
	int atomic = op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
	if (n > q->cap.max_send_sge || (atomic && (n != 1 || sg[0].length != 8)) || op == IBV_WR_ATOMIC_WRITE) {
		q->wr_err = EINVAL;
		return;
	}
	/* An implicit MR's child is registered here, under the send
	 * queue's lock (the builder holds it from wr_start). */
	vrdma_implicit_prepare(q->qpx.qp_base.context, sg, (int)n);
	put_sges(q->qpx.qp_base.context, q->wr_cur, sg, (int)n);
}

static void wr_set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sg = {.addr = addr, .length = length, .lkey = lkey};
	wr_set_sge_list(x, 1, &sg);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *x, size_t n, const struct ibv_data_buf *bufs)
{
	struct vrdma_qp *q = qx(x);
	if (!q->wr_cur)
		return;
	uint8_t op = q->wr_cur[VRDMA_SWQE_OPCODE];
	if (op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    op == IBV_WR_ATOMIC_WRITE) {
		q->wr_err = EINVAL;
		return;
	}
	size_t total = 0;
	uint8_t *body = q->wr_cur + VRDMA_SEND_WQE_HEADER;
	for (size_t i = 0; i < n; i++) {
		if (bufs[i].length > q->cap.max_inline_data - total) {
			q->wr_err = EINVAL;
			return;
		}
		memcpy(body + total, bufs[i].addr, bufs[i].length);
		total += bufs[i].length;
	}
	put_le32(q->wr_cur + VRDMA_SWQE_INLINE_LEN, (uint32_t)total);
	q->wr_cur[VRDMA_SWQE_FLAGS] |= VRDMA_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *x, void *addr, size_t length)
{
	struct ibv_data_buf b = {.addr = addr, .length = length};
	wr_set_inline_data_list(x, 1, &b);
}

static int wr_complete(struct ibv_qp_ex *x)
{
	struct vrdma_qp *q = qx(x);
	int rc = q->wr_err;
	if (rc)
		q->sq_prod = q->wr_start_prod; /* none of the batch is posted */
	else if (q->sq_prod != q->wr_start_prod)
		publish_sq(q);
	q->wr_cur = NULL;
	pthread_spin_unlock(&q->slock);
	return rc;
}

static void wr_abort(struct ibv_qp_ex *x)
{
	struct vrdma_qp *q = qx(x);
	q->sq_prod = q->wr_start_prod;
	q->wr_cur = NULL;
	pthread_spin_unlock(&q->slock);
}

static void wr_local_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	uint8_t *s = wr_begin(qx(x), IBV_WR_LOCAL_INV);
	if (s)
		put_le32(s + VRDMA_SWQE_IMM, rkey);
}

static void wr_send_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	uint8_t *s = wr_begin(qx(x), IBV_WR_SEND_WITH_INV);
	if (s)
		put_le32(s + VRDMA_SWQE_IMM, rkey);
}

/* wr_bind_mw binds mw with rkey (its low 8 bits: the window keeps its
 * index) as a bind work request; the window takes the rkey, as rxe's. */
static void wr_bind_mw(struct ibv_qp_ex *x, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *b)
{
	struct vrdma_qp *q = qx(x);
	if (!q->wr_err && (!mw || (!b->mr && (b->addr || b->length)) || (b->mw_access_flags & IBV_ACCESS_ZERO_BASED))) {
		q->wr_err = EINVAL;
		return;
	}
	uint8_t *s = wr_begin(q, IBV_WR_BIND_MW);
	if (s) {
		put_bind(s, mw->rkey, rkey, b);
		mw->rkey = (mw->rkey & ~0xffu) | (rkey & 0xffu);
	}
}

void vrdma_qp_ex_init(struct vrdma_qp *q)
{
	struct ibv_qp_ex *x = &q->qpx;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	x->wr_atomic_write = wr_atomic_write;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_local_inv = wr_local_inv;
	x->wr_send_inv = wr_send_inv;
	x->wr_bind_mw = wr_bind_mw;
}
