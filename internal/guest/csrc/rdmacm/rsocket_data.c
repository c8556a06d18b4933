/*
 * rsocket_data.c: a connected stream rsocket's data, on rdma-core's wire
 * (docs/design/rsockets.md): RDMA WRITE WITH IMMEDIATE into the peer's
 * receive buffer, the immediate saying how much; credits and SGL updates
 * as the application reads; control messages for shutdown. The peer is
 * another process, perhaps another host: what its messages claim (a
 * length, a credit) is checked before it is believed.
 */
#include "cma.h"
#include "rsocket.h"

#include <byteswap.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define RS_WR_RECV (1ULL << 63)

static int rs_post_recv(struct rsocket *rs)
{
	struct ibv_recv_wr wr = {.wr_id = RS_WR_RECV, .sg_list = NULL, .num_sge = 0}, *bad;
	return ibv_post_recv(rs->id->qp, &wr, &bad);
}

int rs_post_recvs(struct rsocket *rs)
{
	for (uint32_t i = 0; i < rs->rq_size; i++) {
		int e = rs_post_recv(rs);
		if (e)
			return e;
	}
	return 0;
}

/* A message alone: an RDMA WRITE WITH IMMEDIATE of nothing. */
static int rs_post_msg(struct rsocket *rs, uint32_t msg)
{
	struct ibv_send_wr wr = {.wr_id = msg, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .imm_data = htobe32(msg)}, *bad;
	return ibv_post_send(rs->id->qp, &wr, &bad);
}

static int rs_post_write_msg(struct rsocket *rs, struct ibv_sge *sgl, int nsge, uint32_t msg, int flags, uint64_t addr,
			     uint32_t rkey)
{
	struct ibv_send_wr wr = {.wr_id = msg,
				 .sg_list = sgl,
				 .num_sge = nsge,
				 .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				 .send_flags = (unsigned)flags,
				 .imm_data = htobe32(msg)},
			   *bad;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(rs->id->qp, &wr, &bad);
}

static int rs_write_data(struct rsocket *rs, struct ibv_sge *sgl, int nsge, uint32_t length, int flags)
{
	rs->sseq_no++;
	rs->sqe_avail--;
	rs->sbuf_bytes_avail -= length;
	volatile struct rs_sge *t = &rs->target_sgl[rs->target_sge];
	uint64_t addr = t->addr;
	uint32_t rkey = t->key;
	t->addr += length;
	t->length -= length;
	if (t->length == 0 && ++rs->target_sge == RS_SGL_SIZE)
		rs->target_sge = 0;
	return rs_post_write_msg(rs, sgl, nsge, rs_msg_set(RS_OP_DATA, length), flags, addr, rkey);
}

static int rs_ctrl_avail(struct rsocket *rs)
{
	return rs->ctrl_seqno != rs->ctrl_max_seqno;
}

static int64_t rs_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rs_default_keepidle(void)
{
	int v = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_keepalive_time", "re");
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v > 0 ? v : 7200;
}

/* A probe is a 0-byte RDMA WRITE without immediate data: nothing for the
 * peer's application or receive queue, but the peer's QP must acknowledge
 * it. rdma-core counts on the QP's retries to fail a probe to a peer that
 * is gone; a vrdma QP connected through rdma_cm retries for ever (retry
 * count 7, docs/design/transport.md), so here a probe not acknowledged
 * within RS_KA_DEAD_MS (at least two periods) ends the connection. A
 * probe takes a control slot, as credits do; one is out at a time. */
#define RS_KA_DEAD_MS 10000
int rs_keepalive(struct rsocket *rs)
{
	if (!rs->keepalive || rs->state != RS_CONNECTED || !rs->id || !rs->id->qp)
		return -1;
	int64_t now = rs_now_ms(), period = (int64_t)(rs->keepidle > 0 ? rs->keepidle : rs_default_keepidle()) * 1000;
	int64_t dead = 2 * period > RS_KA_DEAD_MS ? 2 * period : RS_KA_DEAD_MS;
	if (rs->ka_sent && now - rs->ka_sent >= dead) {
		vrdma_debug("rsocket %d: a keepalive probe was not acknowledged in %lld s: the peer is gone (ETIMEDOUT)",
			    rs->fd, (long long)(dead / 1000));
		rs->state = RS_ERROR;
		rs->readable = rs->writable = 0;
		rs->err = ETIMEDOUT;
		rdma_disconnect(rs->id);
		return -1;
	}
	if (!rs->ka_next || rs->ka_next > now + period)
		rs->ka_next = now + period;
	if (now >= rs->ka_next) {
		if (!rs->ka_sent && rs_ctrl_avail(rs)) {
			struct ibv_send_wr wr = {.wr_id = rs_msg_set(RS_OP_CTRL, RS_CTRL_KEEPALIVE), .opcode = IBV_WR_RDMA_WRITE},
					   *bad;
			if (ibv_post_send(rs->id->qp, &wr, &bad) == 0) {
				rs->ctrl_seqno++;
				rs->ka_sent = now;
			}
		}
		rs->ka_next = now + period;
	}
	int64_t left = rs->ka_next - now;
	if (rs->ka_sent && rs->ka_sent + dead - now < left)
		left = rs->ka_sent + dead - now;
	return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

/* Grants credits: the receives freed, and half the receive buffer when it
 * is free again (written into the peer's target SGL first). */
static void rs_send_credits(struct rsocket *rs)
{
	rs->ctrl_seqno++;
	rs->rseq_comp = (uint16_t)(rs->rseq_no + (rs->rq_size >> 1));
	uint32_t credit = (uint16_t)(rs->rseq_no + rs->rq_size);
	if (rs->rbuf_bytes_avail >= (rs->rbuf_size >> 1)) {
		struct rs_sge sge = {(uintptr_t)&rs->rbuf[rs->rbuf_free_offset], rs->rmr->rkey, rs->rbuf_size >> 1};
		if (rs->swap_sgl) {
			sge.addr = bswap_64(sge.addr);
			sge.key = bswap_32(sge.key);
			sge.length = bswap_32(sge.length);
		}
		/* From a control slot of the send buffer: no inline needed. */
		struct rs_sge *slot = (struct rs_sge *)(rs->sbuf + rs->sbuf_size) + (rs->ctrl_seqno & (RS_QP_CTRL_SIZE - 1));
		memcpy(slot, &sge, sizeof(sge));
		struct ibv_sge ib = {(uintptr_t)slot, sizeof(sge), rs->smr->lkey};
		(void)rs_post_write_msg(rs, &ib, 1, rs_msg_set(RS_OP_SGL, credit), 0,
					rs->remote_sgl.addr + (uint64_t)rs->remote_sge * sizeof(struct rs_sge),
					rs->remote_sgl.key);
		rs->rbuf_bytes_avail -= rs->rbuf_size >> 1;
		rs->rbuf_free_offset += rs->rbuf_size >> 1;
		if (rs->rbuf_free_offset >= rs->rbuf_size)
			rs->rbuf_free_offset = 0;
		if (++rs->remote_sge == (int)rs->remote_sgl.length)
			rs->remote_sge = 0;
	} else {
		(void)rs_post_msg(rs, rs_msg_set(RS_OP_SGL, credit));
	}
}

static void rs_update_credits(struct rsocket *rs)
{
	if (rs->state != RS_CONNECTED || !rs_ctrl_avail(rs))
		return;
	if (rs->rbuf_bytes_avail >= (rs->rbuf_size >> 1) || (int16_t)(rs->rseq_no - rs->rseq_comp) >= 0)
		rs_send_credits(rs);
}

static void rs_protocol_error(struct rsocket *rs, const char *what, uint32_t v)
{
	vrdma_debug("rsocket %d: the peer broke the rsocket protocol (%s %u): the connection is closed", rs->fd, what,
		    v);
	rs->state = RS_ERROR;
	rs->readable = rs->writable = 0;
	rs->err = EPROTO;
	rs->rmsg_head = rs->rmsg_tail; /* what it claimed to have sent is not believed either */
	rs->rdata_pending = 0;
	rdma_disconnect(rs->id);
}

/* Takes the completions there are; 0 or an errno. */
static int rs_poll_cq(struct rsocket *rs)
{
	struct ibv_wc wc;
	int ret, rcnt = 0;
	while ((ret = ibv_poll_cq(rs->cq, 1, &wc)) > 0) {
		if (wc.wr_id & RS_WR_RECV) {
			if (wc.status != IBV_WC_SUCCESS)
				continue;
			rcnt++;
			if (!(wc.wc_flags & IBV_WC_WITH_IMM)) {
				rs_protocol_error(rs, "a receive without immediate data", wc.opcode);
				return 0;
			}
			uint32_t msg = be32toh(wc.imm_data);
			switch (rs_msg_op(msg)) {
			case RS_OP_SGL:
				rs->sseq_comp = (uint16_t)rs_msg_data(msg);
				break;
			case RS_OP_IOMAP_SGL:
				break; /* no iomap area was offered: nothing was written */
			case RS_OP_CTRL:
				if (rs_msg_data(msg) == RS_CTRL_DISCONNECT) {
					rs->state = RS_DISCONNECTED;
					rs->readable = rs->writable = 0;
					rs->draining = 0; /* the peer reads no more */
					return 0;
				} else if (rs_msg_data(msg) == RS_CTRL_SHUTDOWN) {
					if (rs->writable) {
						rs->readable = 0;
					} else {
						/* Both sides shut: the end, as rdma-core's,
						 * but what we sent last may still be on its
						 * way to a peer that reads it (rs->draining). */
						rs->state = RS_DISCONNECTED;
						rs->readable = 0;
						rs->draining = 1;
						return 0;
					}
				}
				break;
			case RS_OP_DATA: {
				uint32_t len = rs_msg_data(msg);
				/* What was written lies in the buffer granted: at most half of it at once, all of it unread. */
				if (len > (rs->rbuf_size >> 1) || rs->rdata_pending + len > rs->rbuf_size) {
					rs_protocol_error(rs, "a write beyond the receive buffer, bytes", len);
					return 0;
				}
				int next = (rs->rmsg_tail + 1) % (int)(rs->rq_size + 1);
				if (next == rs->rmsg_head) {
					rs_protocol_error(rs, "more messages than receives granted", rs->rq_size);
					return 0;
				}
				rs->rmsg[rs->rmsg_tail].op = RS_OP_DATA;
				rs->rmsg[rs->rmsg_tail].data = len;
				rs->rmsg_tail = next;
				rs->rdata_pending += len;
				break;
			}
			default:
				rs_protocol_error(rs, "an unknown operation", rs_msg_op(msg));
				return 0;
			}
		} else {
			uint32_t msg = (uint32_t)wc.wr_id;
			switch (rs_msg_op(msg)) {
			case RS_OP_SGL:
				rs->ctrl_max_seqno++;
				break;
			case RS_OP_IOMAP_SGL:
				rs->sqe_avail++;
				rs->sbuf_bytes_avail += sizeof(struct rs_iomap);
				break;
			case RS_OP_CTRL:
				rs->ctrl_max_seqno++;
				if (rs_msg_data(msg) == RS_CTRL_KEEPALIVE)
					rs->ka_sent = 0; /* acknowledged (or failed: below) */
				if (rs_msg_data(msg) == RS_CTRL_DISCONNECT) {
					rs->state = RS_DISCONNECTED;
					rs->readable = rs->writable = 0;
				}
				break;
			default:
				rs->sqe_avail++;
				rs->sbuf_bytes_avail += rs_msg_data(msg);
				break;
			}
			if (wc.status != IBV_WC_SUCCESS)
				rs->draining = 0; /* the rest fails too */
			if (wc.status != IBV_WC_SUCCESS && rs->state == RS_CONNECTED) {
				/* A peer that no longer answers (a keepalive probe's
				 * retries exceeded): ETIMEDOUT, as TCP's keepalive. */
				vrdma_debug("rsocket %d: a send failed (%s): the connection is lost", rs->fd,
					    ibv_wc_status_str(wc.status));
				rs->state = RS_ERROR;
				rs->readable = rs->writable = 0;
				rs->err = wc.status == IBV_WC_RETRY_EXC_ERR ? ETIMEDOUT : EIO;
			}
		}
	}
	if (rs->state == RS_CONNECTED) {
		int e = 0;
		while (!e && rcnt--)
			e = rs_post_recv(rs);
		if (e) {
			rs->state = RS_ERROR;
			rs->readable = rs->writable = 0;
			rs->err = e;
		}
	}
	return ret < 0 ? EIO : 0;
}

void rs_progress(struct rsocket *rs)
{
	if (!rs->cq)
		return;
	rs_update_credits(rs);
	(void)rs_poll_cq(rs);
	rs_update_credits(rs);
}

void rs_take_cq_events(struct rsocket *rs)
{
	struct ibv_cq *cq;
	void *ctx;
	while (rs->cch && ibv_get_cq_event(rs->cch, &cq, &ctx) == 0) {
		rs->cq_armed = 0;
		if (++rs->unacked_cqe >= 64) {
			ibv_ack_cq_events(rs->cq, rs->unacked_cqe);
			rs->unacked_cqe = 0;
		}
	}
}

void rs_arm(struct rsocket *rs)
{
	if (rs->cq && !rs->cq_armed) {
		ibv_req_notify_cq(rs->cq, 0);
		rs->cq_armed = 1;
	}
}

int rs_can_send(struct rsocket *rs)
{
	return rs->sqe_avail > 0 && rs->sbuf_bytes_avail >= RS_SNDLOWAT && rs->sseq_no != rs->sseq_comp &&
	       rs->target_sgl[rs->target_sge].length != 0;
}

int rs_have_rdata(struct rsocket *rs)
{
	return rs->rmsg_head != rs->rmsg_tail;
}

int rs_conn_can_send(struct rsocket *rs)
{
	return rs_can_send(rs) || !rs->writable;
}

static int rs_conn_have_rdata(struct rsocket *rs)
{
	return rs_have_rdata(rs) || !rs->readable;
}

static int rs_conn_can_send_ctrl(struct rsocket *rs)
{
	return rs_ctrl_avail(rs) || rs->state != RS_CONNECTED;
}

/* Whether the QP still carries what was posted: connected, or ended by
 * both sides' shutdowns with the peer's QP still there (rs->draining). */
static int rs_qp_live(struct rsocket *rs)
{
	return rs->state == RS_CONNECTED || (rs->state == RS_DISCONNECTED && rs->draining);
}

static int rs_conn_all_sends_done(struct rsocket *rs)
{
	return ((int)rs->ctrl_max_seqno - (int)rs->ctrl_seqno) + rs->sqe_avail == (int)rs->sq_size ||
	       !rs_qp_live(rs);
}

int rs_wait(struct rsocket *rs, int nonblock, int (*test)(struct rsocket *rs))
{
	for (;;) {
		rs_progress(rs);
		if (test(rs))
			return 0;
		if (!rs_qp_live(rs)) {
			errno = rs->err ? rs->err : ECONNRESET;
			return -1;
		}
		if (nonblock) {
			errno = EWOULDBLOCK;
			return -1;
		}
		if (!rs->cq_armed) {
			rs_arm(rs);
			continue; /* what completed before the arm */
		}
		struct pollfd p[2] = {{.fd = rs->cch->fd, .events = POLLIN}, {.fd = rs->fd, .events = POLLIN}};
		int ka = rs_keepalive(rs); /* wake for the next probe */
		pthread_mutex_unlock(&rs->mu);
		(void)poll(p, 2, ka);
		pthread_mutex_lock(&rs->mu);
		rs_take_cq_events(rs);
		if (p[1].revents)
			rs_cm_events(rs);
	}
}

/* Copies len bytes from the iovec at (*iov, *off) to dst, advancing it. */
void rs_iov_gather(uint8_t *dst, const struct iovec **iov, size_t *off, size_t len)
{
	while (len) {
		size_t n = (*iov)->iov_len - *off;
		if (n > len)
			n = len;
		memcpy(dst, (const uint8_t *)(*iov)->iov_base + *off, n);
		dst += n, len -= n, *off += n;
		if (*off == (*iov)->iov_len)
			(*iov)++, *off = 0;
	}
}

void rs_iov_scatter(const struct iovec **iov, size_t *off, const uint8_t *src, size_t len)
{
	while (len) {
		size_t n = (*iov)->iov_len - *off;
		if (n > len)
			n = len;
		memcpy((uint8_t *)(*iov)->iov_base + *off, src, n);
		src += n, len -= n, *off += n;
		if (*off == (*iov)->iov_len)
			(*iov)++, *off = 0;
	}
}

size_t rs_iov_total(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;
	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

int rs_sbuf_put(struct rsocket *rs, const struct iovec **iov, size_t *off, uint32_t xfer, struct ibv_sge sg[2])
{
	uint32_t to_end = (uint32_t)((uintptr_t)rs->sbuf + rs->sbuf_size - rs->ssgl_addr);
	if (xfer <= to_end) {
		rs_iov_gather((uint8_t *)(uintptr_t)rs->ssgl_addr, iov, off, xfer);
		sg[0] = (struct ibv_sge){rs->ssgl_addr, xfer, rs->smr->lkey};
		rs->ssgl_addr = xfer < to_end ? rs->ssgl_addr + xfer : (uintptr_t)rs->sbuf;
		return 1;
	}
	rs_iov_gather((uint8_t *)(uintptr_t)rs->ssgl_addr, iov, off, to_end);
	rs_iov_gather(rs->sbuf, iov, off, xfer - to_end);
	sg[0] = (struct ibv_sge){rs->ssgl_addr, to_end, rs->smr->lkey};
	sg[1] = (struct ibv_sge){(uintptr_t)rs->sbuf, xfer - to_end, rs->smr->lkey};
	rs->ssgl_addr = (uintptr_t)rs->sbuf + (xfer - to_end);
	return 2;
}

ssize_t rs_send(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags)
{
	size_t len = rs_iov_total(iov, iovcnt), left = len, off = 0;
	int nonblock = (rs->fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
	int ret = 0;
	if (!rs->writable) {
		errno = rs->state == RS_CONNECTED ? EPIPE : (rs->err ? rs->err : ENOTCONN);
		return -1;
	}
	while (iovcnt > 0 && iov->iov_len == 0)
		iov++, iovcnt--;
	if (rs->iomap_pending && rs_send_iomaps(rs, nonblock) != 0)
		return -1;
	/* The first WRITE is small so that its bytes leave at once and the
	 * next ones are copied meanwhile; while earlier writes are still in
	 * flight (a stream) the size reached is kept. */
	if (rs->olen < RS_OLAP_START_SIZE || rs->sbuf_bytes_avail == rs->sbuf_size)
		rs->olen = RS_OLAP_START_SIZE;
	while (left) {
		if (!rs_can_send(rs)) {
			ret = rs_wait(rs, nonblock, rs_conn_can_send);
			if (ret)
				break;
			if (!rs->writable) {
				errno = ECONNRESET;
				ret = -1;
				break;
			}
		}
		uint32_t xfer;
		if (rs->olen < left) {
			xfer = rs->olen;
			if (rs->olen < RS_MAX_DATA_TRANSFER)
				rs->olen <<= 1;
		} else {
			xfer = (uint32_t)left;
		}
		if (xfer > rs->sbuf_bytes_avail)
			xfer = rs->sbuf_bytes_avail;
		if (xfer > rs->target_sgl[rs->target_sge].length)
			xfer = rs->target_sgl[rs->target_sge].length;
		struct ibv_sge sg[2];
		int n = rs_sbuf_put(rs, &iov, &off, xfer, sg);
		int e = rs_write_data(rs, sg, n, xfer, xfer <= rs->sq_inline ? IBV_SEND_INLINE : 0);
		if (e) {
			errno = e;
			ret = -1;
			break;
		}
		left -= xfer;
	}
	return (ret && left == len) ? -1 : (ssize_t)(len - left);
}

/* Copies up to len received bytes out (consuming them unless peek). */
static size_t rs_copy_out(struct rsocket *rs, const struct iovec **iov, size_t *off, size_t len, int peek)
{
	size_t done = 0;
	int head = rs->rmsg_head;
	uint32_t offset = rs->rbuf_offset;
	uint32_t first_left = rs->rmsg[head].data;
	while (done < len && head != rs->rmsg_tail) {
		uint32_t have = head == rs->rmsg_head ? first_left : rs->rmsg[head].data;
		uint32_t n = have;
		if (len - done < n)
			n = (uint32_t)(len - done);
		uint32_t end = rs->rbuf_size - offset;
		uint32_t a = n > end ? end : n;
		rs_iov_scatter(iov, off, &rs->rbuf[offset], a);
		if (n > a)
			rs_iov_scatter(iov, off, rs->rbuf, n - a);
		offset = (offset + n) % rs->rbuf_size;
		done += n;
		if (!peek) {
			rs->rbuf_bytes_avail += n;
			rs->rdata_pending -= n;
			if (n == have) {
				rs->rseq_no++;
				rs->rmsg_head = (rs->rmsg_head + 1) % (int)(rs->rq_size + 1);
			} else {
				rs->rmsg[head].data -= n;
			}
			rs->rbuf_offset = offset;
		}
		if (n < have)
			break;
		head = (head + 1) % (int)(rs->rq_size + 1);
		first_left = head != rs->rmsg_tail ? rs->rmsg[head].data : 0;
	}
	return done;
}

ssize_t rs_recv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags)
{
	size_t len = rs_iov_total(iov, iovcnt), left = len, off = 0;
	int nonblock = (rs->fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
	int ret = 0;
	if (len == 0)
		return 0;
	while (iovcnt > 0 && iov->iov_len == 0)
		iov++, iovcnt--;
	do {
		if (!rs_have_rdata(rs)) {
			ret = rs_wait(rs, nonblock, rs_conn_have_rdata);
			if (ret) {
				if (errno != EWOULDBLOCK && rs->state == RS_DISCONNECTED)
					ret = 0; /* an orderly end */
				break;
			}
			if (!rs_have_rdata(rs)) {
				if (rs->state == RS_ERROR) {
					errno = rs->err ? rs->err : EIO;
					ret = -1;
				}
				break; /* the peer shut its side: the end */
			}
		}
		left -= rs_copy_out(rs, &iov, &off, left, flags & MSG_PEEK);
		if (flags & MSG_PEEK)
			break;
		rs_update_credits(rs);
	} while (left && (flags & MSG_WAITALL) && rs->readable);
	if (ret && left == len)
		return -1;
	return (ssize_t)(len - left);
}

int rs_shutdown(struct rsocket *rs, int how)
{
	int ctrl;
	if (rs->state != RS_CONNECTED) {
		if (rs->state == RS_DISCONNECTED)
			return 0;
		errno = ENOTCONN;
		return -1;
	}
	if (how == SHUT_RDWR) {
		ctrl = RS_CTRL_DISCONNECT;
		rs->readable = rs->writable = 0;
	} else if (how == SHUT_WR) {
		rs->writable = 0;
		ctrl = rs->readable ? RS_CTRL_SHUTDOWN : RS_CTRL_DISCONNECT;
	} else if (how == SHUT_RD) {
		rs->readable = 0;
		if (rs->writable)
			return 0;
		ctrl = RS_CTRL_DISCONNECT;
	} else {
		errno = EINVAL;
		return -1;
	}
	if (!rs_ctrl_avail(rs) && rs_wait(rs, 0, rs_conn_can_send_ctrl) != 0 && rs->state == RS_CONNECTED)
		return -1;
	if (rs->state == RS_CONNECTED && rs_ctrl_avail(rs)) {
		rs->ctrl_seqno++;
		(void)rs_post_msg(rs, rs_msg_set(RS_OP_CTRL, ctrl));
	}
	/* What was sent goes out before the QP fails (rdma_disconnect), also
	 * when the peer's shutdown crossed ours meanwhile (rs->draining). */
	if (rs_qp_live(rs))
		(void)rs_wait(rs, 0, rs_conn_all_sends_done);
	if (rs->state == RS_DISCONNECTED)
		rdma_disconnect(rs->id);
	return 0;
}
