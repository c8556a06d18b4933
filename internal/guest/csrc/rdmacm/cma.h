/*
 * cma.h: the drop-in librdmacm.so.1's internals. Applications see
 * rdma-core's <rdma/rdma_cma.h>; each rdma_cm_id is the first member of a
 * cma_id, each rdma_event_channel of a cma_chan, each rdma_cm_event of a
 * cma_event. The connection manager itself is the vrdma daemon's: its
 * commands go on the command channel of the ibv_context an id is bound to,
 * through libibverbs' private interface (vrdma_private.h), and its events
 * come back through the function attached to that context (cma_event.c).
 *
 * One lock, cma_mu, guards the ids, the channels' queues and the ids'
 * states. It is taken inside the command channel's lock (events arrive
 * while a command waits for its reply), so nothing holding it may call
 * into libibverbs.
 */
#ifndef VRDMA_CMA_H
#define VRDMA_CMA_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stddef.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>

#include "vrdma.h"
#include "vrdma_abi.h"
#include "vrdma_private.h"

#define CMA_EXPORT VRDMA_EXPORT
#define cma_container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

#define CMA_MAX_DEVICES 10
#define CMA_MAX_GIDS 16

/* An adapter, opened when the library is first used, for as long as the
 * process lives (rdma_get_devices hands out these contexts). */
struct cma_device {
	struct ibv_context *verbs;
	union ibv_gid gids[CMA_MAX_GIDS];
	int ngids;
	uint8_t active_mtu;
	uint8_t max_rd_atomic;
	uint32_t next_id; /* the ids the library picks, below VRDMA_CM_DAEMON_ID_BASE */
	int dead;         /* its channel to the daemon is lost */
	pthread_mutex_t pd_mu;
	struct ibv_pd *pd; /* the default PD of rdma_create_qp(id, NULL, ...) */
	struct ibv_xrcd *xrcd; /* the XRC domain of its ids' XRC QPs and SRQs (cma_xrc.c); under pd_mu */
};

extern struct cma_device cma_devs[CMA_MAX_DEVICES];
extern int cma_ndevs;
extern pthread_mutex_t cma_mu;
extern pthread_cond_t cma_cond; /* an event was acked */

/* Opens the devices once; 0 or an errno (ENODEV: none). */
int cma_init(void);
/* The device holding gid (its index in *index), or NULL. */
struct cma_device *cma_dev_by_gid(const uint8_t gid[16], int *index);
/* The first device with a GID of the family (v4: IPv4-mapped), or NULL. */
struct cma_device *cma_dev_by_family(int v4, int *index);
/* The device's default PD, allocated on first use. */
struct ibv_pd *cma_dev_pd(struct cma_device *d);
/* The default PD if it is allocated already, else NULL: for callers that
 * hold cma_mu and so may not allocate it. */
struct ibv_pd *cma_dev_pd_peek(struct cma_device *d);
/* A new id of the library's own for a listener or a dialled connection. */
uint32_t cma_dev_new_id(struct cma_device *d);

/* ---- addresses (cma_addr.c) ---- */
/* The GID of an IP address (IPv4 as ::ffff:a.b.c.d); -1 for other families. */
int cma_sa_gid(const struct sockaddr *sa, uint8_t gid[16]);
/* The socket address of a GID (IPv4-mapped: AF_INET) and a port (host order). */
void cma_gid_sa(const uint8_t gid[16], uint16_t port, struct sockaddr_storage *out);
int cma_sa_is_any(const struct sockaddr *sa);
int cma_sa_is_loopback(const struct sockaddr *sa);
/* Whether a bind to a loopback address leaves the id without a device
 * (cma_loopback.c). */
int cma_loopback_has_no_device(void);
/* The port, host order; 0 for other families. */
uint16_t cma_sa_port(const struct sockaddr *sa);
void cma_sa_set_port(struct sockaddr *sa, uint16_t port);
/* The size of a socket address of sa's family; 0 for unknown families. */
socklen_t cma_sa_len(const struct sockaddr *sa);

/* ---- ids (cma_id.c) ---- */
enum cma_state {
	CMA_IDLE,
	CMA_ADDR_RESOLVED,
	CMA_ROUTE_RESOLVED,
	CMA_LISTEN,
	CMA_CONNECT,      /* request sent */
	CMA_REPLY_RCVD,   /* CONNECT_RESPONSE handed out: rdma_accept confirms */
	CMA_REQ_RCVD,     /* a child: the request is the application's to answer */
	CMA_ACCEPTED,     /* reply sent, waiting for the confirmation */
	CMA_ESTABLISHED,
	CMA_DISCONNECTED, /* ended, by either side */
	CMA_FAILED,       /* rejected, timed out, unreachable */
};

struct cma_chan;

struct cma_id {
	struct rdma_cm_id id; /* what the application sees; first */
	struct cma_device *dev;
	uint32_t cmid; /* the daemon's id of the listener or connection; 0: none */
	enum cma_state state;
	int sync;       /* created without a channel: calls wait for their events */
	int unacked;    /* events handed out and not acked */
	int disc_queued; /* a DISCONNECTED event is queued or handed out */
	int own_cqs;    /* rdma_create_qp (or rdma_create_srq, XRC) made the id's CQs and their channels */
	int qp_in_init; /* its QP is in INIT (a child's, from rdma_create_qp) */
	struct vrdma_cm_ev peer; /* the request (child) or reply (active side) */
	uint32_t psn;            /* this side's first PSN */
	uint8_t rd_atomic;       /* RDMA READs/atomics in flight, agreed */
	uint8_t tos;
	uint8_t ack_timeout;  /* RDMA_OPTION_ID_ACK_TIMEOUT's value, when ack_timeout_set */
	int ack_timeout_set;  /* it overrides the CM's timeout at RTS, as the kernel's rdma_cm */
	int afonly;           /* RDMA_OPTION_ID_AFONLY (kept; the daemon's ids are per family anyway) */
	int reuseaddr;        /* RDMA_OPTION_ID_REUSEADDR (kept; the daemon's port space has no TIME_WAIT) */
	int backlog;
	int auto_port; /* rdma_bind_addr picked the port (the application asked for 0) */
	struct ibv_qp_init_attr *qp_init; /* rdma_create_ep on a passive id: for rdma_get_request */
	struct ibv_sa_path_rec path;
	struct cma_mc *mcs;  /* the multicast groups joined (cma_mcast.c) */
	struct cma_id *next; /* in cma_ids */
};

extern struct cma_id *cma_ids;

static inline struct cma_id *to_cid(struct rdma_cm_id *id)
{
	return cma_container_of(id, struct cma_id, id);
}

/* The id of (dev, cmid), or NULL; cma_mu held. */
struct cma_id *cma_find(struct cma_device *d, uint32_t cmid);
/* A new id on channel ch (allocated, not linked); NULL with errno. */
struct cma_id *cma_id_alloc(struct rdma_event_channel *ch, void *context, enum rdma_port_space ps,
			    enum ibv_qp_type qpt);
/* Links id into cma_ids; cma_mu held. */
void cma_link(struct cma_id *id);
/* Binds id to dev (sets verbs, port). */
void cma_bind_dev(struct cma_id *id, struct cma_device *d);

/* ---- multicast (cma_mcast.c) ---- */
/* Frees the id's groups (its QP, destroyed or not, leaves them with it). */
void cma_mc_release(struct cma_id *id);

/* ---- event channels and events (cma_event.c) ---- */
struct cma_chan {
	struct rdma_event_channel ch; /* ch.fd: an epoll set of efd and the daemon sockets */
	int efd;                      /* eventfd: signalled while events are queued */
	struct cma_event *head, *tail;
	int users;     /* threads in rdma_get_cm_event on it */
	int destroyed; /* rdma_destroy_event_channel ran while some were */
	struct cma_chan *next; /* in cma_chans */
};

struct cma_event {
	struct rdma_cm_event ev; /* what the application sees; first */
	struct cma_id *owner;    /* whose count the event holds until acked */
	int from_daemon;         /* raw holds the daemon's event, ev is filled at delivery */
	struct vrdma_cm_ev raw;
	struct cma_event *next;
};

static inline struct cma_chan *to_cchan(struct rdma_event_channel *ch)
{
	return cma_container_of(ch, struct cma_chan, ch);
}

/* Queues a local event (ADDR_RESOLVED...) for id with status. */
int cma_queue_local(struct cma_id *id, enum rdma_cm_event_type type, int status);
/* Queues e on id's channel; cma_mu held. */
void cma_enqueue(struct cma_id *id, struct cma_event *e);
/* Removes the queued events of id from its channel; with cma_mu held.
 * Children of CONNECT_REQUEST events are returned in *orphans (linked by
 * next) for the caller to reject and free without the lock. */
void cma_purge(struct cma_id *id, struct cma_id **orphans);
/* The CM function attached to every device's context. */
void cma_on_event(void *arg, const struct vrdma_cm_ev *ev);
/* Waits for the next event of a synchronous id (its private channel) and
 * keeps it in id->event: 0, or -1 with errno (the event's status). */
int cma_complete(struct cma_id *id);

/* ---- connections (cma_conn.c) ---- */
/* Takes id's QP from RESET to RTS, connected to id->peer. 0 or errno. */
int cma_qp_connect(struct cma_id *id);
/* Sends a CM command with a body made by printf; reply may be NULL. 0 or errno. */
int cma_cmd(struct cma_device *d, uint16_t op, char *reply, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Base64 of n bytes into dst (4 * ((n + 2) / 3) + 1 bytes). */
void cma_b64(char *dst, const uint8_t *src, size_t n);
/* Ends what the daemon holds for id (a listener, a request, a connection)
 * on its destruction. */
void cma_release(struct cma_id *id);

/* Makes the id's CQs, each with a completion channel, of send_n and
 * recv_n entries (0: none of that kind); 0 or an errno. */
int cma_create_cqs(struct cma_id *c, int send_n, int recv_n);
/* Destroys the CQs the library made for the id (none: nothing). */
void cma_destroy_cqs(struct cma_id *c);

/* ---- XRC (cma_xrc.c) ---- */
/* The device's XRC domain, opened on first use; NULL with errno. */
struct ibv_xrcd *cma_dev_xrcd(struct cma_device *d);
/* An XRC_SEND QP of pd (its send CQ made if attr names none: *made set)
 * or an XRC_RECV QP of xrcd (NULL: the device's) for id c, as attr's
 * type says; attr's caps and CQs are set to what the QP has. NULL with
 * errno. */
struct ibv_qp *cma_xrc_create_qp(struct cma_id *c, struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
				 struct ibv_xrcd *xrcd, int *made);
/* An XRC SRQ of pd on the XRC_RECV id c, in attr's domain (or the
 * device's) and completing on attr's CQ (or the id's receive CQ, made if
 * missing); it becomes id->srq. 0 or an errno. */
int cma_xrc_create_srq(struct cma_id *c, struct ibv_pd *pd, struct ibv_srq_init_attr_ex *attr);

/* Sets errno and returns -1: the rdma_cm convention. */
static inline int cma_err(int e)
{
	errno = e;
	return -1;
}

#endif
