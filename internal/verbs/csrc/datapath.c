/* The helper's data path: completion queues, RC queue pairs, posting work
 * requests in batches (one message, one ibv_post_send / ibv_post_recv: one
 * doorbell) and polling completions. Layouts: verbs/datapath_msg.go.
 *
 * Every handle, count and range in a request is checked before anything is
 * posted: a bad work request fails the whole batch with EINVAL and posts
 * none. The device checks keys and access itself. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "helper.h"

enum {
	VH_MAX_CQS = 1024,
	VH_MAX_QPS = 1024,
	VH_MAX_BATCH = 64, /* work requests per post */
	VH_MAX_WR_SGE = 16,
	VH_MAX_INLINE = 1024, /* inline bytes of one work request (MaxWRInline) */
	VH_MAX_POLL = 256, /* completions per poll */
	VH_SEND_WR = 56,
	VH_RECV_WR = 16,
	VH_SGE = 16,
	VH_WC = 48,
	VH_MODIFY_SIZE = 64,
	VH_CREATE_QP_SIZE = 32,
	VH_CQ_PUSH = 1,
};

static struct ibv_cq *cqs[VH_MAX_CQS];
static struct ibv_comp_channel *chan; /* made with the first CQ that pushes */
static int push_fd = -1;              /* the push socket the daemon sent with it */
static struct ibv_wc wc[VH_MAX_POLL];
static struct ibv_qp *qps[VH_MAX_QPS];

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static struct ibv_cq *cq_at(uint32_t h) { return h < VH_MAX_CQS ? cqs[h] : NULL; }
struct ibv_qp *qp_at(uint32_t h) { return h < VH_MAX_QPS ? qps[h] : NULL; }

/* Body: u32 cqe, u32 flags (VH_CQ_PUSH: push its completions as the
 * completion channel reports them). The first pushing CQ's request brings
 * the push socket (SCM_RIGHTS): the helper takes it (*fd = -1) when the CQ
 * is made. Reply: u32 handle, u32 the CQ's cqe. */
int do_create_cq(uint32_t seq, const unsigned char *body, size_t len, int *fd)
{
	uint32_t h, cqe, flags;
	struct ibv_cq *cq;
	int err;

	if (!ctx)
		return fail(VH_CREATE_CQ, seq, ENODEV, "no device is open");
	if (len != 8)
		return fail(VH_CREATE_CQ, seq, EINVAL, "create_cq: %zu-byte body, want 8", len);
	cqe = get32(body);
	flags = get32(body + 4);
	if (cqe == 0 || cqe > INT32_MAX || (flags & ~(uint32_t)VH_CQ_PUSH))
		return fail(VH_CREATE_CQ, seq, EINVAL, "create_cq: %u entries, flags %#x", cqe, flags);
	for (h = 0; h < VH_MAX_CQS && cqs[h]; h++)
		;
	if (h == VH_MAX_CQS)
		return fail(VH_CREATE_CQ, seq, ENOSPC, "create_cq: %d CQs already", VH_MAX_CQS);
	if ((flags & VH_CQ_PUSH) && push_fd < 0 && *fd < 0)
		return fail(VH_CREATE_CQ, seq, EINVAL, "create_cq: a pushing CQ, and no push socket came with it");
	if ((flags & VH_CQ_PUSH) && !chan) {
		chan = ibv_create_comp_channel(ctx);
		if (!chan)
			return fail(VH_CREATE_CQ, seq, errno, "ibv_create_comp_channel: %s", strerror(errno));
		/* Non-blocking: an event poll() saw may be gone when it is read. */
		if (fcntl(chan->fd, F_SETFL, fcntl(chan->fd, F_GETFL) | O_NONBLOCK)) {
			err = errno;
			ibv_destroy_comp_channel(chan);
			chan = NULL;
			return fail(VH_CREATE_CQ, seq, err, "completion channel: %s", strerror(err));
		}
	}
	cq = ibv_create_cq(ctx, (int)cqe, (void *)(uintptr_t)h, (flags & VH_CQ_PUSH) ? chan : NULL, 0);
	if (!cq)
		return fail(VH_CREATE_CQ, seq, errno, "ibv_create_cq(%u): %s", cqe, strerror(errno));
	if ((flags & VH_CQ_PUSH) && (err = ibv_req_notify_cq(cq, 0))) {
		ibv_destroy_cq(cq);
		return fail(VH_CREATE_CQ, seq, err, "ibv_req_notify_cq: %s", strerror(err));
	}
	cqs[h] = cq;
	if ((flags & VH_CQ_PUSH) && push_fd < 0) {
		push_fd = *fd;
		*fd = -1;
	}
	begin(VH_CREATE_CQ | VH_REPLY_BIT, seq, 0);
	put32(h);
	put32((uint32_t)cq->cqe);
	return finish();
}

/* Body: u32 handle. */
int do_destroy_cq(uint32_t seq, const unsigned char *body, size_t len)
{
	uint32_t h;
	int err;

	if (len != 4)
		return fail(VH_DESTROY_CQ, seq, EINVAL, "destroy_cq: %zu-byte body, want 4", len);
	h = get32(body);
	if (!cq_at(h))
		return fail(VH_DESTROY_CQ, seq, ENOENT, "destroy_cq: no CQ %u", h);
	err = ibv_destroy_cq(cqs[h]);
	if (err)
		return fail(VH_DESTROY_CQ, seq, err, "ibv_destroy_cq: %s", strerror(err));
	cqs[h] = NULL;
	begin(VH_DESTROY_CQ | VH_REPLY_BIT, seq, 0);
	return finish();
}

/* Body: u32 send CQ, u32 receive CQ, u32 max_send_wr, max_recv_wr,
 * max_send_sge, max_recv_sge, max_inline_data, u32 QP type (IBV_QPT_RC, or
 * IBV_QPT_UD: ud.c moves it through its states and posts its sends); with
 * op VH_CREATE_QP_SRQ then u32 SRQ, u32 0 (the QP receives from it).
 * Reply: u32 handle, u32 QPN, the five capabilities the QP got, u32 0. */
int do_create_qp(uint16_t op, uint32_t seq, const unsigned char *body, size_t len)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	uint32_t h, type;
	size_t want = op == VH_CREATE_QP_SRQ ? VH_CREATE_QP_SIZE + 8 : VH_CREATE_QP_SIZE;

	if (!pd)
		return fail(op, seq, ENODEV, "no device is open");
	if (len != want)
		return fail(op, seq, EINVAL, "create_qp: %zu-byte body, want %zu", len, want);
	memset(&ia, 0, sizeof(ia));
	if (op == VH_CREATE_QP_SRQ) {
		ia.srq = srq_at(get32(body + VH_CREATE_QP_SIZE));
		if (!ia.srq || get32(body + VH_CREATE_QP_SIZE + 4))
			return fail(op, seq, ENOENT, "create_qp: no SRQ %u", get32(body + VH_CREATE_QP_SIZE));
	}
	ia.send_cq = cq_at(get32(body));
	ia.recv_cq = cq_at(get32(body + 4));
	if (!ia.send_cq || !ia.recv_cq)
		return fail(op, seq, ENOENT, "create_qp: no CQ %u or %u", get32(body), get32(body + 4));
	ia.cap.max_send_wr = get32(body + 8);
	ia.cap.max_recv_wr = get32(body + 12);
	ia.cap.max_send_sge = get32(body + 16);
	ia.cap.max_recv_sge = get32(body + 20);
	ia.cap.max_inline_data = get32(body + 24);
	type = get32(body + 28);
	if (type != IBV_QPT_RC && type != IBV_QPT_UD)
		return fail(op, seq, EOPNOTSUPP, "create_qp: QP type %u: only RC (%d) and UD (%d)", type, IBV_QPT_RC,
			    IBV_QPT_UD);
	if (ia.cap.max_send_sge > VH_MAX_WR_SGE || ia.cap.max_recv_sge > VH_MAX_WR_SGE)
		return fail(op, seq, EINVAL, "create_qp: %u/%u SGEs, the helper posts at most %d",
			    ia.cap.max_send_sge, ia.cap.max_recv_sge, VH_MAX_WR_SGE);
	ia.qp_type = (enum ibv_qp_type)type;
	ia.sq_sig_all = 0;
	for (h = 0; h < VH_MAX_QPS && qps[h]; h++)
		;
	if (h == VH_MAX_QPS)
		return fail(op, seq, ENOSPC, "create_qp: %d QPs already", VH_MAX_QPS);
	ia.qp_context = (void *)(uintptr_t)h; /* its async events name it (async.c) */
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		return fail(op, seq, errno, "ibv_create_qp: %s", strerror(errno));
	qps[h] = qp;
	begin((uint16_t)(op | VH_REPLY_BIT), seq, 0);
	put32(h);
	put32(qp->qp_num);
	put32(ia.cap.max_send_wr);
	put32(ia.cap.max_recv_wr);
	put32(ia.cap.max_send_sge);
	put32(ia.cap.max_recv_sge);
	put32(ia.cap.max_inline_data);
	put32(0);
	return finish();
}

/* Body (64 bytes): u32 handle, u32 state, u32 access, u32 path_mtu, u32
 * dest_qpn, u32 rq_psn, u32 sq_psn, u32 flow_label, 16-byte dgid, u16
 * dlid, u8 sgid_index, hop_limit, traffic_class, sl, timeout, retry_cnt,
 * rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic, is_global,
 * 3 zero bytes. Each transition takes the attributes rdma-core requires for
 * it (RESET->INIT, INIT->RTR, RTR->RTS); RESET and ERR take only the state. */
int do_modify_qp(uint32_t seq, const unsigned char *body, size_t len)
{
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	const unsigned char *b8;
	int mask = IBV_QP_STATE, err;

	if (len != VH_MODIFY_SIZE)
		return fail(VH_MODIFY_QP, seq, EINVAL, "modify_qp: %zu-byte body, want %d", len, VH_MODIFY_SIZE);
	qp = qp_at(get32(body));
	if (!qp)
		return fail(VH_MODIFY_QP, seq, ENOENT, "modify_qp: no QP %u", get32(body));
	memset(&a, 0, sizeof(a));
	a.qp_state = (enum ibv_qp_state)get32(body + 4);
	b8 = body + 48;
	switch (get32(body + 4)) {
	case IBV_QPS_RESET:
	case IBV_QPS_ERR:
		break;
	case IBV_QPS_INIT:
		a.pkey_index = 0;
		a.port_num = port_num;
		a.qp_access_flags = (int)get32(body + 8);
		if (a.qp_access_flags & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					  IBV_ACCESS_REMOTE_ATOMIC))
			return fail(VH_MODIFY_QP, seq, EINVAL, "modify_qp: access flags %#x", a.qp_access_flags);
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		break;
	case IBV_QPS_RTR:
		a.path_mtu = (enum ibv_mtu)get32(body + 12);
		a.dest_qp_num = get32(body + 16);
		a.rq_psn = get32(body + 20);
		if (a.path_mtu < IBV_MTU_256 || a.path_mtu > IBV_MTU_4096 || a.dest_qp_num > 0xffffff ||
		    a.rq_psn > 0xffffff)
			return fail(VH_MODIFY_QP, seq, EINVAL, "modify_qp: MTU code %u, QPN %#x, PSN %#x", a.path_mtu,
				    a.dest_qp_num, a.rq_psn);
		memcpy(a.ah_attr.grh.dgid.raw, body + 32, 16);
		memcpy(&a.ah_attr.dlid, body + 48, 2);
		a.ah_attr.grh.sgid_index = b8[2];
		a.ah_attr.grh.hop_limit = b8[3];
		a.ah_attr.grh.traffic_class = b8[4];
		a.ah_attr.grh.flow_label = get32(body + 28);
		a.ah_attr.sl = b8[5];
		a.ah_attr.is_global = b8[12];
		a.ah_attr.port_num = port_num;
		a.min_rnr_timer = b8[9];
		a.max_dest_rd_atomic = b8[11];
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			IBV_QP_MIN_RNR_TIMER;
		break;
	case IBV_QPS_RTS:
		a.sq_psn = get32(body + 24);
		if (a.sq_psn > 0xffffff)
			return fail(VH_MODIFY_QP, seq, EINVAL, "modify_qp: PSN %#x", a.sq_psn);
		a.timeout = b8[6];
		a.retry_cnt = b8[7];
		a.rnr_retry = b8[8];
		a.max_rd_atomic = b8[10];
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
		break;
	default:
		return fail(VH_MODIFY_QP, seq, EINVAL, "modify_qp: state %u is not RESET, INIT, RTR, RTS or ERR",
			    get32(body + 4));
	}
	err = ibv_modify_qp(qp, &a, mask);
	if (err)
		return fail(VH_MODIFY_QP, seq, err, "ibv_modify_qp to state %u: %s", get32(body + 4), strerror(err));
	begin(VH_MODIFY_QP | VH_REPLY_BIT, seq, 0);
	return finish();
}

/* Body: u32 handle. */
int do_destroy_qp(uint32_t seq, const unsigned char *body, size_t len)
{
	uint32_t h;
	int err;

	if (len != 4)
		return fail(VH_DESTROY_QP, seq, EINVAL, "destroy_qp: %zu-byte body, want 4", len);
	h = get32(body);
	if (!qp_at(h))
		return fail(VH_DESTROY_QP, seq, ENOENT, "destroy_qp: no QP %u", h);
	err = ibv_destroy_qp(qps[h]);
	if (err)
		return fail(VH_DESTROY_QP, seq, err, "ibv_destroy_qp: %s", strerror(err));
	qps[h] = NULL;
	begin(VH_DESTROY_QP | VH_REPLY_BIT, seq, 0);
	return finish();
}

/* sges reads n SGEs (u32 region handle, u32 length, u64 offset) at p into
 * out: 0, or -1 if one is not inside its region. */
static int sges(const unsigned char *p, uint32_t n, struct ibv_sge *out)
{
	for (uint32_t i = 0; i < n; i++, p += VH_SGE)
		if (mr_sge(get32(p), get64(p + 8), get32(p + 4), &out[i]))
			return -1;
	return 0;
}

static struct ibv_send_wr swr[VH_MAX_BATCH];
static struct ibv_recv_wr rwr[VH_MAX_BATCH];
static struct ibv_sge sgl[VH_MAX_BATCH][VH_MAX_WR_SGE];

/* Body: u32 QP, u32 count, then count work requests of 56 bytes: u64
 * wr_id, u32 opcode, u32 send_flags, u32 imm_data (as ibv_send_wr has it),
 * u32 SGE count, u64 remote_addr, u32 rkey, u32 inline length, u64
 * compare_add, u64 swap; each followed by its SGEs, or with IBV_SEND_INLINE
 * (a SEND or WRITE, no SGEs) by its inline bytes padded to 8, which the
 * device copies during the post from this message. All are posted with one
 * ibv_post_send. */
int do_post_send(uint32_t seq, const unsigned char *body, size_t len)
{
	const uint32_t opcodes = 1u << IBV_WR_RDMA_WRITE | 1u << IBV_WR_RDMA_WRITE_WITH_IMM | 1u << IBV_WR_SEND |
				 1u << IBV_WR_SEND_WITH_IMM | 1u << IBV_WR_RDMA_READ | 1u << IBV_WR_ATOMIC_CMP_AND_SWP |
				 1u << IBV_WR_ATOMIC_FETCH_AND_ADD;
	const uint32_t flags = IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE;
	struct ibv_send_wr *bad = NULL;
	struct ibv_qp *qp;
	uint32_t n, i;
	size_t at = 8;
	int err;

	if (len < 8)
		return fail(VH_POST_SEND, seq, EINVAL, "post_send: %zu-byte body", len);
	qp = qp_at(get32(body));
	n = get32(body + 4);
	if (!qp)
		return fail(VH_POST_SEND, seq, ENOENT, "post_send: no QP %u", get32(body));
	if (n == 0 || n > VH_MAX_BATCH)
		return fail(VH_POST_SEND, seq, EINVAL, "post_send: %u work requests, 1..%d per batch", n, VH_MAX_BATCH);
	for (i = 0; i < n; i++) {
		struct ibv_send_wr *w = &swr[i];
		const unsigned char *p = body + at;
		uint32_t op, nsge, ilen;

		if (len - at < VH_SEND_WR)
			return fail(VH_POST_SEND, seq, EINVAL, "post_send: work request %u is cut short", i);
		memset(w, 0, sizeof(*w));
		w->wr_id = get64(p);
		op = get32(p + 8);
		w->send_flags = get32(p + 12);
		w->imm_data = get32(p + 16);
		nsge = get32(p + 20);
		ilen = get32(p + 36);
		if (op >= 32 || !(opcodes >> op & 1) || (w->send_flags & ~flags) || nsge > VH_MAX_WR_SGE ||
		    (size_t)nsge * VH_SGE > len - at - VH_SEND_WR)
			return fail(VH_POST_SEND, seq, EINVAL, "post_send: work request %u: opcode %u, flags %#x, %u SGEs",
				    i, op, w->send_flags, nsge);
		if (w->send_flags & IBV_SEND_INLINE) {
			size_t padded = ((size_t)ilen + 7) & ~(size_t)7;
			if (nsge || ilen > VH_MAX_INLINE || padded > len - at - VH_SEND_WR ||
			    op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD)
				return fail(VH_POST_SEND, seq, EINVAL,
					    "post_send: inline work request %u: opcode %u, %u SGEs, %u bytes", i, op, nsge, ilen);
		} else if (ilen) {
			return fail(VH_POST_SEND, seq, EINVAL, "post_send: work request %u: inline length %u without IBV_SEND_INLINE",
				    i, ilen);
		}
		w->opcode = (enum ibv_wr_opcode)op;
		if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			w->wr.atomic.remote_addr = get64(p + 24);
			w->wr.atomic.rkey = get32(p + 32);
			w->wr.atomic.compare_add = get64(p + 40);
			w->wr.atomic.swap = get64(p + 48);
		} else {
			w->wr.rdma.remote_addr = get64(p + 24);
			w->wr.rdma.rkey = get32(p + 32);
		}
		if (w->send_flags & IBV_SEND_INLINE) {
			/* The provider copies the bytes during ibv_post_send: the
			 * message's buffer holds them until then; no lkey. */
			sgl[i][0] = (struct ibv_sge){.addr = (uintptr_t)(p + VH_SEND_WR), .length = ilen, .lkey = 0};
			w->sg_list = ilen ? sgl[i] : NULL;
			w->num_sge = ilen ? 1 : 0;
			w->next = i + 1 < n ? &swr[i + 1] : NULL;
			at += VH_SEND_WR + (((size_t)ilen + 7) & ~(size_t)7);
			continue;
		}
		if (sges(p + VH_SEND_WR, nsge, sgl[i]))
			return fail(VH_POST_SEND, seq, EINVAL, "post_send: work request %u: an SGE outside its region", i);
		w->sg_list = nsge ? sgl[i] : NULL;
		w->num_sge = (int)nsge;
		w->next = i + 1 < n ? &swr[i + 1] : NULL;
		at += VH_SEND_WR + (size_t)nsge * VH_SGE;
	}
	if (at != len)
		return fail(VH_POST_SEND, seq, EINVAL, "post_send: %zu bytes after the work requests", len - at);
	err = ibv_post_send(qp, swr, &bad);
	if (err)
		return fail(VH_POST_SEND, seq, err, "ibv_post_send: work request %ld of %u: %s",
			    bad ? (long)(bad - swr) : -1L, n, strerror(err));
	begin(VH_POST_SEND | VH_REPLY_BIT, seq, 0);
	return finish();
}

/* Body: u32 QP (or SRQ, with op VH_POST_SRQ_RECV), u32 count, then count
 * work requests of 16 bytes: u64 wr_id, u32 SGE count, u32 0; each
 * followed by its SGEs. */
int do_post_recv(uint16_t op, uint32_t seq, const unsigned char *body, size_t len)
{
	struct ibv_recv_wr *bad = NULL;
	struct ibv_qp *qp = NULL;
	struct ibv_srq *srq = NULL;
	uint32_t n, i;
	size_t at = 8;
	int err;

	if (len < 8)
		return fail(op, seq, EINVAL, "post_recv: %zu-byte body", len);
	if (op == VH_POST_SRQ_RECV)
		srq = srq_at(get32(body));
	else
		qp = qp_at(get32(body));
	n = get32(body + 4);
	if (!qp && !srq)
		return fail(op, seq, ENOENT, "post_recv: no %s %u", op == VH_POST_SRQ_RECV ? "SRQ" : "QP", get32(body));
	if (n == 0 || n > VH_MAX_BATCH)
		return fail(op, seq, EINVAL, "post_recv: %u work requests, 1..%d per batch", n, VH_MAX_BATCH);
	for (i = 0; i < n; i++) {
		struct ibv_recv_wr *w = &rwr[i];
		const unsigned char *p = body + at;
		uint32_t nsge;

		if (len - at < VH_RECV_WR)
			return fail(op, seq, EINVAL, "post_recv: work request %u is cut short", i);
		memset(w, 0, sizeof(*w));
		w->wr_id = get64(p);
		nsge = get32(p + 8);
		if (nsge > VH_MAX_WR_SGE || (size_t)nsge * VH_SGE > len - at - VH_RECV_WR)
			return fail(op, seq, EINVAL, "post_recv: work request %u: %u SGEs", i, nsge);
		if (sges(p + VH_RECV_WR, nsge, sgl[i]))
			return fail(op, seq, EINVAL, "post_recv: work request %u: an SGE outside its region", i);
		w->sg_list = nsge ? sgl[i] : NULL;
		w->num_sge = (int)nsge;
		w->next = i + 1 < n ? &rwr[i + 1] : NULL;
		at += VH_RECV_WR + (size_t)nsge * VH_SGE;
	}
	if (at != len)
		return fail(op, seq, EINVAL, "post_recv: %zu bytes after the work requests", len - at);
	err = srq ? ibv_post_srq_recv(srq, rwr, &bad) : ibv_post_recv(qp, rwr, &bad);
	if (err)
		return fail(op, seq, err, "ibv_post_recv: work request %ld of %u: %s",
			    bad ? (long)(bad - rwr) : -1L, n, strerror(err));
	begin((uint16_t)(op | VH_REPLY_BIT), seq, 0);
	return finish();
}

/* Body: u32 CQ, u32 most. Reply: u32 count, u32 0, then count completions
 * of 40 bytes: u64 wr_id, u32 status, opcode, vendor_err, byte_len,
 * imm_data (as ibv_wc has it), qp_num, src_qp, wc_flags, u16 slid, u8 sl,
 * u8 dlid_path_bits, u32 0 (48 bytes; a UD receive's source). */
/* put_wcs appends u32 n, u32 0 and n completions of wc. */
static void put_wcs(int n)
{
	put32((uint32_t)n);
	put32(0);
	for (int i = 0; i < n; i++) {
		put64(wc[i].wr_id);
		put32(wc[i].status);
		put32(wc[i].opcode);
		put32(wc[i].vendor_err);
		put32(wc[i].byte_len);
		put32(wc[i].imm_data);
		put32(wc[i].qp_num);
		put32(wc[i].src_qp);
		put32(wc[i].wc_flags);
		put32((uint32_t)wc[i].slid | (uint32_t)wc[i].sl << 16 | (uint32_t)wc[i].dlid_path_bits << 24);
		put32(0);
	}
}

int do_poll_cq(uint32_t seq, const unsigned char *body, size_t len)
{
	struct ibv_cq *cq;
	uint32_t most;
	int n;

	if (len != 8)
		return fail(VH_POLL_CQ, seq, EINVAL, "poll_cq: %zu-byte body, want 8", len);
	cq = cq_at(get32(body));
	most = get32(body + 4);
	if (!cq)
		return fail(VH_POLL_CQ, seq, ENOENT, "poll_cq: no CQ %u", get32(body));
	if (most == 0 || most > VH_MAX_POLL)
		return fail(VH_POLL_CQ, seq, EINVAL, "poll_cq: %u completions, 1..%d per poll", most, VH_MAX_POLL);
	n = ibv_poll_cq(cq, (int)most, wc);
	if (n < 0)
		return fail(VH_POLL_CQ, seq, EIO, "ibv_poll_cq failed (%d)", n);
	begin(VH_POLL_CQ | VH_REPLY_BIT, seq, 0);
	put_wcs(n);
	return finish();
}

int datapath_fd(void) { return chan ? chan->fd : -1; }

int datapath_push_fd(void) { return push_fd; }

/* datapath_event takes one event off the completion channel, arms its CQ
 * again and pushes everything the CQ holds (arming before polling: a
 * completion that lands in between raises a new event, none is lost). */
int datapath_event(void)
{
	struct ibv_cq *cq;
	void *cq_ctx;
	uint32_t h;
	int n;

	if (ibv_get_cq_event(chan, &cq, &cq_ctx))
		return 0;
	ibv_ack_cq_events(cq, 1);
	h = (uint32_t)(uintptr_t)cq_ctx;
	if (cq_at(h) != cq)
		return 0; /* destroyed since */
	ibv_req_notify_cq(cq, 0);
	do {
		n = ibv_poll_cq(cq, VH_MAX_POLL, wc);
		if (n <= 0)
			break;
		begin(VH_COMPLETIONS, 0, 0);
		put32(h);
		put_wcs(n);
		if (finish_to(push_fd))
			return -1;
	} while (n == VH_MAX_POLL);
	return 0;
}

/* datapath_close destroys the QPs, then the CQs, as the helper exits. */
void datapath_close(void)
{
	for (int i = 0; i < VH_MAX_QPS; i++)
		if (qps[i])
			ibv_destroy_qp(qps[i]);
	for (int i = 0; i < VH_MAX_CQS; i++)
		if (cqs[i])
			ibv_destroy_cq(cqs[i]);
	if (chan)
		ibv_destroy_comp_channel(chan);
	if (push_fd >= 0)
		close(push_fd);
}
