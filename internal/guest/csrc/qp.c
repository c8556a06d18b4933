/*
 * qp.c: queue pairs (create, modify, query, destroy) and their attribute
 * encoding. Posting work requests is in post.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "verbs_int.h"

void vrdma_qp_ex_init(struct vrdma_qp *q); /* post.c */

static void qp_init_common(struct vrdma_qp *q)
{
	pthread_spin_init(&q->slock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&q->rlock, PTHREAD_PROCESS_PRIVATE);
	pthread_mutex_init(&q->qpx.qp_base.mutex, NULL);
	pthread_cond_init(&q->qpx.qp_base.cond, NULL);
}

/* create_qp creates a QP of context ictx: of PD ibpd, or for an XRC_RECV
 * QP (which has no PD, CQs or queues) of the XRC domain xrcd. */
static struct ibv_qp *create_qp(struct ibv_context *ictx, struct ibv_pd *ibpd, struct ibv_qp_init_attr *attr,
				int ex, struct ibv_xrcd *xrcd, const uint32_t *open_qpn)
{
	struct vrdma_context *ctx = to_vctx(ictx);
	struct vrdma_pd *pd = (struct vrdma_pd *)ibpd;
	int tgt = attr->qp_type == IBV_QPT_XRC_RECV, ini = attr->qp_type == IBV_QPT_XRC_SEND;
	if (tgt ? !xrcd : (!ibpd || !attr->send_cq || (!attr->recv_cq && !ini))) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC && attr->qp_type != IBV_QPT_UD && !tgt && !ini) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((tgt || ini) && attr->srq) {
		errno = EINVAL; /* an XRC QP receives through the XRC SRQ each request names */
		return NULL;
	}
	if (tgt) {
		/* No queues of its own, as the kernel ignores what it is given. */
		memset(&attr->cap, 0, sizeof attr->cap);
		attr->send_cq = attr->recv_cq = NULL;
	}
	if (ini)
		attr->recv_cq = NULL;
	struct vrdma_qp *q = vrdma_own_zalloc(sizeof *q); /* own.h */
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	struct vrdma_cq *scq = (struct vrdma_cq *)attr->send_cq, *rcq = (struct vrdma_cq *)attr->recv_cq;
	struct vrdma_srq *srq = attr->srq ? (struct vrdma_srq *)attr->srq : NULL;
	struct vj_doc doc = {0};
	int fds[2] = {-1, -1}, nfds = 2;
	int rc = open_qpn ? vrdma_cmd(ctx, VRDMA_CMD_OPEN_QP, &doc, NULL, 0, fds, &nfds, "{\"xrcd\":%u,\"qpn\":%u}",
					    ((struct vrdma_xrcd *)xrcd)->handle, *open_qpn) :
			   vrdma_cmd(ctx, VRDMA_CMD_CREATE_QP, &doc, NULL, 0, fds, &nfds,
			   "{\"pd\":%u,\"type\":%u,\"send_cq\":%u,\"recv_cq\":%u,\"srq\":%u,\"xrcd\":%u,"
			   "\"sq_sig_all\":%s,"
			   "\"caps\":{\"max_send_wr\":%u,\"max_recv_wr\":%u,\"max_send_sge\":%u,\"max_recv_sge\":%u,"
			   "\"max_inline_data\":%u}}",
			   pd ? pd->handle : 0, (unsigned)attr->qp_type, scq ? scq->handle : 0, rcq ? rcq->handle : 0,
			   srq ? srq->handle : 0, tgt ? ((struct vrdma_xrcd *)xrcd)->handle : 0,
			   attr->sq_sig_all ? "true" : "false", attr->cap.max_send_wr, attr->cap.max_recv_wr,
			   attr->cap.max_send_sge, attr->cap.max_recv_sge, attr->cap.max_inline_data);
	if (rc) {
		vrdma_own_free(q);
		errno = rc;
		return NULL;
	}
	uint64_t h = 0, qpn = 0;
	int64_t size = 0, v = 0;
	int caps = vj_get(&doc, 0, "caps");
	if (nfds != 2 || vj_get_u64(&doc, 0, "handle", &h) || vj_get_u64(&doc, 0, "qpn", &qpn) ||
	    vj_get_i64(&doc, 0, "size", &size) || size <= 0 ||
	    vrdma_ring_from(&doc, vj_get(&doc, 0, "sq"), (size_t)size, &q->sq) ||
	    (!srq && !tgt && !ini && vrdma_ring_from(&doc, vj_get(&doc, 0, "rq"), (size_t)size, &q->rq)))
		rc = EPROTO;
#define CAP(key, field)                                                          \
	if (!rc && !vj_get_i64(&doc, caps, key, &v) && v >= 0 && v <= INT32_MAX) \
		q->cap.field = (uint32_t)v;
	CAP("max_send_wr", max_send_wr)
	CAP("max_recv_wr", max_recv_wr)
	CAP("max_send_sge", max_send_sge)
	CAP("max_recv_sge", max_recv_sge)
	CAP("max_inline_data", max_inline_data)
#undef CAP
	int gen = 0;
	if (!rc && !vj_bool(&doc, vj_get(&doc, 0, "notify_gen"), &gen))
		q->notify_gen = gen; /* absent: a daemon that arms with 1 every time */
	vrdma_doc_free(&doc);
	q->size = (size_t)size;
	rc = vrdma_take_region(ctx, rc, fds, nfds, q->size, &q->mem, VRDMA_CMD_DESTROY_QP, (uint32_t)h);
	if (rc) {
		vrdma_own_free(q);
		errno = rc;
		return NULL;
	}
	q->bell = fds[1];
	q->handle = (uint32_t)h;
	q->sq_sig_all = attr->sq_sig_all;
	qp_init_common(q);
	struct ibv_qp *qp = &q->qpx.qp_base;
	qp->context = ictx;
	qp->qp_context = attr->qp_context;
	qp->pd = ibpd;
	qp->send_cq = attr->send_cq;
	qp->recv_cq = attr->recv_cq;
	qp->srq = attr->srq;
	qp->handle = q->handle;
	qp->qp_num = (uint32_t)qpn;
	qp->state = IBV_QPS_RESET;
	qp->qp_type = attr->qp_type;
	attr->cap = q->cap;
	if (ex)
		vrdma_qp_ex_init(q);
	vrdma_track(ctx, q, VRDMA_OBJ_QP);
	vrdma_live(ctx, 1);
	return qp;
}

VRDMA_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		errno = EINVAL; /* it needs an XRC domain: ibv_create_qp_ex */
		return NULL;
	}
	return create_qp(pd->context, pd, attr, 0, NULL, NULL);
}

#define SUPPORTED_SEND_OPS                                                                                  \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |              \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |       \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |            \
	 IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_ATOMIC_WRITE)

#define KNOWN_CREATE_FLAGS                                                                            \
	(IBV_QP_CREATE_BLOCK_SELF_MCAST_LB | IBV_QP_CREATE_SCATTER_FCS | IBV_QP_CREATE_CVLAN_STRIPPING | \
	 IBV_QP_CREATE_SOURCE_QPN | IBV_QP_CREATE_PCI_WRITE_END_PADDING)

/* create_qp_ex: the extended creation, for the ibv_wr_* posting API. */
static struct ibv_qp *create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *ax)
{
	uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS |
			 IBV_QP_INIT_ATTR_XRCD;
	if (ax->comp_mask & ~known) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct ibv_xrcd *xrcd = NULL;
	if (ax->qp_type == IBV_QPT_XRC_RECV) {
		/* The target: its XRC domain, nothing else (the kernel's rule). */
		if (!(ax->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !ax->xrcd || ax->xrcd->context != context) {
			errno = EINVAL;
			return NULL;
		}
		xrcd = ax->xrcd;
	} else if (!(ax->comp_mask & IBV_QP_INIT_ATTR_PD) || !ax->pd || ax->pd->context != context) {
		errno = ax->qp_type == IBV_QPT_XRC_SEND ? EINVAL : EOPNOTSUPP;
		return NULL;
	}
	if ((ax->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ax->create_flags) {
		/* As the kernel and rxe answer: a flag the verbs define is not
		 * supported; any other bit is invalid. */
		errno = ax->create_flags & ~(uint32_t)KNOWN_CREATE_FLAGS ? EINVAL : EOPNOTSUPP;
		return NULL;
	}
	if ((ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (ax->send_ops_flags & ~(uint64_t)SUPPORTED_SEND_OPS)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct ibv_qp_init_attr a = {.qp_context = ax->qp_context, .send_cq = ax->send_cq, .recv_cq = ax->recv_cq,
				     .srq = ax->srq, .cap = ax->cap, .qp_type = ax->qp_type, .sq_sig_all = ax->sq_sig_all};
	struct ibv_qp *qp = create_qp(context, xrcd ? NULL : ax->pd, &a, (ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0,
				      xrcd, NULL);
	if (qp)
		ax->cap = a.cap;
	return qp;
}

/* open_qp: a handle of an XRC_RECV QP another process of the same XRC
 * domain created, by its number (the kernel's rule: the number, the
 * domain and the type XRC_RECV are required). */
static struct ibv_qp *open_qp(struct ibv_context *context, struct ibv_qp_open_attr *oa)
{
	uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	if (oa->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((oa->comp_mask & need) != need || !oa->xrcd || oa->xrcd->context != context ||
	    oa->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_qp_init_attr a = {.qp_context = oa->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT ? oa->qp_context : NULL,
				     .qp_type = IBV_QPT_XRC_RECV};
	return create_qp(context, NULL, &a, 0, oa->xrcd, &oa->qp_num);
}

void vrdma_set_create_qp_ex(struct verbs_context *vctx)
{
	vctx->create_qp_ex = create_qp_ex;
	vctx->open_qp = open_qp;
}

VRDMA_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct vrdma_qp *q = (struct vrdma_qp *)qp;
	return q->qpx.wr_start ? &q->qpx : NULL;
}

static void put_gid_json(char *dst, size_t cap, const uint8_t *g)
{
	int n = snprintf(dst, cap, "[");
	for (int i = 0; i < 16 && n > 0 && (size_t)n < cap; i++)
		n += snprintf(dst + n, cap - (size_t)n, i ? ",%u" : "%u", g[i]);
	if (n > 0 && (size_t)n < cap)
		snprintf(dst + n, cap - (size_t)n, "]");
}

/* vrdma_av_json writes an address vector: the daemon's qpstate.AddressVector. */
int vrdma_av_json(char *dst, size_t cap, const struct ibv_ah_attr *ah)
{
	char gid[128];
	/* Without a global route the port is named by its LID alone, which
	 * vrdma's switch resolves (docs/guest-library.md), and the grh fields
	 * mean nothing: programs leave whatever is there, as the verbs let
	 * them. They go as zeros (GID index 0 is the source, as for qperf). */
	struct ibv_global_route grh = {0};
	if (ah->is_global)
		grh = ah->grh;
	put_gid_json(gid, sizeof gid, grh.dgid.raw);
	return snprintf(dst, cap,
			"{\"DGID\":%s,\"SGIDIndex\":%u,\"HopLimit\":%u,\"TrafficClass\":%u,\"FlowLabel\":%u,\"SL\":%u,"
			"\"PortNum\":%u,\"DLID\":%u}",
			gid, grh.sgid_index, grh.hop_limit, grh.traffic_class, grh.flow_label, ah->sl, ah->port_num,
			ah->dlid);
}

/* masked_attr copies the attributes mask names: the others may hold
 * anything (ibv_xsrq_pingpong leaves them uninitialised), and must not
 * reach the daemon as out-of-range values. */
static void masked_attr(struct ibv_qp_attr *dst, const struct ibv_qp_attr *src, int mask)
{
	memset(dst, 0, sizeof *dst);
#define M(bit, field)          \
	if (mask & (bit))      \
		dst->field = src->field;
	M(IBV_QP_STATE, qp_state)
	M(IBV_QP_CUR_STATE, cur_qp_state)
	M(IBV_QP_ACCESS_FLAGS, qp_access_flags)
	M(IBV_QP_PKEY_INDEX, pkey_index)
	M(IBV_QP_PORT, port_num)
	M(IBV_QP_QKEY, qkey)
	M(IBV_QP_AV, ah_attr)
	M(IBV_QP_PATH_MTU, path_mtu)
	M(IBV_QP_TIMEOUT, timeout)
	M(IBV_QP_RETRY_CNT, retry_cnt)
	M(IBV_QP_RNR_RETRY, rnr_retry)
	M(IBV_QP_RQ_PSN, rq_psn)
	M(IBV_QP_SQ_PSN, sq_psn)
	M(IBV_QP_MAX_QP_RD_ATOMIC, max_rd_atomic)
	M(IBV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic)
	M(IBV_QP_MIN_RNR_TIMER, min_rnr_timer)
	M(IBV_QP_DEST_QPN, dest_qp_num)
#undef M
}

VRDMA_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *given, int mask)
{
	struct vrdma_qp *q = (struct vrdma_qp *)qp;
	struct vrdma_context *ctx = to_vctx(qp->context);
	struct ibv_qp_attr masked, *attr = &masked;
	masked_attr(&masked, given, mask);
	char av[512];
	vrdma_av_json(av, sizeof av, &attr->ah_attr);
	struct vj_doc doc = {0};
	int rc = vrdma_cmd(ctx, VRDMA_CMD_MODIFY_QP, &doc, NULL, 0, NULL, NULL,
			   "{\"handle\":%u,\"mask\":%u,\"attr\":{\"State\":%u,\"CurState\":%u,\"AccessFlags\":%u,"
			   "\"PKeyIndex\":%u,\"PortNum\":%u,\"QKey\":%u,\"AV\":%s,\"PathMTU\":%u,\"Timeout\":%u,"
			   "\"RetryCnt\":%u,\"RNRRetry\":%u,\"RQPSN\":%u,\"SQPSN\":%u,\"MaxRdAtomic\":%u,"
			   "\"MaxDestRdAtomic\":%u,\"MinRNRTimer\":%u,\"DestQPN\":%u}}",
			   q->handle, (unsigned)mask, attr->qp_state, attr->cur_qp_state, attr->qp_access_flags,
			   attr->pkey_index, attr->port_num, attr->qkey, av, attr->path_mtu, attr->timeout,
			   attr->retry_cnt, attr->rnr_retry, attr->rq_psn, attr->sq_psn, attr->max_rd_atomic,
			   attr->max_dest_rd_atomic, attr->min_rnr_timer, attr->dest_qp_num);
	if (rc)
		return rc;
	uint64_t st = 0;
	vj_get_u64(&doc, 0, "state", &st);
	vrdma_doc_free(&doc);
	qp->state = (enum ibv_qp_state)st;
	if (st == IBV_QPS_RESET) {
		/* The daemon emptied the queues: start again where it stands. */
		pthread_spin_lock(&q->slock);
		q->sq_prod = vrdma_load32(q->mem, q->sq.off + VRDMA_RING_CONS_OFF);
		vrdma_store32(q->mem, q->sq.off + VRDMA_RING_PROD_OFF, q->sq_prod);
		pthread_spin_unlock(&q->slock);
		if (!qp->srq) {
			pthread_spin_lock(&q->rlock);
			q->rq_prod = vrdma_load32(q->mem, q->rq.off + VRDMA_RING_CONS_OFF);
			vrdma_store32(q->mem, q->rq.off + VRDMA_RING_PROD_OFF, q->rq_prod);
			pthread_spin_unlock(&q->rlock);
		}
		/* Its completions not yet polled go too, as with mlx5: a QP
		 * restarted from ERR (pyverbs' rereg MR tests) must not poll its
		 * old flushes. rxe's provider keeps them; see the commit. */
		if (qp->send_cq) /* an XRC target has none, an initiator no receive CQ */
			vrdma_cq_clean(qp->send_cq, qp->qp_num);
		if (qp->recv_cq && qp->recv_cq != qp->send_cq)
			vrdma_cq_clean(qp->recv_cq, qp->qp_num);
	}
	return 0;
}

VRDMA_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init)
{
	struct vrdma_qp *q = (struct vrdma_qp *)qp;
	struct vj_doc doc = {0};
	(void)mask; /* everything is returned, as providers do */
	int rc = vrdma_cmd(to_vctx(qp->context), VRDMA_CMD_QUERY_QP, &doc, NULL, 0, NULL, NULL, "{\"handle\":%u}",
			   q->handle);
	if (rc)
		return rc;
	int a = vj_get(&doc, 0, "attr"), av = vj_get(&doc, a, "AV");
	uint64_t v = 0;
	memset(attr, 0, sizeof *attr);
#define U(obj, key, field)                              \
	if (!vj_get_u64(&doc, obj, key, &v))            \
		attr->field = (__typeof__(attr->field))v;
	U(a, "State", qp_state)
	U(a, "CurState", cur_qp_state)
	U(a, "AccessFlags", qp_access_flags)
	U(a, "PKeyIndex", pkey_index)
	U(a, "PortNum", port_num)
	U(a, "QKey", qkey)
	U(a, "PathMTU", path_mtu)
	U(a, "Timeout", timeout)
	U(a, "RetryCnt", retry_cnt)
	U(a, "RNRRetry", rnr_retry)
	U(a, "RQPSN", rq_psn)
	U(a, "SQPSN", sq_psn)
	U(a, "MaxRdAtomic", max_rd_atomic)
	U(a, "MaxDestRdAtomic", max_dest_rd_atomic)
	U(a, "MinRNRTimer", min_rnr_timer)
	U(a, "DestQPN", dest_qp_num)
	U(av, "SGIDIndex", ah_attr.grh.sgid_index)
	U(av, "HopLimit", ah_attr.grh.hop_limit)
	U(av, "TrafficClass", ah_attr.grh.traffic_class)
	U(av, "FlowLabel", ah_attr.grh.flow_label)
	U(av, "SL", ah_attr.sl)
	U(av, "PortNum", ah_attr.port_num)
	U(av, "DLID", ah_attr.dlid)
#undef U
	int dgid = vj_get(&doc, av, "DGID");
	for (int i = 0; i < 16 && i < vj_len(&doc, dgid); i++)
		if (!vj_u64(&doc, vj_at(&doc, dgid, i), &v))
			attr->ah_attr.grh.dgid.raw[i] = (uint8_t)v;
	attr->ah_attr.is_global = 1;
	vrdma_doc_free(&doc);
	attr->cap = q->cap;
	attr->path_mig_state = IBV_MIG_MIGRATED;
	qp->state = attr->qp_state;
	if (init) {
		memset(init, 0, sizeof *init);
		init->qp_context = qp->qp_context;
		init->send_cq = qp->send_cq;
		init->recv_cq = qp->recv_cq;
		init->srq = qp->srq;
		init->cap = q->cap;
		init->qp_type = qp->qp_type;
		init->sq_sig_all = q->sq_sig_all;
	}
	return 0;
}

VRDMA_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct vrdma_qp *q = (struct vrdma_qp *)qp;
	struct vrdma_context *ctx = to_vctx(qp->context);
	int rc = vrdma_cmd_simple(ctx, VRDMA_CMD_DESTROY_QP, q->handle);
	if (vrdma_destroy_kept(ctx, rc))
		return rc;
	vrdma_untrack(ctx, q, VRDMA_OBJ_QP);
	munmap(q->mem, q->size);
	close(q->bell);
	pthread_spin_destroy(&q->slock);
	pthread_spin_destroy(&q->rlock);
	vrdma_own_free(q);
	vrdma_live(ctx, -1);
	return 0;
}

/* ---- shared receive queues ---- */

VRDMA_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *ibpd, struct ibv_srq_init_attr *attr)
{
	return vrdma_create_srq(ibpd, attr, 0, 0);
}

struct ibv_srq *vrdma_create_srq(struct ibv_pd *ibpd, struct ibv_srq_init_attr *attr, uint32_t xrcd_handle,
				 uint32_t cq_handle)
{
	struct vrdma_context *ctx = to_vctx(ibpd->context);
	struct vrdma_pd *pd = (struct vrdma_pd *)ibpd;
	struct vrdma_srq *s = vrdma_own_zalloc(sizeof *s); /* own.h */
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	struct vj_doc doc = {0};
	int fds[2] = {-1, -1}, nfds = 2;
	int rc = vrdma_cmd(ctx, VRDMA_CMD_CREATE_SRQ, &doc, NULL, 0, fds, &nfds,
			   "{\"pd\":%u,\"max_wr\":%u,\"max_sge\":%u,\"xrcd\":%u,\"cq\":%u}", pd->handle,
			   attr->attr.max_wr, attr->attr.max_sge, xrcd_handle, cq_handle);
	if (rc) {
		vrdma_own_free(s);
		errno = rc;
		return NULL;
	}
	uint64_t h = 0, srqn = 0;
	int64_t size = 0, max_wr = 0, max_sge = 0;
	if (xrcd_handle && (vj_get_u64(&doc, 0, "srqn", &srqn) || srqn == 0 || srqn > 0xffffff))
		rc = EPROTO;
	/* The ring, and for an SRQ on a device its doorbell (none for XRC). */
	if (nfds < 1 || nfds > 2 || (xrcd_handle && nfds != 1) || vj_get_u64(&doc, 0, "handle", &h) || vj_get_i64(&doc, 0, "size", &size) || size <= 0 ||
	    vj_get_i64(&doc, 0, "max_wr", &max_wr) || vj_get_i64(&doc, 0, "max_sge", &max_sge) ||
	    max_sge < 0 || max_sge > VRDMA_MAX_SGE || max_wr < 0 ||
	    vrdma_ring_from(&doc, vj_get(&doc, 0, "ring"), (size_t)size, &s->ring))
		rc = EPROTO;
	vrdma_doc_free(&doc);
	s->size = (size_t)size;
	rc = vrdma_take_region(ctx, rc, fds, nfds, s->size, &s->mem, VRDMA_CMD_DESTROY_SRQ, (uint32_t)h);
	if (rc) {
		vrdma_own_free(s);
		errno = rc;
		return NULL;
	}
	s->bell = nfds == 2 ? fds[1] : -1;
	s->handle = (uint32_t)h;
	s->srqn = (uint32_t)srqn;
	s->max_wr = (uint32_t)max_wr;
	s->max_sge = (int)max_sge;
	pthread_spin_init(&s->lock, PTHREAD_PROCESS_PRIVATE);
	s->ibsrq.context = ibpd->context;
	s->ibsrq.srq_context = attr->srq_context;
	s->ibsrq.pd = ibpd;
	s->ibsrq.handle = s->handle;
	pthread_mutex_init(&s->ibsrq.mutex, NULL);
	pthread_cond_init(&s->ibsrq.cond, NULL);
	attr->attr.max_wr = s->max_wr;
	attr->attr.max_sge = (uint32_t)s->max_sge;
	vrdma_track(ctx, s, VRDMA_OBJ_SRQ);
	vrdma_live(ctx, 1);
	return &s->ibsrq;
}

/* Reads the daemon's reply to a modify or query of s: its size and armed
 * limit, and after a resize (ring != 0) the new ring's layout. */
static int srq_attr_from(const struct vj_doc *doc, int ring, int64_t *max_wr, int64_t *limit, int64_t *size,
			 struct vrdma_ring *r)
{
	if (vj_get_i64(doc, 0, "max_wr", max_wr) || *max_wr <= 0 || *max_wr > VRDMA_MAX_RING_ENTRIES ||
	    vj_get_i64(doc, 0, "srq_limit", limit) || *limit < 0 || *limit > *max_wr)
		return EPROTO;
	if (ring && (vj_get_i64(doc, 0, "size", size) || *size <= 0 ||
		     vrdma_ring_from(doc, vj_get(doc, 0, "ring"), (size_t)*size, r) || r->entries != (uint32_t)*max_wr))
		return EPROTO;
	return 0;
}

/* ibv_modify_srq as rxe has it: IBV_SRQ_LIMIT arms the limit event (the
 * daemon raises IBV_EVENT_SRQ_LIMIT_REACHED once when fewer requests than
 * the limit remain posted, and disarms it); IBV_SRQ_MAX_WR resizes the
 * ring. For a resize the daemon makes a new ring, copies the requests not
 * yet consumed to the same indices and hands it over; the SRQ's lock is
 * held throughout, so no post writes the old ring meanwhile and the
 * producer index carries over. */
VRDMA_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	struct vrdma_srq *s = (struct vrdma_srq *)srq;
	struct vrdma_context *ctx = to_vctx(srq->context);
	if (!attr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return EINVAL;
	if (!mask)
		return 0;
	if ((mask & IBV_SRQ_MAX_WR) && (attr->max_wr == 0 || attr->max_wr > INT32_MAX))
		return EINVAL;
	if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > INT32_MAX)
		return EINVAL;
	pthread_spin_lock(&s->lock);
	if (vrdma_is_lost(ctx)) {
		pthread_spin_unlock(&s->lock);
		return EIO; /* the daemon is gone (lost.c) */
	}
	struct vj_doc doc = {0};
	int fds[1] = {-1}, nfds = 1;
	int rc = vrdma_cmd(ctx, VRDMA_CMD_MODIFY_SRQ, &doc, NULL, 0, fds, &nfds,
			   "{\"handle\":%u,\"mask\":%d,\"max_wr\":%u,\"srq_limit\":%u}", s->handle, mask,
			   (mask & IBV_SRQ_MAX_WR) ? attr->max_wr : 0, (mask & IBV_SRQ_LIMIT) ? attr->srq_limit : 0);
	if (rc) {
		pthread_spin_unlock(&s->lock);
		return rc;
	}
	int resize = (mask & IBV_SRQ_MAX_WR) != 0;
	int64_t max_wr = 0, limit = 0, size = 0;
	struct vrdma_ring ring = {0};
	rc = srq_attr_from(&doc, resize, &max_wr, &limit, &size, &ring);
	if (!resize && nfds != 0)
		rc = EPROTO;
	if (resize && nfds != 1)
		rc = EPROTO;
	if (resize && !rc && (ring.stride != s->ring.stride || max_wr < (int64_t)attr->max_wr))
		rc = EPROTO;
	vrdma_doc_free(&doc);
	if (!resize) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		s->max_wr = (uint32_t)max_wr;
		pthread_spin_unlock(&s->lock);
		return rc;
	}
	uint8_t *mem = NULL;
	rc = vrdma_take_region(ctx, rc, fds, nfds, (size_t)size, &mem, 0, 0); /* closes the descriptors */
	if (rc) {
		/* The daemon took the new ring, which we do not have: the SRQ
		 * is lost to this process, as the requests posted to it. */
		pthread_spin_unlock(&s->lock);
		vrdma_log("ibv_modify_srq: the daemon's new ring could not be taken (%s): the SRQ no longer receives",
			  strerror(rc));
		return rc;
	}
	munmap(s->mem, s->size);
	s->mem = mem;
	s->size = (size_t)size;
	s->ring = ring;
	s->max_wr = (uint32_t)max_wr;
	pthread_spin_unlock(&s->lock);
	return 0;
}

/* ibv_query_srq asks the daemon: the limit event disarms the limit there. */
VRDMA_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct vrdma_srq *s = (struct vrdma_srq *)srq;
	struct vrdma_context *ctx = to_vctx(srq->context);
	if (vrdma_is_lost(ctx))
		return EIO;
	struct vj_doc doc = {0};
	int rc = vrdma_cmd(ctx, VRDMA_CMD_QUERY_SRQ, &doc, NULL, 0, NULL, NULL, "{\"handle\":%u}", s->handle);
	if (rc)
		return rc;
	int64_t max_wr = 0, limit = 0;
	rc = srq_attr_from(&doc, 0, &max_wr, &limit, NULL, NULL);
	vrdma_doc_free(&doc);
	if (rc)
		return rc;
	attr->max_wr = (uint32_t)max_wr;
	attr->max_sge = (uint32_t)s->max_sge;
	attr->srq_limit = (uint32_t)limit;
	return 0;
}

VRDMA_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	struct vrdma_srq *s = (struct vrdma_srq *)srq;
	struct vrdma_context *ctx = to_vctx(srq->context);
	int rc = vrdma_cmd_simple(ctx, VRDMA_CMD_DESTROY_SRQ, s->handle);
	if (vrdma_destroy_kept(ctx, rc))
		return rc;
	vrdma_untrack(ctx, s, VRDMA_OBJ_SRQ);
	munmap(s->mem, s->size);
	if (s->bell >= 0)
		close(s->bell);
	pthread_spin_destroy(&s->lock);
	vrdma_own_free(s);
	vrdma_live(ctx, -1);
	return 0;
}

/* ---- address handles ---- */

VRDMA_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *ibpd, struct ibv_ah_attr *attr)
{
	struct vrdma_pd *pd = (struct vrdma_pd *)ibpd;
	char av[512];
	struct vrdma_ah *ah = calloc(1, sizeof *ah);
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	vrdma_av_json(av, sizeof av, attr);
	struct vj_doc doc = {0};
	int rc = vrdma_cmd(to_vctx(ibpd->context), VRDMA_CMD_CREATE_AH, &doc, NULL, 0, NULL, NULL,
			   "{\"pd\":%u,\"av\":%s}", pd->handle, av);
	uint64_t h = 0;
	if (!rc) {
		rc = vj_get_u64(&doc, 0, "handle", &h) ? EPROTO : 0;
		vrdma_doc_free(&doc);
	}
	if (rc) {
		free(ah);
		errno = rc;
		return NULL;
	}
	ah->ibah.context = ibpd->context;
	ah->ibah.pd = ibpd;
	ah->ibah.handle = (uint32_t)h;
	vrdma_live(to_vctx(ibpd->context), 1);
	return &ah->ibah;
}

VRDMA_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	int rc = vrdma_cmd_simple(to_vctx(ah->context), VRDMA_CMD_DESTROY_AH, ah->handle);
	if (vrdma_destroy_kept(to_vctx(ah->context), rc))
		return rc;
	vrdma_live(to_vctx(ah->context), -1);
	free(ah);
	return 0;
}

int vrdma_grh_addrs(const struct ibv_grh *grh, union ibv_gid *from, union ibv_gid *to, uint32_t *flow_label,
		    uint8_t *tclass)
{
	uint32_t flow = ntohl(grh->version_tclass_flow);
	const uint8_t *ip4 = (const uint8_t *)grh + 20;
	if (flow >> 28 == 6) {
		*from = grh->sgid;
		*to = grh->dgid;
		*flow_label = flow & 0xfffff;
		*tclass = (uint8_t)(flow >> 20);
		return 0;
	}
	if (ip4[0] != 0x45) {
		errno = EPROTONOSUPPORT; /* neither an IPv6 nor an IPv4 header */
		return -1;
	}
	memset(from, 0, sizeof *from);
	memset(to, 0, sizeof *to);
	from->raw[10] = from->raw[11] = to->raw[10] = to->raw[11] = 0xff;
	memcpy(&from->raw[12], ip4 + 12, 4);
	memcpy(&to->raw[12], ip4 + 16, 4);
	*flow_label = 0;
	*tclass = ip4[1];
	return 0;
}

VRDMA_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
				     struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	memset(ah_attr, 0, sizeof *ah_attr);
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH) || !grh) {
		errno = EINVAL; /* RoCE: a UD receive always has a GRH */
		return -1;
	}
	ah_attr->is_global = 1;
	ah_attr->grh.hop_limit = 0xff;
	union ibv_gid to; /* the address the sender used: one of ours */
	if (vrdma_grh_addrs(grh, &ah_attr->grh.dgid, &to, &ah_attr->grh.flow_label, &ah_attr->grh.traffic_class))
		return -1;
	/* The source GID index: the entry of our table the sender addressed. */
	for (int i = 0; i < VRDMA_MAX_GIDS; i++) {
		union ibv_gid g;
		if (ibv_query_gid(context, port_num, i, &g))
			break;
		if (memcmp(g.raw, to.raw, 16) == 0) {
			ah_attr->grh.sgid_index = (uint8_t)i;
			return 0;
		}
	}
	errno = ENOENT;
	return -1;
}

VRDMA_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
						  uint8_t port_num)
{
	struct ibv_ah_attr a;
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a))
		return NULL;
	return ibv_create_ah(pd, &a);
}
