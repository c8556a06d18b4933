/*
 * rsocket.h: the drop-in librdmacm's rsockets (rdma-core's <rdma/rsocket.h>
 * API), stream sockets on rdma-core's rsocket wire protocol
 * (docs/design/rsockets.md). An rsocket is a descriptor the library made
 * with rsocket() or raccept(): the descriptor of its rdma_cm event channel.
 * The table below maps its number to its state. Every other descriptor is
 * ordinary: rpoll and rselect hand it to poll and select as it is, and the
 * calls on one socket fail with EBADF for it, as rdma-core's do.
 */
#ifndef VRDMA_RSOCKET_H
#define VRDMA_RSOCKET_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

/* The descriptors the table can hold: 0 to RS_MAX_FD - 1 (rdma-core's
 * index map holds as many). */
#define RS_MAX_FD 65536

/* ---- the wire (rdma-core's librdmacm/rsocket.c) ---- */
#define RS_OP_DATA 0
#define RS_OP_SGL 4
#define RS_OP_IOMAP_SGL 6
#define RS_OP_CTRL 7
#define RS_CTRL_DISCONNECT 0
#define RS_CTRL_KEEPALIVE 1
#define RS_CTRL_SHUTDOWN 2
#define rs_msg_set(op, data) (((uint32_t)(op) << 29) | (uint32_t)(data))
#define rs_msg_op(imm) ((uint32_t)(imm) >> 29)
#define rs_msg_data(imm) ((uint32_t)(imm)&0x1FFFFFFF)

#define RS_OP_WRITE 2 /* a plain RDMA WRITE (riowrite): never on the wire as an immediate */
#define RS_CONN_FLAG_NET (1 << 0)
#define RS_CONN_FLAG_IOMAP (1 << 1)
#define RS_SGL_SIZE 2         /* entries of a target SGL */
#define RS_QP_CTRL_SIZE 4     /* send slots kept for control messages */
#define RS_SNDLOWAT 2048      /* the least send buffer a send waits for */
#define RS_OLAP_START_SIZE 2048
#define RS_MAX_TRANSFER 65536 /* the most one riowrite RDMA WRITE carries */
/* The most one rsend RDMA WRITE carries: also bounded by the half of the
 * peer's receive buffer it writes into (64 KiB with rdma-core's defaults). */
#define RS_MAX_DATA_TRANSFER (1u << 20)
#define RS_QP_MIN_SIZE 16
#define RS_QP_MAX_SIZE 0xFFFE
#define RS_DEF_QSIZE 384
#define RS_DEF_INLINE 64
#define RS_DEF_MEM (1 << 17) /* rdma-core's send and receive buffers; ours when memory is scarce */
/* Our default send and receive buffers when the process may lock enough
 * memory (rs_default_mem): larger than rdma-core's, a local choice the peer
 * learns from the connection data and SGL updates (docs/design/rsockets.md,
 * "Performance"). */
#define RS_BIG_MEM (1u << 22)

/* Datagrams (rdma-core's ds_*): every message over the UD QPs starts with
 * a ds_header naming the sender's address; until a peer's QP number is
 * known, data goes over the rsocket's UDP socket after a ds_udp_header,
 * whose receiver answers with an RS_OP_CTRL header carrying its own. */
#define DS_IPV4_HDR_LEN 8
#define DS_IPV6_HDR_LEN 24
#define DS_UDP_TAG 0x55555555u
#define DS_UDP_IPV4_HDR_LEN 16
#define DS_UDP_IPV6_HDR_LEN 28
#define DS_MSG_SIZE RS_SNDLOWAT /* a datagram with its ds_header: one send or receive slot */
#define DS_GRH_LEN 40           /* the GRH a UD receive starts with */

/* An SGL entry, in the order its writer's host uses (the connection data's
 * are big-endian). */
struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

/* An iomap entry: a peer's riomap'd buffer, at offset in its own numbering. */
struct rs_iomap {
	uint64_t offset;
	struct rs_sge sge;
};

/* One of this side's riomap'd buffers, advertised in the peer's iomap slot index. */
struct rs_iomap_mr {
	uint64_t offset;
	struct ibv_mr *mr; /* NULL: the slot is free */
	int queued;        /* not yet written to the peer */
};

/* The private data of the connection request and of its acceptance. */
struct rs_conn_data {
	uint8_t version; /* 1 */
	uint8_t flags;   /* RS_CONN_FLAG_* */
	uint16_t credits; /* big-endian: the sender's receive queue */
	uint8_t reserved[3];
	uint8_t target_iomap_size; /* log2 of the iomap entries; 0: none */
	struct rs_sge target_sgl;  /* where the peer writes SGL updates */
	struct rs_sge data_buf;    /* the first half of the receive buffer */
};
_Static_assert(sizeof(struct rs_conn_data) == 40, "rdma-core's rs_conn_data is 40 bytes");

/* The header of a datagram on a UD QP, in network order: the sender's
 * address as rrecvfrom reports it. */
struct ds_header {
	uint8_t version; /* 4 or 6 */
	uint8_t length;  /* DS_IPV4_HDR_LEN or DS_IPV6_HDR_LEN: where the data starts */
	uint16_t port;
	union {
		uint32_t ipv4;
		struct {
			uint32_t flowinfo;
			uint8_t addr[16];
		} ipv6;
	} addr;
};
_Static_assert(sizeof(struct ds_header) == DS_IPV6_HDR_LEN, "rdma-core's ds_header is 24 bytes");

/* The header of a datagram rsocket's UDP message, in network order. */
struct ds_udp_header {
	uint32_t tag; /* DS_UDP_TAG */
	uint8_t version;
	uint8_t op;     /* RS_OP_DATA (data follows) or RS_OP_CTRL (the answer) */
	uint8_t length; /* DS_UDP_IPV4_HDR_LEN or DS_UDP_IPV6_HDR_LEN */
	uint8_t reserved;
	uint32_t qpn; /* the sender's UD QP, 24 bits */
	union {
		uint32_t ipv4;
		uint8_t ipv6[16];
	} addr; /* the address the sender's QP serves */
};
_Static_assert(sizeof(struct ds_udp_header) == DS_UDP_IPV6_HDR_LEN, "rdma-core's ds_udp_header is 28 bytes");

struct rs_dgram; /* rsocket_dgram.c */

/* ---- an rsocket ---- */
enum rs_state {
	RS_INIT,
	RS_BOUND,
	RS_LISTENING,
	RS_CONNECTING,  /* rconnect under way: the CM steps are driven by rs_connect_step */
	RS_CONNECTED,   /* readable and writable tell the directions still open */
	RS_DISCONNECTED,
	RS_CONNECT_ERROR,
	RS_ERROR,
};

struct rs_rmsg {
	uint32_t op, data;
};

struct rsocket {
	int fd; /* the descriptor the application holds: ch->fd (a datagram rsocket's: its UDP socket) */
	struct rs_dgram *dg; /* a datagram rsocket's state; NULL for a stream */
	pthread_mutex_t mu;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	enum rs_state state;
	int readable, writable;
	/* RS_DISCONNECTED because the peer shut its writing side after we had
	 * shut ours: no data flows any more, but the peer's QP still takes
	 * what we posted before, which rs_shutdown waits for (moving the QP
	 * to the error state at once would drop it). Cleared when the peer's
	 * QP goes (its DISCONNECT message, the CM's DISCONNECTED, a failed
	 * send). */
	int draining;
	int err;      /* SO_ERROR */
	int fs_flags; /* F_GETFL: O_NONBLOCK */
	int fd_flags; /* F_GETFD */
	int cm_step;  /* RS_CONNECTING: the event rconnect waits for next */

	/* options, before the connection */
	uint32_t sq_size, rq_size, sq_inline, sbuf_size, rbuf_size;
	int sbuf_set, rbuf_set; /* SO_SNDBUF/SO_RCVBUF chose the size (no fallback to RS_DEF_MEM) */
	int nodelay, keepalive, reuseaddr, oobinline, keepidle, linger_off, v6only;
	int64_t ka_next; /* CLOCK_MONOTONIC ms: the next keepalive probe; 0: not yet timed */
	int64_t ka_sent; /* when the probe not yet acknowledged was sent; 0: none */

	/* verbs */
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	int cq_armed;
	unsigned unacked_cqe;
	uint8_t *sbuf, *rbuf;
	volatile struct rs_sge *target_sgl; /* RS_SGL_SIZE: the peer's receive buffer, written by the peer */
	volatile struct rs_iomap *target_iomap; /* target_iomap_size entries after it: the peer's riomaps */
	uint32_t target_iomap_size;             /* RDMA_IOMAPSIZE: the slots offered to the peer */
	struct ibv_mr *smr, *rmr, *tmr;

	/* riomap: the peer's slots (remote_iomap), ours in them */
	struct rs_sge remote_iomap;
	struct rs_iomap_mr *iomaps; /* remote_iomap.length entries, made on first use */
	int iomap_pending;

	/* sending */
	uint16_t sseq_no, sseq_comp;
	int sqe_avail;
	uint32_t sbuf_bytes_avail;
	uint32_t olen; /* the next WRITE's size while writes are in flight (grows from RS_OLAP_START_SIZE) */
	uint64_t ssgl_addr; /* the next free byte of sbuf (a ring) */
	int target_sge;
	unsigned ctrl_seqno, ctrl_max_seqno;
	struct rs_sge remote_sgl; /* the peer's target SGL */
	int remote_sge;
	int swap_sgl; /* the peer's byte order differs */

	/* receiving */
	uint16_t rseq_no, rseq_comp;
	uint32_t rbuf_bytes_avail, rbuf_free_offset, rbuf_offset;
	struct rs_rmsg *rmsg; /* rq_size + 1 entries */
	uint32_t rdata_pending; /* the bytes of rmsg's entries: received, not yet read */
	int rmsg_head, rmsg_tail;
};

/* ---- the table (rsocket_table.c) ---- */
/* The rsocket of descriptor fd, or NULL for an ordinary one (or a number
 * out of range). Lock-free: safe beside rs_insert and rs_remove. */
struct rsocket *rs_lookup(int fd);
/* Enters rs under rs->fd: 0, or an errno (EBADF: out of range; EEXIST: the
 * number is taken; ENOMEM). */
int rs_insert(struct rsocket *rs);
/* Removes rs from the table (its number may then be reused). */
void rs_remove(struct rsocket *rs);
/* How many rsockets the table holds: 0 lets rpoll and rselect hand their
 * arguments to the kernel untouched. */
int rs_count(void);

/* ---- connections (rsocket_conn.c) ---- */
/* A new stream rsocket (not in the table): NULL with errno. */
struct rsocket *rs_new(int domain, int fs_flags, int fd_flags, const struct rsocket *inherit);
/* Frees rs and everything it holds (after rs_remove). */
void rs_free(struct rsocket *rs);
/* One step of a connection under way (rs->mu held): 0 once connected, -1
 * with EINPROGRESS while it waits (nonblock), another errno on failure. */
int rs_connect_step(struct rsocket *rs, int nonblock);
/* raccept's work on a listener: -1 with errno, or the new descriptor. */
int rs_accept(struct rsocket *rs, int nonblock);
/* Takes CM events of a connected rsocket (DISCONNECTED), without waiting; rs->mu held. */
void rs_cm_events(struct rsocket *rs);

/* ---- data (rsocket_data.c) ---- */
/* Processes completions and credits without waiting; rs->mu held. */
void rs_progress(struct rsocket *rs);
/* Waits (rs->mu released meanwhile) until test(rs) or the connection ends:
 * 0, or -1 with errno (EWOULDBLOCK when nonblock). rs->mu held. */
int rs_wait(struct rsocket *rs, int nonblock, int (*test)(struct rsocket *rs));
int rs_can_send(struct rsocket *rs);
/* rs_can_send, or the sending side is shut. */
int rs_conn_can_send(struct rsocket *rs);
int rs_have_rdata(struct rsocket *rs);
ssize_t rs_send(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags);
ssize_t rs_recv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags);
int rs_shutdown(struct rsocket *rs, int how);
/* Posts the receives of a new connection; 0 or errno. */
int rs_post_recvs(struct rsocket *rs);
/* Arms the CQ's notification (for rpoll); rs->mu held. */
void rs_arm(struct rsocket *rs);
/* Takes the CQ channel's events without waiting; rs->mu held. */
void rs_take_cq_events(struct rsocket *rs);
/* Copies len bytes into the send buffer's ring and describes them in sg
 * (one or two entries, returned); rs->mu held, the room checked. */
int rs_sbuf_put(struct rsocket *rs, const struct iovec **iov, size_t *off, uint32_t len, struct ibv_sge sg[2]);

/* SO_KEEPALIVE: sends the probe that is due (a 0-byte RDMA WRITE, as
 * rdma-core's), ends the connection (ETIMEDOUT) when one is not
 * acknowledged in time, and returns the milliseconds until it must look
 * again, for a wait to wake then; -1 when rs sends none (off, or not
 * connected). rs->mu held. */
int rs_keepalive(struct rsocket *rs);
/* The default TCP_KEEPIDLE: the kernel's tcp_keepalive_time, as rdma-core's. */
int rs_default_keepidle(void);

/* Copies len bytes between an iovec at (*iov, *off) and a buffer, advancing it. */
void rs_iov_gather(uint8_t *dst, const struct iovec **iov, size_t *off, size_t len);
void rs_iov_scatter(const struct iovec **iov, size_t *off, const uint8_t *src, size_t len);
size_t rs_iov_total(const struct iovec *iov, int iovcnt);

/* ---- datagrams (rsocket_dgram.c) ---- */
/* A new datagram rsocket (not in the table): NULL with errno. */
struct rsocket *ds_new(int domain, int fs_flags, int fd_flags);
/* Frees a datagram rsocket and everything it holds (after rs_remove). */
void ds_free(struct rsocket *rs);
/* The calls on a datagram rsocket; rs->mu held. */
int ds_bind(struct rsocket *rs, const struct sockaddr *addr, socklen_t len);
int ds_connect(struct rsocket *rs, const struct sockaddr *addr, socklen_t len);
ssize_t ds_send(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags, const struct sockaddr *dst,
		socklen_t dlen);
ssize_t ds_recv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags, struct sockaddr *src,
		socklen_t *slen);
int ds_shutdown(struct rsocket *rs, int how);
/* rpoll's view: the events of rs among events, after taking what arrived. */
short ds_revents(struct rsocket *rs, short events);
/* Arms the CQs; the descriptor that is readable once one has a completion, or -1. */
int ds_arm(struct rsocket *rs);
/* Takes the CQ channels' events without waiting. */
void ds_take_cq_events(struct rsocket *rs);
/* Whether the endpoint (QP buffers) is made: options that size it are set before. */
int ds_ready(const struct rsocket *rs);

/* ---- riomap (rsocket_iomap.c) ---- */
/* Writes the riomaps not yet sent into the peer's slots: 0 or -1 with errno; rs->mu held. */
int rs_send_iomaps(struct rsocket *rs, int nonblock);
/* Deregisters every riomap of rs. */
void rs_free_iomaps(struct rsocket *rs);
int rs_value_to_scale(int value, int bits);
int rs_scale_to_value(int value, int bits);

#endif
