/*
 * cma_mcast.c: rdma_join_multicast, rdma_join_multicast_ex and
 * rdma_leave_multicast, as rdma-core's librdmacm over the kernel's rdma_cm
 * on a RoCE port (docs/design/multicast.md). The group's GID is what the
 * kernel's cma derives for RoCEv2: an IPv4 group as ::ffff:a.b.c.d, an
 * IPv6 group as itself. The join completes at once with
 * RDMA_CM_EVENT_MULTICAST_JOIN, whose ud parameters address the group
 * (ah_attr with the MGID, qp_num 0xFFFFFF, qkey RDMA_UDP_QKEY); the id's QP,
 * if it has one and did not join send-only, is attached to the group
 * then, and a failure to attach turns the event into
 * RDMA_CM_EVENT_MULTICAST_ERROR, as in rdma-core. The daemon keeps the
 * group per tenant and joins it on the host's links (IGMP/MLD).
 */
#include "cma.h"

#include <stdlib.h>
#include <string.h>

#define CMA_MC_QPN 0xFFFFFFu

struct cma_mc {
	struct cma_mc *next;
	struct sockaddr_storage addr;
	union ibv_gid mgid;
	uint16_t join_flags;
	int attached; /* the id's QP is attached to the group */
	void *context;
};

/* mc_gid derives the group's GID from its address, as the kernel's cma
 * does on a RoCEv2 port; -1 for an address that is not a multicast group. */
static int mc_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	if (cma_sa_gid(sa, gid->raw) < 0)
		return -1;
	if (sa->sa_family == AF_INET)
		return (gid->raw[12] & 0xf0) == 0xe0 ? 0 : -1;
	return gid->raw[0] == 0xff ? 0 : -1;
}

static int same_addr(const struct sockaddr *a, const struct sockaddr_storage *b)
{
	socklen_t n = cma_sa_len(a);
	union ibv_gid ga, gb;
	return n && a->sa_family == b->ss_family && cma_sa_gid(a, ga.raw) == 0 &&
	       cma_sa_gid((const struct sockaddr *)b, gb.raw) == 0 && memcmp(ga.raw, gb.raw, 16) == 0;
}

/* queue_mc queues a MULTICAST_JOIN (status 0) or MULTICAST_ERROR event for
 * group mc of id. */
static int queue_mc(struct cma_id *c, struct cma_mc *mc, int status)
{
	struct cma_event *e = vrdma_own_zalloc(sizeof *e);
	if (e == NULL)
		return ENOMEM;
	e->ev.id = &c->id;
	e->ev.event = status ? RDMA_CM_EVENT_MULTICAST_ERROR : RDMA_CM_EVENT_MULTICAST_JOIN;
	e->ev.status = status;
	e->owner = c;
	struct rdma_ud_param *u = &e->ev.param.ud;
	u->private_data = mc->context; /* rdma-core hands the join's context back here */
	u->qp_num = CMA_MC_QPN;
	u->qkey = RDMA_UDP_QKEY;
	u->ah_attr.is_global = 1;
	u->ah_attr.grh.dgid = mc->mgid;
	u->ah_attr.grh.hop_limit = 64; /* IPV6_DEFAULT_HOPLIMIT, the kernel's for RoCEv2 */
	u->ah_attr.port_num = c->id.port_num ? c->id.port_num : 1;
	int index = 0;
	if (c->dev && cma_dev_by_gid(c->id.route.addr.addr.ibaddr.sgid.raw, &index) == c->dev)
		u->ah_attr.grh.sgid_index = (uint8_t)index;
	pthread_mutex_lock(&cma_mu);
	cma_enqueue(c, e);
	pthread_mutex_unlock(&cma_mu);
	return 0;
}

static int join(struct rdma_cm_id *id, struct sockaddr *addr, uint16_t flags, void *context)
{
	if (id == NULL || addr == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	union ibv_gid mgid;
	if (cma_sa_len(addr) == 0 || addr->sa_family == AF_IB)
		return cma_err(EAFNOSUPPORT);
	if (mc_gid(addr, &mgid) < 0) {
		vrdma_debug("rdma_join_multicast: the address is not a multicast group (224.0.0.0/4 or ff00::/8)");
		return cma_err(EINVAL);
	}
	/* The kernel's rdma_join_multicast: a UD id bound to a device. */
	if (c->dev == NULL || (c->state != CMA_IDLE && c->state != CMA_ADDR_RESOLVED && c->state != CMA_ROUTE_RESOLVED))
		return cma_err(EINVAL);
	if (id->ps != RDMA_PS_UDP && id->ps != RDMA_PS_IPOIB)
		return cma_err(EINVAL);
	struct cma_mc *mc = calloc(1, sizeof *mc);
	if (mc == NULL)
		return cma_err(ENOMEM);
	memcpy(&mc->addr, addr, cma_sa_len(addr));
	mc->mgid = mgid;
	mc->join_flags = flags;
	mc->context = context;
	int status = 0;
	if (id->qp && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
		int r = ibv_attach_mcast(id->qp, &mgid, 0);
		if (r)
			status = -r;
		else
			mc->attached = 1;
	}
	vrdma_debug("rdma_cm: joined multicast group %s%s", addr->sa_family == AF_INET ? "(IPv4)" : "(IPv6)",
		    status ? " but could not attach the QP" : "");
	pthread_mutex_lock(&cma_mu);
	mc->next = c->mcs;
	c->mcs = mc;
	pthread_mutex_unlock(&cma_mu);
	if (queue_mc(c, mc, status))
		return cma_err(ENOMEM);
	return c->sync ? cma_complete(c) : 0;
}

CMA_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

CMA_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr, void *context)
{
	if (attr == NULL)
		return cma_err(EINVAL);
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return cma_err(ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    (attr->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER && attr->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER))
		return cma_err(EINVAL);
	return join(id, attr->addr, (uint16_t)attr->join_flags, context);
}

CMA_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	if (id == NULL || addr == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	pthread_mutex_lock(&cma_mu);
	struct cma_mc **p = &c->mcs;
	while (*p && !same_addr(addr, &(*p)->addr))
		p = &(*p)->next;
	struct cma_mc *mc = *p;
	if (mc)
		*p = mc->next;
	pthread_mutex_unlock(&cma_mu);
	if (mc == NULL)
		return cma_err(EADDRNOTAVAIL); /* rdma-core: no such group on the id */
	int r = 0;
	if (mc->attached && id->qp)
		r = ibv_detach_mcast(id->qp, &mc->mgid, 0);
	free(mc);
	return r ? cma_err(r) : 0;
}

void cma_mc_release(struct cma_id *c)
{
	while (c->mcs) {
		struct cma_mc *mc = c->mcs;
		c->mcs = mc->next;
		free(mc);
	}
}
