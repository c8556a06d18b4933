/*
 * rsocket_conn.c: a stream rsocket's life: its rdma_cm id and event
 * channel (whose descriptor is the rsocket's), the QP, CQ and registered
 * buffers of a connection, rdma-core's connection data (struct
 * rs_conn_data) both ways, rconnect's steps and raccept's. The library
 * starts no thread: a listener's requests are answered in raccept, a
 * connection's CM events are taken while its rsocket is used or polled
 * (rdma-core uses service threads for both; the wire is the same).
 */
#include "cma.h"
#include "rsocket.h"

#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define RS_CM_TIMEOUT_MS 2000

enum { STEP_ADDR, STEP_ROUTE, STEP_CONN };

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* The default size of a stream rsocket's send and receive buffers: each
 * connection registers both, and registered memory counts against the
 * process's RLIMIT_MEMLOCK (as with rdma-core over rdma_rxe), unless it
 * runs as root (the daemon, as the kernel for CAP_IPC_LOCK, does not hold
 * root to it). A process that may lock without limit gets RS_BIG_MEM
 * (fewer credit round trips: docs/design/rsockets.md, "Performance"); one
 * with a limit gets what leaves room for 32 connections, between
 * rdma-core's RS_DEF_MEM and RS_BIG_MEM. */
static uint32_t rs_default_mem(void)
{
	static _Atomic uint32_t cached;
	uint32_t v = atomic_load(&cached);
	if (v)
		return v;
	struct rlimit rl;
	v = RS_DEF_MEM;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY || geteuid() == 0) {
			v = RS_BIG_MEM;
		} else {
			while (v < RS_BIG_MEM && (rlim_t)v * 2 * 2 * 32 <= rl.rlim_cur)
				v <<= 1;
		}
	}
	atomic_store(&cached, v);
	return v;
}

struct rsocket *rs_new(int domain, int fs_flags, int fd_flags, const struct rsocket *inherit)
{
	(void)domain;
	struct rsocket *rs = calloc(1, sizeof(*rs));
	if (!rs) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&rs->mu, NULL);
	rs->fd = -1;
	rs->fs_flags = fs_flags;
	rs->fd_flags = fd_flags;
	if (inherit) {
		rs->sq_size = inherit->sq_size, rs->rq_size = inherit->rq_size;
		rs->sq_inline = inherit->sq_inline;
		rs->sbuf_size = inherit->sbuf_size, rs->rbuf_size = inherit->rbuf_size;
		rs->sbuf_set = inherit->sbuf_set, rs->rbuf_set = inherit->rbuf_set;
		rs->nodelay = inherit->nodelay, rs->keepalive = inherit->keepalive;
		rs->keepidle = inherit->keepidle;
		rs->target_iomap_size = inherit->target_iomap_size;
	} else {
		rs->sq_size = rs->rq_size = RS_DEF_QSIZE;
		rs->sq_inline = RS_DEF_INLINE;
		rs->sbuf_size = rs->rbuf_size = rs_default_mem();
	}
	rs->ctrl_max_seqno = RS_QP_CTRL_SIZE;
	rs->ch = rdma_create_event_channel();
	if (!rs->ch || set_nonblock(rs->ch->fd) < 0) {
		int e = errno;
		if (rs->ch)
			rdma_destroy_event_channel(rs->ch);
		pthread_mutex_destroy(&rs->mu);
		free(rs);
		errno = e;
		return NULL;
	}
	rs->fd = rs->ch->fd;
	return rs;
}

void rs_free(struct rsocket *rs)
{
	if (rs->dg) {
		ds_free(rs);
		return;
	}
	if (rs->id) {
		if (rs->id->qp)
			rdma_destroy_qp(rs->id);
		rdma_destroy_id(rs->id);
	}
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->tmr)
		ibv_dereg_mr(rs->tmr);
	rs_free_iomaps(rs);
	if (rs->cq) {
		rs_take_cq_events(rs);
		if (rs->unacked_cqe)
			ibv_ack_cq_events(rs->cq, rs->unacked_cqe);
		ibv_destroy_cq(rs->cq);
	}
	if (rs->cch)
		ibv_destroy_comp_channel(rs->cch);
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	free(rs->sbuf);
	free(rs->rbuf);
	free((void *)rs->target_sgl);
	free(rs->rmsg);
	pthread_mutex_destroy(&rs->mu);
	free(rs);
}

/* A page-aligned zeroed buffer, or NULL. */
static void *rs_alloc_buf(size_t len)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, len ? len : 1) != 0)
		return NULL;
	memset(p, 0, len);
	return p;
}

static uint32_t clamp_qsize(uint32_t v, uint32_t max)
{
	if (max > RS_QP_MAX_SIZE)
		max = RS_QP_MAX_SIZE;
	if (v > max)
		v = max;
	if (v < RS_QP_MIN_SIZE)
		v = RS_QP_MIN_SIZE;
	return v;
}

/* Frees what rs_alloc_bufs made (or part of it). */
static void rs_free_bufs(struct rsocket *rs)
{
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->tmr)
		ibv_dereg_mr(rs->tmr);
	free(rs->sbuf);
	free(rs->rbuf);
	free((void *)rs->target_sgl);
	free(rs->rmsg);
	rs->smr = rs->rmr = rs->tmr = NULL;
	rs->sbuf = rs->rbuf = NULL;
	rs->target_sgl = NULL;
	rs->target_iomap = NULL;
	rs->rmsg = NULL;
}

/* The send and receive buffers, the target SGL and their registrations:
 * 0, or -1 with errno (what was made is left for rs_free_bufs). */
static int rs_alloc_bufs(struct rsocket *rs)
{
	struct rdma_cm_id *id = rs->id;
	size_t sbuf_total = rs->sbuf_size + sizeof(struct rs_sge) * RS_QP_CTRL_SIZE;
	rs->sbuf = rs_alloc_buf(sbuf_total);
	rs->rbuf = rs_alloc_buf(rs->rbuf_size);
	size_t tlen = sizeof(struct rs_sge) * RS_SGL_SIZE + sizeof(struct rs_iomap) * rs->target_iomap_size;
	rs->target_sgl = rs_alloc_buf(tlen);
	if (rs->target_sgl)
		rs->target_iomap = (volatile struct rs_iomap *)(rs->target_sgl + RS_SGL_SIZE);
	rs->rmsg = calloc(rs->rq_size + 1, sizeof(*rs->rmsg));
	if (!rs->sbuf || !rs->rbuf || !rs->target_sgl || !rs->rmsg) {
		errno = ENOMEM;
		return -1;
	}
	rs->smr = ibv_reg_mr(id->pd, rs->sbuf, sbuf_total, IBV_ACCESS_LOCAL_WRITE);
	if (!rs->smr)
		return -1;
	rs->rmr = ibv_reg_mr(id->pd, rs->rbuf, rs->rbuf_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rs->rmr)
		return -1;
	rs->tmr = ibv_reg_mr(id->pd, (void *)rs->target_sgl, tlen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rs->tmr)
		return -1;
	return 0;
}

/* The QP, CQ, buffers and receives of a connection: 0 or -1 with errno. */
static int rs_create_ep(struct rsocket *rs)
{
	struct rdma_cm_id *id = rs->id;
	struct ibv_device_attr da;
	uint32_t max = RS_QP_MAX_SIZE;
	if (ibv_query_device(id->verbs, &da) == 0 && da.max_qp_wr > 0)
		max = (uint32_t)da.max_qp_wr;
	rs->sq_size = clamp_qsize(rs->sq_size, max);
	rs->rq_size = clamp_qsize(rs->rq_size, max);
	if (rs->sbuf_size < 2 * RS_SNDLOWAT)
		rs->sbuf_size = 2 * RS_SNDLOWAT;
	if (rs->rbuf_size < 2 * RS_SNDLOWAT)
		rs->rbuf_size = 2 * RS_SNDLOWAT;
	if (rs->rbuf_size > (1u << 28))
		rs->rbuf_size = 1u << 28; /* a length fits the immediate's 29 bits */
	if (rs->sbuf_size > (1u << 28))
		rs->sbuf_size = 1u << 28;

	rs->cch = ibv_create_comp_channel(id->verbs);
	if (!rs->cch || set_nonblock(rs->cch->fd) < 0)
		return -1;
	rs->cq = ibv_create_cq(id->verbs, (int)(rs->sq_size + rs->rq_size), rs, rs->cch, 0);
	if (!rs->cq)
		return -1;

	struct ibv_qp_init_attr qa = {
		.qp_context = rs,
		.send_cq = rs->cq,
		.recv_cq = rs->cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {.max_send_wr = rs->sq_size, .max_recv_wr = rs->rq_size, .max_send_sge = 2, .max_recv_sge = 1,
			.max_inline_data = rs->sq_inline},
	};
	if (rdma_create_qp(id, NULL, &qa) != 0) {
		/* A device with less inline data than asked: without it. */
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(id, NULL, &qa) != 0)
			return -1;
	}
	rs->sq_inline = qa.cap.max_inline_data;

	if (rs_alloc_bufs(rs) != 0) {
		/* Buffers larger than rdma-core's by our own default, refused
		 * (RLIMIT_MEMLOCK): rdma-core's size, as its rsockets have. */
		int e = errno, retry = 0;
		if (!rs->sbuf_set && rs->sbuf_size > RS_DEF_MEM)
			rs->sbuf_size = RS_DEF_MEM, retry = 1;
		if (!rs->rbuf_set && rs->rbuf_size > RS_DEF_MEM)
			rs->rbuf_size = RS_DEF_MEM, retry = 1;
		rs_free_bufs(rs);
		if (!retry) {
			errno = e;
			return -1;
		}
		vrdma_debug("rsocket %d: its buffers could not be registered (%s): %u bytes each instead", rs->fd,
			    strerror(e), RS_DEF_MEM);
		if (rs_alloc_bufs(rs) != 0)
			return -1;
	}

	rs->ssgl_addr = (uintptr_t)rs->sbuf;
	rs->sbuf_bytes_avail = rs->sbuf_size;
	rs->rbuf_free_offset = rs->rbuf_size >> 1;
	rs->rbuf_bytes_avail = rs->rbuf_size >> 1;
	rs->sqe_avail = (int)(rs->sq_size - rs->ctrl_max_seqno);
	rs->rseq_comp = (uint16_t)(rs->rq_size >> 1);
	int e = rs_post_recvs(rs);
	if (e) {
		errno = e;
		return -1;
	}
	ibv_req_notify_cq(rs->cq, 0);
	rs->cq_armed = 1;
	return 0;
}

static int host_is_net(void)
{
	return __BYTE_ORDER == __BIG_ENDIAN;
}

static void rs_format_conn_data(struct rsocket *rs, struct rs_conn_data *c)
{
	memset(c, 0, sizeof(*c));
	c->version = 1;
	c->flags = RS_CONN_FLAG_IOMAP | (host_is_net() ? RS_CONN_FLAG_NET : 0);
	c->credits = htobe16((uint16_t)rs->rq_size);
	c->target_iomap_size = (uint8_t)rs_value_to_scale((int)rs->target_iomap_size, 8);
	c->target_sgl.addr = htobe64((uintptr_t)rs->target_sgl);
	c->target_sgl.key = htobe32(rs->tmr->rkey);
	c->target_sgl.length = htobe32(RS_SGL_SIZE);
	c->data_buf.addr = htobe64((uintptr_t)rs->rbuf);
	c->data_buf.key = htobe32(rs->rmr->rkey);
	c->data_buf.length = htobe32(rs->rbuf_size >> 1);
}

/* Takes the peer's connection data (len bytes from the wire): 0, or an
 * errno when it is not rdma-core's version 1 or is malformed. */
static int rs_save_conn_data(struct rsocket *rs, const void *data, size_t len)
{
	struct rs_conn_data c;
	if (!data || len < sizeof(c))
		return EPROTO;
	memcpy(&c, data, sizeof(c));
	if (c.version != 1)
		return ENOTSUP;
	rs->remote_sgl.addr = be64toh(c.target_sgl.addr);
	rs->remote_sgl.key = be32toh(c.target_sgl.key);
	rs->remote_sgl.length = be32toh(c.target_sgl.length);
	if (rs->remote_sgl.length == 0)
		return EPROTO; /* no entry to write SGL updates to */
	rs->remote_sge = 1;
	rs->swap_sgl = (host_is_net() != !!(c.flags & RS_CONN_FLAG_NET));
	if (c.flags & RS_CONN_FLAG_IOMAP) { /* the peer's iomap slots follow its target SGL */
		rs->remote_iomap.addr = rs->remote_sgl.addr + sizeof(struct rs_sge) * rs->remote_sgl.length;
		rs->remote_iomap.length = (uint32_t)rs_scale_to_value(c.target_iomap_size, 8);
		rs->remote_iomap.key = rs->remote_sgl.key;
	}
	struct rs_sge first = {be64toh(c.data_buf.addr), be32toh(c.data_buf.key), be32toh(c.data_buf.length)};
	rs->target_sgl[0] = first;
	rs->sseq_comp = be16toh(c.credits);
	return 0;
}

/* The next CM event of rs's channel, acked, with its type, status and
 * private data copied (pd: 40 bytes at most, *pdlen its length). 0, or -1
 * with errno (EAGAIN: none yet and nonblock). rs->mu held; released while
 * it waits. */
static int rs_next_event(struct rsocket *rs, int nonblock, enum rdma_cm_event_type *type, int *status,
			 struct rdma_cm_id **evid, struct rdma_conn_param *param, struct rs_conn_data *pd,
			 size_t *pdlen)
{
	for (;;) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(rs->ch, &ev) == 0) {
			*type = ev->event;
			*status = ev->status;
			if (evid)
				*evid = ev->id;
			if (param)
				*param = ev->param.conn;
			if (pd && pdlen) {
				size_t n = ev->param.conn.private_data ? ev->param.conn.private_data_len : 0;
				if (n > sizeof(*pd))
					n = sizeof(*pd);
				if (n)
					memcpy(pd, ev->param.conn.private_data, n);
				*pdlen = n;
			}
			rdma_ack_cm_event(ev);
			return 0;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if (nonblock) {
			errno = EAGAIN;
			return -1;
		}
		struct pollfd p = {.fd = rs->fd, .events = POLLIN};
		pthread_mutex_unlock(&rs->mu);
		(void)poll(&p, 1, -1);
		pthread_mutex_lock(&rs->mu);
	}
}

/* The errno of a failed CM step. */
static int cm_errno(enum rdma_cm_event_type t, int status)
{
	switch (t) {
	case RDMA_CM_EVENT_REJECTED:
		return ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return status < 0 && -status < 4096 ? -status : EHOSTUNREACH;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return status < 0 && -status < 4096 ? -status : ETIMEDOUT;
	default:
		return ECONNREFUSED;
	}
}

int rs_connect_step(struct rsocket *rs, int nonblock)
{
	while (rs->state == RS_CONNECTING) {
		enum rdma_cm_event_type t;
		int status, e = 0;
		struct rs_conn_data pd;
		size_t pdlen = 0;
		if (rs_next_event(rs, nonblock, &t, &status, NULL, NULL, &pd, &pdlen) != 0) {
			if (errno == EAGAIN) {
				errno = EINPROGRESS;
				return -1;
			}
			e = errno;
			goto fail;
		}
		switch (t) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(rs->id, RS_CM_TIMEOUT_MS) != 0) {
				e = errno;
				goto fail;
			}
			rs->cm_step = STEP_ROUTE;
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED: {
			if (rs_create_ep(rs) != 0) {
				e = errno;
				goto fail;
			}
			struct rs_conn_data c;
			rs_format_conn_data(rs, &c);
			struct rdma_conn_param p = {.private_data = &c,
						    .private_data_len = sizeof(c),
						    .responder_resources = 0,
						    .initiator_depth = 0,
						    .flow_control = 1,
						    .retry_count = 7,
						    .rnr_retry_count = 7};
			if (rdma_connect(rs->id, &p) != 0) {
				e = errno;
				goto fail;
			}
			rs->cm_step = STEP_CONN;
			break;
		}
		case RDMA_CM_EVENT_ESTABLISHED:
			e = rs_save_conn_data(rs, &pd, pdlen);
			if (e) {
				rdma_disconnect(rs->id);
				goto fail;
			}
			rs->state = RS_CONNECTED;
			rs->readable = rs->writable = 1;
			return 0;
		case RDMA_CM_EVENT_ADDR_ERROR:
		case RDMA_CM_EVENT_ROUTE_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_REJECTED:
			e = cm_errno(t, status);
			goto fail;
		default:
			break; /* not for this step */
		}
		continue;
	fail:
		rs->state = RS_CONNECT_ERROR;
		rs->err = e ? e : ECONNREFUSED;
		errno = rs->err;
		return -1;
	}
	if (rs->state == RS_CONNECTED)
		return 0;
	errno = rs->err ? rs->err : ENOTCONN;
	return -1;
}

int rs_accept(struct rsocket *ls, int nonblock)
{
	for (;;) {
		enum rdma_cm_event_type t;
		int status;
		struct rdma_cm_id *child = NULL;
		struct rdma_conn_param req;
		struct rs_conn_data pd;
		size_t pdlen = 0;
		if (rs_next_event(ls, nonblock, &t, &status, &child, &req, &pd, &pdlen) != 0)
			return -1;
		if (t != RDMA_CM_EVENT_CONNECT_REQUEST)
			continue;
		struct rsocket *rs = rs_new(AF_INET, ls->fs_flags, ls->fd_flags, ls);
		if (!rs) {
			rdma_reject(child, NULL, 0);
			rdma_destroy_id(child);
			return -1;
		}
		int e = 0;
		if (rdma_migrate_id(child, rs->ch) != 0) {
			e = errno;
			rdma_reject(child, NULL, 0);
			rdma_destroy_id(child);
			rs_free(rs);
			errno = e;
			return -1;
		}
		rs->id = child;
		child->context = rs;
		pthread_mutex_lock(&rs->mu);
		if (pdlen < sizeof(pd) || pd.version != 1)
			e = pdlen < sizeof(pd) ? EPROTO : ENOTSUP; /* not rdma-core's rsocket */
		if (e == 0 && rs_create_ep(rs) != 0)
			e = errno;
		if (e == 0)
			e = rs_save_conn_data(rs, &pd, pdlen);
		if (e == 0) {
			struct rs_conn_data c;
			rs_format_conn_data(rs, &c);
			struct rdma_conn_param p = req;
			p.private_data = &c;
			p.private_data_len = sizeof(c);
			if (rdma_accept(child, &p) != 0)
				e = errno;
		}
		while (e == 0) {
			int st;
			if (rs_next_event(rs, 0, &t, &st, NULL, NULL, NULL, NULL) != 0) {
				e = errno;
				break;
			}
			if (t == RDMA_CM_EVENT_ESTABLISHED)
				break;
			if (t == RDMA_CM_EVENT_REJECTED || t == RDMA_CM_EVENT_UNREACHABLE ||
			    t == RDMA_CM_EVENT_CONNECT_ERROR || t == RDMA_CM_EVENT_DISCONNECTED)
				e = ECONNABORTED;
		}
		if (e == 0) {
			rs->state = RS_CONNECTED;
			rs->readable = rs->writable = 1;
			e = rs_insert(rs);
		}
		pthread_mutex_unlock(&rs->mu);
		if (e) {
			vrdma_debug("raccept: a connection request failed: %s", strerror(e));
			if (e != ECONNABORTED)
				rdma_reject(child, NULL, 0);
			rs_free(rs);
			errno = e;
			return -1;
		}
		return rs->fd;
	}
}

void rs_cm_events(struct rsocket *rs)
{
	enum rdma_cm_event_type t;
	int status;
	while (rs_next_event(rs, 1, &t, &status, NULL, NULL, NULL, NULL) == 0) {
		if (t == RDMA_CM_EVENT_DISCONNECTED || t == RDMA_CM_EVENT_DEVICE_REMOVAL) {
			rs->draining = 0; /* the peer's QP is gone: nothing more goes out */
			if (rs->state == RS_CONNECTED) {
				rs->state = RS_DISCONNECTED;
				rs->readable = rs->writable = 0;
			}
		}
	}
}
