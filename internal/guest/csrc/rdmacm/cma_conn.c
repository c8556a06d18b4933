/*
 * cma_conn.c: QPs on ids and connections: rdma_create_qp, rdma_connect,
 * rdma_accept, rdma_reject, rdma_disconnect, and the daemon's CM commands
 * they send. The daemon's connection manager exchanges the QPs' numbers,
 * PSNs, GIDs and path MTU; the library moves the QP from RESET to RTS with
 * them, as rdma-core's librdmacm does with what its kernel returns.
 */
#include "cma.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cma_b64(char *dst, const uint8_t *src, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i = 0;
	for (; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
		*dst++ = tab[v >> 18];
		*dst++ = tab[(v >> 12) & 63];
		*dst++ = tab[(v >> 6) & 63];
		*dst++ = tab[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)src[i] << 16 | (i + 1 < n ? (uint32_t)src[i + 1] << 8 : 0);
		*dst++ = tab[v >> 18];
		*dst++ = tab[(v >> 12) & 63];
		*dst++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		*dst++ = '=';
	}
	*dst = '\0';
}

int cma_cmd(struct cma_device *d, uint16_t op, char *reply, size_t cap, const char *fmt, ...)
{
	char body[1024], msg[256];
	va_list ap;

	if (d == NULL)
		return ENODEV;
	va_start(ap, fmt);
	int n = vsnprintf(body, sizeof body, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof body)
		return EINVAL;
	int r = vrdma_private_cm_call(d->verbs, op, body, (size_t)n, reply, cap, msg, sizeof msg);
	if (r != 0)
		vrdma_debug("rdma_cm: command %u: %s", op, msg[0] ? msg : strerror(r));
	return r;
}

/* ",\"private_data\":\"...\"" for n bytes of data, or "" for none. */
static void pdata_field(char *dst, size_t cap, const void *data, size_t n)
{
	char b64[4 * ((VRDMA_CM_PRIVATE_MAX + 2) / 3) + 1];
	dst[0] = '\0';
	if (data == NULL || n == 0 || n > VRDMA_CM_PRIVATE_MAX)
		return;
	cma_b64(b64, data, n);
	snprintf(dst, cap, ",\"private_data\":\"%s\"", b64);
}

/* rdma_cm's bounds on private data (what the IB CM's messages carry, less
 * rdma_cm's header where it adds one). */
enum { PDATA_REQ = 56, PDATA_REP = 196, PDATA_REJ = 148, PDATA_DREQ = 220, PDATA_SIDR_REQ = 180, PDATA_SIDR_REP = 136 };

static int modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int r = ibv_modify_qp(qp, a, mask);
	if (r != 0)
		vrdma_debug("rdma_cm: moving QP %u to state %d failed: %s", qp->qp_num, a->qp_state, strerror(r));
	return r;
}

/* A UD QP is ready to send as soon as it is created, with rdma_cm's Q_Key. */
static int ud_to_rts(struct cma_id *c)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = RDMA_UDP_QKEY };
	int r = modify(c->id.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	if (r == 0) {
		memset(&a, 0, sizeof a);
		a.qp_state = IBV_QPS_RTR;
		r = modify(c->id.qp, &a, IBV_QP_STATE);
	}
	if (r == 0) {
		memset(&a, 0, sizeof a);
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = c->psn;
		r = modify(c->id.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	return r;
}

/* The attributes that take a QP of type qpt to state st on id c, with
 * their mask: what cma_qp_connect applies and rdma_init_qp_attr hands to
 * an application moving its own QP. RTR and RTS need the peer (its
 * request or reply). 0 or an errno. */
static int qp_attr(struct cma_id *c, enum ibv_qp_type qpt, enum ibv_qp_state st, struct ibv_qp_attr *a, int *mask)
{
	const struct vrdma_cm_ev *p = &c->peer;
	memset(a, 0, sizeof *a);
	a->qp_state = st;
	switch (st) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = 1;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (qpt == IBV_QPT_UD) {
			a->qkey = RDMA_UDP_QKEY;
			*mask |= IBV_QP_QKEY;
		} else {
			a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					     IBV_ACCESS_REMOTE_ATOMIC;
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		if (qpt == IBV_QPT_UD) {
			*mask = IBV_QP_STATE;
			return 0;
		}
		a->path_mtu = p->mtu ? (enum ibv_mtu)p->mtu : (enum ibv_mtu)c->dev->active_mtu;
		a->dest_qp_num = p->qpn;
		/* IBTA's CM (and Linux's rdma_cm): the Starting PSN a side sends in
		 * its REQ or REP is the first it expects to receive; it sends from
		 * the peer's. */
		a->rq_psn = c->psn;
		a->max_dest_rd_atomic = c->rd_atomic;
		a->min_rnr_timer = 12;
		a->ah_attr.is_global = 1;
		memcpy(a->ah_attr.grh.dgid.raw, p->gid, 16);
		a->ah_attr.grh.sgid_index = p->sgid_index;
		a->ah_attr.grh.hop_limit = 64;
		a->ah_attr.grh.traffic_class = c->tos;
		a->ah_attr.port_num = 1;
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		/* The responder's attributes, for the QPs that respond (an XRC
		 * initiator never does), as the kernel's CM gives them. */
		if (qpt == IBV_QPT_RC || qpt == IBV_QPT_XRC_RECV)
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = qpt == IBV_QPT_UD ? c->psn : p->psn;
		/* RDMA_OPTION_ID_ACK_TIMEOUT overrides the CM's, as the kernel's rdma_cm. */
		a->timeout = c->ack_timeout_set ? c->ack_timeout : 14;
		a->retry_cnt = 7;
		a->rnr_retry = 7;
		a->max_rd_atomic = c->rd_atomic;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		/* The requester's, for the QPs that request; an XRC target only
		 * its ACK timeout (the kernel's CM: cm_init_qp_rts_attr). */
		if (qpt == IBV_QPT_RC || qpt == IBV_QPT_XRC_SEND)
			*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		else if (qpt == IBV_QPT_XRC_RECV)
			*mask |= IBV_QP_TIMEOUT;
		return 0;
	default:
		return EINVAL;
	}
}

/* RESET to INIT, as rdma-core's rdma_create_qp leaves a connected QP. */
static int conn_to_init(struct cma_id *c, struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	int mask;
	qp_attr(c, qp->qp_type, IBV_QPS_INIT, &a, &mask);
	return modify(qp, &a, mask);
}

int cma_qp_connect(struct cma_id *c)
{
	struct ibv_qp *qp = c->id.qp;
	struct ibv_qp_attr a;
	int mask, r;

	if (!c->qp_in_init && (r = conn_to_init(c, qp)) != 0)
		return r;
	c->qp_in_init = 0;
	qp_attr(c, qp->qp_type, IBV_QPS_RTR, &a, &mask);
	if ((r = modify(qp, &a, mask)) != 0)
		return r;
	qp_attr(c, qp->qp_type, IBV_QPS_RTS, &a, &mask);
	return modify(qp, &a, mask);
}

CMA_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr_out, int *qp_attr_mask)
{
	if (id == NULL || qp_attr_out == NULL || qp_attr_mask == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	if (c->dev == NULL)
		return cma_err(EINVAL); /* not bound to a device */
	enum ibv_qp_state st = qp_attr_out->qp_state;
	/* RTR and RTS need the peer: a request (child) or a reply. */
	if (st != IBV_QPS_INIT && c->state != CMA_REQ_RCVD && c->state != CMA_REPLY_RCVD &&
	    c->state != CMA_ACCEPTED && c->state != CMA_ESTABLISHED)
		return cma_err(EINVAL);
	if (st == IBV_QPS_RTR && c->state == CMA_REQ_RCVD)
		c->rd_atomic = c->rd_atomic < c->peer.rd_atomic ? c->rd_atomic : c->peer.rd_atomic;
	int r = qp_attr(c, id->qp_type, st, qp_attr_out, qp_attr_mask);
	return r ? cma_err(r) : 0;
}

static int fail_qp(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	return qp ? ibv_modify_qp(qp, &a, IBV_QP_STATE) : 0;
}

/* rdma_create_qp without CQs: the library makes them, each with a
 * completion channel (rdma_get_send_comp and rdma_get_recv_comp wait on
 * them); an XRC QP or SRQ needs only one of the two. */
int cma_create_cqs(struct cma_id *c, int send_n, int recv_n)
{
	struct rdma_cm_id *id = &c->id;
	int ok = 1;

	if (recv_n > 0) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		id->recv_cq = id->recv_cq_channel ? ibv_create_cq(id->verbs, recv_n, id, id->recv_cq_channel, 0) : NULL;
		ok = id->recv_cq != NULL;
	}
	if (ok && send_n > 0) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		id->send_cq = id->send_cq_channel ? ibv_create_cq(id->verbs, send_n, id, id->send_cq_channel, 0) : NULL;
		ok = id->send_cq != NULL;
	}
	c->own_cqs = 1;
	if (ok)
		return 0;
	int e = errno ? errno : ENOMEM;
	cma_destroy_cqs(c);
	return e;
}

void cma_destroy_cqs(struct cma_id *c)
{
	struct rdma_cm_id *id = &c->id;
	if (!c->own_cqs)
		return;
	if (id->recv_cq)
		ibv_destroy_cq(id->recv_cq);
	if (id->send_cq)
		ibv_destroy_cq(id->send_cq);
	if (id->recv_cq_channel)
		ibv_destroy_comp_channel(id->recv_cq_channel);
	if (id->send_cq_channel)
		ibv_destroy_comp_channel(id->send_cq_channel);
	id->recv_cq = id->send_cq = NULL;
	id->recv_cq_channel = id->send_cq_channel = NULL;
	c->own_cqs = 0;
}

/* rdma_create_qp and rdma_create_qp_ex: xrcd is an XRC_RECV QP's domain
 * (NULL: the device's). */
static int create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr,
		     struct ibv_xrcd *xrcd)
{
	if (id == NULL || qp_init_attr == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	if (id->verbs == NULL || c->dev == NULL)
		return cma_err(EINVAL); /* not bound to a device yet */
	if (id->qp != NULL)
		return cma_err(EINVAL);
	if (pd == NULL && (pd = cma_dev_pd(c->dev)) == NULL)
		return cma_err(ENOMEM);
	if (pd->context != id->verbs)
		return cma_err(EINVAL);
	int made = 0;
	struct ibv_qp *qp;
	int xrc = qp_init_attr->qp_type == IBV_QPT_XRC_SEND || qp_init_attr->qp_type == IBV_QPT_XRC_RECV;
	if (xrc) {
		qp = cma_xrc_create_qp(c, pd, qp_init_attr, xrcd, &made);
	} else {
		if (qp_init_attr->send_cq == NULL && qp_init_attr->recv_cq == NULL) {
			const struct ibv_qp_cap *cap = &qp_init_attr->cap;
			int r = cma_create_cqs(c, cap->max_send_wr ? (int)cap->max_send_wr : 1,
					       cap->max_recv_wr ? (int)cap->max_recv_wr : 1);
			if (r != 0)
				return cma_err(r);
			qp_init_attr->send_cq = id->send_cq;
			qp_init_attr->recv_cq = id->recv_cq;
			made = 1;
		}
		if (qp_init_attr->srq == NULL && id->srq != NULL)
			qp_init_attr->srq = id->srq;
		qp = ibv_create_qp(pd, qp_init_attr);
	}
	if (qp == NULL) {
		int e = errno;
		if (made) {
			cma_destroy_cqs(c);
			qp_init_attr->send_cq = qp_init_attr->recv_cq = NULL;
		}
		return cma_err(e ? e : ENOMEM);
	}
	uint32_t handle;
	(void)vrdma_private_qp_handle(qp, &handle); /* rdma_cm's: receives are taken in RESET */
	id->qp = qp;
	id->pd = pd;
	id->qp_type = qp->qp_type;
	/* A requester's RC or UC QP stays in RESET: the daemon's connection
	 * manager takes it from there (receives posted now are kept). A
	 * listener's child's goes to INIT, as with rdma-core. UD is ready at once. */
	if (qp->qp_type != IBV_QPT_UD && c->state == CMA_REQ_RCVD) {
		int r = conn_to_init(c, qp);
		if (r != 0) {
			ibv_destroy_qp(qp);
			id->qp = NULL;
			if (made)
				cma_destroy_cqs(c);
			return cma_err(r);
		}
		c->qp_in_init = 1;
	} else if (qp->qp_type == IBV_QPT_UD) {
		int r = ud_to_rts(c);
		if (r != 0) {
			ibv_destroy_qp(qp);
			id->qp = NULL;
			if (made)
				cma_destroy_cqs(c);
			return cma_err(r);
		}
	}
	return 0;
}

CMA_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	return create_qp(id, pd, qp_init_attr, NULL);
}

CMA_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	if (id == NULL || attr == NULL)
		return cma_err(EINVAL);
	if (attr->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD)) {
		vrdma_debug("rdma_create_qp_ex: comp_mask 0x%x beyond IBV_QP_INIT_ATTR_PD and _XRCD is not supported by vrdma",
			    attr->comp_mask);
		return cma_err(EOPNOTSUPP);
	}
	struct ibv_qp_init_attr a = {
		.qp_context = attr->qp_context, .send_cq = attr->send_cq, .recv_cq = attr->recv_cq,
		.srq = attr->srq, .cap = attr->cap, .qp_type = attr->qp_type, .sq_sig_all = attr->sq_sig_all,
	};
	struct ibv_xrcd *xrcd = (attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) ? attr->xrcd : NULL;
	int r = create_qp(id, (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : NULL, &a, xrcd);
	if (r == 0)
		attr->cap = a.cap;
	return r;
}

CMA_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (id == NULL || id->qp == NULL)
		return;
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	to_cid(id)->qp_in_init = 0;
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq != NULL)
		return; /* the receive CQ is the XRC SRQ's: it goes with it (rdma_destroy_srq) */
	cma_destroy_cqs(to_cid(id));
}

/* The application's own QP that conn_param's qp_num names (rdma-core:
 * for an id without a QP), on the id's device; NULL if none. */
static struct ibv_qp *ext_qp(struct cma_id *c, const struct rdma_conn_param *p)
{
	if (p == NULL || c->id.verbs == NULL)
		return NULL;
	struct ibv_qp *qp = vrdma_private_qp_by_num(c->id.verbs, p->qp_num);
	return qp && qp->qp_type == c->id.qp_type ? qp : NULL;
}

static uint8_t rd_of(struct cma_id *c, const struct rdma_conn_param *p)
{
	uint8_t v = c->dev ? c->dev->max_rd_atomic : 16;
	if (p != NULL) {
		uint8_t want = p->responder_resources > p->initiator_depth ? p->responder_resources : p->initiator_depth;
		if (want < v)
			v = want;
	}
	return v;
}

CMA_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	char pd[400], reply[512], addr[32];
	if (id == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	int ud = id->qp_type == IBV_QPT_UD;
	if (c->state != CMA_ROUTE_RESOLVED && !(ud && c->state == CMA_ADDR_RESOLVED))
		return cma_err(EINVAL);
	struct ibv_qp *qp = id->qp ? id->qp : ext_qp(c, conn_param);
	if (qp == NULL) {
		vrdma_debug("rdma_connect: no QP: make one with rdma_create_qp on the id, or name your own in conn_param's qp_num");
		return cma_err(EINVAL);
	}
	size_t plen = conn_param ? conn_param->private_data_len : 0;
	if (plen > (size_t)(ud ? PDATA_SIDR_REQ : PDATA_REQ) || (plen && conn_param->private_data == NULL))
		return cma_err(EINVAL);
	uint32_t handle = 0;
	if (vrdma_private_qp_handle(qp, &handle) != 0)
		return cma_err(EINVAL);
	c->rd_atomic = rd_of(c, conn_param);
	pdata_field(pd, sizeof pd, plen ? conn_param->private_data : NULL, plen);
	cma_b64(addr, id->route.addr.addr.ibaddr.dgid.raw, 16);
	uint32_t cmid = cma_dev_new_id(c->dev);
	pthread_mutex_lock(&cma_mu);
	c->cmid = cmid;
	c->state = CMA_CONNECT;
	pthread_mutex_unlock(&cma_mu);
	int r = cma_cmd(c->dev, VRDMA_CMD_CM_CONNECT, reply, sizeof reply,
			"{\"id\":%u,\"qp\":%u,\"psn\":%u,\"addr\":\"%s\",\"port\":%u%s,\"rd_atomic\":%u,\"keep_qp\":true}", cmid, handle,
			c->psn, addr, cma_sa_port(&id->route.addr.dst_addr), pd, c->rd_atomic);
	if (r == ENOENT) {
		/* The daemon finds no way to the peer's connection manager: with
		 * rdma-core that is an UNREACHABLE event after the request times
		 * out, which programs wait for (rping's CM thread ends the
		 * program on it), not a failed call. */
		pthread_mutex_lock(&cma_mu);
		c->cmid = 0;
		c->state = CMA_FAILED;
		pthread_mutex_unlock(&cma_mu);
		return cma_queue_local(c, RDMA_CM_EVENT_UNREACHABLE, -ENETUNREACH) ? cma_err(ENOMEM) : cma_complete(c);
	}
	if (r != 0) {
		pthread_mutex_lock(&cma_mu);
		c->cmid = 0;
		c->state = CMA_ROUTE_RESOLVED;
		pthread_mutex_unlock(&cma_mu);
		return cma_err(r);
	}
	struct vj_doc doc;
	uint64_t port = 0;
	if (vj_parse(&doc, reply, strlen(reply)) == 0) {
		if (vj_get_u64(&doc, 0, "local_port", &port) == 0 && port > 0 && port <= UINT16_MAX &&
		    cma_sa_port(&id->route.addr.src_addr) == 0)
			cma_sa_set_port(&id->route.addr.src_addr, (uint16_t)port);
		vj_free(&doc);
	}
	return cma_complete(c);
}

CMA_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	char pd[400];
	if (id == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	if (c->state == CMA_REPLY_RCVD) { /* the active side's confirmation, its QP its own */
		int r = cma_cmd(c->dev, VRDMA_CMD_CM_ACCEPT, NULL, 0, "{\"id\":%u}", c->cmid);
		if (r != 0)
			return cma_err(r);
		pthread_mutex_lock(&cma_mu);
		c->state = CMA_ESTABLISHED;
		pthread_mutex_unlock(&cma_mu);
		return 0;
	}
	if (c->state != CMA_REQ_RCVD)
		return cma_err(EINVAL);
	int ud = id->qp_type == IBV_QPT_UD;
	size_t plen = conn_param ? conn_param->private_data_len : 0;
	if (plen > (size_t)(ud ? PDATA_SIDR_REP : PDATA_REP) || (plen && conn_param->private_data == NULL))
		return cma_err(EINVAL);
	struct ibv_qp *qp = id->qp ? id->qp : ext_qp(c, conn_param);
	if (qp == NULL) {
		vrdma_debug("rdma_accept: no QP: make one with rdma_create_qp on the id, or name your own in conn_param's qp_num");
		return cma_err(EINVAL);
	}
	uint32_t handle = 0;
	if (vrdma_private_qp_handle(qp, &handle) != 0)
		return cma_err(EINVAL);
	pdata_field(pd, sizeof pd, plen ? conn_param->private_data : NULL, plen);
	int r;
	if (ud) {
		r = cma_cmd(c->dev, VRDMA_CMD_CM_ACCEPT, NULL, 0, "{\"id\":%u,\"qp\":%u%s}", c->cmid, handle, pd);
		if (r != 0)
			return cma_err(r);
		pthread_mutex_lock(&cma_mu);
		c->state = CMA_ESTABLISHED; /* SIDR: no confirmation follows */
		pthread_mutex_unlock(&cma_mu);
		return 0;
	}
	if ((c->peer.qp_type == IBV_QPT_XRC_SEND) != (qp->qp_type == IBV_QPT_XRC_RECV)) {
		/* An XRC initiator is answered by an XRC_RECV QP, anything else
		 * not: refused, and the requester told at once (IBTA: invalid
		 * transport type) rather than left to time out. */
		vrdma_debug("rdma_accept: the request is from a QP of type %u; QP %u of type %d cannot answer it",
			    c->peer.qp_type, qp->qp_num, qp->qp_type);
		(void)cma_cmd(c->dev, VRDMA_CMD_CM_REJECT, NULL, 0, "{\"id\":%u,\"reason\":9}", c->cmid);
		fail_qp(id->qp);
		pthread_mutex_lock(&cma_mu);
		c->state = CMA_FAILED;
		pthread_mutex_unlock(&cma_mu);
		return cma_err(EINVAL);
	}
	uint8_t rd = rd_of(c, conn_param);
	c->rd_atomic = rd < c->peer.rd_atomic ? rd : c->peer.rd_atomic;
	/* An application's own QP it has moved itself (rdma_init_qp_attr). */
	if (id->qp != NULL && (r = cma_qp_connect(c)) != 0) {
		(void)cma_cmd(c->dev, VRDMA_CMD_CM_REJECT, NULL, 0, "{\"id\":%u,\"reason\":1}", c->cmid);
		fail_qp(id->qp);
		return cma_err(r);
	}
	pthread_mutex_lock(&cma_mu);
	c->state = CMA_ACCEPTED;
	pthread_mutex_unlock(&cma_mu);
	r = cma_cmd(c->dev, VRDMA_CMD_CM_ACCEPT, NULL, 0, "{\"id\":%u,\"qp\":%u,\"psn\":%u%s,\"rd_atomic\":%u,\"keep_qp\":true}", c->cmid,
		    handle, c->psn, pd, c->rd_atomic);
	if (r != 0) {
		fail_qp(qp);
		pthread_mutex_lock(&cma_mu);
		c->state = CMA_FAILED;
		pthread_mutex_unlock(&cma_mu);
		return cma_err(r == ENOENT ? ECONNRESET : r);
	}
	return cma_complete(c);
}

CMA_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	char pd[400];
	if (id == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	if (c->state != CMA_REQ_RCVD && c->state != CMA_REPLY_RCVD)
		return cma_err(EINVAL);
	if (private_data_len > PDATA_REJ || (private_data_len && private_data == NULL))
		return cma_err(EINVAL);
	pdata_field(pd, sizeof pd, private_data, private_data_len);
	int r = cma_cmd(c->dev, VRDMA_CMD_CM_REJECT, NULL, 0, "{\"id\":%u%s}", c->cmid, pd);
	pthread_mutex_lock(&cma_mu);
	c->state = CMA_FAILED;
	pthread_mutex_unlock(&cma_mu);
	return r == 0 || r == ENOENT ? 0 : cma_err(r);
}

CMA_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return rdma_reject(id, private_data, private_data_len);
}

CMA_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	if (id == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	switch (c->state) {
	case CMA_ESTABLISHED:
	case CMA_ACCEPTED:
	case CMA_REPLY_RCVD:
	case CMA_DISCONNECTED:
		break;
	default:
		return cma_err(EINVAL);
	}
	if (id->qp_type == IBV_QPT_UD)
		return 0; /* nothing to end */
	(void)fail_qp(id->qp); /* rdma_cm moves the QP to ERR */
	if (c->state == CMA_DISCONNECTED)
		return 0; /* the peer ended it: its event is here or on its way */
	int r = cma_cmd(c->dev, VRDMA_CMD_CM_DISCONNECT, NULL, 0, "{\"id\":%u}", c->cmid);
	if (r == ENOENT || r == EINVAL)
		r = 0; /* ended meanwhile */
	if (r == 0) {
		pthread_mutex_lock(&cma_mu);
		c->state = CMA_DISCONNECTED; /* its DISCONNECTED event follows the peer's answer */
		pthread_mutex_unlock(&cma_mu);
	}
	return r ? cma_err(r) : 0;
}

void cma_release(struct cma_id *c)
{
	enum cma_state st;
	pthread_mutex_lock(&cma_mu);
	st = c->state;
	c->state = CMA_IDLE;
	pthread_mutex_unlock(&cma_mu);
	if (c->cmid == 0 || c->dev == NULL || c->dev->dead)
		return;
	switch (st) {
	case CMA_LISTEN:
		(void)cma_cmd(c->dev, VRDMA_CMD_CM_CANCEL_LISTEN, NULL, 0, "{\"id\":%u}", c->cmid);
		break;
	case CMA_CONNECT:
	case CMA_REPLY_RCVD:
	case CMA_REQ_RCVD:
		(void)cma_cmd(c->dev, VRDMA_CMD_CM_REJECT, NULL, 0, "{\"id\":%u}", c->cmid);
		break;
	case CMA_ACCEPTED:
	case CMA_ESTABLISHED:
		if (c->id.qp_type != IBV_QPT_UD)
			(void)cma_cmd(c->dev, VRDMA_CMD_CM_DISCONNECT, NULL, 0, "{\"id\":%u}", c->cmid);
		break;
	default:
		break;
	}
}

CMA_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	if (id == NULL)
		return cma_err(EINVAL);
	if (to_cid(id)->state != CMA_REPLY_RCVD || id->qp != NULL)
		return cma_err(EINVAL);
	return rdma_accept(id, NULL);
}
