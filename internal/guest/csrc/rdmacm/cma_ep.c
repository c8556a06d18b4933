/*
 * cma_ep.c: the rdma_verbs.h conveniences: rdma_getaddrinfo, endpoints
 * (rdma_create_ep, rdma_destroy_ep), rdma_get_request and shared receive
 * queues on ids.
 */
#include "cma.h"

#include <netdb.h>
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

CMA_EXPORT int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
				struct rdma_addrinfo **res)
{
	struct addrinfo ah = { 0 }, *ai = NULL;
	if (res == NULL || (node == NULL && service == NULL))
		return cma_err(EINVAL);
	int flags = hints ? hints->ai_flags : 0;
	if (hints && (hints->ai_flags & RAI_FAMILY)) {
		vrdma_debug("rdma_getaddrinfo: RAI_FAMILY (AF_IB) is not supported by vrdma");
		return cma_err(EOPNOTSUPP);
	}
	ah.ai_family = hints ? hints->ai_family : 0;
	ah.ai_socktype = SOCK_STREAM;
	if (flags & RAI_PASSIVE)
		ah.ai_flags |= AI_PASSIVE;
	if (flags & RAI_NUMERICHOST)
		ah.ai_flags |= AI_NUMERICHOST;
	int r = getaddrinfo(node, service, &ah, &ai);
	if (r != 0)
		return r; /* rdma-core returns getaddrinfo's code */
	struct rdma_addrinfo *ra = calloc(1, sizeof *ra);
	if (ra == NULL) {
		freeaddrinfo(ai);
		return cma_err(ENOMEM);
	}
	ra->ai_flags = flags;
	ra->ai_family = ai->ai_family;
	ra->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	ra->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type
			 : ra->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD
							   : IBV_QPT_RC;
	if (hints && hints->ai_qp_type == IBV_QPT_UD && !hints->ai_port_space)
		ra->ai_port_space = RDMA_PS_UDP;
	if (flags & RAI_PASSIVE) {
		ra->ai_src_addr = copy_sa(ai->ai_addr, ai->ai_addrlen);
		ra->ai_src_len = ai->ai_addrlen;
	} else {
		ra->ai_dst_addr = copy_sa(ai->ai_addr, ai->ai_addrlen);
		ra->ai_dst_len = ai->ai_addrlen;
		if (hints && hints->ai_src_addr && hints->ai_src_len) {
			ra->ai_src_addr = copy_sa(hints->ai_src_addr, hints->ai_src_len);
			ra->ai_src_len = hints->ai_src_len;
		}
	}
	if (node && ai->ai_canonname)
		ra->ai_dst_canonname = strdup(ai->ai_canonname);
	freeaddrinfo(ai);
	if ((ra->ai_src_len && ra->ai_src_addr == NULL) || (ra->ai_dst_len && ra->ai_dst_addr == NULL)) {
		rdma_freeaddrinfo(ra);
		return cma_err(ENOMEM);
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

CMA_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	if (id == NULL || attr == NULL)
		return cma_err(EINVAL);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC) {
		vrdma_debug("rdma_create_srq_ex: only basic SRQs are supported by vrdma");
		return cma_err(EOPNOTSUPP);
	}
	struct ibv_srq_init_attr a = { .srq_context = attr->srq_context, .attr = attr->attr };
	return rdma_create_srq(id, (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? attr->pd : NULL, &a);
}

CMA_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	if (id == NULL || attr == NULL || id->verbs == NULL || id->srq != NULL)
		return cma_err(EINVAL);
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
}
