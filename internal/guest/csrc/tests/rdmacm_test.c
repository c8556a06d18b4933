/*
 * rdmacm_test.c: the drop-in librdmacm as an application calls it, against
 * a real daemon (the Go test starts one and passes its socket in
 * VRDMA_SOCKET), both sides of each connection in this one process on the
 * first adapter (127.0.0.1 is that adapter, as rdma_cm binds loopback).
 *
 * Each case asserts the return value, errno, event and status rdma_cm
 * gives: the event channel's descriptor with poll and O_NONBLOCK, address
 * and route resolution, a connection with private data both ways and the
 * QPs' states at each event, data over it, disconnection seen once on each
 * side, a rejection with its status and data, a port nobody listens on,
 * destruction waiting for unacked events, synchronous ids (rdma_create_ep,
 * rdma_get_request), and misuse.
 *
 * needs: daemon
 */
#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmacm/cma.h" /* a white-box look: a channel's users */

static int failures;
static const char *current = "setup";

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			failures++;                                                        \
			fprintf(stderr, "%s:%d: [%s] %s: ", __FILE__, __LINE__, current, #cond); \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
		}                                                                          \
	} while (0)

#define REQUIRE(cond, ...)                        \
	do {                                      \
		if (!(cond)) {                    \
			CHECK(cond, __VA_ARGS__); \
			return;                   \
		}                                 \
	} while (0)

/* The hang guard of a wait for an event: a lost event, not slowness. */
#define HANG_GUARD_MS 20000

static struct sockaddr_in loopback(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* The next event on ch, which must be want; NULL (and a failure) if it
 * is another or none comes. */
static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev = NULL;

	if (poll(&p, 1, HANG_GUARD_MS) != 1) {
		CHECK(0, "no event on the channel, want %s", rdma_event_str(want));
		return NULL;
	}
	if (rdma_get_cm_event(ch, &ev) != 0) {
		CHECK(0, "rdma_get_cm_event: %s, want %s", strerror(errno), rdma_event_str(want));
		return NULL;
	}
	if (ev->event != want) {
		CHECK(0, "event %s (status %d), want %s", rdma_event_str(ev->event), ev->status, rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) != 0)
		return (enum ibv_qp_state)-1;
	return a.qp_state;
}

/* The QP's local ACK timeout (ibv_query_qp), or -1. */
static int qp_timeout(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	return ibv_query_qp(qp, &a, IBV_QP_TIMEOUT, &ia) == 0 ? a.timeout : -1;
}

static int create_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC, .sq_sig_all = 1 };
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	return rdma_create_qp(id, NULL, &a); /* NULL PD and CQs: the library's */
}

static void test_channel(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id;

	current = "channel";
	REQUIRE(ch != NULL, "rdma_create_event_channel: %s", strerror(errno));
	int fl = fcntl(ch->fd, F_GETFL);
	REQUIRE(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK: %s", strerror(errno));
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN, "an empty non-blocking channel: errno %d", errno);
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&p, 1, 0) == 0, "an empty channel polls readable");
	REQUIRE(rdma_create_id(ch, &id, (void *)0x1234, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
	CHECK(id->verbs == NULL && id->qp == NULL && id->channel == ch && id->context == (void *)0x1234 &&
		      id->ps == RDMA_PS_TCP,
	      "a new id: verbs %p channel %p", (void *)id->verbs, (void *)id->channel);
	struct sockaddr_in dst = loopback(7471);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "rdma_resolve_addr: %s",
	      strerror(errno));
	CHECK(poll(&p, 1, HANG_GUARD_MS) == 1, "ADDR_RESOLVED does not make the channel readable");
	CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED && ev->status == 0 &&
		      ev->id == id,
	      "want ADDR_RESOLVED for the id");
	CHECK(id->verbs != NULL && id->port_num == 1, "resolved, the id has no device");
	CHECK(rdma_get_dst_port(id) == htons(7471), "dst port %u", ntohs(rdma_get_dst_port(id)));
	CHECK(rdma_ack_cm_event(ev) == 0, "ack: %s", strerror(errno));
	CHECK(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
	ev = expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(id->route.num_paths == 1 && id->route.path_rec != NULL, "no path record after ROUTE_RESOLVED");
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id: %s", strerror(errno));
	rdma_destroy_event_channel(ch);
}

static void test_misuse(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	current = "misuse";
	REQUIRE(ch != NULL, "rdma_create_event_channel: %s", strerror(errno));
	errno = 0;
	CHECK(rdma_get_cm_event(NULL, &ev) == -1 && errno == EINVAL, "no channel: errno %d", errno);
	errno = 0;
	CHECK(rdma_create_id(ch, &id, NULL, (enum rdma_port_space)0x77) == -1 && errno == EINVAL,
	      "an unknown port space: errno %d", errno);
	errno = 0;
	CHECK(rdma_create_id(ch, NULL, NULL, RDMA_PS_TCP) == -1 && errno == EINVAL, "no id pointer: errno %d", errno);
	errno = 0;
	CHECK(rdma_ack_cm_event(NULL) == -1 && errno == EINVAL, "acking NULL: errno %d", errno);
	errno = 0;
	CHECK(rdma_destroy_id(NULL) == -1 && errno == EINVAL, "destroying NULL: errno %d", errno);
	REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
	errno = 0;
	CHECK(rdma_connect(id, NULL) == -1 && errno == EINVAL, "connecting an unresolved id: errno %d", errno);
	errno = 0;
	CHECK(rdma_resolve_route(id, 100) == -1 && errno == EINVAL, "a route before the address: errno %d", errno);
	errno = 0;
	CHECK(rdma_accept(id, NULL) == -1 && errno == EINVAL, "accepting on an id with no request: errno %d", errno);
	errno = 0;
	CHECK(create_qp(id) == -1 && errno == EINVAL, "a QP on an id with no device: errno %d", errno);
	struct sockaddr_in foreign = { .sin_family = AF_INET };
	foreign.sin_addr.s_addr = inet_addr("192.0.2.1");
	errno = 0;
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&foreign) == -1 && errno == EADDRNOTAVAIL,
	      "binding an address no adapter has: errno %d", errno);
	errno = 0;
	CHECK(rdma_join_multicast(id, (struct sockaddr *)&foreign, NULL) == -1 && errno == EINVAL,
	      "joining a unicast address: errno %d", errno);
	struct sockaddr_in any = loopback(0);
	any.sin_addr.s_addr = htonl(INADDR_ANY);
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&any) == 0, "binding the wildcard: %s", strerror(errno));
	CHECK(rdma_get_src_port(id) != 0, "binding port 0 gave no port");
	CHECK(rdma_listen(id, 0) == 0, "rdma_listen: %s", strerror(errno));
	errno = 0;
	CHECK(rdma_accept(id, NULL) == -1 && errno == EINVAL, "accepting on a listener: errno %d", errno);
	errno = 0;
	CHECK(rdma_listen(id, 0) == -1 && errno == EINVAL, "listening twice: errno %d", errno);
	struct rdma_cm_id *other;
	REQUIRE(rdma_create_id(ch, &other, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
	struct sockaddr_in same = loopback(ntohs(rdma_get_src_port(id)));
	CHECK(rdma_bind_addr(other, (struct sockaddr *)&same) == 0, "bind: %s", strerror(errno));
	errno = 0;
	CHECK(rdma_listen(other, 0) == -1 && errno == EADDRINUSE, "a second listener on the port: errno %d", errno);
	CHECK(rdma_destroy_id(other) == 0 && rdma_destroy_id(id) == 0, "destroy: %s", strerror(errno));
	rdma_destroy_event_channel(ch);
}

/* Both ends of connections: a listener on ls, clients on cs. */
struct rig {
	struct rdma_event_channel *ls, *cs;
	struct rdma_cm_id *listener;
	uint16_t port;
};

static int rig_up(struct rig *r)
{
	memset(r, 0, sizeof *r);
	r->ls = rdma_create_event_channel();
	r->cs = rdma_create_event_channel();
	if (r->ls == NULL || r->cs == NULL || rdma_create_id(r->ls, &r->listener, NULL, RDMA_PS_TCP) != 0)
		return -1;
	struct sockaddr_in a = loopback(0);
	if (rdma_bind_addr(r->listener, (struct sockaddr *)&a) != 0 || rdma_listen(r->listener, 8) != 0)
		return -1;
	r->port = ntohs(rdma_get_src_port(r->listener));
	return 0;
}

static void rig_down(struct rig *r)
{
	if (r->listener)
		rdma_destroy_id(r->listener);
	if (r->ls)
		rdma_destroy_event_channel(r->ls);
	if (r->cs)
		rdma_destroy_event_channel(r->cs);
}

/* A client id resolved to the rig's port, with a QP. */
static struct rdma_cm_id *client(struct rig *r, uint16_t port)
{
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct sockaddr_in dst = loopback(port);

	if (rdma_create_id(r->cs, &id, NULL, RDMA_PS_TCP) != 0)
		return NULL;
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "resolve: %s", strerror(errno));
	if ((ev = expect(r->cs, RDMA_CM_EVENT_ADDR_RESOLVED)) != NULL)
		rdma_ack_cm_event(ev);
	CHECK(rdma_resolve_route(id, 2000) == 0, "route: %s", strerror(errno));
	if ((ev = expect(r->cs, RDMA_CM_EVENT_ROUTE_RESOLVED)) != NULL)
		rdma_ack_cm_event(ev);
	CHECK(create_qp(id) == 0, "rdma_create_qp: %s", strerror(errno));
	return id;
}

/* Set by main when the Go test runs this program in a namespace where
 * an interface has the adapter's GID as its address: the loopback bind
 * must then leave the id without a device. */
static int want_unbound;

/* A bind to a loopback address: the bind succeeds and keeps the address
 * and a port. Where an interface's address is on an adapter (as every RoCE
 * GID is on the kernel), it is the kernel's rdma_cm's (loopback taken as
 * the wildcard): no device (verbs and PD NULL), and listening does not
 * give it one either (a listener on every device); libfabric's verbs
 * provider tells "no device" from the id to publish the interfaces'
 * addresses rather than 127.0.0.1 (Open MPI's ranks on two hosts each
 * dialled their own 127.0.0.1). Where none is, the id is the first
 * adapter's, as before (cma_loopback.c says why). A connection to the
 * listener comes with a device either way. */
static void test_loopback_bind(void)
{
	int unbound = 0;
	struct sockaddr_in v4 = loopback(0);
	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	const struct {
		const char *name;
		struct sockaddr *addr;
		int connect; /* also connect a client to it */
	} cases[] = {
		{ "bind 127.0.0.1", (struct sockaddr *)&v4, 1 },
		{ "bind ::1", (struct sockaddr *)&v6, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct rig r = { 0 };
		struct rdma_cm_event *ev;
		current = cases[i].name;
		r.ls = rdma_create_event_channel();
		r.cs = rdma_create_event_channel();
		REQUIRE(r.ls != NULL && r.cs != NULL && rdma_create_id(r.ls, &r.listener, NULL, RDMA_PS_TCP) == 0,
			"rdma_create_id: %s", strerror(errno));
		unbound = cma_loopback_has_no_device(); /* the adapters are known once an id is made */
		CHECK(unbound || !want_unbound, "an interface has the adapter's GID, but a loopback bind would give a device");
		CHECK(rdma_bind_addr(r.listener, cases[i].addr) == 0, "rdma_bind_addr: %s", strerror(errno));
		if (unbound)
			CHECK(r.listener->verbs == NULL && r.listener->pd == NULL,
			      "a loopback bind gave the id a device: verbs %p pd %p, want none (as the kernel's rdma_cm)",
			      (void *)r.listener->verbs, (void *)r.listener->pd);
		else
			CHECK(r.listener->verbs != NULL && r.listener->pd != NULL,
			      "no interface has an adapter's address, yet a loopback bind gave no device");
		const struct sockaddr *la = rdma_get_local_addr(r.listener);
		CHECK(la->sa_family == cases[i].addr->sa_family && cma_sa_is_loopback(la) && rdma_get_src_port(r.listener) != 0,
		      "the bound address: family %d, loopback %d, port %u", la->sa_family, cma_sa_is_loopback(la),
		      ntohs(rdma_get_src_port(r.listener)));
		CHECK(rdma_listen(r.listener, 4) == 0, "rdma_listen: %s", strerror(errno));
		CHECK(!unbound || r.listener->verbs == NULL, "listening gave the loopback-bound id a device: %p",
		      (void *)r.listener->verbs);
		r.port = ntohs(rdma_get_src_port(r.listener));
		if (cases[i].connect) {
			struct rdma_cm_id *c = client(&r, r.port);
			CHECK(c != NULL && rdma_connect(c, NULL) == 0, "rdma_connect: %s", strerror(errno));
			if ((ev = expect(r.ls, RDMA_CM_EVENT_CONNECT_REQUEST)) != NULL) {
				CHECK(ev->listen_id == r.listener && ev->id->verbs != NULL,
				      "the request: listen_id %p verbs %p", (void *)ev->listen_id, (void *)ev->id->verbs);
				CHECK(rdma_reject(ev->id, NULL, 0) == 0, "rdma_reject: %s", strerror(errno));
				struct rdma_cm_id *child = ev->id;
				rdma_ack_cm_event(ev);
				rdma_destroy_id(child);
			}
			if ((ev = expect(r.cs, RDMA_CM_EVENT_REJECTED)) != NULL)
				rdma_ack_cm_event(ev);
			if (c != NULL) {
				rdma_destroy_qp(c);
				rdma_destroy_id(c);
			}
		}
		rig_down(&r);
	}
}

/* An AF_IB address with port 0 in its service ID (libfabric's verbs
 * provider binds one when no IP address is on the adapter): the bind picks
 * a port and writes it into the service ID, and the listener's address
 * keeps the port the daemon listens on, as the kernel's rdma_cm does; it
 * stayed 0, and fi_pingpong's client dialled port 0. */
static void test_af_ib_port(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct ibv_context **devs = rdma_get_devices(NULL);
	union ibv_gid gid;

	current = "AF_IB, port 0";
	REQUIRE(ch != NULL && devs != NULL && devs[0] != NULL && ibv_query_gid(devs[0], 1, 0, &gid) == 0,
		"the first adapter's GID: %s", strerror(errno));
	rdma_free_devices(devs);
	struct sockaddr_ib ib = { .sib_family = AF_IB, .sib_pkey = htobe16(0xffff) };
	memcpy(ib.sib_addr.sib_raw, gid.raw, 16);
	ib.sib_sid = htobe64((uint64_t)RDMA_PS_IB << 16);
	ib.sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK);
	REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_IB) == 0, "rdma_create_id: %s", strerror(errno));
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&ib) == 0, "rdma_bind_addr: %s", strerror(errno));
	const struct sockaddr_ib *la = (const struct sockaddr_ib *)(const void *)rdma_get_local_addr(id);
	uint16_t bound = (uint16_t)be64toh(la->sib_sid);
	CHECK(la->sib_family == AF_IB && bound != 0 && be64toh(la->sib_sid) >> 16 == RDMA_PS_IB,
	      "the bound service ID %#llx: want port space %#x and a port", (unsigned long long)be64toh(la->sib_sid),
	      RDMA_PS_IB);
	CHECK(rdma_listen(id, 1) == 0, "rdma_listen: %s", strerror(errno));
	uint16_t listening = (uint16_t)be64toh(la->sib_sid);
	CHECK(listening != 0 && ntohs(rdma_get_src_port(id)) == listening,
	      "listening on service ID %#llx (port %u, rdma_get_src_port %u): want a port",
	      (unsigned long long)be64toh(la->sib_sid), listening, ntohs(rdma_get_src_port(id)));
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* rdma_set_option as the kernel's rdma_cm answers it: sizes, the states
 * REUSEADDR and AFONLY are taken in, the ACK timeout on RC ids only, and
 * IB_PATH refused. */
static void test_options(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL, *ud = NULL;
	int on = 1, off = 0;
	uint8_t u8 = 3;

	current = "rdma_set_option";
	REQUIRE(ch != NULL && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0 &&
			rdma_create_id(ch, &ud, NULL, RDMA_PS_UDP) == 0,
		"ids: %s", strerror(errno));
	const struct {
		const char *what;
		int level, opt;
		void *val;
		size_t len;
		int ud;
		int want; /* 0 or the errno */
	} cases[] = {
		{ "TOS", RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &u8, 1, 0, 0 },
		{ "TOS, an int", RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &on, sizeof on, 0, EINVAL },
		{ "ACK timeout", RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &u8, 1, 0, 0 },
		{ "ACK timeout, an int", RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &on, sizeof on, 0, EINVAL },
		{ "ACK timeout on a UD id", RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &u8, 1, 1, EINVAL },
		{ "REUSEADDR off, unbound", RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &off, sizeof off, 0, 0 },
		{ "REUSEADDR, a byte", RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &u8, 1, 0, EINVAL },
		{ "AFONLY, unbound", RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on, sizeof on, 0, 0 },
		{ "AFONLY, a byte", RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &u8, 1, 0, EINVAL },
		{ "IB_PATH", RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &u8, 1, 0, EOPNOTSUPP },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		errno = 0;
		int r = rdma_set_option(cases[i].ud ? ud : id, cases[i].level, cases[i].opt, cases[i].val, cases[i].len);
		CHECK(cases[i].want ? r == -1 && errno == cases[i].want : r == 0, "%s: %d, errno %d, want errno %d",
		      cases[i].what, r, errno, cases[i].want);
	}
	struct sockaddr_in a = loopback(0);
	REQUIRE(rdma_bind_addr(id, (struct sockaddr *)&a) == 0 && rdma_listen(id, 1) == 0, "listen: %s",
		strerror(errno));
	errno = 0;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof on) == -1 && errno == EINVAL,
	      "REUSEADDR on a listener: errno %d, want EINVAL", errno);
	errno = 0;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on, sizeof on) == -1 && errno == EINVAL,
	      "AFONLY on a listener: errno %d, want EINVAL", errno);
	rdma_destroy_id(ud);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

static void test_connect(void)
{
	struct rig r;
	struct rdma_cm_event *ev;

	current = "connect";
	REQUIRE(rig_up(&r) == 0, "the listener: %s", strerror(errno));
	struct rdma_cm_id *c = client(&r, r.port);
	REQUIRE(c != NULL && c->qp != NULL, "no client");
	CHECK(c->send_cq != NULL && c->recv_cq != NULL && c->send_cq_channel != NULL && c->pd != NULL,
	      "rdma_create_qp with NULL PD and CQs made none");
	/* vrdma holds the QP in RESET (rdma_cm: INIT) until connected; receives are taken. */
	CHECK(qp_state(c->qp) == IBV_QPS_RESET, "a new QP in state %d", qp_state(c->qp));
	char cbuf[64] = "", sbuf[64] = "";
	struct ibv_mr *cmr = rdma_reg_msgs(c, cbuf, sizeof cbuf);
	REQUIRE(cmr != NULL, "rdma_reg_msgs: %s", strerror(errno));
	CHECK(rdma_post_recv(c, NULL, cbuf, sizeof cbuf, cmr) == 0, "a receive before connecting: %s",
	      strerror(errno));
	struct rdma_conn_param cp = { .private_data = "hello", .private_data_len = 5, .responder_resources = 1,
				      .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };
	uint8_t tmo = 21; /* RDMA_OPTION_ID_ACK_TIMEOUT overrides the CM's timeout at RTS */
	CHECK(rdma_set_option(c, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tmo, sizeof tmo) == 0,
	      "the client's ACK timeout: %s", strerror(errno));
	CHECK(rdma_connect(c, &cp) == 0, "rdma_connect: %s", strerror(errno));

	ev = expect(r.ls, RDMA_CM_EVENT_CONNECT_REQUEST);
	REQUIRE(ev != NULL, "no request");
	struct rdma_cm_id *s = ev->id;
	CHECK(ev->listen_id == r.listener && s != r.listener && s->verbs != NULL && s->channel == r.ls,
	      "the request's ids: listen_id %p id %p verbs %p", (void *)ev->listen_id, (void *)s, (void *)s->verbs);
	CHECK(ev->param.conn.private_data_len >= 5 && memcmp(ev->param.conn.private_data, "hello", 5) == 0,
	      "the request's private data (%u bytes)", ev->param.conn.private_data_len);
	CHECK(ev->param.conn.initiator_depth >= 1, "initiator depth %u", ev->param.conn.initiator_depth);
	CHECK(rdma_get_dst_port(s) == rdma_get_src_port(c) && rdma_get_src_port(s) == htons(r.port),
	      "the child's ports: src %u dst %u; the client's src %u", ntohs(rdma_get_src_port(s)),
	      ntohs(rdma_get_dst_port(s)), ntohs(rdma_get_src_port(c)));
	/* A listener on 127.0.0.1: both ends of the request are 127.0.0.1, as
	 * the kernel's loopback makes them (libfabric's ofi_rxm looks the
	 * peer up by that address), not the adapter's GID. */
	const struct sockaddr_in *sp = (const struct sockaddr_in *)(const void *)rdma_get_peer_addr(s);
	const struct sockaddr_in *sl = (const struct sockaddr_in *)(const void *)rdma_get_local_addr(s);
	CHECK(sp->sin_family == AF_INET && sp->sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
		      sl->sin_family == AF_INET && sl->sin_addr.s_addr == htonl(INADDR_LOOPBACK),
	      "the request's addresses: peer family %d 0x%08x, local family %d 0x%08x; want 127.0.0.1 both",
	      sp->sin_family, ntohl(sp->sin_addr.s_addr), sl->sin_family, ntohl(sl->sin_addr.s_addr));
	rdma_ack_cm_event(ev);
	REQUIRE(create_qp(s) == 0, "the child's QP: %s", strerror(errno));
	CHECK(qp_state(s->qp) == IBV_QPS_INIT, "the child's new QP in state %d, want INIT (as rdma_cm)", qp_state(s->qp));
	struct ibv_mr *smr = rdma_reg_msgs(s, sbuf, sizeof sbuf);
	REQUIRE(smr != NULL, "rdma_reg_msgs: %s", strerror(errno));
	CHECK(rdma_post_recv(s, NULL, sbuf, sizeof sbuf, smr) == 0, "rdma_post_recv: %s", strerror(errno));
	cp.private_data = "welcome";
	cp.private_data_len = 7;
	tmo = 19;
	CHECK(rdma_set_option(s, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tmo, sizeof tmo) == 0,
	      "the child's ACK timeout: %s", strerror(errno));
	CHECK(rdma_accept(s, &cp) == 0, "rdma_accept: %s", strerror(errno));
	CHECK(qp_state(s->qp) == IBV_QPS_RTS, "the accepted QP in state %d, want RTS", qp_state(s->qp));
	CHECK(qp_timeout(s->qp) == 19, "the accepted QP's timeout %d, want the option's 19", qp_timeout(s->qp));

	ev = expect(r.cs, RDMA_CM_EVENT_ESTABLISHED);
	if (ev) {
		CHECK(ev->id == c && ev->param.conn.private_data_len >= 7 &&
			      memcmp(ev->param.conn.private_data, "welcome", 7) == 0,
		      "the reply's private data (%u bytes)", ev->param.conn.private_data_len);
		rdma_ack_cm_event(ev);
	}
	CHECK(qp_state(c->qp) == IBV_QPS_RTS, "the client's QP at ESTABLISHED in state %d", qp_state(c->qp));
	CHECK(qp_timeout(c->qp) == 21, "the client's QP's timeout %d, want the option's 21", qp_timeout(c->qp));
	if ((ev = expect(r.ls, RDMA_CM_EVENT_ESTABLISHED)) != NULL) {
		CHECK(ev->id == s, "ESTABLISHED for another id");
		rdma_ack_cm_event(ev);
	}

	/* Data: a send each way, into the receives posted before connecting. */
	struct ibv_wc wc;
	strcpy(cbuf + 32, "ping");
	CHECK(rdma_post_send(c, NULL, cbuf + 32, 5, cmr, 0) == 0, "send: %s", strerror(errno));
	CHECK(rdma_get_send_comp(c, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "the client's send: status %d",
	      wc.status);
	CHECK(rdma_get_recv_comp(s, &wc) == 1 && wc.status == IBV_WC_SUCCESS && strcmp(sbuf, "ping") == 0,
	      "the server received %s (status %d)", sbuf, wc.status);
	strcpy(sbuf + 32, "pong");
	CHECK(rdma_post_send(s, NULL, sbuf + 32, 5, smr, 0) == 0, "send: %s", strerror(errno));
	CHECK(rdma_get_send_comp(s, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "the server's send: status %d",
	      wc.status);
	CHECK(rdma_get_recv_comp(c, &wc) == 1 && wc.status == IBV_WC_SUCCESS && strcmp(cbuf, "pong") == 0,
	      "the client received %s (status %d)", cbuf, wc.status);

	/* The client ends it: each side gets DISCONNECTED once, QPs in ERR. */
	CHECK(rdma_disconnect(c) == 0, "rdma_disconnect: %s", strerror(errno));
	if ((ev = expect(r.ls, RDMA_CM_EVENT_DISCONNECTED)) != NULL)
		rdma_ack_cm_event(ev);
	CHECK(rdma_disconnect(s) == 0, "disconnecting the other side too: %s", strerror(errno));
	if ((ev = expect(r.cs, RDMA_CM_EVENT_DISCONNECTED)) != NULL)
		rdma_ack_cm_event(ev);
	CHECK(qp_state(c->qp) == IBV_QPS_ERR && qp_state(s->qp) == IBV_QPS_ERR, "QPs after disconnection: %d %d",
	      qp_state(c->qp), qp_state(s->qp));
	int fl = fcntl(r.cs->fd, F_GETFL);
	fcntl(r.cs->fd, F_SETFL, fl | O_NONBLOCK);
	fcntl(r.ls->fd, F_SETFL, fl | O_NONBLOCK);
	errno = 0;
	CHECK(rdma_get_cm_event(r.cs, &ev) == -1 && errno == EAGAIN, "a second DISCONNECTED on the client");
	errno = 0;
	CHECK(rdma_get_cm_event(r.ls, &ev) == -1 && errno == EAGAIN, "a second DISCONNECTED on the server");
	rdma_dereg_mr(cmr);
	rdma_dereg_mr(smr);
	rdma_destroy_qp(c);
	rdma_destroy_qp(s);
	CHECK(rdma_destroy_id(c) == 0 && rdma_destroy_id(s) == 0, "destroy: %s", strerror(errno));
	rig_down(&r);
}

/* RDMA_PS_UDP as rdma-core's pyverbs drives it: the request answered
 * with rdma_accept, ESTABLISHED on the active side with the passive QP's
 * number, Q_Key and an AH, a datagram each way through them; and each id
 * bound to a device has its PD before any QP is made (pyverbs builds its
 * AH on that PD: it was NULL, and the suite's active side crashed). */
static void test_udp(void)
{
	struct rdma_event_channel *ls = rdma_create_event_channel(), *cs = rdma_create_event_channel();
	struct rdma_cm_id *listener = NULL, *c = NULL, *s = NULL;
	struct rdma_cm_event *ev;
	struct sockaddr_in a = loopback(0);

	current = "udp";
	REQUIRE(ls != NULL && cs != NULL && rdma_create_id(ls, &listener, NULL, RDMA_PS_UDP) == 0 &&
			rdma_bind_addr(listener, (struct sockaddr *)&a) == 0 && rdma_listen(listener, 4) == 0 &&
			rdma_create_id(cs, &c, NULL, RDMA_PS_UDP) == 0,
		"the ids: %s", strerror(errno));
	struct sockaddr_in dst = loopback(ntohs(rdma_get_src_port(listener)));
	REQUIRE(rdma_resolve_addr(c, NULL, (struct sockaddr *)&dst, 2000) == 0, "resolve: %s", strerror(errno));
	if ((ev = expect(cs, RDMA_CM_EVENT_ADDR_RESOLVED)) != NULL)
		rdma_ack_cm_event(ev);
	REQUIRE(rdma_resolve_route(c, 2000) == 0, "route: %s", strerror(errno));
	if ((ev = expect(cs, RDMA_CM_EVENT_ROUTE_RESOLVED)) != NULL)
		rdma_ack_cm_event(ev);
	/* rdma-core: an id bound to a device has the device's PD (pyverbs
	 * wraps id->pd for the AH and the QPs it makes). */
	CHECK(c->pd != NULL && c->pd->context == c->verbs, "the resolved id's PD: %p", (void *)c->pd);
	struct ibv_pd *bound_pd = c->pd;
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_UD };
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	REQUIRE(rdma_create_qp(c, NULL, &qa) == 0, "the client's UD QP: %s", strerror(errno));
	struct rdma_conn_param cp = { 0 };
	REQUIRE(rdma_connect(c, &cp) == 0, "rdma_connect: %s", strerror(errno));
	ev = expect(ls, RDMA_CM_EVENT_CONNECT_REQUEST);
	REQUIRE(ev != NULL, "no request");
	s = ev->id;
	rdma_ack_cm_event(ev);
	/* The request's id has its device's PD, the one the client's id has
	 * (and the listener's, unless its bind to 127.0.0.1 left it without
	 * a device: test_loopback_bind). */
	CHECK(s->pd != NULL && s->pd == bound_pd && (listener->pd == NULL || listener->pd == bound_pd),
	      "the request's id's PD %p, the device's %p, the listener's %p", (void *)s->pd, (void *)bound_pd,
	      (void *)listener->pd);
	CHECK(c->pd == bound_pd, "rdma_create_qp(id, NULL, ...) used PD %p, not the id's %p", (void *)c->pd,
	      (void *)bound_pd);
	struct ibv_qp_init_attr qb = { .qp_type = IBV_QPT_UD };
	qb.cap.max_send_wr = qb.cap.max_recv_wr = 1;
	qb.cap.max_send_sge = qb.cap.max_recv_sge = 1;
	REQUIRE(rdma_create_qp(s, NULL, &qb) == 0, "the child's UD QP: %s", strerror(errno));
	REQUIRE(rdma_accept(s, &cp) == 0, "rdma_accept: %s", strerror(errno));
	ev = expect(cs, RDMA_CM_EVENT_ESTABLISHED);
	REQUIRE(ev != NULL, "no ESTABLISHED");
	struct rdma_ud_param ud = ev->param.ud;
	rdma_ack_cm_event(ev);
	CHECK(ud.qp_num == s->qp->qp_num && ud.qkey == RDMA_UDP_QKEY, "ud_param: QPN %u (want %u) Q_Key 0x%x",
	      ud.qp_num, s->qp->qp_num, ud.qkey);

	enum { GRH = 40, LEN = 64 };
	static char cbuf[GRH + LEN], sbuf[GRH + LEN];
	struct ibv_mr *cmr = rdma_reg_msgs(c, cbuf, sizeof cbuf), *smr = rdma_reg_msgs(s, sbuf, sizeof sbuf);
	REQUIRE(cmr != NULL && smr != NULL, "rdma_reg_msgs: %s", strerror(errno));
	struct ibv_wc wc = { 0 };
	CHECK(rdma_post_recv(s, NULL, sbuf, sizeof sbuf, smr) == 0, "the server's receive: %s", strerror(errno));
	struct ibv_ah *ah = ibv_create_ah(c->pd, &ud.ah_attr);
	REQUIRE(ah != NULL, "the AH of ESTABLISHED's ud_param: %s", strerror(errno));
	strcpy(cbuf, "datagram");
	CHECK(rdma_post_ud_send(c, NULL, cbuf, LEN, cmr, IBV_SEND_SIGNALED, ah, ud.qp_num) == 0, "send: %s",
	      strerror(errno));
	CHECK(rdma_get_send_comp(c, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "the client's send: status %d",
	      wc.status);
	CHECK(rdma_get_recv_comp(s, &wc) == 1 && wc.status == IBV_WC_SUCCESS && strcmp(sbuf + GRH, "datagram") == 0,
	      "the server received '%.8s' (status %d)", sbuf + GRH, wc.status);
	/* The answer: an AH from the completion, to the client's QPN. */
	struct ibv_ah *back = ibv_create_ah_from_wc(s->pd, &wc, (struct ibv_grh *)sbuf, 1);
	CHECK(back != NULL, "the AH from the completion: %s", strerror(errno));
	CHECK(rdma_post_recv(c, NULL, cbuf, sizeof cbuf, cmr) == 0, "the client's receive: %s", strerror(errno));
	if (back) {
		strcpy(sbuf + GRH, "answer");
		CHECK(rdma_post_ud_send(s, NULL, sbuf + GRH, LEN, smr, IBV_SEND_SIGNALED, back, c->qp->qp_num) == 0,
		      "the answer: %s", strerror(errno));
		CHECK(rdma_get_send_comp(s, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "the answer's send: status %d",
		      wc.status);
		CHECK(rdma_get_recv_comp(c, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
			      strcmp(cbuf + GRH, "answer") == 0,
		      "the client received '%.6s' (status %d)", cbuf + GRH, wc.status);
		ibv_destroy_ah(back);
	}
	ibv_destroy_ah(ah);
	rdma_dereg_mr(cmr);
	rdma_dereg_mr(smr);
	rdma_destroy_qp(c);
	rdma_destroy_qp(s);
	rdma_destroy_id(c);
	rdma_destroy_id(s);
	rdma_destroy_id(listener);
	rdma_destroy_event_channel(ls);
	rdma_destroy_event_channel(cs);
}

/* Moves an application's own QP to st with rdma_init_qp_attr's attributes. */
static int ext_move(struct rdma_cm_id *id, struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a = { .qp_state = st };
	int mask = 0;
	if (rdma_init_qp_attr(id, &a, &mask) != 0)
		return -1;
	return ibv_modify_qp(qp, &a, mask) == 0 ? 0 : -1;
}

/* An application's own QPs (ibv_create_qp on the ids' PDs) connected
 * through rdma_cm as pyverbs' external-QP test does: rdma_init_qp_attr
 * for each state, conn_param's qp_num in rdma_connect and rdma_accept,
 * CONNECT_RESPONSE and rdma_establish on the active side, ESTABLISHED on
 * the passive one, then a message over them. */
static void test_external_qp(void)
{
	struct rig r;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c = NULL;

	current = "external QP";
	REQUIRE(rig_up(&r) == 0, "the listener: %s", strerror(errno));
	struct sockaddr_in dst = loopback(r.port);
	REQUIRE(rdma_create_id(r.cs, &c, NULL, RDMA_PS_TCP) == 0, "id: %s", strerror(errno));
	REQUIRE(rdma_resolve_addr(c, NULL, (struct sockaddr *)&dst, 2000) == 0, "resolve: %s", strerror(errno));
	if ((ev = expect(r.cs, RDMA_CM_EVENT_ADDR_RESOLVED)) != NULL)
		rdma_ack_cm_event(ev);
	REQUIRE(rdma_resolve_route(c, 2000) == 0, "route: %s", strerror(errno));
	if ((ev = expect(r.cs, RDMA_CM_EVENT_ROUTE_RESOLVED)) != NULL)
		rdma_ack_cm_event(ev);
	REQUIRE(c->pd != NULL, "no PD on the resolved id");
	struct ibv_cq *ccq = ibv_create_cq(c->verbs, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC, .sq_sig_all = 1, .send_cq = ccq, .recv_cq = ccq };
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	struct ibv_qp *cqp = ccq ? ibv_create_qp(c->pd, &qa) : NULL;
	REQUIRE(cqp != NULL, "the client's own QP: %s", strerror(errno));
	CHECK(ext_move(c, cqp, IBV_QPS_INIT) == 0, "INIT with rdma_init_qp_attr: %s", strerror(errno));
	struct rdma_conn_param cp = { .qp_num = cqp->qp_num, .responder_resources = 1, .initiator_depth = 1 };
	REQUIRE(rdma_connect(c, &cp) == 0, "rdma_connect with qp_num: %s", strerror(errno));

	ev = expect(r.ls, RDMA_CM_EVENT_CONNECT_REQUEST);
	REQUIRE(ev != NULL, "no request");
	struct rdma_cm_id *s = ev->id;
	rdma_ack_cm_event(ev);
	REQUIRE(s->pd != NULL, "no PD on the request's id");
	struct ibv_cq *scq = ibv_create_cq(s->verbs, 8, NULL, NULL, 0);
	qa.send_cq = qa.recv_cq = scq;
	struct ibv_qp *sqp = scq ? ibv_create_qp(s->pd, &qa) : NULL;
	REQUIRE(sqp != NULL, "the server's own QP: %s", strerror(errno));
	CHECK(ext_move(s, sqp, IBV_QPS_INIT) == 0 && ext_move(s, sqp, IBV_QPS_RTR) == 0 &&
		      ext_move(s, sqp, IBV_QPS_RTS) == 0,
	      "the server's QP to RTS with rdma_init_qp_attr: %s", strerror(errno));
	cp.qp_num = sqp->qp_num;
	CHECK(rdma_accept(s, &cp) == 0, "rdma_accept with qp_num: %s", strerror(errno));

	ev = expect(r.cs, RDMA_CM_EVENT_CONNECT_RESPONSE);
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(ext_move(c, cqp, IBV_QPS_RTR) == 0 && ext_move(c, cqp, IBV_QPS_RTS) == 0,
	      "the client's QP to RTS with rdma_init_qp_attr: %s", strerror(errno));
	CHECK(rdma_establish(c) == 0, "rdma_establish: %s", strerror(errno));
	if ((ev = expect(r.ls, RDMA_CM_EVENT_ESTABLISHED)) != NULL)
		rdma_ack_cm_event(ev);

	static char cbuf[16] = "own qp", sbuf[16];
	struct ibv_mr *cmr = ibv_reg_mr(c->pd, cbuf, sizeof cbuf, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *smr = ibv_reg_mr(s->pd, sbuf, sizeof sbuf, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(cmr != NULL && smr != NULL, "ibv_reg_mr: %s", strerror(errno));
	struct ibv_sge ssge = { .addr = (uintptr_t)sbuf, .length = sizeof sbuf, .lkey = smr->lkey };
	struct ibv_recv_wr rwr = { .sg_list = &ssge, .num_sge = 1 }, *rbad;
	CHECK(ibv_post_recv(sqp, &rwr, &rbad) == 0, "the server's receive");
	struct ibv_sge csge = { .addr = (uintptr_t)cbuf, .length = sizeof cbuf, .lkey = cmr->lkey };
	struct ibv_send_wr swr = { .sg_list = &csge, .num_sge = 1, .opcode = IBV_WR_SEND }, *sbad;
	CHECK(ibv_post_send(cqp, &swr, &sbad) == 0, "the client's send");
	struct ibv_wc wc;
	int got = 0;
	for (int i = 0; i < 2000000 && got == 0; i++)
		got = ibv_poll_cq(scq, 1, &wc);
	CHECK(got == 1 && wc.status == IBV_WC_SUCCESS && strcmp(sbuf, "own qp") == 0,
	      "the server's receive: %d completions, status %d, '%s'", got, got ? (int)wc.status : -1, sbuf);
	ibv_dereg_mr(cmr);
	ibv_dereg_mr(smr);
	rdma_disconnect(c);
	ibv_destroy_qp(cqp);
	ibv_destroy_qp(sqp);
	rdma_destroy_id(c);
	rdma_destroy_id(s);
	ibv_destroy_cq(ccq);
	ibv_destroy_cq(scq);
	rig_down(&r);
}

static void test_reject(void)
{
	struct rig r;
	struct rdma_cm_event *ev;

	current = "reject";
	REQUIRE(rig_up(&r) == 0, "the listener: %s", strerror(errno));
	struct rdma_cm_id *c = client(&r, r.port);
	REQUIRE(c != NULL, "no client");
	CHECK(rdma_connect(c, NULL) == 0, "rdma_connect: %s", strerror(errno));
	ev = expect(r.ls, RDMA_CM_EVENT_CONNECT_REQUEST);
	REQUIRE(ev != NULL, "no request");
	struct rdma_cm_id *s = ev->id;
	rdma_ack_cm_event(ev);
	CHECK(rdma_reject(s, "busy", 4) == 0, "rdma_reject: %s", strerror(errno));
	if ((ev = expect(r.cs, RDMA_CM_EVENT_REJECTED)) != NULL) {
		CHECK(ev->status == 28, "REJECTED with status %d, want 28 (the consumer's)", ev->status);
		CHECK(ev->param.conn.private_data_len >= 4 && memcmp(ev->param.conn.private_data, "busy", 4) == 0,
		      "the rejection's private data (%u bytes)", ev->param.conn.private_data_len);
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_id(s);
	rdma_destroy_qp(c);
	rdma_destroy_id(c);

	/* Nobody on the port: REJECTED, status 8 (invalid service ID). */
	current = "no listener";
	uint16_t nobody = r.port == 65535 ? 1 : (uint16_t)(r.port + 1);
	c = client(&r, nobody);
	REQUIRE(c != NULL, "no client");
	CHECK(rdma_connect(c, NULL) == 0, "rdma_connect: %s", strerror(errno));
	if ((ev = expect(r.cs, RDMA_CM_EVENT_REJECTED)) != NULL) {
		CHECK(ev->status == 8, "REJECTED with status %d, want 8", ev->status);
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_qp(c);
	rdma_destroy_id(c);

	rig_down(&r);
}

static atomic_int destroyed;

static void *destroy_it(void *id)
{
	rdma_destroy_id(id);
	atomic_store(&destroyed, 1);
	return NULL;
}

static void test_destroy_waits_for_acks(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	pthread_t t;

	current = "destroy waits";
	REQUIRE(ch != NULL && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "id: %s", strerror(errno));
	struct sockaddr_in dst = loopback(7471);
	REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "resolve: %s", strerror(errno));
	ev = expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	REQUIRE(ev != NULL, "no event");
	pthread_create(&t, NULL, destroy_it, id);
	usleep(100 * 1000); /* not a threshold: a destroy that did not wait may be seen */
	CHECK(!atomic_load(&destroyed), "rdma_destroy_id returned with an event not acked");
	rdma_ack_cm_event(ev);
	pthread_join(t, NULL);
	CHECK(atomic_load(&destroyed), "rdma_destroy_id did not return after the ack");
	rdma_destroy_event_channel(ch);
}

static void *wait_for_event(void *ch)
{
	struct rdma_cm_event *ev;
	(void)rdma_get_cm_event(ch, &ev); /* blocks for good, as in rdma-core */
	return NULL;
}

/* rping's CM thread waits in rdma_get_cm_event while its main thread
 * destroys the channel and returns from main: the waiter must neither
 * wake nor touch freed memory (the sanitizers watch). */
static void test_destroy_channel_with_waiter(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	pthread_t t;

	current = "destroy a channel with a waiter";
	REQUIRE(ch != NULL, "rdma_create_event_channel: %s", strerror(errno));
	struct cma_chan *c = to_cchan(ch);
	pthread_create(&t, NULL, wait_for_event, ch);
	for (;;) { /* until the thread is in rdma_get_cm_event */
		pthread_mutex_lock(&cma_mu);
		int w = c->users;
		pthread_mutex_unlock(&cma_mu);
		if (w == 1)
			break;
		usleep(1000);
	}
	rdma_destroy_event_channel(ch);
	/* A connection on another channel: the device's socket is busy, and
	 * nothing of it may reach the destroyed channel's waiter. */
	struct rdma_event_channel *other = rdma_create_event_channel();
	struct rdma_cm_id *id;
	REQUIRE(other != NULL && rdma_create_id(other, &id, NULL, RDMA_PS_TCP) == 0, "id: %s", strerror(errno));
	struct sockaddr_in dst = loopback(7471);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "resolve: %s", strerror(errno));
	struct rdma_cm_event *ev = expect(other, RDMA_CM_EVENT_ADDR_RESOLVED);
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(other);
	pthread_detach(t); /* it stays blocked until the process ends */
}

/* rdma_server and rdma_client's way: synchronous ids. */
struct sync_server {
	struct rdma_cm_id *listen;
	int ok;
};

static void *serve_one(void *p)
{
	struct sync_server *sv = p;
	struct rdma_cm_id *id;
	char buf[16] = "";

	if (rdma_get_request(sv->listen, &id) != 0)
		return NULL;
	struct ibv_mr *mr = rdma_reg_msgs(id, buf, sizeof buf);
	if (mr && rdma_post_recv(id, NULL, buf, sizeof buf, mr) == 0 && rdma_accept(id, NULL) == 0) {
		struct ibv_wc wc;
		sv->ok = rdma_get_recv_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS && strcmp(buf, "sync") == 0;
		rdma_disconnect(id);
	}
	if (mr)
		rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	return NULL;
}

static void test_sync(void)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = { .sq_sig_all = 1 };
	struct sync_server sv = { 0 };
	pthread_t t;

	current = "synchronous";
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	REQUIRE(rdma_getaddrinfo("127.0.0.1", "0", &hints, &res) == 0, "rdma_getaddrinfo: %s", strerror(errno));
	CHECK(res->ai_src_addr != NULL && res->ai_dst_addr == NULL && res->ai_qp_type == IBV_QPT_RC,
	      "a passive address: src %p dst %p", (void *)res->ai_src_addr, (void *)res->ai_dst_addr);
	REQUIRE(rdma_create_ep(&sv.listen, res, NULL, &attr) == 0, "rdma_create_ep: %s", strerror(errno));
	rdma_freeaddrinfo(res);
	REQUIRE(rdma_listen(sv.listen, 0) == 0, "rdma_listen: %s", strerror(errno));
	char port[8];
	snprintf(port, sizeof port, "%u", ntohs(rdma_get_src_port(sv.listen)));
	pthread_create(&t, NULL, serve_one, &sv);

	struct rdma_addrinfo chints = { .ai_port_space = RDMA_PS_TCP };
	struct rdma_cm_id *id;
	REQUIRE(rdma_getaddrinfo("127.0.0.1", port, &chints, &res) == 0, "rdma_getaddrinfo: %s", strerror(errno));
	int r = rdma_create_ep(&id, res, NULL, &attr);
	rdma_freeaddrinfo(res);
	REQUIRE(r == 0, "rdma_create_ep: %s", strerror(errno));
	char buf[16] = "sync";
	struct ibv_mr *mr = rdma_reg_msgs(id, buf, sizeof buf);
	CHECK(mr != NULL, "rdma_reg_msgs: %s", strerror(errno));
	CHECK(rdma_connect(id, NULL) == 0, "a synchronous rdma_connect: %s", strerror(errno));
	CHECK(id->event != NULL && id->event->event == RDMA_CM_EVENT_ESTABLISHED, "the id's event after connect");
	struct ibv_wc wc;
	CHECK(rdma_post_send(id, NULL, buf, 5, mr, 0) == 0 && rdma_get_send_comp(id, &wc) == 1 &&
		      wc.status == IBV_WC_SUCCESS,
	      "send: status %d", wc.status);
	pthread_join(t, NULL);
	CHECK(sv.ok, "the server did not receive the message");
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(sv.listen);
}

/* rdma_getaddrinfo with rdma-core's semantics: the hints' family (with
 * RAI_FAMILY or without), QP type and port space steer the lookup and
 * fill the answer; hints alone are an answer; AF_IB with RAI_NUMERICHOST
 * turns an IPv6 address into a GID and service ID. */
static void test_getaddrinfo(void)
{
	current = "rdma_getaddrinfo";
	struct sockaddr_in src = loopback(4000), dst = loopback(5000);
	struct {
		const char *name, *node, *service;
		struct rdma_addrinfo hints;
		int family, qp_type, port_space, passive;
		socklen_t src_len, dst_len;
		uint16_t port; /* of the answer's address */
	} cases[] = {
		{ "active, default hints", "127.0.0.1", "7471", { 0 }, AF_INET, IBV_QPT_RC, RDMA_PS_TCP, 0, 0,
		  sizeof(struct sockaddr_in), 7471 },
		{ "passive", NULL, "7471", { .ai_flags = RAI_PASSIVE }, AF_INET, IBV_QPT_RC, RDMA_PS_TCP, 1,
		  sizeof(struct sockaddr_in), 0, 7471 },
		{ "RAI_FAMILY AF_INET, passive, numeric", "127.0.0.1", "0",
		  { .ai_flags = RAI_FAMILY | RAI_PASSIVE | RAI_NUMERICHOST, .ai_family = AF_INET }, AF_INET, IBV_QPT_RC,
		  RDMA_PS_TCP, 1, sizeof(struct sockaddr_in), 0, 0 },
		{ "RAI_FAMILY AF_INET6", "::1", "7471", { .ai_flags = RAI_FAMILY | RAI_NUMERICHOST, .ai_family = AF_INET6 },
		  AF_INET6, IBV_QPT_RC, RDMA_PS_TCP, 0, 0, sizeof(struct sockaddr_in6), 7471 },
		{ "UD QP type: a datagram lookup, UDP port space", "127.0.0.1", "7174", { .ai_qp_type = IBV_QPT_UD },
		  AF_INET, IBV_QPT_UD, RDMA_PS_UDP, 0, 0, sizeof(struct sockaddr_in), 7174 },
		{ "port space IB, RC", "127.0.0.1", "7471", { .ai_qp_type = IBV_QPT_RC, .ai_port_space = RDMA_PS_IB },
		  AF_INET, IBV_QPT_RC, RDMA_PS_IB, 0, 0, sizeof(struct sockaddr_in), 7471 },
		{ "hints alone, with a source from them", NULL, NULL,
		  { .ai_flags = RAI_PASSIVE | RAI_FAMILY, .ai_family = AF_INET, .ai_qp_type = IBV_QPT_RC,
		    .ai_port_space = RDMA_PS_TCP, .ai_src_addr = (struct sockaddr *)&src, .ai_src_len = sizeof src },
		  AF_INET, IBV_QPT_RC, RDMA_PS_TCP, 1, sizeof src, 0, 4000 },
		{ "hints alone, active, with a destination", NULL, NULL,
		  { .ai_family = AF_INET, .ai_qp_type = IBV_QPT_UD, .ai_port_space = RDMA_PS_UDP,
		    .ai_dst_addr = (struct sockaddr *)&dst, .ai_dst_len = sizeof dst },
		  AF_INET, IBV_QPT_UD, RDMA_PS_UDP, 0, 0, sizeof dst, 5000 },
		{ "a source from the hints beside the lookup's destination", "127.0.0.1", "7471",
		  { .ai_src_addr = (struct sockaddr *)&src, .ai_src_len = sizeof src }, AF_INET, IBV_QPT_RC, RDMA_PS_TCP, 0,
		  sizeof src, sizeof(struct sockaddr_in), 7471 },
		{ "AF_IB from a numeric IPv6 address", "fe80::1", "7471",
		  { .ai_flags = RAI_FAMILY | RAI_NUMERICHOST, .ai_family = AF_IB, .ai_port_space = RDMA_PS_TCP }, AF_IB,
		  IBV_QPT_RC, RDMA_PS_TCP, 0, 0, sizeof(struct sockaddr_ib), 7471 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		current = cases[i].name;
		struct rdma_addrinfo *res = NULL;
		int r = rdma_getaddrinfo(cases[i].node, cases[i].service, &cases[i].hints, &res);
		CHECK(r == 0 && res != NULL, "rdma_getaddrinfo: %d (errno %d)", r, errno);
		if (r != 0 || res == NULL)
			continue;
		CHECK(res->ai_family == cases[i].family, "family %d, want %d", res->ai_family, cases[i].family);
		CHECK(res->ai_qp_type == cases[i].qp_type, "QP type %d, want %d", res->ai_qp_type, cases[i].qp_type);
		CHECK(res->ai_port_space == cases[i].port_space, "port space %#x, want %#x", res->ai_port_space,
		      cases[i].port_space);
		CHECK(!!(res->ai_flags & RAI_PASSIVE) == cases[i].passive, "flags %#x", res->ai_flags);
		CHECK(res->ai_src_len == cases[i].src_len && !!res->ai_src_addr == !!cases[i].src_len,
		      "source length %u, want %u", res->ai_src_len, cases[i].src_len);
		CHECK(res->ai_dst_len == cases[i].dst_len && !!res->ai_dst_addr == !!cases[i].dst_len,
		      "destination length %u, want %u", res->ai_dst_len, cases[i].dst_len);
		struct sockaddr *a = cases[i].passive || !cases[i].dst_len ? res->ai_src_addr : res->ai_dst_addr;
		if (a != NULL)
			CHECK(cma_sa_port(a) == cases[i].port,
			      "port %u, want %u", cma_sa_port(a), cases[i].port);
		if (res->ai_family == AF_IB && res->ai_dst_addr != NULL) {
			const struct sockaddr_ib *ib = (const struct sockaddr_ib *)(const void *)res->ai_dst_addr;
			CHECK(be64toh(ib->sib_sid) == ((uint64_t)RDMA_PS_TCP << 16 | 7471) &&
				      be64toh(ib->sib_sid_mask) == (RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK) &&
				      ib->sib_addr.sib_raw[0] == 0xfe && ib->sib_addr.sib_raw[1] == 0x80 &&
				      ib->sib_addr.sib_raw[15] == 1 && ib->sib_pkey == htobe16(0xffff),
			      "the AF_IB address: sid %#llx mask %#llx", (unsigned long long)be64toh(ib->sib_sid),
			      (unsigned long long)be64toh(ib->sib_sid_mask));
		}
		rdma_freeaddrinfo(res);
	}

	current = "rdma_getaddrinfo misuse";
	struct rdma_addrinfo *res = NULL;
	errno = 0;
	CHECK(rdma_getaddrinfo(NULL, NULL, NULL, &res) == -1 && errno == EINVAL, "no node, service or hints: errno %d",
	      errno);
	struct rdma_addrinfo numeric = { .ai_flags = RAI_NUMERICHOST };
	errno = 0;
	CHECK(rdma_getaddrinfo("not-a-number.invalid", "7471", &numeric, &res) == -1 && errno == EAI_NONAME,
	      "a name under RAI_NUMERICHOST: errno %d, want getaddrinfo's EAI_NONAME", errno);
}

int main(int argc, char **argv)
{
	if (argc > 2 || (argc == 2 && strcmp(argv[1], "loopback") != 0)) {
		fprintf(stderr, "usage: rdmacm_test [loopback]\n"
				"  loopback: only the loopback bind, in a namespace where an interface has the adapter's GID\n");
		return 2;
	}
	alarm(120); /* a hang guard */
	if (argc == 2) {
		want_unbound = 1;
		test_loopback_bind();
		if (failures) {
			fprintf(stderr, "rdmacm_test loopback: %d failures\n", failures);
			return 1;
		}
		printf("rdmacm_test loopback: ok\n");
		return 0;
	}
	test_getaddrinfo();
	test_channel();
	test_misuse();
	test_loopback_bind();
	test_af_ib_port();
	test_options();
	test_connect();
	test_udp();
	test_external_qp();
	test_reject();
	test_destroy_waits_for_acks();
	test_sync();
	test_destroy_channel_with_waiter();
	if (failures) {
		fprintf(stderr, "rdmacm_test: %d failures\n", failures);
		return 1;
	}
	printf("rdmacm_test: ok\n");
	return 0;
}
