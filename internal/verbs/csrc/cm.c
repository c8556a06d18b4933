/* The helper's connection manager: rdma_cm ids on the device's own CM
 * (the host kernel's, through librdmacm), for connections whose QP is a
 * device QP the daemon made with VH_CREATE_QP. Layouts: verbs/cm_msg.go.
 *
 * The ids carry no QP of librdmacm's (rdma_create_qp is never called): the
 * REQ and REP name the QP by number (conn_param.qp_num), and the QP's
 * transitions take rdma_init_qp_attr's attributes (VH_CM_QP_ATTR), which the
 * daemon applies with VH_MODIFY_QP, as librdmacm documents for a QP the
 * application moves itself; the active side then sends the RTU with
 * rdma_establish.
 *
 * librdmacm.so.1 is opened at run time (dlopen) by VH_CM_OPEN, so a host
 * without it runs the helper and only the CM's ops fail; a build without
 * rdma/rdma_cma.h (no librdmacm-dev) likewise has the ops fail, saying what
 * to install. Events are pushed on a socket of their own, which
 * VH_CM_OPEN brings. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"

enum {
	VH_CM_IDS = 1024,
	VH_CM_PDATA = 256, /* the most private data an event or request carries */
	VH_CM_NONE = 0xffffffffu,
	VH_CM_LISTEN_SIZE = 24,
	VH_CM_CONNECT_SIZE = 40,
	VH_CM_ACCEPT_SIZE = 16,
	VH_CM_REJECT_SIZE = 8,
};

#if !VH_HAVE_CMA

int do_cm(uint16_t op, uint32_t seq, const unsigned char *body, size_t len, int *fd)
{
	(void)body;
	(void)len;
	(void)fd;
	return fail(op, seq, EOPNOTSUPP,
		    "this helper was built without rdma/rdma_cma.h: install librdmacm-dev (`apt-get install librdmacm-dev`) and let the daemon build it again");
}

int cm_fd(void) { return -1; }
int cm_event(void) { return 0; }
void cm_close(void) {}

#else

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* librdmacm's functions, found at VH_CM_OPEN. */
static struct {
	void *lib;
	struct rdma_event_channel *(*create_channel)(void);
	void (*destroy_channel)(struct rdma_event_channel *);
	int (*create_id)(struct rdma_event_channel *, struct rdma_cm_id **, void *, enum rdma_port_space);
	int (*destroy_id)(struct rdma_cm_id *);
	int (*bind_addr)(struct rdma_cm_id *, struct sockaddr *);
	int (*listen)(struct rdma_cm_id *, int);
	int (*resolve_addr)(struct rdma_cm_id *, struct sockaddr *, struct sockaddr *, int);
	int (*resolve_route)(struct rdma_cm_id *, int);
	int (*connect)(struct rdma_cm_id *, struct rdma_conn_param *);
	int (*accept)(struct rdma_cm_id *, struct rdma_conn_param *);
	int (*reject)(struct rdma_cm_id *, const void *, uint8_t);
	int (*establish)(struct rdma_cm_id *);
	int (*disconnect)(struct rdma_cm_id *);
	int (*get_event)(struct rdma_event_channel *, struct rdma_cm_event **);
	int (*ack_event)(struct rdma_cm_event *);
	int (*init_qp_attr)(struct rdma_cm_id *, struct ibv_qp_attr *, int *);
} cma;

static struct rdma_event_channel *chan;
static int push = -1;

/* An id, and for one being dialled what its connect sends once its route
 * is resolved. */
static struct cm_id {
	struct rdma_cm_id *id;
	int dialling;
	int timeout;
	struct rdma_conn_param param;
	unsigned char pdata[VH_CM_PDATA];
} ids[VH_CM_IDS];

static int load(void)
{
	struct {
		const char *name;
		void **p;
	} fns[] = {
		{ "rdma_create_event_channel", (void **)&cma.create_channel },
		{ "rdma_destroy_event_channel", (void **)&cma.destroy_channel },
		{ "rdma_create_id", (void **)&cma.create_id },
		{ "rdma_destroy_id", (void **)&cma.destroy_id },
		{ "rdma_bind_addr", (void **)&cma.bind_addr },
		{ "rdma_listen", (void **)&cma.listen },
		{ "rdma_resolve_addr", (void **)&cma.resolve_addr },
		{ "rdma_resolve_route", (void **)&cma.resolve_route },
		{ "rdma_connect", (void **)&cma.connect },
		{ "rdma_accept", (void **)&cma.accept },
		{ "rdma_reject", (void **)&cma.reject },
		{ "rdma_establish", (void **)&cma.establish },
		{ "rdma_disconnect", (void **)&cma.disconnect },
		{ "rdma_get_cm_event", (void **)&cma.get_event },
		{ "rdma_ack_cm_event", (void **)&cma.ack_event },
		{ "rdma_init_qp_attr", (void **)&cma.init_qp_attr },
	};

	if (cma.lib)
		return 0;
	cma.lib = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cma.lib)
		return -1;
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		void *f = dlsym(cma.lib, fns[i].name);
		if (!f) {
			dlclose(cma.lib);
			cma.lib = NULL;
			return -2;
		}
		memcpy(fns[i].p, &f, sizeof(f));
	}
	return 0;
}

static struct cm_id *id_at(uint32_t h) { return h < VH_CM_IDS && ids[h].id ? &ids[h] : NULL; }

static int new_handle(void)
{
	for (int h = 0; h < VH_CM_IDS; h++)
		if (!ids[h].id)
			return h;
	return -1;
}

/* sockaddr_of reads a 16-byte address (IPv4 as ::ffff:a.b.c.d) and a port
 * into ss. */
static struct sockaddr *sockaddr_of(const unsigned char *addr, uint16_t port, struct sockaddr_storage *ss)
{
	static const unsigned char v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	memset(ss, 0, sizeof(*ss));
	if (!memcmp(addr, v4, 12)) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		memcpy(&s->sin_addr, addr + 12, 4);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons(port);
		memcpy(&s->sin6_addr, addr, 16);
	}
	return (struct sockaddr *)ss;
}

/* cm_put_sockaddr appends u16 port, u16 0 and the 16-byte address of sa. */
void cm_put_sockaddr(const struct sockaddr *sa)
{
	unsigned char a[16] = { 0 };
	uint16_t port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)sa;
		a[10] = a[11] = 0xff;
		memcpy(a + 12, &s->sin_addr, 4);
		port = ntohs(s->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;
		memcpy(a, &s->sin6_addr, 16);
		port = ntohs(s->sin6_port);
	}
	put32(port);
	putbytes(a, 16);
}

/* ours reports whether id is bound to the helper's device and port. */
static int ours(const struct rdma_cm_id *id)
{
	return id->verbs && ctx && !strcmp(ibv_get_device_name(id->verbs->device), ibv_get_device_name(ctx->device)) &&
	       id->port_num == port_num;
}

static int drop(uint32_t h)
{
	int err = cma.destroy_id(ids[h].id) ? errno : 0;
	memset(&ids[h], 0, sizeof(ids[h]));
	return err;
}

/* push_event sends an event: u32 id, u32 listener (VH_CM_NONE if none),
 * i32 event, i32 status, u32 the peer's QPN, u8 responder resources,
 * u8 initiator depth, u16 0, then the local and the peer's address (u32
 * port, 16 bytes each), u32 private data length, u32 0, the data. */
static int push_event(uint32_t h, uint32_t listener, int event, int status, const struct rdma_cm_event *ev,
		      const struct rdma_cm_id *id)
{
	const struct rdma_conn_param *c = ev ? &ev->param.conn : NULL;
	uint32_t n = c && c->private_data ? c->private_data_len : 0;
	struct sockaddr_storage none = { 0 };

	if (n > VH_CM_PDATA)
		n = VH_CM_PDATA;
	begin(VH_CM_EVENT, 0, 0);
	put32(h);
	put32(listener);
	put32((uint32_t)event);
	put32((uint32_t)status);
	put32(c ? c->qp_num : 0);
	putbytes((unsigned char[4]){ c ? c->responder_resources : 0, c ? c->initiator_depth : 0, 0, 0 }, 4);
	cm_put_sockaddr(id ? (const struct sockaddr *)&id->route.addr.src_addr : (const struct sockaddr *)&none);
	cm_put_sockaddr(id ? (const struct sockaddr *)&id->route.addr.dst_addr : (const struct sockaddr *)&none);
	put32(n);
	put32(0);
	if (n)
		putbytes(c->private_data, n);
	return finish_to(push);
}

/* Body: the event socket (SCM_RIGHTS). Opens librdmacm and the event
 * channel; again with the channel open, it is a no-op. */
static int cm_open(uint32_t seq, int *fd)
{
	int r;

	if (!ctx)
		return fail(VH_CM_OPEN, seq, ENODEV, "no device is open");
	if (chan) {
		begin(VH_CM_OPEN | VH_REPLY_BIT, seq, 0);
		return finish();
	}
	if (*fd < 0)
		return fail(VH_CM_OPEN, seq, EINVAL, "cm_open: no event socket came with it");
	r = load();
	if (r == -1)
		return fail(VH_CM_OPEN, seq, ELIBACC,
			    "librdmacm.so.1 cannot be loaded (%s): install it with `apt-get install librdmacm1`", dlerror());
	if (r == -2)
		return fail(VH_CM_OPEN, seq, ELIBBAD, "librdmacm.so.1 lacks rdma_establish or another function: rdma-core 23 or later is needed");
	chan = cma.create_channel();
	if (!chan)
		return fail(VH_CM_OPEN, seq, errno, "rdma_create_event_channel: %s", strerror(errno));
	if (fcntl(chan->fd, F_SETFL, fcntl(chan->fd, F_GETFL) | O_NONBLOCK)) {
		r = errno;
		cma.destroy_channel(chan);
		chan = NULL;
		return fail(VH_CM_OPEN, seq, r, "the CM's event channel: %s", strerror(r));
	}
	push = *fd;
	*fd = -1;
	begin(VH_CM_OPEN | VH_REPLY_BIT, seq, 0);
	return finish();
}

/* Body: u32 backlog, u32 port, 16-byte address (all zero: any). Reply:
 * u32 id, u32 the port bound. */
int cm_listen_ps(uint16_t op, uint32_t seq, const unsigned char *body, size_t len, enum rdma_port_space ps)
{
	static const unsigned char any[16];
	struct sockaddr_storage ss;
	struct sockaddr *sa;
	int h, err;
	uint32_t port;

	if (len != VH_CM_LISTEN_SIZE)
		return fail(op, seq, EINVAL, "cm_listen: %zu-byte body, want %d", len, VH_CM_LISTEN_SIZE);
	port = get32(body + 4);
	if (get32(body) > 4096 || port > 0xffff)
		return fail(op, seq, EINVAL, "cm_listen: backlog %u, port %u", get32(body), port);
	if ((h = new_handle()) < 0)
		return fail(op, seq, ENOSPC, "cm_listen: %d ids already", VH_CM_IDS);
	if (memcmp(body + 8, any, 16)) {
		sa = sockaddr_of(body + 8, (uint16_t)port, &ss);
	} else {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;
		memset(&ss, 0, sizeof(ss));
		s->sin_family = AF_INET;
		s->sin_port = htons((uint16_t)port);
		sa = (struct sockaddr *)s;
	}
	if (cma.create_id(chan, &ids[h].id, (void *)(uintptr_t)h, ps))
		return fail(op, seq, errno, "rdma_create_id: %s", strerror(errno));
	if (cma.bind_addr(ids[h].id, sa)) {
		err = errno;
		drop((uint32_t)h);
		return fail(op, seq, err, "rdma_bind_addr: %s", strerror(err));
	}
	if (ids[h].id->verbs && !ours(ids[h].id)) {
		drop((uint32_t)h);
		return fail(op, seq, EXDEV, "that address belongs to device %s, not to %s",
			    ibv_get_device_name(ids[h].id->verbs->device), ibv_get_device_name(ctx->device));
	}
	if (cma.listen(ids[h].id, (int)get32(body))) {
		err = errno;
		drop((uint32_t)h);
		return fail(op, seq, err, "rdma_listen: %s", strerror(err));
	}
	begin(op | VH_REPLY_BIT, seq, 0);
	put32((uint32_t)h);
	put32(ntohs(((struct sockaddr_in *)&ids[h].id->route.addr.src_addr)->sin_port));
	return finish();
}

/* Body: u32 timeout (ms), u32 QPN, u32 port, u8 responder resources, u8
 * initiator depth, u8 retry count, u8 RNR retry count, 16-byte address,
 * u32 private data length, u32 0, the data. Reply: u32 id. The helper
 * resolves the address and the route, then connects; the events say
 * how it went (an error, or RDMA_CM_EVENT_CONNECT_RESPONSE). */
int cm_connect_ps(uint16_t op, uint32_t seq, const unsigned char *body, size_t len, enum rdma_port_space ps)
{
	struct sockaddr_storage ss;
	struct cm_id *c;
	uint32_t timeout, qpn, port, n;
	int h, err;

	if (len < VH_CM_CONNECT_SIZE)
		return fail(op, seq, EINVAL, "cm_connect: %zu-byte body, want %d and the data", len, VH_CM_CONNECT_SIZE);
	timeout = get32(body);
	qpn = get32(body + 4);
	port = get32(body + 8);
	n = get32(body + 32);
	if (timeout == 0 || timeout > 600000 || qpn > 0xffffff || port == 0 || port > 0xffff || n > VH_CM_PDATA ||
	    len != VH_CM_CONNECT_SIZE + n)
		return fail(op, seq, EINVAL, "cm_connect: timeout %u ms, QPN %#x, port %u, %u bytes of private data in %zu", timeout,
			    qpn, port, n, len);
	if ((h = new_handle()) < 0)
		return fail(op, seq, ENOSPC, "cm_connect: %d ids already", VH_CM_IDS);
	c = &ids[h];
	if (cma.create_id(chan, &c->id, (void *)(uintptr_t)h, ps))
		return fail(op, seq, errno, "rdma_create_id: %s", strerror(errno));
	c->dialling = 1;
	c->timeout = (int)timeout;
	c->param.qp_num = qpn;
	c->param.responder_resources = body[12];
	c->param.initiator_depth = body[13];
	c->param.retry_count = body[14] > 7 ? 7 : body[14];
	c->param.rnr_retry_count = body[15] > 7 ? 7 : body[15];
	c->param.flow_control = 1;
	memcpy(c->pdata, body + VH_CM_CONNECT_SIZE, n);
	c->param.private_data = n ? c->pdata : NULL;
	c->param.private_data_len = (uint8_t)n;
	if (cma.resolve_addr(c->id, NULL, sockaddr_of(body + 16, (uint16_t)port, &ss), c->timeout)) {
		err = errno;
		drop((uint32_t)h);
		return fail(op, seq, err, "rdma_resolve_addr: %s", strerror(err));
	}
	begin(op | VH_REPLY_BIT, seq, 0);
	put32((uint32_t)h);
	return finish();
}

/* Body: u32 id, u32 QPN, u8 responder resources, u8 initiator depth, u8
 * RNR retry count, u8 0, u32 private data length, the data. */
static int cm_accept(uint32_t seq, const unsigned char *body, size_t len)
{
	struct rdma_conn_param p;
	struct cm_id *c;
	uint32_t n;

	if (len < VH_CM_ACCEPT_SIZE)
		return fail(VH_CM_ACCEPT, seq, EINVAL, "cm_accept: %zu-byte body, want %d and the data", len, VH_CM_ACCEPT_SIZE);
	c = id_at(get32(body));
	n = get32(body + 12);
	if (!c)
		return fail(VH_CM_ACCEPT, seq, ENOENT, "cm_accept: no id %u", get32(body));
	if (get32(body + 4) > 0xffffff || n > VH_CM_PDATA || len != VH_CM_ACCEPT_SIZE + n)
		return fail(VH_CM_ACCEPT, seq, EINVAL, "cm_accept: QPN %#x, %u bytes of private data in %zu", get32(body + 4), n, len);
	memset(&p, 0, sizeof(p));
	p.qp_num = get32(body + 4);
	p.responder_resources = body[8];
	p.initiator_depth = body[9];
	p.rnr_retry_count = body[10] > 7 ? 7 : body[10];
	p.flow_control = 1;
	p.private_data = n ? body + VH_CM_ACCEPT_SIZE : NULL;
	p.private_data_len = (uint8_t)n;
	if (cma.accept(c->id, &p))
		return fail(VH_CM_ACCEPT, seq, errno, "rdma_accept: %s", strerror(errno));
	begin(VH_CM_ACCEPT | VH_REPLY_BIT, seq, 0);
	return finish();
}

/* Body: u32 id, u32 private data length, the data. */
static int cm_reject(uint32_t seq, const unsigned char *body, size_t len)
{
	struct cm_id *c;
	uint32_t n;

	if (len < VH_CM_REJECT_SIZE)
		return fail(VH_CM_REJECT, seq, EINVAL, "cm_reject: %zu-byte body, want %d and the data", len, VH_CM_REJECT_SIZE);
	c = id_at(get32(body));
	n = get32(body + 4);
	if (!c)
		return fail(VH_CM_REJECT, seq, ENOENT, "cm_reject: no id %u", get32(body));
	if (n > VH_CM_PDATA || len != VH_CM_REJECT_SIZE + n)
		return fail(VH_CM_REJECT, seq, EINVAL, "cm_reject: %u bytes of private data in %zu", n, len);
	if (cma.reject(c->id, n ? body + VH_CM_REJECT_SIZE : NULL, (uint8_t)n))
		return fail(VH_CM_REJECT, seq, errno, "rdma_reject: %s", strerror(errno));
	begin(VH_CM_REJECT | VH_REPLY_BIT, seq, 0);
	return finish();
}

/* Body: u32 id (establish, disconnect, destroy). */
static int cm_simple(uint16_t op, uint32_t seq, const unsigned char *body, size_t len)
{
	struct cm_id *c;
	int err = 0;
	const char *what = "";

	if (len != 4)
		return fail(op, seq, EINVAL, "cm op %u: %zu-byte body, want 4", op, len);
	c = id_at(get32(body));
	if (!c)
		return fail(op, seq, ENOENT, "cm op %u: no id %u", op, get32(body));
	switch (op) {
	case VH_CM_ESTABLISH:
		what = "rdma_establish";
		err = cma.establish(c->id) ? errno : 0;
		break;
	case VH_CM_DISCONNECT:
		what = "rdma_disconnect";
		err = cma.disconnect(c->id) ? errno : 0;
		break;
	default:
		what = "rdma_destroy_id";
		err = drop(get32(body));
	}
	if (err)
		return fail(op, seq, err, "%s: %s", what, strerror(err));
	begin(op | VH_REPLY_BIT, seq, 0);
	return finish();
}

/* Body: u32 id, u32 state. Reply: u32 mask, then rdma_init_qp_attr's
 * attributes in VH_MODIFY_QP's 64-byte layout (its QP handle 0). */
static int cm_qp_attr(uint32_t seq, const unsigned char *body, size_t len)
{
	struct ibv_qp_attr a;
	struct cm_id *c;
	int mask = 0;
	unsigned char b8[16] = { 0 };

	if (len != 8)
		return fail(VH_CM_QP_ATTR, seq, EINVAL, "cm_qp_attr: %zu-byte body, want 8", len);
	c = id_at(get32(body));
	if (!c)
		return fail(VH_CM_QP_ATTR, seq, ENOENT, "cm_qp_attr: no id %u", get32(body));
	if (get32(body + 4) < IBV_QPS_INIT || get32(body + 4) > IBV_QPS_RTS)
		return fail(VH_CM_QP_ATTR, seq, EINVAL, "cm_qp_attr: state %u is not INIT, RTR or RTS", get32(body + 4));
	memset(&a, 0, sizeof(a));
	a.qp_state = (enum ibv_qp_state)get32(body + 4);
	if (cma.init_qp_attr(c->id, &a, &mask))
		return fail(VH_CM_QP_ATTR, seq, errno, "rdma_init_qp_attr(state %u): %s", get32(body + 4), strerror(errno));
	begin(VH_CM_QP_ATTR | VH_REPLY_BIT, seq, 0);
	put32((uint32_t)mask);
	put32(0);
	put32(a.qp_state);
	put32((uint32_t)a.qp_access_flags);
	put32(a.path_mtu);
	put32(a.dest_qp_num);
	put32(a.rq_psn);
	put32(a.sq_psn);
	put32(a.ah_attr.grh.flow_label);
	putbytes(a.ah_attr.grh.dgid.raw, 16);
	putbytes(&a.ah_attr.dlid, 2);
	b8[0] = a.ah_attr.grh.sgid_index;
	b8[1] = a.ah_attr.grh.hop_limit;
	b8[2] = a.ah_attr.grh.traffic_class;
	b8[3] = a.ah_attr.sl;
	b8[4] = a.timeout;
	b8[5] = a.retry_cnt;
	b8[6] = a.rnr_retry;
	b8[7] = a.min_rnr_timer;
	b8[8] = a.max_rd_atomic;
	b8[9] = a.max_dest_rd_atomic;
	b8[10] = a.ah_attr.is_global;
	putbytes(b8, 14);
	return finish();
}

int do_cm(uint16_t op, uint32_t seq, const unsigned char *body, size_t len, int *fd)
{
	if (op == VH_CM_OPEN)
		return cm_open(seq, fd);
	if (!chan)
		return fail(op, seq, ENOTCONN, "the CM is not open (VH_CM_OPEN first)");
	switch (op) {
	case VH_CM_LISTEN:
		return cm_listen_ps(op, seq, body, len, RDMA_PS_TCP);
	case VH_CM_CONNECT:
		return cm_connect_ps(op, seq, body, len, RDMA_PS_TCP);
	case VH_CM_ACCEPT:
		return cm_accept(seq, body, len);
	case VH_CM_REJECT:
		return cm_reject(seq, body, len);
	case VH_CM_QP_ATTR:
		return cm_qp_attr(seq, body, len);
	default:
		return cm_simple(op, seq, body, len);
	}
}

int cm_fd(void) { return chan ? chan->fd : -1; }

struct rdma_cm_id *cm_id_at(uint32_t h)
{
	struct cm_id *c = id_at(h);
	return c ? c->id : NULL;
}

int cm_rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p) { return cma.accept(id, p); }

int cm_push_sock(void) { return push; }

/* dial moves a dialled id on when its address or route is resolved: 0, or
 * the errno of the step that failed. */
static int dial(struct cm_id *c, int event)
{
	if (event == RDMA_CM_EVENT_ADDR_RESOLVED) {
		if (!ours(c->id))
			return EXDEV;
		return cma.resolve_route(c->id, c->timeout) ? errno : 0;
	}
	c->dialling = 0;
	return cma.connect(c->id, &c->param) ? errno : 0;
}

/* cm_event takes one event off the channel and pushes it (with what the
 * helper did on its own: a dialled id's next step). 0, or -1 if the event
 * socket failed. */
int cm_event(void)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint32_t h, listener = VH_CM_NONE;
	int type, status, r, err;

	if (cma.get_event(chan, &ev))
		return 0;
	id = ev->id;
	type = ev->event;
	status = ev->status;
	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		int n = new_handle();

		listener = (uint32_t)(uintptr_t)ev->listen_id->context;
		if (n < 0 || !ours(id)) {
			/* No room, or a request that came through another device
			 * (a listener on any address): refused here, as the kernel
			 * would refuse a listener that is not there. */
			cma.reject(id, NULL, 0);
			cma.ack_event(ev);
			cma.destroy_id(id);
			return 0;
		}
		h = (uint32_t)n;
		id->context = (void *)(uintptr_t)h;
		ids[h].id = id;
	} else {
		h = (uint32_t)(uintptr_t)id->context;
	}
	if (ids[h].dialling && status == 0 &&
	    (type == RDMA_CM_EVENT_ADDR_RESOLVED || type == RDMA_CM_EVENT_ROUTE_RESOLVED) && (err = dial(&ids[h], type))) {
		/* The step failed: the daemon hears of it as the event of the
		 * step that failed, with its errno. */
		if (type == RDMA_CM_EVENT_ADDR_RESOLVED)
			type = err == EXDEV ? RDMA_CM_EVENT_ADDR_ERROR : RDMA_CM_EVENT_ROUTE_ERROR;
		else
			type = RDMA_CM_EVENT_CONNECT_ERROR;
		status = -err;
		ids[h].dialling = 0;
	}
	if (id->ps == RDMA_PS_UDP) /* SIDR: the event carries param.ud */
		r = cm_ud_push(h, listener, type, status, ev, id);
	else
		r = push_event(h, listener, type, status, ev, id);
	cma.ack_event(ev);
	return r;
}

void cm_close(void)
{
	for (uint32_t h = 0; h < VH_CM_IDS; h++)
		if (ids[h].id)
			drop(h);
	if (chan)
		cma.destroy_channel(chan);
	if (push >= 0)
		close(push);
}

#endif
