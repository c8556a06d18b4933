/*
 * verbs_int.h: the objects behind rdma-core's structures. Each vrdma object
 * embeds the ibverbs structure the application sees as its first member
 * (the context: a verbs_context, whose ibv_context is its last member), so a
 * pointer the application hands back converts with a cast or container_of.
 */
#ifndef VRDMA_VERBS_INT_H
#define VRDMA_VERBS_INT_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <time.h>

#include "vrdma.h"
#include "vrdma_abi.h"

#define vrdma_container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* Reply buffers: the daemon's replies are bounded by the protocol. */
#define VRDMA_REPLY_MAX VRDMA_PROTO_MAX_MESSAGE

#define VRDMA_MAX_DEVICES 10
/* An empty poll_cq yields the CPU every this many polls in a row (cq.c). */
#define VRDMA_POLL_YIELD_EVERY 16
/* An empty poll_cq looks whether the daemon is still there (one poll(2) of
 * the command socket) every this many polls in a row (lost.c). */
#define VRDMA_LOST_CHECK_EVERY 1024
#define VRDMA_MAX_GIDS 16
/* Whether doorbells are rung with pwritev2's RWF_NOSIGNAL (post.c): 1 yes,
 * -1 no (the kernel lacks it), 0 not known yet. */
extern int vrdma_bell_nosignal;

/* A device: one adapter of the process's instance. Devices live as long as
 * the process (ibv_free_device_list frees only the array). */
struct vrdma_device {
	struct ibv_device dev; /* what the application sees */
	uint64_t guid; /* host order */
	int index;
};

struct vrdma_context {
	struct vrdma_chan chan;
	struct vrdma_device *dev;
	struct ibv_device_attr attr;
	uint8_t active_mtu;
	pthread_mutex_t objs_mu; /* guards the object lists below */
	struct vrdma_qp *qps;
	struct vrdma_cq *cqs;
	struct vrdma_srq *srqs;
	int fatal_sent;
	/* The daemon is gone (lost.c): set once, by whoever notices first
	 * (atomic); posts then fail with EIO and polls flush. */
	int lost;
	int flush_ready; /* the flush cursors below are set (objs_mu) */
	int live;   /* objects not yet destroyed (atomic) */
	int closed; /* ibv_close_device ran; the memory stays while objects live */
	/* ibv_import_device made the context: its cmd_fd is the descriptor it
	 * was given (the exporter's connection), closed with it (import.c). */
	int imported;
	struct verbs_context vctx; /* must be last: ibv_context ends it */
};

struct vrdma_pd {
	struct ibv_pd ibpd;
	uint32_t handle; /* the daemon's PD; a parent domain's is its PD's */
	/* A parent domain (ibv_alloc_parent_domain, mem.c): its PD, thread
	 * domain and what the application gave; a PD counts its parent
	 * domains (ibv_dealloc_pd is EBUSY while it has some). */
	struct vrdma_pd *parent;
	struct ibv_td *td;
	void *pd_context;
	int children;
};

/* A backing (a chunk): whole pages of the application's memory moved into
 * a sealed memfd mapped at the same address, shared with the daemon
 * (mem.c). Live backings never overlap: each moved page belongs to one; an
 * MR uses the backings that hold its pages, up to VRDMA_PROTO_MAX_FDS. A
 * stale one, which the application unmapped in part or whole, may overlap
 * newer ones and is never reused. */
struct vrdma_backing {
	uintptr_t start, end;
	int fd;
	uint64_t ino; /* the memfd's inode: its pages are still in place (mem.c) */
	int refs;     /* MRs using some of its pages */
	int prot;     /* the pages' protection: PROT_READ, with PROT_WRITE and PROT_EXEC where they had them */
	int stale;    /* no longer wholly in place: kept for its MRs and for fork, never reused */
	int locked;   /* mlock'd: some MR without IBV_ACCESS_ON_DEMAND uses it, or did (docs/design/odp.md) */
	uint64_t off; /* where start is in the memfd: 0 but for a piece */
	size_t huge;  /* the huge page size of hugetlb memory (MAP_HUGETLB), its memfd's too; 0: ordinary pages */
	/* A stale backing's pages still in place, handed to backings of their
	 * own (its pieces, on the list, chained by piece_next) that it holds
	 * a reference to while it lives; pieces_made once it did. */
	struct vrdma_backing *pieces, *piece_next;
	int pieces_made;
	void *snap;   /* during a fork: the pages' copy for the child */
	int detached; /* during a fork: on the forking thread's stack, private until after it */
	struct vrdma_backing *next;
};

struct vrdma_mr {
	struct ibv_mr ibmr;
	uint32_t handle;
	uint32_t lkey, rkey;
	unsigned int access; /* as registered: ibv_rereg_mr keeps what it does not change */
	uint64_t iova;
	int nbackings;
	struct vrdma_backing *backings[VRDMA_PROTO_MAX_FDS]; /* in address order */
	struct vrdma_mr *live_next; /* the process's live MRs (mem.c), for ibv_advise_mr */
	struct vrdma_implicit *implicit; /* an implicit on-demand MR's children (mem.c), else NULL */
};

struct vrdma_ring {
	uint32_t off, entries, stride;
};

struct vrdma_cq {
	union { /* ibv_cq_ex begins as ibv_cq does: ibv_cq_ex_to_cq is a cast */
		struct ibv_cq ibcq;
		struct ibv_cq_ex cqx;
	};
	/* ibv_start_poll/ibv_next_poll's current completion, which the
	 * ibv_wc_read_* functions read (cq.c). */
	struct ibv_wc cur;
	/* A timestamped CQ's (ring.stride VRDMA_CQE_TS_SIZE): when the last
	 * completion poll_ring took was written, CLOCK_MONOTONIC and
	 * CLOCK_REALTIME in ns (docs/design/cq-timestamps.md); cur_stamped
	 * says poll_ring set them (a flush from the library has none). */
	uint64_t cur_ts, cur_wallclock;
	int cur_stamped;
	uint32_t handle;
	uint8_t *mem;
	size_t size;
	struct vrdma_ring ring;
	uint32_t cons;
	uint32_t empty_polls; /* polls in a row that found nothing */
	int rfd; /* the notification doorbell's read end: a pipe the daemon writes when armed */
	pthread_spinlock_t lock;
	/* After the loss (lost.c): the ring is read up to lost_prod, its
	 * producer index then, and never past it (lock). */
	int frozen;
	uint32_t lost_prod;
	struct vrdma_cq *next;
};

struct vrdma_srq {
	struct ibv_srq ibsrq;
	uint32_t handle;
	uint8_t *mem;
	size_t size;
	struct vrdma_ring ring;
	uint32_t prod;
	int max_sge;
	uint32_t max_wr;
	pthread_spinlock_t lock;
	/* Write end of the SRQ's doorbell, -1 for none: the daemon gives one
	 * to an SRQ on a device (a bound adapter's) and sets the ring's notify
	 * word; a post then rings it (post.c). */
	int bell;
	uint32_t flush; /* after the loss: the next request to flush (lost.c) */
	uint32_t srqn;  /* an XRC SRQ's number; 0 for a basic SRQ (xrc.c) */
	struct ibv_cq *xcq; /* an XRC SRQ's CQ, where its requests flush (lost.c) */
	struct vrdma_srq *next;
};

/* An XRC domain handle (xrc.c). */
struct vrdma_xrcd {
	struct ibv_xrcd ibxrcd;
	uint32_t handle;
};

struct vrdma_qp {
	struct ibv_qp_ex qpx; /* its qp_base is the ibv_qp the application sees */
	uint32_t handle;
	uint8_t *mem;
	size_t size;
	struct vrdma_ring sq, rq;
	int bell; /* write end of the QP's doorbell */
	uint32_t sq_prod, rq_prod;
	/* The daemon arms the send ring with a new notify value each time
	 * (its create reply's notify_gen): then one doorbell per value is
	 * enough, and rung is the value last rung for (0: none). Under slock. */
	int notify_gen;
	uint32_t rung;
	pthread_spinlock_t slock, rlock;
	struct ibv_qp_cap cap;
	int sq_sig_all;
	/* The ibv_wr_* builder (post.c): the entry being written, the producer
	 * index at ibv_wr_start, the first error since. */
	uint8_t *wr_cur;
	uint32_t wr_start_prod;
	int wr_err;
	/* librdmacm created it and holds it in RESET until the connection
	 * manager connects it (rdma_cm leaves it in INIT): receives are taken
	 * meanwhile (vrdma_private_qp_handle). */
	int cm_held;
	/* After the loss: the next send and receive requests to flush (lost.c). */
	uint32_t flush_sq, flush_rq;
	struct vrdma_qp *next;
};

struct vrdma_ah {
	struct ibv_ah ibah;
};

static inline struct vrdma_context *to_vctx(struct ibv_context *c)
{
	return vrdma_container_of(c, struct vrdma_context, vctx.context);
}

static inline uint32_t vrdma_load32(const uint8_t *mem, size_t off)
{
	return __atomic_load_n((const uint32_t *)(const void *)(mem + off), __ATOMIC_ACQUIRE);
}

static inline void vrdma_store32(uint8_t *mem, size_t off, uint32_t v)
{
	__atomic_store_n((uint32_t *)(void *)(mem + off), v, __ATOMIC_RELEASE);
}

/* vrdma_fence orders the stores before it ahead of the loads after it. The
 * doorbell handshake with the daemon is Dekker's: we store an index and then
 * read the ring's notify word, the daemon stores the notify word and then
 * reads the index (its Go atomics are sequentially consistent), and one of
 * the two must see the other's store. Release and acquire do not give that:
 * the load may pass the store (x86's store buffer), and then neither rings
 * nor wakes (tests/ring_order_test.c). */
static inline void vrdma_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* vrdma_publish32 stores v and fences: for a word the daemon reads before
 * deciding whether to wake us or to sleep itself. */
static inline void vrdma_publish32(uint8_t *mem, size_t off, uint32_t v)
{
	vrdma_store32(mem, off, v);
	vrdma_fence();
}

static inline uint8_t *vrdma_slot(uint8_t *mem, const struct vrdma_ring *r, uint32_t idx)
{
	return mem + r->off + VRDMA_RING_HEADER_SIZE + (size_t)(idx & (r->entries - 1)) * r->stride;
}

/* put_le* write little-endian fields of ring entries. */
static inline void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}
static inline void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t get_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t get_le64(const uint8_t *p) { return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32; }

/* Commands (device.c): one request with a JSON body built by printf; the
 * reply parsed into doc (free with vj_free). errno-style return. */
int vrdma_cmd(struct vrdma_context *ctx, uint16_t op, struct vj_doc *doc, const int *fds, int nfds, int *rfds,
	      int *nrfds, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
/* Frees a reply vrdma_cmd parsed: the document and the text it points into. */
void vrdma_doc_free(struct vj_doc *doc);
/* A command whose reply is not needed. */
int vrdma_cmd_simple(struct vrdma_context *ctx, uint16_t op, uint32_t handle);

/* Maps a shared region the daemon passed (closes fd); NULL with errno. */
uint8_t *vrdma_map_region(int fd, size_t size);
/* vrdma_take_region finishes a create command whose reply (rc: its
 * checks' result) came with nfds descriptors, the first the object's shared
 * region of size bytes: it maps the region into *mem. On failure, the
 * reply's or the mapping's, it closes the descriptors, destroys the object
 * the daemon made (destroy_op on handle, if any) and returns the errno. */
int vrdma_take_region(struct vrdma_context *ctx, int rc, int *fds, int nfds, size_t size, uint8_t **mem,
		      uint16_t destroy_op, uint32_t handle);
int vrdma_ring_from(const struct vj_doc *doc, int tok, size_t size, struct vrdma_ring *r);

/* vrdma_grh_addrs reads the GRH area of a UD receive: an IPv6 header, or
 * (RoCEv2 over IPv4, as rxe and the NICs fill it) an IPv4 header in its
 * last 20 bytes; the addresses as GIDs (IPv4-mapped for IPv4). -1 with
 * errno EPROTONOSUPPORT if it holds neither. */
int vrdma_grh_addrs(const struct ibv_grh *grh, union ibv_gid *from, union ibv_gid *to, uint32_t *flow_label,
		    uint8_t *tclass);

/* vrdma_live counts the context's objects; the last one destroyed after
 * ibv_close_device frees the context. */
void vrdma_live(struct vrdma_context *ctx, int delta);
/* vrdma_context_joined makes ctx, whose channel ibv_import_device joined
 * to a session (import.c), a context of the device the daemon's greeting
 * doc names, with cmd_fd, which it owns; NULL if doc does not say one. */
struct ibv_context *vrdma_context_joined(struct vrdma_context *ctx, const struct vj_doc *doc, int cmd_fd);

/* Object lists for events (device.c). */
void vrdma_track(struct vrdma_context *ctx, void *obj, int kind);
void vrdma_untrack(struct vrdma_context *ctx, void *obj, int kind);
enum { VRDMA_OBJ_QP, VRDMA_OBJ_CQ, VRDMA_OBJ_SRQ };

/* A lost daemon (lost.c; docs/design/lost-daemon.md). vrdma_note_lost
 * records the loss (cheap, any thread, any lock held); vrdma_is_lost reads
 * it; vrdma_check_lost looks at the command socket (one poll(2)) and notes
 * the loss when the daemon's end closed. vrdma_flush_cq writes up to num
 * IBV_WC_WR_FLUSH_ERR completions for the requests still outstanding on
 * the QPs (and SRQs) whose completions go to cq; it takes objs_mu and the
 * queues' locks, so no caller may hold them. vrdma_freeze records, once,
 * where the flushes start and where each CQ's ring ends (same locks). */
void vrdma_note_lost(struct vrdma_context *ctx);
static inline int vrdma_is_lost(const struct vrdma_context *ctx) { return __atomic_load_n(&ctx->lost, __ATOMIC_ACQUIRE); }
int vrdma_check_lost(struct vrdma_context *ctx);
/* Whether a destroy (dereg, dealloc) whose command failed with rc keeps
 * its object. Not after the loss, whatever the error (EIO, or the errno of
 * a refusal): the daemon freed its side with the session, so the library
 * frees its own and the call succeeds (docs/design/lost-daemon.md). */
static inline int vrdma_destroy_kept(const struct vrdma_context *ctx, int rc)
{
	return rc && rc != EIO && !vrdma_is_lost(ctx);
}
int vrdma_flush_cq(struct vrdma_cq *cq, int num, struct ibv_wc *wc);
void vrdma_freeze(struct vrdma_context *ctx);

/* Per-operation entry points placed into ibv_context_ops. */
int vrdma_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
uint64_t vrdma_clock_ns(clockid_t clock);
/* Removes the completions of QP qpn not yet polled from cq, as mlx5 does
 * when a QP enters RESET (cq.c). */
void vrdma_cq_clean(struct ibv_cq *cq, uint32_t qpn);
int vrdma_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int vrdma_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
/* Memory windows (mem.c, post.c): the context's alloc_mw, dealloc_mw and
 * bind_mw. A window's rkey is the daemon's; binding is a work request. */
struct ibv_mw *vrdma_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int vrdma_dealloc_mw(struct ibv_mw *mw);
int vrdma_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);
struct ibv_pd *vrdma_alloc_parent_domain(struct ibv_context *context, struct ibv_parent_domain_init_attr *attr);
struct ibv_td *vrdma_alloc_td(struct ibv_context *context, struct ibv_td_init_attr *init_attr);
int vrdma_dealloc_td(struct ibv_td *td);
/* Implicit on-demand MRs (mem.c, docs/design/odp-implicit.md): how many
 * the process holds (0: an SGE's lkey is always the daemon's), and, once
 * mem.c made one, its resolver: the lkey under which the daemon finds an
 * SGE named with an implicit MR's lkey, the child MR covering its bytes
 * (registered first when may_register: never under a queue's spinlock),
 * else sg->lkey itself. Both live in post.c, which links without mem.c
 * in some tests. */
typedef uint32_t vrdma_implicit_resolver_fn(struct ibv_context *context, const struct ibv_sge *sg, int may_register);
extern atomic_int vrdma_implicit_count;
extern vrdma_implicit_resolver_fn *_Atomic vrdma_implicit_resolver;
static inline int vrdma_implicit_any(void)
{
	return __builtin_expect(atomic_load_explicit(&vrdma_implicit_count, memory_order_acquire) != 0, 0);
}
static inline uint32_t vrdma_sge_lkey(struct ibv_context *context, const struct ibv_sge *sg)
{
	if (!vrdma_implicit_any())
		return sg->lkey;
	return atomic_load(&vrdma_implicit_resolver)(context, sg, 0);
}
/* vrdma_implicit_prepare registers the children n SGEs of an implicit MR
 * need (before a post takes its queue's lock). */
static inline void vrdma_implicit_prepare(struct ibv_context *context, const struct ibv_sge *sg, int n)
{
	if (!vrdma_implicit_any())
		return;
	vrdma_implicit_resolver_fn *fn = atomic_load(&vrdma_implicit_resolver);
	for (int i = 0; i < n; i++)
		(void)fn(context, &sg[i], 1);
}
int vrdma_mr_span(struct ibv_pd *pd, uint32_t lkey, uint64_t iova, uint32_t length, unsigned int *access, void **va);
int vrdma_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg_list,
		    uint32_t num_sge);
int vrdma_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int vrdma_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int vrdma_query_port_ex(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len);

void vrdma_set_create_qp_ex(struct verbs_context *vctx);
/* XRC (xrc.c): the domain, SRQ and open_qp operations of the context. */
void vrdma_set_xrc_ops(struct verbs_context *vctx);
/* Creates an SRQ of pd; an XRC one when xrcd_handle is not 0 (qp.c). */
struct ibv_srq *vrdma_create_srq(struct ibv_pd *ibpd, struct ibv_srq_init_attr *attr, uint32_t xrcd_handle,
				 uint32_t cq_handle);
struct ibv_cq_ex *vrdma_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);

/* Registered memory (mem.c). */
void vrdma_mem_init(void);

#endif
