/*
 * rsocket_iomap.c: riomap, riounmap and riowrite, on rdma-core's wire.
 * Each side offers the other RDMA_IOMAPSIZE slots after its target SGL
 * (the connection data says how many). riomap(PROT_WRITE) registers a
 * buffer and, with the next rsend or riowrite, RDMA-WRITEs its description
 * (struct rs_iomap) into one of the peer's slots, with RS_OP_IOMAP_SGL and
 * the slot's index as the immediate. riowrite looks the offset up in the
 * slots the peer filled in and RDMA-WRITEs there directly: nothing is
 * received by the peer, whose buffer simply changes.
 */
#include "cma.h"
#include "rsocket.h"

#include <byteswap.h>
#include <fcntl.h>
#include <rdma/rsocket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>

int rs_value_to_scale(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value : (1 << (bits - 1)) | (value >> bits);
}

int rs_scale_to_value(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value : (value & ~(1 << (bits - 1))) << bits;
}

void rs_free_iomaps(struct rsocket *rs)
{
	for (uint32_t i = 0; rs->iomaps && i < rs->remote_iomap.length; i++)
		if (rs->iomaps[i].mr)
			ibv_dereg_mr(rs->iomaps[i].mr);
	free(rs->iomaps);
	rs->iomaps = NULL;
}

static int rs_nonblock(struct rsocket *rs, int flags)
{
	return (rs->fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

int rs_send_iomaps(struct rsocket *rs, int nonblock)
{
	for (uint32_t i = 0; rs->iomaps && i < rs->remote_iomap.length; i++) {
		struct rs_iomap_mr *m = &rs->iomaps[i];
		if (!m->mr || !m->queued)
			continue;
		if (!rs_can_send(rs)) {
			if (rs_wait(rs, nonblock, rs_conn_can_send) != 0)
				return -1;
			if (!rs->writable) {
				errno = ECONNRESET;
				return -1;
			}
		}
		struct rs_iomap iom = {m->offset, {(uintptr_t)m->mr->addr, m->mr->rkey, (uint32_t)m->mr->length}};
		if (rs->swap_sgl) {
			iom.offset = bswap_64(iom.offset);
			iom.sge.addr = bswap_64(iom.sge.addr);
			iom.sge.key = bswap_32(iom.sge.key);
			iom.sge.length = bswap_32(iom.sge.length);
		}
		struct iovec v = {&iom, sizeof(iom)};
		const struct iovec *vp = &v;
		size_t off = 0;
		struct ibv_sge sg[2];
		int n = rs_sbuf_put(rs, &vp, &off, sizeof(iom), sg);
		uint32_t msg = rs_msg_set(RS_OP_IOMAP_SGL, i);
		struct ibv_send_wr wr = {.wr_id = msg,
					 .sg_list = sg,
					 .num_sge = n,
					 .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					 .imm_data = htobe32(msg)},
				   *bad;
		wr.wr.rdma.remote_addr = rs->remote_iomap.addr + (uint64_t)i * sizeof(struct rs_iomap);
		wr.wr.rdma.rkey = rs->remote_iomap.key;
		rs->sseq_no++;
		rs->sqe_avail--;
		rs->sbuf_bytes_avail -= sizeof(iom);
		int e = ibv_post_send(rs->id->qp, &wr, &bad);
		if (e) {
			errno = e;
			return -1;
		}
		m->queued = 0;
	}
	rs->iomap_pending = 0;
	return 0;
}

CMA_EXPORT off_t riomap(int s, void *buf, size_t len, int prot, int flags, off_t offset)
{
	(void)flags;
	struct rsocket *rs = rs_lookup(s);
	if (!rs) {
		vrdma_debug("riomap: descriptor %d is not an rsocket (EBADF)", s);
		errno = EBADF;
		return -1;
	}
	if (prot & ~(PROT_WRITE | PROT_NONE)) {
		errno = EINVAL;
		return -1;
	}
	if (!(prot & PROT_WRITE)) {
		vrdma_debug("riomap: only PROT_WRITE mappings are provided (ENOTSUP)");
		errno = ENOTSUP;
		return -1;
	}
	pthread_mutex_lock(&rs->mu);
	off_t ret = -1;
	if (rs->state != RS_CONNECTED || !rs->id->pd) {
		errno = EINVAL; /* rdma-core: no PD before the connection */
		goto out;
	}
	if (!rs->iomaps && rs->remote_iomap.length)
		rs->iomaps = calloc(rs->remote_iomap.length, sizeof(*rs->iomaps));
	uint32_t i = 0;
	while (rs->iomaps && i < rs->remote_iomap.length && rs->iomaps[i].mr)
		i++;
	if (!rs->iomaps || i == rs->remote_iomap.length) {
		vrdma_debug("riomap: the peer offers %u iomap slots, all taken (set RDMA_IOMAPSIZE on its side) (ENOMEM)",
			    rs->remote_iomap.length);
		errno = ENOMEM;
		goto out;
	}
	struct ibv_mr *mr = ibv_reg_mr(rs->id->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		goto out;
	if (offset == -1)
		offset = (off_t)(uintptr_t)buf;
	rs->iomaps[i] = (struct rs_iomap_mr){.offset = (uint64_t)offset, .mr = mr, .queued = 1};
	rs->iomap_pending = 1;
	ret = offset;
out:
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

CMA_EXPORT int riounmap(int s, void *buf, size_t len)
{
	struct rsocket *rs = rs_lookup(s);
	if (!rs) {
		vrdma_debug("riounmap: descriptor %d is not an rsocket (EBADF)", s);
		errno = EBADF;
		return -1;
	}
	pthread_mutex_lock(&rs->mu);
	int ret = -1;
	for (uint32_t i = 0; rs->iomaps && i < rs->remote_iomap.length; i++) {
		struct rs_iomap_mr *m = &rs->iomaps[i];
		if (m->mr && m->mr->addr == buf && m->mr->length == len) {
			ibv_dereg_mr(m->mr);
			*m = (struct rs_iomap_mr){0};
			ret = 0;
			break;
		}
	}
	if (ret)
		errno = EINVAL;
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

/* The peer's slot holding offset, copied out (the peer writes the slots). */
static int rs_find_iomap(struct rsocket *rs, uint64_t offset, struct rs_iomap *out)
{
	for (uint32_t i = 0; i < rs->target_iomap_size; i++) {
		struct rs_iomap m;
		m.offset = rs->target_iomap[i].offset;
		m.sge.addr = rs->target_iomap[i].sge.addr;
		m.sge.key = rs->target_iomap[i].sge.key;
		m.sge.length = rs->target_iomap[i].sge.length;
		if (m.sge.length && offset >= m.offset && offset - m.offset < m.sge.length) {
			*out = m;
			return 1;
		}
	}
	return 0;
}

/* A count, as rdma-core's: (size_t)-1 on failure, with errno. */
CMA_EXPORT size_t riowrite(int s, const void *buf, size_t count, off_t offset, int flags)
{
	struct rsocket *rs = rs_lookup(s);
	if (!rs) {
		vrdma_debug("riowrite: descriptor %d is not an rsocket (EBADF)", s);
		errno = EBADF;
		return (size_t)-1;
	}
	pthread_mutex_lock(&rs->mu);
	int nonblock = rs_nonblock(rs, flags), ret = 0;
	size_t left = count, off = 0;
	uint32_t olen = RS_OLAP_START_SIZE;
	struct iovec v = {(void *)buf, count};
	const struct iovec *vp = &v;
	if (rs->state != RS_CONNECTED || !rs->writable) {
		errno = rs->state == RS_CONNECTED ? EPIPE : ENOTCONN;
		ret = -1;
		goto out;
	}
	if (rs->iomap_pending && rs_send_iomaps(rs, nonblock) != 0) {
		ret = -1;
		goto out;
	}
	while (left) {
		struct rs_iomap iom;
		if (!rs_find_iomap(rs, (uint64_t)offset, &iom)) {
			vrdma_debug("riowrite: offset %lld is in none of the peer's riomaps (EINVAL)", (long long)offset);
			errno = EINVAL;
			ret = -1;
			break;
		}
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
		if (olen < left) {
			xfer = olen;
			if (olen < RS_MAX_TRANSFER)
				olen <<= 1;
		} else {
			xfer = left > RS_MAX_TRANSFER ? RS_MAX_TRANSFER : (uint32_t)left;
		}
		if (xfer > rs->sbuf_bytes_avail)
			xfer = rs->sbuf_bytes_avail;
		uint64_t room = iom.offset + iom.sge.length - (uint64_t)offset;
		if (xfer > room)
			xfer = (uint32_t)room;
		struct ibv_sge sg[2];
		int n = rs_sbuf_put(rs, &vp, &off, xfer, sg);
		uint32_t msg = rs_msg_set(RS_OP_WRITE, xfer);
		struct ibv_send_wr wr = {.wr_id = msg, .sg_list = sg, .num_sge = n, .opcode = IBV_WR_RDMA_WRITE}, *bad;
		wr.wr.rdma.remote_addr = iom.sge.addr + ((uint64_t)offset - iom.offset);
		wr.wr.rdma.rkey = iom.sge.key;
		rs->sqe_avail--;
		rs->sbuf_bytes_avail -= xfer;
		int e = ibv_post_send(rs->id->qp, &wr, &bad);
		if (e) {
			errno = e;
			ret = -1;
			break;
		}
		left -= xfer;
		offset += xfer;
	}
out:
	pthread_mutex_unlock(&rs->mu);
	return (ret && left == count) ? (size_t)-1 : count - left;
}
