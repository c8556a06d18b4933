/*
 * vrdma_private.h: the private interface between the drop-in libibverbs.so.1
 * and the drop-in librdmacm.so.1 (symbol version VRDMA_PRIVATE_1.0, in
 * libibverbs.map). The connection manager's commands name QPs by the
 * handles of the session whose QP they are, so librdmacm speaks on the
 * command channel of the ibv_context an id is bound to: it sends the
 * cm_* commands through vrdma_private_cm_call and receives the cm_event
 * messages, decoded and checked by libibverbs (cm_event.c), through the
 * function it attaches to the context. See docs/design/rdma-cm-events.md.
 *
 * Both libraries come from one build, so this interface has no
 * compatibility promise beyond its version node.
 */
#ifndef VRDMA_PRIVATE_H
#define VRDMA_PRIVATE_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds of a CM event's fields (the CM's limits: REP carries 196 bytes of
 * private data, RTU 224, a REJ's text 128 bytes). */
#define VRDMA_CM_PRIVATE_MAX 224
#define VRDMA_CM_TEXT_MAX 128
/* Ids the library picks are below this; the daemon's are at or above it. */
#define VRDMA_CM_DAEMON_ID_BASE 0x80000000u

/* What a CM event reports (internal/proto's CMEventType). */
enum vrdma_cm_ev_type {
	VRDMA_CM_EV_REQUEST = 1,	 /* a request to a listener (id is new) */
	VRDMA_CM_EV_REPLY,		 /* a dialled connection's reply */
	VRDMA_CM_EV_ESTABLISHED,	 /* the requester confirmed (or, UD: the reply) */
	VRDMA_CM_EV_REJECTED,		 /* refused (reason, text) */
	VRDMA_CM_EV_TIMEOUT,		 /* no answer in time */
	VRDMA_CM_EV_UNREACHABLE,	 /* the peer's connection manager is unreachable */
	VRDMA_CM_EV_DISCONNECTED,	 /* the peer ended the connection */
	VRDMA_CM_EV_DISCONNECT_DONE,	 /* the peer answered this side's disconnection */
};

/* A CM event, decoded and checked: every field within its range. */
struct vrdma_cm_ev {
	uint8_t type; /* enum vrdma_cm_ev_type */
	uint32_t id, listener;
	uint8_t qp_type; /* the daemon's QP type (2 RC, 3 UC, 4 UD, 9 XRC_SEND: IBV_QPT_*) */
	uint8_t gid[16]; /* the peer's; zero when absent */
	uint32_t qpn, psn, qkey;
	uint8_t mtu; /* enum ibv_mtu; 0 when absent */
	uint8_t rd_atomic, sgid_index;
	uint8_t local_addr[16], remote_addr[16];
	uint16_t local_port, remote_port;
	uint16_t reason;
	/* A connection through a device's own CM (a verbs uplink): the PSN
	 * this side's QP expects first, the kernel's, in place of the
	 * library's own (has_local_psn set). */
	uint32_t local_psn;
	uint8_t has_local_psn;
	char text[VRDMA_CM_TEXT_MAX + 1];
	/* Aligned as rdma-core's: programs read numbers off its front
	 * (rdma_xclient: the SRQ number, a __be32). */
	_Alignas(8) uint8_t private_data[VRDMA_CM_PRIVATE_MAX];
	size_t private_len;
};

/* Called with the channel's lock held, for each CM event the channel reads
 * (while a command waits for its reply, or in vrdma_private_cm_drain): it
 * must only queue the event, never call into the channel. */
typedef void (*vrdma_cm_fn)(void *arg, const struct vrdma_cm_ev *ev);

/* Decodes a cm_event body (JSON). 0, or -EINVAL when it is not a valid
 * event (not JSON, a field of the wrong type or out of range, a field too
 * long). Hidden: libibverbs only. */
int vrdma_cm_event_parse(const char *body, size_t len, struct vrdma_cm_ev *ev);

/* Exported under VRDMA_PRIVATE_1.0. All return 0 or a positive errno. */

/* Sends CM command op (VRDMA_CMD_CM_*) with a JSON body on ctx's channel
 * and copies the reply body (NUL-terminated) into reply when it is not NULL.
 * A daemon error is its errno, with the daemon's message in msg (msgcap
 * bytes, may be NULL). */
int vrdma_private_cm_call(struct ibv_context *ctx, uint16_t op, const char *body, size_t len, char *reply,
			  size_t cap, char *msg, size_t msgcap);
/* Sends ctx's CM events to fn(arg, ...) from now on (fn NULL: drops them,
 * as before). */
int vrdma_private_cm_attach(struct ibv_context *ctx, vrdma_cm_fn fn, void *arg);
/* The descriptor that is readable when the daemon has sent something on
 * ctx's channel (the socket itself), for an epoll set; -1 when closed. */
int vrdma_private_cm_fd(struct ibv_context *ctx);
/* Reads, without waiting, what the daemon has sent on ctx's channel: CM
 * events go to the attached function, the others where they always go. 0,
 * or EIO when the channel is lost (the daemon went away). */
int vrdma_private_cm_drain(struct ibv_context *ctx);
/* The session's handle of qp, which CM commands name it by. It also marks
 * qp as rdma_cm's: held in RESET until the daemon's connection manager
 * connects it (rdma-core's leaves it in INIT; the daemon takes a
 * requester's QP from RESET), it takes receives meanwhile, as in INIT. */
int vrdma_private_qp_handle(struct ibv_qp *qp, uint32_t *handle);
/* The QP of ctx numbered qpn (an application's own, named in
 * rdma_conn_param's qp_num), or NULL. */
struct ibv_qp *vrdma_private_qp_by_num(struct ibv_context *ctx, uint32_t qpn);

#endif
