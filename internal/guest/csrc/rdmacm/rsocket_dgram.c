/*
 * rsocket_dgram.c: datagram rsockets on rdma-core's UDP rsocket protocol
 * (docs/design/rsockets.md, "Datagrams"). The rsocket's descriptor is a
 * kernel UDP socket, bound and connected as the application asks; data
 * goes over UD QPs, one per local source address, each message a
 * ds_header (the sender's address and port) and the data. A peer's QP
 * number is learnt over UDP: the first datagram to a peer goes on the
 * UDP socket after a ds_udp_header naming the sender's QP, and the
 * receiver answers with an RS_OP_CTRL header naming its own; each side
 * then makes an address handle through the connection manager. No thread
 * is started (rdma-core serves the UDP sockets from one): the UDP socket
 * is read whenever the rsocket is used or polled.
 *
 * What a peer sends is checked before it is used: a UDP header with
 * another tag, version or length, shorter than it says, or an op that is
 * neither data nor the answer is dropped; so is a UD message shorter than
 * the GRH and a ds_header, or whose header's version and length disagree
 * or exceed what arrived (rdma-core takes a 24-byte IPv6 length from a
 * message that may be 8 bytes long).
 */
#include "cma.h"
#include "rsocket.h"

#include <endian.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define DS_UDP_SLOTS 16           /* datagrams that came over UDP, waiting to be read */
#define DS_WR_RECV (1ull << 63)   /* wr_id: a receive (the rest: its offset) */
#define DS_CM_TIMEOUT_MS 2000

/* A UD QP serving one local source address. */
struct ds_qp {
	struct ds_qp *next;
	struct rsocket *rs;
	struct rdma_cm_id *id;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	int armed;
	struct ibv_mr *smr, *rmr;
	uint8_t *rbuf; /* rq_size slots of DS_MSG_SIZE, then the GRH all receives write */
	struct sockaddr_storage src; /* with the UDP socket's port */
	struct ds_header hdr;        /* what this QP's messages start with */
};

/* A peer: its address, the QP that reaches it, its QP and address handle once known. */
struct ds_dest {
	struct ds_dest *next;
	struct sockaddr_storage addr;
	struct ds_qp *qp;
	struct ibv_ah *ah;
	uint32_t qpn;
	uint32_t mtu; /* the most a UD message to it carries (the path's MTU) */
};

/* A datagram received and not yet read: in qp's rbuf, or (qp NULL) in the UDP slots. */
struct ds_rmsg {
	struct ds_qp *qp;
	uint32_t offset, length; /* length: the ds_header and the data */
};

struct rs_dgram {
	int domain;
	int ready; /* the buffers are made (at rbind, rconnect or the first send) */
	int epfd;  /* the QPs' CQ channels */
	int cq_armed;
	struct ds_qp *qps;
	struct ds_dest *dests;
	struct ds_dest *conn_dest; /* rconnect's peer */
	uint8_t *sbuf;             /* sq_size slots of DS_MSG_SIZE */
	uint32_t *sfree;           /* free send slots: a stack */
	int nsfree;
	int rqe_avail; /* datagrams that may still be queued */
	struct ds_rmsg *dmsg; /* rq_size + 1 entries: a ring */
	int head, tail;
	uint8_t *ubuf; /* DS_UDP_SLOTS slots of DS_MSG_SIZE */
	uint8_t uused[DS_UDP_SLOTS];
};

static void *ds_alloc(size_t len)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, len ? len : 1) != 0)
		return NULL;
	memset(p, 0, len);
	return p;
}

struct rsocket *ds_new(int domain, int fs_flags, int fd_flags)
{
	struct rsocket *rs = calloc(1, sizeof(*rs));
	struct rs_dgram *dg = calloc(1, sizeof(*dg));
	if (!rs || !dg) {
		free(rs);
		free(dg);
		errno = ENOMEM;
		return NULL;
	}
	rs->fd = socket(domain, SOCK_DGRAM | ((fd_flags & FD_CLOEXEC) ? SOCK_CLOEXEC : 0), 0);
	if (rs->fd < 0) {
		int e = errno;
		free(rs);
		free(dg);
		errno = e;
		return NULL;
	}
	pthread_mutex_init(&rs->mu, NULL);
	dg->domain = domain;
	dg->epfd = -1;
	rs->dg = dg;
	rs->fs_flags = fs_flags;
	rs->fd_flags = fd_flags;
	rs->sq_size = rs->rq_size = RS_DEF_QSIZE;
	rs->sq_inline = RS_DEF_INLINE;
	rs->sbuf_size = rs->rbuf_size = RS_DEF_MEM;
	rs->readable = rs->writable = 1;
	return rs;
}

/* Takes qp's CQ channel events without waiting: whether there were any. */
static int ds_qp_events(struct ds_qp *qp)
{
	struct ibv_cq *cq;
	void *ctx;
	int any = 0;
	while (ibv_get_cq_event(qp->cch, &cq, &ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		qp->armed = 0;
		any = 1;
	}
	return any;
}

static void ds_free_qp(struct ds_qp *qp)
{
	if (qp->id && qp->id->qp)
		rdma_destroy_qp(qp->id);
	if (qp->cq) {
		(void)ds_qp_events(qp);
		ibv_destroy_cq(qp->cq);
	}
	if (qp->cch)
		ibv_destroy_comp_channel(qp->cch);
	if (qp->smr)
		ibv_dereg_mr(qp->smr);
	if (qp->rmr)
		ibv_dereg_mr(qp->rmr);
	if (qp->id)
		rdma_destroy_id(qp->id);
	free(qp->rbuf);
	free(qp);
}

void ds_free(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;
	while (dg->dests) {
		struct ds_dest *d = dg->dests;
		dg->dests = d->next;
		if (d->ah)
			ibv_destroy_ah(d->ah);
		free(d);
	}
	while (dg->qps) {
		struct ds_qp *qp = dg->qps;
		dg->qps = qp->next;
		qp->next = NULL;
		ds_free_qp(qp);
	}
	if (dg->epfd >= 0)
		close(dg->epfd);
	close(rs->fd);
	free(dg->sbuf);
	free(dg->sfree);
	free(dg->dmsg);
	free(dg->ubuf);
	free(dg);
	pthread_mutex_destroy(&rs->mu);
	free(rs);
}

int ds_ready(const struct rsocket *rs)
{
	return rs->dg->ready;
}

/* The buffers, sized as rdma-core sizes them: a slot of DS_MSG_SIZE per
 * queue entry, as many entries as SO_SNDBUF/SO_RCVBUF hold. */
static int ds_init_ep(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;
	if (dg->ready)
		return 0;
	if (rs->sq_size > RS_QP_MAX_SIZE)
		rs->sq_size = RS_QP_MAX_SIZE;
	if (rs->rq_size > RS_QP_MAX_SIZE)
		rs->rq_size = RS_QP_MAX_SIZE;
	if (rs->rq_size > rs->rbuf_size / DS_MSG_SIZE)
		rs->rq_size = rs->rbuf_size / DS_MSG_SIZE;
	if (rs->sq_size > rs->sbuf_size / DS_MSG_SIZE)
		rs->sq_size = rs->sbuf_size / DS_MSG_SIZE;
	if (rs->rq_size < 2)
		rs->rq_size = 2;
	if (rs->sq_size < 2)
		rs->sq_size = 2;
	rs->rbuf_size = rs->rq_size * DS_MSG_SIZE;
	rs->sbuf_size = rs->sq_size * DS_MSG_SIZE;

	dg->sbuf = ds_alloc(rs->sbuf_size);
	dg->sfree = calloc(rs->sq_size, sizeof(*dg->sfree));
	dg->dmsg = calloc(rs->rq_size + 1, sizeof(*dg->dmsg));
	dg->ubuf = ds_alloc(DS_UDP_SLOTS * DS_MSG_SIZE);
	if (dg->epfd < 0)
		dg->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!dg->sbuf || !dg->sfree || !dg->dmsg || !dg->ubuf || dg->epfd < 0) {
		free(dg->sbuf), free(dg->sfree), free(dg->dmsg), free(dg->ubuf);
		dg->sbuf = NULL, dg->sfree = NULL, dg->dmsg = NULL, dg->ubuf = NULL;
		errno = ENOMEM;
		return -1;
	}
	for (uint32_t i = 0; i < rs->sq_size; i++)
		dg->sfree[i] = rs->sq_size - 1 - i;
	dg->nsfree = (int)rs->sq_size;
	dg->rqe_avail = (int)rs->rq_size;
	dg->ready = 1;
	return 0;
}

/* ---- addresses ---- */

static uint16_t sa_port(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
					: ((const struct sockaddr_in6 *)ss)->sin6_port;
}

static void sa_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = port;
	else
		((struct sockaddr_in6 *)ss)->sin6_port = port;
}

static socklen_t sa_len(int family)
{
	return family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

/* Whether two addresses name the same socket (family, address, port, scope). */
static int sa_same(const struct sockaddr_storage *a, const struct sockaddr *b)
{
	if (a->ss_family != b->sa_family)
		return 0;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
	       memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
}

/* Copies an address the application gave into ss: 0, or -1 with errno. */
static int sa_take(struct sockaddr_storage *ss, const struct sockaddr *sa, socklen_t len)
{
	if (!sa || len < sizeof(sa_family_t) || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    len < sa_len(sa->sa_family)) {
		errno = sa && len >= sizeof(sa_family_t) && sa->sa_family != AF_INET && sa->sa_family != AF_INET6
				? EAFNOSUPPORT
				: EINVAL;
		return -1;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, sa, sa_len(sa->sa_family));
	return 0;
}

static int sa_any_or_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		uint32_t a = ((const struct sockaddr_in *)ss)->sin_addr.s_addr;
		return a == htonl(INADDR_ANY) || a == htonl(INADDR_LOOPBACK);
	}
	const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
	return IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LOOPBACK(a);
}

/* The local address datagrams to dst leave from: the UDP socket's, or,
 * when that is a wildcard or loopback, the one the kernel routes dst
 * from, with the socket's port (as rdma-core). An unbound socket is bound
 * first (rdma-core's would name port 0). */
static int ds_src_addr(struct rsocket *rs, const struct sockaddr_storage *dst, struct sockaddr_storage *src)
{
	socklen_t len = sizeof(*src);
	memset(src, 0, sizeof(*src));
	if (getsockname(rs->fd, (struct sockaddr *)src, &len) != 0)
		return -1;
	if (sa_port(src) == 0) {
		struct sockaddr_storage any = {.ss_family = (sa_family_t)rs->dg->domain};
		if (bind(rs->fd, (struct sockaddr *)&any, sa_len(rs->dg->domain)) != 0)
			return -1;
		len = sizeof(*src);
		if (getsockname(rs->fd, (struct sockaddr *)src, &len) != 0)
			return -1;
	}
	if (!sa_any_or_loopback(src))
		return 0;
	uint16_t port = sa_port(src);
	int s = socket(dst->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	len = sizeof(*src);
	int r = connect(s, (const struct sockaddr *)dst, sa_len(dst->ss_family));
	if (r == 0)
		r = getsockname(s, (struct sockaddr *)src, &len);
	int e = errno;
	close(s);
	if (r != 0) {
		errno = e;
		return -1;
	}
	sa_set_port(src, port);
	return 0;
}

static void ds_format_hdr(struct ds_header *h, const struct sockaddr_storage *ss)
{
	memset(h, 0, sizeof(*h));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;
		h->version = 4;
		h->length = DS_IPV4_HDR_LEN;
		h->port = a->sin_port;
		h->addr.ipv4 = a->sin_addr.s_addr;
	} else {
		const struct sockaddr_in6 *a = (const void *)ss;
		h->version = 6;
		h->length = DS_IPV6_HDR_LEN;
		h->port = a->sin6_port;
		h->addr.ipv6.flowinfo = a->sin6_flowinfo;
		memcpy(h->addr.ipv6.addr, &a->sin6_addr, 16);
	}
}

/* The address a checked ds_header names, as rrecvfrom reports it. */
static void ds_hdr_addr(const struct ds_header *h, struct sockaddr *out, socklen_t *len)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	if (h->version == 4) {
		struct sockaddr_in *a = (void *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = h->port;
		a->sin_addr.s_addr = h->addr.ipv4;
	} else {
		struct sockaddr_in6 *a = (void *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = h->port;
		a->sin6_flowinfo = h->addr.ipv6.flowinfo;
		memcpy(&a->sin6_addr, h->addr.ipv6.addr, 16);
	}
	socklen_t n = sa_len(ss.ss_family);
	memcpy(out, &ss, *len < n ? *len : n);
	*len = n;
}

/* ---- QPs and peers ---- */

static int ds_post_recv(struct ds_qp *qp, uint32_t offset)
{
	struct rsocket *rs = qp->rs;
	struct ibv_sge sge[2] = {
		{.addr = (uintptr_t)qp->rbuf + rs->rbuf_size, .length = DS_GRH_LEN, .lkey = qp->rmr->lkey},
		{.addr = (uintptr_t)qp->rbuf + offset, .length = DS_MSG_SIZE, .lkey = qp->rmr->lkey},
	};
	struct ibv_recv_wr wr = {.wr_id = DS_WR_RECV | offset, .sg_list = sge, .num_sge = 2}, *bad;
	return ibv_post_recv(qp->id->qp, &wr, &bad);
}

/* A UD QP for the local address src: 0, or -1 with errno. */
static int ds_create_qp(struct rsocket *rs, const struct sockaddr_storage *src, struct ds_qp **out)
{
	struct rs_dgram *dg = rs->dg;
	struct ds_qp *qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return -1;
	}
	qp->rs = rs;
	qp->src = *src;
	ds_format_hdr(&qp->hdr, src);
	struct sockaddr_storage b = *src;
	sa_set_port(&b, 0); /* the port is the UDP socket's; the QP's id needs only the device */
	if (rdma_create_id(NULL, &qp->id, qp, RDMA_PS_UDP) != 0 || rdma_bind_addr(qp->id, (struct sockaddr *)&b) != 0)
		goto fail;
	qp->cch = ibv_create_comp_channel(qp->id->verbs);
	if (!qp->cch)
		goto fail;
	int fl = fcntl(qp->cch->fd, F_GETFL);
	if (fl < 0 || fcntl(qp->cch->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		goto fail;
	qp->cq = ibv_create_cq(qp->id->verbs, (int)(rs->sq_size + rs->rq_size), qp, qp->cch, 0);
	if (!qp->cq)
		goto fail;
	struct ibv_qp_init_attr qa = {
		.qp_context = qp,
		.send_cq = qp->cq,
		.recv_cq = qp->cq,
		.qp_type = IBV_QPT_UD,
		.sq_sig_all = 1,
		.cap = {.max_send_wr = rs->sq_size, .max_recv_wr = rs->rq_size, .max_send_sge = 1, .max_recv_sge = 2,
			.max_inline_data = rs->sq_inline},
	};
	if (rdma_create_qp(qp->id, NULL, &qa) != 0) {
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(qp->id, NULL, &qa) != 0)
			goto fail;
	}
	if (qa.cap.max_inline_data < rs->sq_inline)
		rs->sq_inline = qa.cap.max_inline_data;
	qp->rbuf = ds_alloc(rs->rbuf_size + DS_GRH_LEN);
	if (!qp->rbuf) {
		errno = ENOMEM;
		goto fail;
	}
	qp->smr = ibv_reg_mr(qp->id->pd, dg->sbuf, rs->sbuf_size, IBV_ACCESS_LOCAL_WRITE);
	qp->rmr = ibv_reg_mr(qp->id->pd, qp->rbuf, rs->rbuf_size + DS_GRH_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!qp->smr || !qp->rmr)
		goto fail;
	for (uint32_t i = 0; i < rs->rq_size; i++) {
		int e = ds_post_recv(qp, i * DS_MSG_SIZE);
		if (e) {
			errno = e;
			goto fail;
		}
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = qp};
	if (epoll_ctl(dg->epfd, EPOLL_CTL_ADD, qp->cch->fd, &ev) != 0)
		goto fail;
	ibv_req_notify_cq(qp->cq, 0);
	qp->armed = 1;
	qp->next = dg->qps;
	dg->qps = qp;
	*out = qp;
	vrdma_debug("rsocket: datagram rsocket %d: UD QP %u on %s", rs->fd, qp->id->qp->qp_num,
		    ibv_get_device_name(qp->id->verbs->device));
	return 0;
fail:;
	int e = errno ? errno : ENOMEM;
	vrdma_debug("rsocket: datagram rsocket %d: no UD QP: %s", rs->fd, strerror(e));
	ds_free_qp(qp);
	errno = e;
	return -1;
}

/* The peer at addr, made on first use: 0, or -1 with errno. */
static int ds_get_dest(struct rsocket *rs, const struct sockaddr_storage *addr, struct ds_dest **out)
{
	struct rs_dgram *dg = rs->dg;
	for (struct ds_dest *d = dg->dests; d; d = d->next) {
		if (sa_same(&d->addr, (const struct sockaddr *)addr)) {
			*out = d;
			return 0;
		}
	}
	struct sockaddr_storage src;
	if (ds_src_addr(rs, addr, &src) != 0)
		return -1;
	struct ds_qp *qp = NULL;
	for (struct ds_qp *q = dg->qps; q; q = q->next)
		if (sa_same(&q->src, (const struct sockaddr *)&src))
			qp = q;
	if (!qp && ds_create_qp(rs, &src, &qp) != 0)
		return -1;
	struct ds_dest *d = calloc(1, sizeof(*d));
	if (!d) {
		errno = ENOMEM;
		return -1;
	}
	d->addr = *addr;
	d->qp = qp;
	d->next = dg->dests;
	dg->dests = d;
	*out = d;
	return 0;
}

/* The address handle to a peer whose QP is qpn, through the connection
 * manager's route from the QP's address to the peer's. */
static void ds_make_ah(struct ds_dest *d, uint32_t qpn)
{
	struct rdma_cm_id *id;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP) != 0)
		return;
	struct sockaddr_storage src = d->qp->src;
	sa_set_port(&src, 0);
	struct ibv_ah *ah = NULL;
	if (rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&d->addr, DS_CM_TIMEOUT_MS) == 0 &&
	    rdma_resolve_route(id, DS_CM_TIMEOUT_MS) == 0 && id->route.path_rec) {
		struct ibv_sa_path_rec *p = id->route.path_rec;
		struct ibv_context *ctx = d->qp->id->verbs;
		uint8_t port = d->qp->id->port_num ? d->qp->id->port_num : 1;
		struct ibv_ah_attr a = {.dlid = be16toh(p->dlid), .sl = p->sl, .port_num = port};
		if (p->hop_limit > 1) {
			a.is_global = 1;
			a.grh.dgid = p->dgid;
			a.grh.flow_label = be32toh(p->flow_label);
			a.grh.hop_limit = p->hop_limit;
			a.grh.traffic_class = p->traffic_class;
			for (int i = 0; i < CMA_MAX_GIDS; i++) {
				union ibv_gid g;
				if (ibv_query_gid(ctx, port, i, &g) == 0 && memcmp(&g, &p->sgid, sizeof(g)) == 0) {
					a.grh.sgid_index = (uint8_t)i;
					break;
				}
			}
		}
		ah = ibv_create_ah(d->qp->id->pd, &a);
		d->mtu = p->mtu >= IBV_MTU_256 && p->mtu <= IBV_MTU_4096 ? 128u << p->mtu : 256;
	}
	if (!ah)
		vrdma_debug("rsocket: no address handle to a datagram peer (QP %u): %s", qpn, strerror(errno));
	rdma_destroy_id(id);
	if (!ah)
		return;
	if (d->ah)
		ibv_destroy_ah(d->ah);
	d->ah = ah;
	d->qpn = qpn;
}

/* ---- the UDP socket ---- */

/* Sends len bytes of data (or none) to d over the UDP socket after a
 * ds_udp_header with op: what was sent of the data, or -1 with errno. */
static ssize_t ds_send_udp(struct rsocket *rs, struct ds_dest *d, const uint8_t *data, size_t len, int flags, uint8_t op)
{
	struct ds_udp_header h = {.tag = htobe32(DS_UDP_TAG), .version = d->qp->hdr.version, .op = op};
	h.qpn = htobe32(d->qp->id->qp->qp_num & 0xFFFFFF);
	if (h.version == 4) {
		h.length = DS_UDP_IPV4_HDR_LEN;
		h.addr.ipv4 = d->qp->hdr.addr.ipv4;
	} else {
		h.length = DS_UDP_IPV6_HDR_LEN;
		memcpy(h.addr.ipv6, d->qp->hdr.addr.ipv6.addr, 16);
	}
	struct iovec v[2] = {{&h, h.length}, {(void *)data, len}};
	struct msghdr m = {.msg_name = &d->addr, .msg_namelen = sa_len(d->addr.ss_family), .msg_iov = v, .msg_iovlen = len ? 2 : 1};
	ssize_t n = sendmsg(rs->fd, &m, flags | MSG_DONTWAIT | MSG_NOSIGNAL);
	return n < 0 ? n : n - h.length;
}

/* Whether a UDP message of n bytes from family fam starts with a header
 * of rdma-core's datagram rsockets. */
static int ds_valid_udp(const struct ds_udp_header *h, size_t n, int fam)
{
	if (n < DS_UDP_IPV4_HDR_LEN || be32toh(h->tag) != DS_UDP_TAG)
		return 0;
	if (h->op != RS_OP_DATA && h->op != RS_OP_CTRL)
		return 0;
	if (h->version == 4 && fam == AF_INET && h->length == DS_UDP_IPV4_HDR_LEN)
		return n >= DS_UDP_IPV4_HDR_LEN;
	if (h->version == 6 && fam == AF_INET6 && h->length == DS_UDP_IPV6_HDR_LEN)
		return n >= DS_UDP_IPV6_HDR_LEN;
	return 0;
}

/* Queues data that came over UDP from src, after a ds_header naming src. */
static void ds_queue_udp(struct rsocket *rs, const struct sockaddr_storage *src, const uint8_t *data, size_t len)
{
	struct rs_dgram *dg = rs->dg;
	struct ds_header h;
	ds_format_hdr(&h, src);
	if (len > (size_t)(DS_MSG_SIZE - h.length) || !dg->rqe_avail) {
		vrdma_debug("rsocket: datagram rsocket %d drops a UDP datagram of %zu bytes (%s)", rs->fd, len,
			    dg->rqe_avail ? "larger than a UD message" : "no room");
		return;
	}
	int slot = -1;
	for (int i = 0; i < DS_UDP_SLOTS && slot < 0; i++)
		if (!dg->uused[i])
			slot = i;
	if (slot < 0)
		return;
	uint8_t *p = dg->ubuf + (size_t)slot * DS_MSG_SIZE;
	memcpy(p, &h, h.length);
	memcpy(p + h.length, data, len);
	dg->uused[slot] = 1;
	dg->rqe_avail--;
	dg->dmsg[dg->tail] = (struct ds_rmsg){.qp = NULL, .offset = (uint32_t)slot * DS_MSG_SIZE,
					      .length = (uint32_t)(h.length + len)};
	if (++dg->tail == (int)rs->rq_size + 1)
		dg->tail = 0;
}

/* Reads the UDP socket until it is empty: answers and queues data, makes
 * address handles for the QP numbers peers name. */
static void ds_udp_input(struct rsocket *rs)
{
	uint8_t buf[DS_MSG_SIZE + DS_UDP_IPV6_HDR_LEN];
	for (;;) {
		struct sockaddr_storage from;
		socklen_t flen = sizeof(from);
		memset(&from, 0, sizeof(from));
		ssize_t n = recvfrom(rs->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &flen);
		if (n < 0)
			return;
		struct ds_udp_header h;
		memset(&h, 0, sizeof(h));
		memcpy(&h, buf, (size_t)n < sizeof(h) ? (size_t)n : sizeof(h));
		if ((size_t)n > sizeof(buf) || !ds_valid_udp(&h, (size_t)n, from.ss_family)) {
			vrdma_debug("rsocket: datagram rsocket %d drops a UDP message of %zd bytes that is not an rsocket's",
				    rs->fd, n);
			continue;
		}
		struct ds_dest *d;
		if (ds_get_dest(rs, &from, &d) != 0)
			continue;
		if (h.op == RS_OP_DATA)
			(void)ds_send_udp(rs, d, NULL, 0, 0, RS_OP_CTRL);
		uint32_t qpn = be32toh(h.qpn) & 0xFFFFFF;
		if (!d->ah || d->qpn != qpn)
			ds_make_ah(d, qpn);
		if (h.op == RS_OP_DATA)
			ds_queue_udp(rs, &from, buf + h.length, (size_t)n - h.length);
	}
}

/* ---- completions ---- */

/* Whether a receive of byte_len bytes at offset holds a ds_header the
 * data follows. */
static int ds_valid_recv(const struct ds_qp *qp, uint32_t offset, uint32_t byte_len)
{
	if (byte_len < DS_GRH_LEN + DS_IPV4_HDR_LEN || byte_len > DS_GRH_LEN + DS_MSG_SIZE)
		return 0;
	const struct ds_header *h = (const struct ds_header *)(qp->rbuf + offset);
	if (!((h->version == 4 && h->length == DS_IPV4_HDR_LEN) || (h->version == 6 && h->length == DS_IPV6_HDR_LEN)))
		return 0;
	return byte_len - DS_GRH_LEN >= h->length;
}

static void ds_poll_cqs(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;
	struct ibv_wc wc[16];
	for (struct ds_qp *qp = dg->qps; qp; qp = qp->next) {
		int n;
		while ((n = ibv_poll_cq(qp->cq, 16, wc)) > 0) {
			for (int i = 0; i < n; i++) {
				uint32_t off = (uint32_t)(wc[i].wr_id & 0xFFFFFFFFu);
				if (!(wc[i].wr_id & DS_WR_RECV)) {
					dg->sfree[dg->nsfree++] = off / DS_MSG_SIZE;
					if (wc[i].status != IBV_WC_SUCCESS)
						vrdma_debug("rsocket: datagram rsocket %d: a send failed: %s", rs->fd,
							    ibv_wc_status_str(wc[i].status));
					continue;
				}
				if (wc[i].status != IBV_WC_SUCCESS)
					continue; /* flushed: the QP is going */
				if (dg->rqe_avail && ds_valid_recv(qp, off, wc[i].byte_len)) {
					dg->rqe_avail--;
					dg->dmsg[dg->tail] = (struct ds_rmsg){.qp = qp, .offset = off,
									      .length = wc[i].byte_len - DS_GRH_LEN};
					if (++dg->tail == (int)rs->rq_size + 1)
						dg->tail = 0;
				} else {
					if (dg->rqe_avail)
						vrdma_debug("rsocket: datagram rsocket %d drops a UD message of %u bytes "
							    "without a valid header",
							    rs->fd, wc[i].byte_len);
					(void)ds_post_recv(qp, off);
				}
			}
		}
	}
}

void ds_take_cq_events(struct rsocket *rs)
{
	for (struct ds_qp *qp = rs->dg->qps; qp; qp = qp->next)
		if (ds_qp_events(qp))
			rs->dg->cq_armed = 0;
}

int ds_arm(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;
	if (!dg->ready)
		return -1;
	for (struct ds_qp *qp = dg->qps; qp; qp = qp->next) {
		if (!qp->armed) {
			ibv_req_notify_cq(qp->cq, 0);
			qp->armed = 1;
		}
	}
	dg->cq_armed = 1;
	return dg->epfd;
}

static void ds_progress(struct rsocket *rs)
{
	ds_udp_input(rs);
	ds_poll_cqs(rs);
}

static int ds_have_rdata(struct rsocket *rs)
{
	return rs->dg->head != rs->dg->tail;
}

static int ds_can_send(struct rsocket *rs)
{
	return rs->dg->nsfree > 0;
}

static int ds_all_sends_done(struct rsocket *rs)
{
	return rs->dg->nsfree == (int)rs->sq_size;
}

/* Waits (rs->mu released meanwhile) until test(rs): 0, or -1 with errno. */
static int ds_wait(struct rsocket *rs, int nonblock, int (*test)(struct rsocket *rs))
{
	for (;;) {
		ds_progress(rs);
		if (test(rs))
			return 0;
		if (nonblock) {
			errno = EWOULDBLOCK;
			return -1;
		}
		if (!rs->dg->cq_armed) {
			(void)ds_arm(rs);
			continue; /* what completed before the arm */
		}
		struct pollfd p[2] = {{.fd = rs->dg->epfd, .events = POLLIN}, {.fd = rs->fd, .events = POLLIN}};
		pthread_mutex_unlock(&rs->mu);
		(void)poll(p, 2, -1);
		pthread_mutex_lock(&rs->mu);
		ds_take_cq_events(rs);
	}
}

/* ---- the calls ---- */

int ds_bind(struct rsocket *rs, const struct sockaddr *addr, socklen_t len)
{
	if (ds_init_ep(rs) != 0)
		return -1;
	return bind(rs->fd, addr, len);
}

int ds_connect(struct rsocket *rs, const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage ss;
	if (ds_init_ep(rs) != 0 || sa_take(&ss, addr, len) != 0)
		return -1;
	if (connect(rs->fd, addr, len) != 0)
		return -1;
	return ds_get_dest(rs, &ss, &rs->dg->conn_dest);
}

ssize_t ds_send(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags, const struct sockaddr *dst,
		socklen_t dlen)
{
	struct rs_dgram *dg = rs->dg;
	if (!rs->writable) {
		errno = EPIPE;
		return -1;
	}
	if (ds_init_ep(rs) != 0)
		return -1;
	struct ds_dest *d = dg->conn_dest;
	if (dst) {
		struct sockaddr_storage ss;
		if (sa_take(&ss, dst, dlen) != 0 || ds_get_dest(rs, &ss, &d) != 0)
			return -1;
	} else if (!d) {
		errno = EDESTADDRREQ;
		return -1;
	}
	size_t len = rs_iov_total(iov, iovcnt);
	if (len > (size_t)(DS_MSG_SIZE - d->qp->hdr.length)) {
		vrdma_debug("rsocket: a datagram of %zu bytes: datagram rsockets carry at most %u (EMSGSIZE)", len,
			    DS_MSG_SIZE - d->qp->hdr.length);
		errno = EMSGSIZE;
		return -1;
	}
	if (!d->ah)
		ds_udp_input(rs); /* the peer's answer may name its QP */
	size_t off = 0;
	/* Before the peer's QP is known, and for a datagram larger than the
	 * path's MTU (a UD message is one packet; a RoCE link of 1500 bytes
	 * carries 1024), the UDP socket carries it (rdma-core's receivers
	 * take data over UDP at any time). */
	if (!d->ah || d->qp->hdr.length + len > d->mtu) {
		uint8_t buf[DS_MSG_SIZE];
		rs_iov_gather(buf, &iov, &off, len);
		return ds_send_udp(rs, d, buf, len, flags & ~MSG_DONTWAIT, RS_OP_DATA);
	}
	if (!ds_can_send(rs) && ds_wait(rs, (rs->fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT), ds_can_send) != 0)
		return -1;
	uint32_t slot = dg->sfree[--dg->nsfree];
	uint8_t *p = dg->sbuf + (size_t)slot * DS_MSG_SIZE;
	memcpy(p, &d->qp->hdr, d->qp->hdr.length);
	rs_iov_gather(p + d->qp->hdr.length, &iov, &off, len);
	struct ibv_sge sge = {.addr = (uintptr_t)p, .length = (uint32_t)(d->qp->hdr.length + len), .lkey = d->qp->smr->lkey};
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)slot * DS_MSG_SIZE,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = sge.length <= rs->sq_inline ? IBV_SEND_INLINE : 0,
		.wr.ud = {.ah = d->ah, .remote_qpn = d->qpn, .remote_qkey = RDMA_UDP_QKEY},
	}, *bad;
	int e = ibv_post_send(d->qp->id->qp, &wr, &bad);
	if (e) {
		dg->sfree[dg->nsfree++] = slot;
		errno = e;
		return -1;
	}
	return (ssize_t)len;
}

ssize_t ds_recv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags, struct sockaddr *src,
		socklen_t *slen)
{
	struct rs_dgram *dg = rs->dg;
	if (!dg->ready || !rs->readable) {
		vrdma_debug("rsocket: receiving on datagram rsocket %d before rbind, rconnect or a send (EINVAL)", rs->fd);
		errno = EINVAL;
		return -1;
	}
	ds_poll_cqs(rs);
	if (!ds_have_rdata(rs) && ds_wait(rs, (rs->fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT), ds_have_rdata) != 0)
		return -1;
	struct ds_rmsg *m = &dg->dmsg[dg->head];
	const uint8_t *base = m->qp ? m->qp->rbuf + m->offset : dg->ubuf + m->offset;
	const struct ds_header *h = (const struct ds_header *)base;
	size_t have = m->length - h->length, want = rs_iov_total(iov, iovcnt), off = 0;
	size_t n = want < have ? want : have;
	rs_iov_scatter(&iov, &off, base + h->length, n);
	if (src && slen)
		ds_hdr_addr(h, src, slen);
	if (!(flags & MSG_PEEK)) {
		if (m->qp)
			(void)ds_post_recv(m->qp, m->offset);
		else
			dg->uused[m->offset / DS_MSG_SIZE] = 0;
		if (++dg->head == (int)rs->rq_size + 1)
			dg->head = 0;
		dg->rqe_avail++;
	}
	return (ssize_t)((flags & MSG_TRUNC) ? have : n);
}

int ds_shutdown(struct rsocket *rs, int how)
{
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		errno = EINVAL;
		return -1;
	}
	if (how != SHUT_RD && rs->dg->ready)
		(void)ds_wait(rs, 0, ds_all_sends_done);
	if (how != SHUT_WR)
		rs->readable = 0;
	if (how != SHUT_RD)
		rs->writable = 0;
	return 0;
}

short ds_revents(struct rsocket *rs, short events)
{
	short rev = 0;
	if (!rs->dg->ready)
		return (short)(events & POLLOUT);
	ds_progress(rs);
	if ((events & POLLIN) && ds_have_rdata(rs))
		rev |= POLLIN;
	if ((events & POLLOUT) && ds_can_send(rs))
		rev |= POLLOUT;
	return rev;
}
