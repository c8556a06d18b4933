/*
 * cma_event.c: event channels and the events on them.
 *
 * A channel's descriptor (rdma_event_channel.fd) is an epoll set of an
 * eventfd, signalled while events are queued on the channel, and of the
 * command channels' sockets: a CM event the daemon sends while nobody is
 * in a command wakes a thread polling the channel, which then reads it
 * (vrdma_private_cm_drain). Events read while a command waits for its
 * reply are queued by the command's thread (cma_on_event) and signal the
 * eventfd. rdma_get_cm_event blocks on the descriptor unless O_NONBLOCK is
 * set on it, as rdma-core's does. See docs/design/rdma-cm-events.md.
 */
#include "cma.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static struct cma_chan *cma_chans; /* every channel, for their epoll sets; cma_mu */

static void efd_signal(int fd)
{
	uint64_t one = 1;
	while (write(fd, &one, sizeof one) < 0 && errno == EINTR)
		;
}

static void efd_clear(int fd)
{
	uint64_t v;
	while (read(fd, &v, sizeof v) < 0 && errno == EINTR)
		;
}

CMA_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	int e = cma_init();
	if (e != 0) {
		vrdma_debug("rdma_create_event_channel: no vrdma device (%s)", strerror(e));
		errno = e;
		return NULL;
	}
	struct cma_chan *c = vrdma_own_zalloc(sizeof *c); /* own.h */
	if (c == NULL)
		return NULL;
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->ch.fd = epoll_create1(EPOLL_CLOEXEC);
	if (c->efd < 0 || c->ch.fd < 0)
		goto fail;
	struct epoll_event ee = { .events = EPOLLIN };
	ee.data.fd = c->efd;
	if (epoll_ctl(c->ch.fd, EPOLL_CTL_ADD, c->efd, &ee) < 0)
		goto fail;
	pthread_mutex_lock(&cma_mu);
	for (int i = 0; i < cma_ndevs; i++) {
		int fd = vrdma_private_cm_fd(cma_devs[i].verbs);
		if (cma_devs[i].dead || fd < 0)
			continue;
		ee.data.fd = fd;
		(void)epoll_ctl(c->ch.fd, EPOLL_CTL_ADD, fd, &ee);
	}
	c->next = cma_chans;
	cma_chans = c;
	pthread_mutex_unlock(&cma_mu);
	return &c->ch;
fail:
	e = errno;
	if (c->efd >= 0)
		close(c->efd);
	if (c->ch.fd >= 0)
		close(c->ch.fd);
	vrdma_own_free(c);
	errno = e;
	return NULL;
}

/*
 * A thread may still be in rdma_get_cm_event on the channel (rping's CM
 * thread is, when its main thread destroys the channel and returns from
 * main). With rdma-core, such a thread stays blocked in read(2) for good;
 * here it does too (rdma_get_cm_event never returns once it sees the
 * channel destroyed), and the channel's memory stays for it.
 */
CMA_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (channel == NULL)
		return;
	struct cma_chan *c = to_cchan(channel);
	pthread_mutex_lock(&cma_mu);
	for (struct cma_chan **p = &cma_chans; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	for (int i = 0; i < cma_ndevs; i++) {
		int fd = vrdma_private_cm_fd(cma_devs[i].verbs);
		if (fd >= 0)
			(void)epoll_ctl(c->ch.fd, EPOLL_CTL_DEL, fd, NULL);
	}
	struct cma_event *e = c->head;
	c->head = c->tail = NULL;
	c->destroyed = 1;
	int users = c->users;
	close(c->efd);
	close(c->ch.fd);
	pthread_mutex_unlock(&cma_mu);
	while (e) {
		struct cma_event *next = e->next;
		vrdma_own_free(e);
		e = next;
	}
	if (users == 0)
		vrdma_own_free(c);
}

void cma_enqueue(struct cma_id *id, struct cma_event *e)
{
	struct cma_chan *c = to_cchan(id->id.channel);
	e->next = NULL;
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
	efd_signal(c->efd);
}

int cma_queue_local(struct cma_id *id, enum rdma_cm_event_type type, int status)
{
	struct cma_event *e = vrdma_own_zalloc(sizeof *e);
	if (e == NULL)
		return ENOMEM;
	e->ev.id = &id->id;
	e->ev.event = type;
	e->ev.status = status;
	e->owner = id;
	pthread_mutex_lock(&cma_mu);
	cma_enqueue(id, e);
	pthread_mutex_unlock(&cma_mu);
	return 0;
}

void cma_purge(struct cma_id *id, struct cma_id **orphans)
{
	struct cma_chan *c = to_cchan(id->id.channel);
	struct cma_event **p = &c->head, *last = NULL;

	while (*p) {
		struct cma_event *e = *p;
		if (e->owner != id && e->ev.id != &id->id) {
			last = e;
			p = &e->next;
			continue;
		}
		*p = e->next;
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->owner == id && e->ev.id != &id->id) {
			struct cma_id *child = to_cid(e->ev.id);
			for (struct cma_id **q = &cma_ids; *q; q = &(*q)->next)
				if (*q == child) {
					*q = child->next;
					break;
				}
			child->next = *orphans;
			*orphans = child;
		}
		vrdma_own_free(e);
	}
	c->tail = last;
	if (c->head == NULL)
		efd_clear(c->efd);
}

/* A listener bound to a loopback address hears connections to that address
 * only, and with rdma-core both ends of such a connection are that address
 * (the kernel's loopback): the request's local and peer addresses are the
 * listener's, with the ports of the request, not the adapter's GID the
 * daemon carried the connection by. libfabric's ofi_rxm looks the peer's
 * address up in its address vector: with the GID there, two ranks of one
 * host that connect to each other at once each take the other's request
 * for a stranger's and MPI's receives never match. */
static void loopback_ends(struct cma_id *child, const struct cma_id *l, const struct vrdma_cm_ev *ev)
{
	const struct sockaddr *la = &l->id.route.addr.src_addr;
	socklen_t len = cma_sa_len(la);
	if (len == 0 || !cma_sa_is_loopback(la))
		return;
	struct rdma_addr *a = &child->id.route.addr;
	memset(&a->src_storage, 0, sizeof a->src_storage);
	memset(&a->dst_storage, 0, sizeof a->dst_storage);
	memcpy(&a->src_storage, la, len);
	memcpy(&a->dst_storage, la, len);
	cma_sa_set_port(&a->src_addr, ev->local_port);
	cma_sa_set_port(&a->dst_addr, ev->remote_port);
}

/* A connection request to listener l: a new child id on l's channel. */
static void on_request(struct cma_device *d, const struct vrdma_cm_ev *ev)
{
	struct cma_id *l = cma_find(d, ev->listener);
	if (l == NULL || l->state != CMA_LISTEN) {
		vrdma_debug("rdma_cm: a request for listener %u, which is gone: it times out", ev->listener);
		return;
	}
	enum ibv_qp_type qpt = ev->qp_type == IBV_QPT_UD ? IBV_QPT_UD : l->id.qp_type;
	struct cma_id *child = cma_id_alloc(l->id.channel, l->id.context, l->id.ps, qpt);
	struct cma_event *e = vrdma_own_zalloc(sizeof *e);
	if (child == NULL || e == NULL) {
		vrdma_own_free(child);
		vrdma_own_free(e);
		vrdma_debug("rdma_cm: out of memory for a request: it times out");
		return;
	}
	cma_bind_dev(child, d);
	child->cmid = ev->id;
	child->state = CMA_REQ_RCVD;
	child->peer = *ev;
	if (ev->has_local_psn)
		child->psn = ev->local_psn; /* the device's CM chose it */
	child->qp_init = NULL;
	child->id.pd = l->id.pd ? l->id.pd : cma_dev_pd_peek(d);
	cma_gid_sa(ev->local_addr, ev->local_port, &child->id.route.addr.src_storage);
	cma_gid_sa(ev->remote_addr, ev->remote_port, &child->id.route.addr.dst_storage);
	loopback_ends(child, l, ev);
	memcpy(child->id.route.addr.addr.ibaddr.sgid.raw, ev->local_addr, 16);
	memcpy(child->id.route.addr.addr.ibaddr.dgid.raw, ev->gid, 16);
	child->id.route.addr.addr.ibaddr.pkey = 0xffff;
	cma_link(child);
	e->owner = l;
	e->from_daemon = 1;
	e->raw = *ev;
	e->ev.id = &child->id;
	e->ev.listen_id = &l->id;
	e->ev.event = RDMA_CM_EVENT_CONNECT_REQUEST;
	cma_enqueue(l, e);
}

/* Whether an event of the daemon fits the state of the id it names: the
 * daemon is trusted less than fully, and an event that cannot happen in a
 * state (a reply to a listener, ESTABLISHED before any request) is dropped
 * rather than handed to the application; cma_mu held. */
static int fits(const struct cma_id *id, uint8_t type)
{
	switch (type) {
	case VRDMA_CM_EV_REPLY:
		return id->state == CMA_CONNECT && id->id.qp_type != IBV_QPT_UD;
	case VRDMA_CM_EV_ESTABLISHED:
		return id->state == CMA_ACCEPTED || (id->state == CMA_CONNECT && id->id.qp_type == IBV_QPT_UD);
	case VRDMA_CM_EV_REJECTED:
	case VRDMA_CM_EV_TIMEOUT:
	case VRDMA_CM_EV_UNREACHABLE:
		return id->state == CMA_CONNECT || id->state == CMA_REPLY_RCVD || id->state == CMA_REQ_RCVD ||
		       id->state == CMA_ACCEPTED;
	case VRDMA_CM_EV_DISCONNECTED:
	case VRDMA_CM_EV_DISCONNECT_DONE:
		return id->state == CMA_ESTABLISHED || id->state == CMA_ACCEPTED || id->state == CMA_REPLY_RCVD ||
		       id->state == CMA_DISCONNECTED;
	}
	return 0;
}

void cma_on_event(void *arg, const struct vrdma_cm_ev *ev)
{
	struct cma_device *d = arg;

	pthread_mutex_lock(&cma_mu);
	if (ev->type == VRDMA_CM_EV_REQUEST) {
		on_request(d, ev);
		pthread_mutex_unlock(&cma_mu);
		return;
	}
	struct cma_id *id = cma_find(d, ev->id);
	if (id == NULL) {
		vrdma_debug("rdma_cm: event %u for connection %u, which is gone", ev->type, ev->id);
		goto out;
	}
	if (!fits(id, ev->type)) {
		vrdma_debug("rdma_cm: dropped event %u for connection %u, which is in state %d", ev->type, ev->id,
			    id->state);
		goto out;
	}
	if (ev->type == VRDMA_CM_EV_DISCONNECTED || ev->type == VRDMA_CM_EV_DISCONNECT_DONE) {
		if (id->disc_queued)
			goto out; /* both sides ended it: one DISCONNECTED, as rdma_cm gives */
		id->disc_queued = 1;
	}
	struct cma_event *e = vrdma_own_zalloc(sizeof *e);
	if (e == NULL) {
		vrdma_debug("rdma_cm: out of memory: dropped event %u for connection %u", ev->type, ev->id);
		goto out;
	}
	e->owner = id;
	e->from_daemon = 1;
	e->raw = *ev;
	e->ev.id = &id->id;
	cma_enqueue(id, e);
out:
	pthread_mutex_unlock(&cma_mu);
}

/* The device's daemon went away: every id on it gets DEVICE_REMOVAL, as
 * rdma_cm's ids do when their device goes; cma_mu held. */
static void device_removed(struct cma_device *d)
{
	for (struct cma_id *id = cma_ids; id; id = id->next) {
		if (id->dev != d)
			continue;
		struct cma_event *e = vrdma_own_zalloc(sizeof *e);
		if (e == NULL)
			continue;
		e->owner = id;
		e->ev.id = &id->id;
		e->ev.event = RDMA_CM_EVENT_DEVICE_REMOVAL;
		id->state = CMA_FAILED;
		cma_enqueue(id, e);
	}
}

/* Reads what the daemon has sent on every device's channel. A lost
 * channel leaves the epoll sets (its socket would stay readable). */
static void drain_all(void)
{
	for (int i = 0; i < cma_ndevs; i++) {
		struct cma_device *d = &cma_devs[i];
		if (__atomic_load_n(&d->dead, __ATOMIC_ACQUIRE))
			continue;
		if (vrdma_private_cm_drain(d->verbs) == 0)
			continue;
		int fd = vrdma_private_cm_fd(d->verbs);
		pthread_mutex_lock(&cma_mu);
		if (!d->dead) {
			__atomic_store_n(&d->dead, 1, __ATOMIC_RELEASE);
			vrdma_log("rdma_cm: the channel of %s to the vrdma daemon is lost; its connections are gone",
				  ibv_get_device_name(d->verbs->device));
			for (struct cma_chan *c = cma_chans; c && fd >= 0; c = c->next)
				(void)epoll_ctl(c->ch.fd, EPOLL_CTL_DEL, fd, NULL);
			device_removed(d);
		}
		pthread_mutex_unlock(&cma_mu);
	}
}

/* Whether every device's channel to the daemon is lost. */
static int all_dead(void)
{
	for (int i = 0; i < cma_ndevs; i++)
		if (!__atomic_load_n(&cma_devs[i].dead, __ATOMIC_ACQUIRE))
			return 0;
	return cma_ndevs > 0;
}

static void set_conn_param(struct cma_event *e)
{
	e->ev.param.conn.private_data = e->raw.private_len ? e->raw.private_data : NULL;
	e->ev.param.conn.private_data_len = (uint8_t)e->raw.private_len;
	e->ev.param.conn.responder_resources = e->raw.rd_atomic;
	e->ev.param.conn.initiator_depth = e->raw.rd_atomic;
	e->ev.param.conn.flow_control = 1;
	e->ev.param.conn.retry_count = 7;
	e->ev.param.conn.rnr_retry_count = 7;
	e->ev.param.conn.qp_num = e->raw.qpn;
}

static void set_ud_param(struct cma_event *e)
{
	struct rdma_ud_param *u = &e->ev.param.ud;
	u->private_data = e->raw.private_len ? e->raw.private_data : NULL;
	u->private_data_len = (uint8_t)e->raw.private_len;
	u->qp_num = e->raw.qpn;
	u->qkey = e->raw.qkey;
	u->ah_attr.is_global = 1;
	memcpy(u->ah_attr.grh.dgid.raw, e->raw.gid, 16);
	u->ah_attr.grh.sgid_index = e->raw.sgid_index;
	u->ah_attr.grh.hop_limit = 64;
	u->ah_attr.port_num = 1;
}

static void set_state(struct cma_id *id, enum cma_state st)
{
	pthread_mutex_lock(&cma_mu);
	id->state = st;
	pthread_mutex_unlock(&cma_mu);
}

/* The active side's reply: with a QP of the library's, connect it and
 * confirm, then the application sees ESTABLISHED (or CONNECT_ERROR);
 * without one, it sees CONNECT_RESPONSE and confirms with rdma_accept or
 * rdma_establish. */
static void on_reply(struct cma_id *id, struct cma_event *e)
{
	set_conn_param(e);
	id->peer = e->raw;
	if (e->raw.has_local_psn)
		id->psn = e->raw.local_psn; /* the device's CM chose it */
	id->rd_atomic = e->raw.rd_atomic < id->rd_atomic ? e->raw.rd_atomic : id->rd_atomic;
	if (id->id.qp == NULL) {
		set_state(id, CMA_REPLY_RCVD);
		e->ev.event = RDMA_CM_EVENT_CONNECT_RESPONSE;
		return;
	}
	int r = cma_qp_connect(id);
	if (r == 0)
		r = cma_cmd(id->dev, VRDMA_CMD_CM_ACCEPT, NULL, 0, "{\"id\":%u}", id->cmid);
	if (r != 0) {
		(void)cma_cmd(id->dev, VRDMA_CMD_CM_REJECT, NULL, 0, "{\"id\":%u,\"reason\":1}", id->cmid);
		set_state(id, CMA_FAILED);
		e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
		e->ev.status = -r;
		return;
	}
	set_state(id, CMA_ESTABLISHED);
	e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
}

/* Fills in a daemon event for the application, doing what rdma_cm does on
 * the way (the active side's confirmation). */
static void translate(struct cma_event *e)
{
	struct cma_id *id = to_cid(e->ev.id);
	const struct vrdma_cm_ev *r = &e->raw;

	switch (r->type) {
	case VRDMA_CM_EV_REQUEST:
		e->ev.event = RDMA_CM_EVENT_CONNECT_REQUEST;
		if (id->id.qp_type == IBV_QPT_UD)
			set_ud_param(e);
		else
			set_conn_param(e);
		break;
	case VRDMA_CM_EV_REPLY:
		on_reply(id, e);
		break;
	case VRDMA_CM_EV_ESTABLISHED:
		if (id->id.qp_type == IBV_QPT_UD)
			set_ud_param(e);
		else
			set_conn_param(e);
		set_state(id, CMA_ESTABLISHED);
		e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
		break;
	case VRDMA_CM_EV_REJECTED:
		vrdma_debug("rdma_cm: connection %u rejected (reason %u): %s", r->id, r->reason, r->text);
		set_conn_param(e);
		set_state(id, CMA_FAILED);
		e->ev.status = r->reason ? r->reason : 28; /* IBTA: consumer */
		e->ev.event = id->id.qp_type == IBV_QPT_UD ? RDMA_CM_EVENT_UNREACHABLE : RDMA_CM_EVENT_REJECTED;
		break;
	case VRDMA_CM_EV_TIMEOUT:
	case VRDMA_CM_EV_UNREACHABLE:
		vrdma_debug("rdma_cm: connection %u: %s: %s", r->id,
			    r->type == VRDMA_CM_EV_TIMEOUT ? "timed out" : "unreachable", r->text);
		set_state(id, CMA_FAILED);
		e->ev.status = r->type == VRDMA_CM_EV_TIMEOUT ? -ETIMEDOUT : -EHOSTUNREACH;
		e->ev.event = RDMA_CM_EVENT_UNREACHABLE;
		break;
	default: /* DISCONNECTED, DISCONNECT_DONE */
		e->ev.param.conn.private_data = r->private_len ? r->private_data : NULL;
		e->ev.param.conn.private_data_len = (uint8_t)r->private_len;
		set_state(id, CMA_DISCONNECTED);
		e->ev.event = RDMA_CM_EVENT_DISCONNECTED;
		break;
	}
}

static int nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl >= 0 && (fl & O_NONBLOCK);
}

/* The next event of c: 0 with *event, -1 with errno, or 1 when c was
 * destroyed meanwhile. The caller counts as one of c's users. */
static int next_event(struct cma_chan *c, struct rdma_cm_event **event)
{
	for (;;) {
		drain_all();
		pthread_mutex_lock(&cma_mu);
		if (c->destroyed) {
			pthread_mutex_unlock(&cma_mu);
			return 1;
		}
		struct cma_event *e = c->head;
		if (e) {
			c->head = e->next;
			if (c->head == NULL)
				c->tail = NULL;
		}
		if (c->head == NULL)
			efd_clear(c->efd);
		int fd = c->ch.fd;
		int gone = e == NULL && all_dead(); /* with the queue: removals are queued as devices die */
		pthread_mutex_unlock(&cma_mu);
		if (e) {
			if (e->from_daemon)
				translate(e);
			pthread_mutex_lock(&cma_mu);
			e->owner->unacked++;
			pthread_mutex_unlock(&cma_mu);
			e->next = NULL;
			*event = &e->ev;
			return 0;
		}
		if (gone) {
			/* Every device's daemon is gone and each id had its
			 * DEVICE_REMOVAL: nothing can come any more. */
			return cma_err(EIO);
		}
		if (nonblocking(fd))
			return cma_err(EAGAIN);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -1;
	}
}

CMA_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	if (channel == NULL || event == NULL)
		return cma_err(EINVAL);
	struct cma_chan *c = to_cchan(channel);
	pthread_mutex_lock(&cma_mu);
	c->users++;
	pthread_mutex_unlock(&cma_mu);
	int r = next_event(c, event);
	int e = errno;
	pthread_mutex_lock(&cma_mu);
	c->users--;
	pthread_mutex_unlock(&cma_mu);
	if (r == 1) {
		/* Destroyed under this thread: rdma-core's reader stays blocked in
		 * read(2) for good, and so does this one (the process is usually
		 * ending: rping's CM thread). */
		for (;;)
			pause();
	}
	errno = e;
	return r;
}

CMA_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (event == NULL)
		return cma_err(EINVAL);
	struct cma_event *e = cma_container_of(event, struct cma_event, ev);
	pthread_mutex_lock(&cma_mu);
	e->owner->unacked--;
	pthread_cond_broadcast(&cma_cond);
	pthread_mutex_unlock(&cma_mu);
	vrdma_own_free(e);
	return 0;
}

int cma_complete(struct cma_id *id)
{
	if (!id->sync)
		return 0;
	if (id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	if (rdma_get_cm_event(id->id.channel, &id->id.event) < 0)
		return -1;
	int st = id->id.event->status;
	if (st == 0)
		return 0;
	if (id->id.event->event == RDMA_CM_EVENT_REJECTED)
		return cma_err(ECONNREFUSED);
	return cma_err(st < 0 ? -st : st);
}

CMA_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	switch (event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		return "RDMA_CM_EVENT_ADDR_RESOLVED";
	case RDMA_CM_EVENT_ADDR_ERROR:
		return "RDMA_CM_EVENT_ADDR_ERROR";
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		return "RDMA_CM_EVENT_ROUTE_RESOLVED";
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return "RDMA_CM_EVENT_ROUTE_ERROR";
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return "RDMA_CM_EVENT_CONNECT_REQUEST";
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		return "RDMA_CM_EVENT_CONNECT_RESPONSE";
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return "RDMA_CM_EVENT_CONNECT_ERROR";
	case RDMA_CM_EVENT_UNREACHABLE:
		return "RDMA_CM_EVENT_UNREACHABLE";
	case RDMA_CM_EVENT_REJECTED:
		return "RDMA_CM_EVENT_REJECTED";
	case RDMA_CM_EVENT_ESTABLISHED:
		return "RDMA_CM_EVENT_ESTABLISHED";
	case RDMA_CM_EVENT_DISCONNECTED:
		return "RDMA_CM_EVENT_DISCONNECTED";
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return "RDMA_CM_EVENT_DEVICE_REMOVAL";
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		return "RDMA_CM_EVENT_MULTICAST_JOIN";
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		return "RDMA_CM_EVENT_MULTICAST_ERROR";
	case RDMA_CM_EVENT_ADDR_CHANGE:
		return "RDMA_CM_EVENT_ADDR_CHANGE";
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
	}
	return "UNKNOWN EVENT";
}
