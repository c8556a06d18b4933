/*
 * cma_ep.c: the rdma_verbs.h conveniences: rdma_getaddrinfo, endpoints
 * (rdma_create_ep, rdma_destroy_ep), rdma_get_request and shared receive
 * queues on ids.
 */
#include "cma.h"

#include <endian.h>
#include <netdb.h>
#include <infiniband/ib.h>
#include <netinet/in.h>
#include <rdma/rdma_verbs.h>
#include <stdlib.h>
#include <string.h>

static struct sockaddr *copy_sa(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *c = malloc(len);
	if (c)
		memcpy(c, sa, len);
	return c;
}

CMA_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

/* The getaddrinfo hints that stand for rdma hints h: the socket type of
 * the QP type, the protocol of the port space, the flags that carry over. */
static void gai_hints_of(const struct rdma_addrinfo *h, struct addrinfo *ah)
{
	memset(ah, 0, sizeof *ah);
	if (h->ai_flags & RAI_PASSIVE)
		ah->ai_flags |= AI_PASSIVE;
	if (h->ai_flags & RAI_NUMERICHOST)
		ah->ai_flags |= AI_NUMERICHOST;
	if (h->ai_family != AF_IB)
		ah->ai_family = h->ai_family;
	switch (h->ai_qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		ah->ai_socktype = SOCK_STREAM;
		break;
	case IBV_QPT_UD:
		ah->ai_socktype = SOCK_DGRAM;
		break;
	default:
		break;
	}
	switch (h->ai_port_space) {
	case RDMA_PS_TCP:
		ah->ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		ah->ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		ah->ai_protocol = ah->ai_socktype == SOCK_STREAM  ? IPPROTO_TCP
				  : ah->ai_socktype == SOCK_DGRAM ? IPPROTO_UDP
								  : 0;
		break;
	default:
		break;
	}
}

/* An AF_IB address for the IPv6 address in6 (a GID), its service ID made
 * of port space ps and in6's port, as rdma-core makes them for RAI_FAMILY
 * with AF_IB. */
static struct sockaddr *ib_sa_of(int ps, const struct sockaddr_in6 *in6)
{
	struct sockaddr_ib *ib = calloc(1, sizeof *ib);
	if (ib == NULL)
		return NULL;
	uint16_t port = ntohs(in6->sin6_port);
	ib->sib_family = AF_IB;
	ib->sib_pkey = htobe16(0xffff);
	ib->sib_flowinfo = in6->sin6_flowinfo;
	memcpy(&ib->sib_addr, &in6->sin6_addr, 16);
	ib->sib_sid = htobe64(((uint64_t)ps << 16) | port);
	uint64_t mask = 0;
	if (ps)
		mask |= RDMA_IB_IP_PS_MASK;
	if (port)
		mask |= RDMA_IB_IP_PORT_MASK;
	ib->sib_sid_mask = htobe64(mask);
	ib->sib_scope_id = in6->sin6_scope_id;
	return (struct sockaddr *)ib;
}

/* Fills ra from getaddrinfo's first answer ai under hints h (rdma-core's
 * rules: h's QP type and port space win, else ai's socket type and
 * protocol say them; a passive answer is the source address). Returns 0 or
 * an errno. */
static int rai_of(struct rdma_addrinfo *ra, const struct rdma_addrinfo *h, const struct addrinfo *ai)
{
	if (h->ai_qp_type)
		ra->ai_qp_type = h->ai_qp_type;
	else if (ai->ai_socktype == SOCK_STREAM)
		ra->ai_qp_type = IBV_QPT_RC;
	else if (ai->ai_socktype == SOCK_DGRAM)
		ra->ai_qp_type = IBV_QPT_UD;
	if (h->ai_port_space)
		ra->ai_port_space = h->ai_port_space;
	else if (ai->ai_protocol == IPPROTO_TCP)
		ra->ai_port_space = RDMA_PS_TCP;
	else if (ai->ai_protocol == IPPROTO_UDP)
		ra->ai_port_space = RDMA_PS_UDP;

	int passive = (ai->ai_flags & AI_PASSIVE) != 0;
	struct sockaddr **addr = passive ? &ra->ai_src_addr : &ra->ai_dst_addr;
	socklen_t *len = passive ? &ra->ai_src_len : &ra->ai_dst_len;
	char **canon = passive ? &ra->ai_src_canonname : &ra->ai_dst_canonname;
	if (passive)
		ra->ai_flags = RAI_PASSIVE;
	if (ai->ai_canonname && (*canon = strdup(ai->ai_canonname)) == NULL)
		return ENOMEM;
	if ((h->ai_flags & RAI_FAMILY) && h->ai_family == AF_IB && (h->ai_flags & RAI_NUMERICHOST) &&
	    ai->ai_family == AF_INET6) {
		ra->ai_family = AF_IB;
		*addr = ib_sa_of(ra->ai_port_space, (const struct sockaddr_in6 *)(const void *)ai->ai_addr);
		*len = sizeof(struct sockaddr_ib);
	} else {
		ra->ai_family = ai->ai_family;
		*addr = copy_sa(ai->ai_addr, ai->ai_addrlen);
		*len = ai->ai_addrlen;
	}
	return *addr == NULL ? ENOMEM : 0;
}

/*
 * rdma_getaddrinfo follows rdma-core's rules: node or service (or both)
 * are looked up with getaddrinfo under the hints' family, socket type (of
 * the QP type) and protocol (of the port space); without either, the hints
 * alone are the answer (their flags, family, QP type, port space and
 * destination); a source address in the hints is kept when the lookup gave
 * none. RAI_FAMILY with AF_IB and RAI_NUMERICHOST turns an IPv6 answer into
 * an AF_IB address. A failed lookup returns -1 with errno set to
 * getaddrinfo's EAI_ code, as rdma-core does.
 */
CMA_EXPORT int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
				struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo nohints;
	if (res == NULL || (node == NULL && service == NULL && hints == NULL))
		return cma_err(EINVAL);
	struct rdma_addrinfo *ra = calloc(1, sizeof *ra);
	if (ra == NULL)
		return cma_err(ENOMEM);
	const struct rdma_addrinfo *h = hints ? hints : &nohints;
	int r = 0;
	if (node != NULL || service != NULL) {
		struct addrinfo ah, *ai = NULL;
		gai_hints_of(h, &ah);
		r = getaddrinfo(node, service, hints ? &ah : NULL, &ai);
		if (r == 0) {
			r = rai_of(ra, h, ai);
			freeaddrinfo(ai);
		}
	} else {
		ra->ai_flags = h->ai_flags;
		ra->ai_family = h->ai_family;
		ra->ai_qp_type = h->ai_qp_type;
		ra->ai_port_space = h->ai_port_space;
		if (h->ai_dst_len && h->ai_dst_addr) {
			ra->ai_dst_addr = copy_sa(h->ai_dst_addr, h->ai_dst_len);
			ra->ai_dst_len = h->ai_dst_len;
			if (ra->ai_dst_addr == NULL)
				r = ENOMEM;
		}
	}
	if (r == 0 && ra->ai_src_len == 0 && h->ai_src_len && h->ai_src_addr) {
		ra->ai_src_addr = copy_sa(h->ai_src_addr, h->ai_src_len);
		ra->ai_src_len = h->ai_src_len;
		if (ra->ai_src_addr == NULL)
			r = ENOMEM;
	}
	if (r != 0) {
		rdma_freeaddrinfo(ra);
		return cma_err(r);
	}
	*res = ra;
	return 0;
}

CMA_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			      struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	if (id == NULL || res == NULL)
		return cma_err(EINVAL);
	if (rdma_create_id(NULL, &cm_id, NULL, (enum rdma_port_space)res->ai_port_space) < 0)
		return -1;
	struct cma_id *c = to_cid(cm_id);
	cm_id->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	if (qp_init_attr)
		qp_init_attr->qp_type = cm_id->qp_type; /* rdma-core: the QP is of the address's type */
	int r;
	if (res->ai_flags & RAI_PASSIVE) {
		r = res->ai_src_addr ? rdma_bind_addr(cm_id, res->ai_src_addr) : 0;
		if (r == 0 && qp_init_attr) {
			c->qp_init = malloc(sizeof *qp_init_attr);
			if (c->qp_init == NULL)
				r = cma_err(ENOMEM);
			else
				*c->qp_init = *qp_init_attr;
			cm_id->pd = pd;
		}
	} else {
		r = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
		if (r == 0)
			r = rdma_resolve_route(cm_id, 2000);
		if (r == 0 && qp_init_attr)
			r = rdma_create_qp(cm_id, pd, qp_init_attr);
	}
	if (r < 0) {
		int e = errno;
		rdma_destroy_ep(cm_id);
		errno = e;
		return -1;
	}
	*id = cm_id;
	return 0;
}

CMA_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (id == NULL)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

CMA_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct rdma_cm_event *event;
	if (listen == NULL || id == NULL)
		return cma_err(EINVAL);
	struct cma_id *l = to_cid(listen);
	if (!l->sync || l->state != CMA_LISTEN)
		return cma_err(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	if (rdma_get_cm_event(listen->channel, &event) < 0)
		return -1;
	if (event->status) {
		int e = event->status < 0 ? -event->status : event->status;
		rdma_ack_cm_event(event);
		return cma_err(e);
	}
	if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(event);
		return cma_err(EINVAL);
	}
	struct rdma_cm_id *child = event->id;
	if (rdma_migrate_id(child, NULL) < 0) /* synchronous, as its listener */
		goto fail;
	if (l->qp_init) {
		struct ibv_qp_init_attr attr = *l->qp_init;
		if (rdma_create_qp(child, listen->pd, &attr) < 0)
			goto fail;
	}
	child->event = event; /* acked by the child's next call or its destruction */
	*id = child;
	return 0;
fail:;
	int e = errno;
	rdma_ack_cm_event(event);
	rdma_reject(child, NULL, 0);
	rdma_destroy_id(child);
	return cma_err(e);
}

/* rdma_create_srq_ex: a basic SRQ, or, with IBV_SRQT_XRC (the default
 * on an XRC_RECV id), an XRC SRQ in the device's XRC domain (cma_xrc.c). */
CMA_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	if (id == NULL || attr == NULL || id->verbs == NULL || id->srq != NULL)
		return cma_err(EINVAL);
	int xrc = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type == IBV_SRQT_XRC
							       : id->qp_type == IBV_QPT_XRC_RECV;
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC && !xrc) {
		vrdma_debug("rdma_create_srq_ex: SRQ type %d: vrdma has basic and XRC SRQs", attr->srq_type);
		return cma_err(EOPNOTSUPP);
	}
	struct ibv_pd *pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? attr->pd : NULL;
	if (!xrc) {
		struct ibv_srq_init_attr a = { .srq_context = attr->srq_context, .attr = attr->attr };
		int r = rdma_create_srq(id, pd, &a);
		if (r == 0)
			attr->attr = a.attr;
		return r;
	}
	if (pd == NULL && (pd = id->pd) == NULL && (pd = cma_dev_pd(to_cid(id)->dev)) == NULL)
		return cma_err(ENOMEM);
	int r = cma_xrc_create_srq(to_cid(id), pd, attr);
	return r ? cma_err(r) : 0;
}

CMA_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	if (id == NULL || attr == NULL || id->verbs == NULL || id->srq != NULL)
		return cma_err(EINVAL);
	if (id->qp_type == IBV_QPT_XRC_RECV) { /* rdma-core: an XRC_RECV id's SRQ is an XRC SRQ */
		struct ibv_srq_init_attr_ex ax = {
			.srq_context = attr->srq_context, .attr = attr->attr, .comp_mask = IBV_SRQ_INIT_ATTR_TYPE,
			.srq_type = IBV_SRQT_XRC, .pd = pd};
		if (pd != NULL)
			ax.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
		int r = rdma_create_srq_ex(id, &ax);
		if (r == 0)
			attr->attr = ax.attr;
		return r;
	}
	if (pd == NULL && (pd = cma_dev_pd(to_cid(id)->dev)) == NULL)
		return cma_err(ENOMEM);
	struct ibv_srq *srq = ibv_create_srq(pd, attr);
	if (srq == NULL)
		return -1;
	id->srq = srq;
	id->pd = pd;
	return 0;
}

CMA_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (id == NULL || id->srq == NULL)
		return;
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
	if (id->qp_type == IBV_QPT_XRC_RECV && id->qp == NULL)
		cma_destroy_cqs(to_cid(id)); /* the XRC SRQ's CQ, made by rdma_create_srq */
}
