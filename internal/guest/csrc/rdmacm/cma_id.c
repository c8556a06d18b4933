/*
 * cma_id.c: communication identifiers: creation and destruction, binding,
 * address and route resolution, listening, migration between channels and
 * options.
 */
#include "cma.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

struct cma_id *cma_ids; /* every id with a daemon id or that may get one; cma_mu */

struct cma_id *cma_find(struct cma_device *d, uint32_t cmid)
{
	for (struct cma_id *id = cma_ids; id; id = id->next)
		if (id->dev == d && id->cmid == cmid && cmid != 0)
			return id;
	return NULL;
}

void cma_link(struct cma_id *id)
{
	id->next = cma_ids;
	cma_ids = id;
}

static void unlink_id(struct cma_id *id)
{
	for (struct cma_id **p = &cma_ids; *p; p = &(*p)->next)
		if (*p == id) {
			*p = id->next;
			return;
		}
}

static uint32_t random_psn(void)
{
	uint32_t v = 0;
	if (getrandom(&v, sizeof v, GRND_NONBLOCK) != sizeof v)
		v = (uint32_t)rand();
	return v & 0xffffff;
}

/* A port of the range the daemon gives requesters and listeners on port 0
 * (Linux's ephemeral range). */
static uint16_t random_port(void)
{
	uint32_t v = 0;
	if (getrandom(&v, sizeof v, GRND_NONBLOCK) != sizeof v)
		v = (uint32_t)rand();
	return (uint16_t)(32768 + v % (60999 - 32768 + 1));
}

struct cma_id *cma_id_alloc(struct rdma_event_channel *ch, void *context, enum rdma_port_space ps,
			    enum ibv_qp_type qpt)
{
	struct cma_id *id = vrdma_own_zalloc(sizeof *id); /* own.h */
	if (id == NULL)
		return NULL;
	id->id.channel = ch;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qpt;
	id->psn = random_psn();
	id->rd_atomic = 16;
	id->backlog = 128;
	return id;
}

void cma_bind_dev(struct cma_id *id, struct cma_device *d)
{
	id->dev = d;
	id->id.verbs = d->verbs;
	id->id.port_num = 1;
	id->rd_atomic = d->max_rd_atomic;
}

static int valid_ps(enum rdma_port_space ps, enum ibv_qp_type *qpt)
{
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_IB:
		*qpt = IBV_QPT_RC;
		return 1;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		*qpt = IBV_QPT_UD;
		return 1;
	}
	return 0;
}

CMA_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
			      enum rdma_port_space ps)
{
	enum ibv_qp_type qpt;
	int e = cma_init();

	if (id == NULL)
		return cma_err(EINVAL);
	if (e != 0)
		return cma_err(e);
	if (!valid_ps(ps, &qpt))
		return cma_err(EINVAL);
	int sync = channel == NULL;
	if (sync && (channel = rdma_create_event_channel()) == NULL)
		return -1;
	struct cma_id *c = cma_id_alloc(channel, context, ps, qpt);
	if (c == NULL) {
		if (sync)
			rdma_destroy_event_channel(channel);
		return cma_err(ENOMEM);
	}
	c->sync = sync;
	pthread_mutex_lock(&cma_mu);
	cma_link(c);
	pthread_mutex_unlock(&cma_mu);
	*id = &c->id;
	return 0;
}

CMA_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	if (id == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	struct cma_id *orphans = NULL;

	if (c->sync && id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	cma_release(c);
	pthread_mutex_lock(&cma_mu);
	unlink_id(c);
	cma_purge(c, &orphans);
	while (c->unacked > 0) /* rdma_cm: destroying waits for the id's events to be acked */
		pthread_cond_wait(&cma_cond, &cma_mu);
	pthread_mutex_unlock(&cma_mu);
	while (orphans) { /* requests to this listener nobody saw: refused */
		struct cma_id *o = orphans;
		orphans = o->next;
		(void)cma_cmd(o->dev, VRDMA_CMD_CM_REJECT, NULL, 0, "{\"id\":%u,\"reason\":8}", o->cmid);
		vrdma_own_free(o);
	}
	if (c->sync)
		rdma_destroy_event_channel(id->channel);
	free(id->route.path_rec);
	free(c->qp_init);
	cma_mc_release(c);
	vrdma_own_free(c);
	return 0;
}

/* The device a source address is on: the one whose GID table holds it. */
static struct cma_device *dev_for_src(const struct sockaddr *sa, int *index)
{
	uint8_t gid[16];
	if (cma_sa_gid(sa, gid) < 0)
		return NULL;
	return cma_dev_by_gid(gid, index);
}

CMA_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	if (id == NULL || addr == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	socklen_t len = cma_sa_len(addr);
	if (len == 0)
		return cma_err(EAFNOSUPPORT);
	if (c->state != CMA_IDLE || c->dev != NULL)
		return cma_err(EINVAL);
	/* A loopback address: no device until the id listens (on the first
	 * adapter) or resolves, as the kernel's rdma_cm does, when an
	 * interface's address is on an adapter; else the first adapter
	 * (cma_loopback.c says why). */
	int loopback = cma_sa_is_loopback(addr);
	if (!cma_sa_is_any(addr) && !(loopback && cma_loopback_has_no_device())) {
		int index = 0;
		struct cma_device *d = loopback ? (cma_ndevs > 0 ? &cma_devs[0] : NULL) : dev_for_src(addr, &index);
		if (d == NULL) {
			vrdma_debug("rdma_bind_addr: the address is on no vrdma adapter (their GID tables hold their addresses)");
			return cma_err(EADDRNOTAVAIL);
		}
		cma_bind_dev(c, d);
		id->pd = cma_dev_pd(d); /* rdma-core: an id bound to a device has its PD */
		memcpy(id->route.addr.addr.ibaddr.sgid.raw, d->gids[index].raw, 16);
	}
	memset(&id->route.addr.src_storage, 0, sizeof id->route.addr.src_storage);
	memcpy(&id->route.addr.src_storage, addr, len);
	if (cma_sa_port(addr) == 0 &&
	    (addr->sa_family == AF_INET || addr->sa_family == AF_INET6 || addr->sa_family == AF_IB)) {
		/* rdma_cm gives the port at once (programs read it to tell their
		 * peer before they listen); the daemon's port space is checked
		 * when the id listens. */
		c->auto_port = 1;
		cma_sa_set_port(&id->route.addr.src_addr, random_port());
	}
	return 0;
}

CMA_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr,
				 int timeout_ms)
{
	(void)timeout_ms; /* resolution answers at once */
	if (id == NULL || dst_addr == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	socklen_t dlen = cma_sa_len(dst_addr);
	uint8_t dgid[16];
	int index = 0;

	if (dlen == 0 || cma_sa_gid(dst_addr, dgid) < 0)
		return cma_err(EAFNOSUPPORT);
	if (c->state != CMA_IDLE)
		return cma_err(EINVAL);
	if (src_addr != NULL && c->dev == NULL && rdma_bind_addr(id, src_addr) < 0)
		return -1;
	struct cma_device *d = c->dev;
	if (d != NULL) {
		uint8_t sgid[16];
		if (cma_sa_gid(&id->route.addr.src_addr, sgid) == 0 && cma_dev_by_gid(sgid, &index) != d)
			index = 0;
	} else if (cma_sa_is_loopback(dst_addr)) {
		d = cma_ndevs > 0 ? &cma_devs[0] : NULL;
	} else {
		d = cma_dev_by_family(dst_addr->sa_family == AF_INET, &index);
	}
	memset(&id->route.addr.dst_storage, 0, sizeof id->route.addr.dst_storage);
	memcpy(&id->route.addr.dst_storage, dst_addr, dlen);
	if (d == NULL) {
		vrdma_debug("rdma_resolve_addr: no vrdma adapter has an address of that family");
		return cma_queue_local(c, RDMA_CM_EVENT_ADDR_ERROR, -ENODEV) ? cma_err(ENOMEM) : cma_complete(c);
	}
	if (c->dev == NULL)
		cma_bind_dev(c, d);
	if (id->pd == NULL)
		id->pd = cma_dev_pd(d); /* rdma-core: an id bound to a device has its PD (pyverbs wraps it) */
	/* A loopback destination is this device: rdma_cm sends to its GID 0. */
	if (cma_sa_is_loopback(dst_addr))
		memcpy(dgid, d->gids[0].raw, 16);
	struct rdma_addr *a = &id->route.addr;
	memcpy(a->addr.ibaddr.dgid.raw, dgid, 16);
	memcpy(a->addr.ibaddr.sgid.raw, d->gids[index].raw, 16);
	a->addr.ibaddr.pkey = 0xffff;
	if (cma_sa_is_any(&a->src_addr)) {
		uint16_t port = cma_sa_port(&a->src_addr);
		if (cma_sa_is_loopback(dst_addr)) {
			memcpy(&a->src_storage, dst_addr, dlen);
			cma_sa_set_port(&a->src_addr, port);
		} else {
			cma_gid_sa(d->gids[index].raw, port, &a->src_storage);
		}
	}
	c->state = CMA_ADDR_RESOLVED;
	vrdma_debug("rdma_cm: resolved port %u on %s", cma_sa_port(dst_addr), ibv_get_device_name(d->verbs->device));
	if (cma_queue_local(c, RDMA_CM_EVENT_ADDR_RESOLVED, 0))
		return cma_err(ENOMEM);
	return cma_complete(c);
}

CMA_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	(void)timeout_ms;
	if (id == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	if (c->state != CMA_ADDR_RESOLVED)
		return cma_err(EINVAL);
	struct ibv_sa_path_rec *p = calloc(1, sizeof *p);
	if (p == NULL)
		return cma_err(ENOMEM);
	p->dgid = id->route.addr.addr.ibaddr.dgid;
	p->sgid = id->route.addr.addr.ibaddr.sgid;
	p->pkey = htons(0xffff);
	p->mtu = c->dev->active_mtu;
	p->mtu_selector = 2; /* exactly */
	p->hop_limit = 64;
	p->reversible = 1;
	p->numb_path = 1;
	p->traffic_class = c->tos;
	free(id->route.path_rec);
	id->route.path_rec = p;
	id->route.num_paths = 1;
	c->state = CMA_ROUTE_RESOLVED;
	if (cma_queue_local(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 0))
		return cma_err(ENOMEM);
	return cma_complete(c);
}

CMA_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	char reply[256];
	if (id == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	if (c->state != CMA_IDLE)
		return cma_err(EINVAL);
	struct cma_device *d = c->dev ? c->dev : cma_ndevs > 0 ? &cma_devs[0] : NULL;
	if (d == NULL)
		return cma_err(ENODEV);
	if (backlog <= 0 || backlog > 4096)
		backlog = 128; /* rdma_cm: 0 and less mean the default */
	uint32_t cmid = cma_dev_new_id(d);
	pthread_mutex_lock(&cma_mu);
	c->dev = d; /* a listener on any address listens on the first device */
	c->cmid = cmid;
	c->state = CMA_LISTEN;
	pthread_mutex_unlock(&cma_mu);
	int r;
	for (int try = 0;; try++) {
		/* "ud": the port space is UDP's (SIDR): a device's CM listens
		 * for it apart (verbs uplinks); the daemon's serves both. */
		r = cma_cmd(d, VRDMA_CMD_CM_LISTEN, reply, sizeof reply, "{\"id\":%u,\"port\":%u,\"backlog\":%d%s}", cmid,
			    cma_sa_port(&id->route.addr.src_addr), backlog, id->qp_type == IBV_QPT_UD ? ",\"ud\":true" : "");
		if (r != EBUSY || !c->auto_port || try == 8)
			break;
		cma_sa_set_port(&id->route.addr.src_addr, random_port()); /* the port bind picked is taken */
	}
	if (r != 0) {
		pthread_mutex_lock(&cma_mu);
		c->cmid = 0;
		c->state = CMA_IDLE;
		if (id->verbs == NULL)
			c->dev = NULL;
		pthread_mutex_unlock(&cma_mu);
		return cma_err(r == EBUSY ? EADDRINUSE : r);
	}
	struct vj_doc doc;
	uint64_t port = 0;
	if (vj_parse(&doc, reply, strlen(reply)) == 0) {
		(void)vj_get_u64(&doc, 0, "port", &port);
		vj_free(&doc);
	}
	if (id->route.addr.src_addr.sa_family == 0)
		id->route.addr.src_addr.sa_family = AF_INET;
	if (port > 0 && port <= UINT16_MAX)
		cma_sa_set_port(&id->route.addr.src_addr, (uint16_t)port);
	c->backlog = backlog;
	vrdma_debug("rdma_cm: listening on port %u of %s", cma_sa_port(&id->route.addr.src_addr),
		    ibv_get_device_name(d->verbs->device));
	return 0;
}

CMA_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	if (id == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	int sync = channel == NULL;
	if (sync && (channel = rdma_create_event_channel()) == NULL)
		return -1;
	struct rdma_event_channel *old = id->channel;
	if (c->sync && id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	pthread_mutex_lock(&cma_mu);
	while (c->unacked > 0) /* rdma_cm: its events on the old channel are acked first */
		pthread_cond_wait(&cma_cond, &cma_mu);
	struct cma_chan *from = to_cchan(old);
	struct cma_event **p = &from->head, *last = NULL, *moved = NULL, **mtail = &moved;
	while (*p) { /* what is queued for it follows it */
		struct cma_event *e = *p;
		if (e->owner == c) {
			*p = e->next;
			e->next = NULL;
			*mtail = e;
			mtail = &e->next;
		} else {
			last = e;
			p = &e->next;
		}
	}
	from->tail = last;
	id->channel = channel;
	for (struct cma_event *e = moved, *n; e; e = n) {
		n = e->next;
		cma_enqueue(c, e);
	}
	int was_sync = c->sync;
	c->sync = sync;
	pthread_mutex_unlock(&cma_mu);
	if (was_sync)
		rdma_destroy_event_channel(old);
	return 0;
}

/* rdma_set_option with the kernel's rdma_cm (ucma_set_option) as the
 * model: each option's size is checked (EINVAL), TOS and the ACK timeout
 * apply to the QP when it is connected, REUSEADDR and AFONLY are kept in
 * the states rdma_set_reuseaddr and rdma_set_afonly take them (EINVAL in
 * others) and change nothing else, the ACK timeout only on RC ids (EINVAL on
 * others, as rdma_set_ack_timeout), and IB_PATH, a path record for
 * InfiniBand's SA, is refused with EOPNOTSUPP: vrdma's route comes from
 * its own resolution. */
CMA_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	if (id == NULL || optval == NULL)
		return cma_err(EINVAL);
	struct cma_id *c = to_cid(id);
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			if (optlen != sizeof(uint8_t))
				return cma_err(EINVAL);
			c->tos = *(uint8_t *)optval;
			return 0;
		case RDMA_OPTION_ID_REUSEADDR:
		case RDMA_OPTION_ID_AFONLY: {
			if (optlen != sizeof(int))
				return cma_err(EINVAL);
			int v = *(int *)optval != 0;
			pthread_mutex_lock(&cma_mu);
			/* The kernel's rules: AFONLY while unbound or bound (IDLE,
			 * ADDR_BOUND); REUSEADDR on while not listening, off only
			 * while unbound. */
			int idle = optname == RDMA_OPTION_ID_AFONLY ? c->state == CMA_IDLE
								    : (v && c->state != CMA_LISTEN) ||
									      (c->state == CMA_IDLE && c->dev == NULL &&
								       id->route.addr.src_addr.sa_family == 0);
			if (idle) {
				if (optname == RDMA_OPTION_ID_REUSEADDR)
					c->reuseaddr = v;
				else
					c->afonly = v;
			}
			pthread_mutex_unlock(&cma_mu);
			return idle ? 0 : cma_err(EINVAL);
		}
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != sizeof(uint8_t) || id->qp_type != IBV_QPT_RC)
				return cma_err(EINVAL);
			c->ack_timeout = *(uint8_t *)optval;
			c->ack_timeout_set = 1;
			return 0;
		}
	}
	vrdma_debug("rdma_set_option: level %d option %d is not supported by vrdma", level, optname);
	return cma_err(level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH ? EOPNOTSUPP : ENOSYS);
}
