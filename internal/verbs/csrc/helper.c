/* vrdma-verbs-helper: drives one device of the host's own rdma-core for the
 * vrdma daemon (docs/design/verbs-uplink.md).
 *
 * The daemon starts it with a SOCK_SEQPACKET unix socket on descriptor 3 and
 * nothing else; it answers one request at a time, one message per request,
 * and exits when the socket closes. Every message starts with a 16-byte
 * header in the host's byte order: u32 len (the whole message), u16 op,
 * u16 flags (0), u32 seq, i32 status (0, or a positive errno with the
 * reason as text in the body). A reply carries the request's op with
 * VH_REPLY set and its seq. The first message is the helper's, unasked:
 * VH_HELLO with the protocol version. Layouts: see verbs/msg.go and
 * verbs/datapath_msg.go; the data-path ops are in datapath.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helper.h"
#include "cm.h"

enum {
	VH_VERSION = 4,
	VH_HDR = 16,
	VH_MAX = 16384,
	VH_MAX_GIDS = 256,
	VH_GID_SIZE = 28,
	VH_DEV_SIZE = 144,
	VH_PORT_SIZE = 40,
	VH_NAME_MAX = 64,
	VH_SOCK = 3,
	VH_MAX_MRS = 4096,
	VH_REG_MR_SIZE = 32,
};

enum { VH_HELLO = 1, VH_OPEN = 2, VH_QUERY_PORT = 3, VH_PING = 4, VH_REG_MR = 5, VH_DEREG_MR = 6, VH_REPLY = 0x8000 };

struct ibv_context *ctx;
struct ibv_pd *pd;
uint8_t port_num;

/* The registered regions: the helper's own mapping of a memfd the daemon
 * passed, registered with the device. A handle is an index. */
static struct {
	struct ibv_mr *mr;
	void *addr;
	size_t len;
	uint64_t iova; /* the address the device knows byte 0 by */
} mrs[VH_MAX_MRS];

static unsigned char out[VH_MAX];
static size_t outlen;

void put32(uint32_t v) { memcpy(out + outlen, &v, 4); outlen += 4; }
void put64(uint64_t v) { memcpy(out + outlen, &v, 8); outlen += 8; }
void putbytes(const void *p, size_t n) { memcpy(out + outlen, p, n); outlen += n; }

void begin(uint16_t op, uint32_t seq, int32_t status)
{
	uint16_t flags = 0;
	outlen = 0;
	put32(0);
	memcpy(out + outlen, &op, 2); outlen += 2;
	memcpy(out + outlen, &flags, 2); outlen += 2;
	put32(seq);
	put32((uint32_t)status);
}

int finish(void) { return finish_to(VH_SOCK); }

int finish_to(int sock)
{
	uint32_t n = (uint32_t)outlen;
	memcpy(out, &n, 4);
	for (;;) {
		ssize_t w = send(sock, out, outlen, MSG_NOSIGNAL);
		if (w >= 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

/* fail replies with errno err and a message. */
int fail(uint16_t op, uint32_t seq, int err, const char *fmt, ...)
{
	char text[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(text))
		n = sizeof(text) - 1;
	begin(op | VH_REPLY, seq, err > 0 ? err : EIO);
	putbytes(text, (size_t)n);
	return finish();
}

static int do_open(uint32_t seq, const unsigned char *body, size_t len)
{
	uint32_t port, namelen;
	char name[VH_NAME_MAX + 1];
	struct ibv_device **list;
	struct ibv_device_attr attr;
	int i, n = 0, err = 0;
	char have[200];
	size_t hl = 0;

	if (ctx)
		return fail(VH_OPEN, seq, EBUSY, "a device is open already");
	if (len < 8)
		return fail(VH_OPEN, seq, EINVAL, "open: %zu-byte body, want 8 and a name", len);
	memcpy(&port, body, 4);
	memcpy(&namelen, body + 4, 4);
	if (namelen == 0 || namelen > VH_NAME_MAX || namelen != len - 8)
		return fail(VH_OPEN, seq, EINVAL, "open: name of %u bytes in a %zu-byte body", namelen, len);
	if (port == 0 || port > 255)
		return fail(VH_OPEN, seq, EINVAL, "open: port %u is not 1..255", port);
	memcpy(name, body + 8, namelen);
	name[namelen] = 0;

	list = ibv_get_device_list(&n);
	if (!list) {
		/* ENOSYS: the kernel has no RDMA devices (no ib_uverbs). */
		if (errno == ENOSYS)
			return fail(VH_OPEN, seq, ENODEV, "%s", "");
		return fail(VH_OPEN, seq, errno, "ibv_get_device_list: %s", strerror(errno));
	}
	have[0] = 0;
	for (i = 0; i < n; i++) {
		const char *d = ibv_get_device_name(list[i]);
		if (!strcmp(d, name)) {
			ctx = ibv_open_device(list[i]);
			err = errno;
			break;
		}
		if (hl < sizeof(have) - 1) {
			int w = snprintf(have + hl, sizeof(have) - hl, "%s%s", hl ? " " : "", d);
			if (w > 0)
				hl += (size_t)w;
			if (hl >= sizeof(have))
				hl = sizeof(have) - 1;
		}
	}
	if (i == n) {
		ibv_free_device_list(list);
		return fail(VH_OPEN, seq, ENODEV, "%s", n ? have : "");
	}
	ibv_free_device_list(list);
	if (!ctx)
		return fail(VH_OPEN, seq, err, "ibv_open_device %s: %s", name, strerror(err));
	err = ibv_query_device(ctx, &attr);
	if (err) {
		ibv_close_device(ctx);
		ctx = NULL;
		return fail(VH_OPEN, seq, err, "ibv_query_device %s: %s", name, strerror(err));
	}
	if (port > attr.phys_port_cnt) {
		ibv_close_device(ctx);
		ctx = NULL;
		return fail(VH_OPEN, seq, ERANGE, "%s has %u port(s)", name, (unsigned)attr.phys_port_cnt);
	}
	port_num = (uint8_t)port;
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		err = errno;
		ibv_close_device(ctx);
		ctx = NULL;
		return fail(VH_OPEN, seq, err, "ibv_alloc_pd %s: %s", name, strerror(err));
	}

	begin(VH_OPEN | VH_REPLY, seq, 0);
	put64(attr.node_guid);
	put64(attr.sys_image_guid);
	put32(attr.vendor_id);
	put32(attr.vendor_part_id);
	put32(attr.hw_ver);
	put32(attr.phys_port_cnt);
	put32((uint32_t)attr.max_qp);
	put32((uint32_t)attr.max_qp_wr);
	put32((uint32_t)attr.max_sge);
	put32((uint32_t)attr.max_cq);
	put32((uint32_t)attr.max_cqe);
	put32((uint32_t)attr.max_mr);
	put64(attr.max_mr_size);
	put32((uint32_t)attr.max_pd);
	put32((uint32_t)attr.atomic_cap);
	put32((uint32_t)ctx->device->node_type);
	put32((uint32_t)ctx->device->transport_type);
	{
		char fw[64];
		memset(fw, 0, sizeof(fw));
		snprintf(fw, sizeof(fw), "%.63s", attr.fw_ver);
		putbytes(fw, sizeof(fw));
	}
	return finish();
}

static int do_query_port(uint32_t seq)
{
	struct ibv_port_attr pa;
	uint32_t i, ngids = 0;
	size_t count_at;
	int err;

	if (!ctx)
		return fail(VH_QUERY_PORT, seq, ENODEV, "no device is open");
	err = ibv_query_port(ctx, port_num, &pa);
	if (err)
		return fail(VH_QUERY_PORT, seq, err, "ibv_query_port %u: %s", port_num, strerror(err));
	begin(VH_QUERY_PORT | VH_REPLY, seq, 0);
	put32(pa.state);
	put32(pa.phys_state);
	put32(pa.max_mtu);
	put32(pa.active_mtu);
	put32(pa.link_layer);
	put32(pa.lid);
	put32(pa.sm_lid);
	put32((uint32_t)pa.gid_tbl_len);
	put32(pa.port_cap_flags);
	count_at = outlen;
	put32(0);
	for (i = 0; i < (uint32_t)pa.gid_tbl_len && ngids < VH_MAX_GIDS; i++) {
		struct ibv_gid_entry e;
		static const uint8_t zero[16];

		if (ibv_query_gid_ex(ctx, port_num, i, &e, 0))
			continue; /* ENODATA: an empty entry */
		if (!memcmp(e.gid.raw, zero, sizeof(zero)))
			continue;
		put32(e.gid_index);
		put32(e.gid_type);
		put32(e.ndev_ifindex);
		putbytes(e.gid.raw, 16);
		ngids++;
	}
	memcpy(out + count_at, &ngids, 4);
	return finish();
}

/* do_reg_mr maps length bytes at offset of the memfd fd (MAP_SHARED: the
 * pages the application and the daemon map) and registers them at iova:
 * the device knows the region by the application's addresses (what its
 * peers name in RDMA WRITE and READ), not by the helper's mapping. Body:
 * u64 offset (page-aligned), u64 length, u32 access, u32 0, u64 iova.
 * Reply: u32 handle, u32 lkey, u32 rkey, u32 0, u64 the address in the
 * helper. */
static int do_reg_mr(uint32_t seq, const unsigned char *body, size_t len, int fd)
{
	const uint32_t allowed = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				 IBV_ACCESS_REMOTE_ATOMIC;
	uint64_t off, length, iova;
	uint32_t access, h;
	long page = sysconf(_SC_PAGESIZE);
	void *addr;
	struct ibv_mr *mr;
	int err;

	if (!pd)
		return fail(VH_REG_MR, seq, ENODEV, "no device is open");
	if (fd < 0)
		return fail(VH_REG_MR, seq, EBADF, "reg_mr: no memfd came with the request");
	if (len != VH_REG_MR_SIZE)
		return fail(VH_REG_MR, seq, EINVAL, "reg_mr: %zu-byte body, want %d", len, VH_REG_MR_SIZE);
	memcpy(&off, body, 8);
	memcpy(&length, body + 8, 8);
	memcpy(&access, body + 16, 4);
	memcpy(&iova, body + 24, 8);
	if (length == 0 || length > SIZE_MAX / 2 || off % (uint64_t)page || off > (uint64_t)INT64_MAX - length)
		return fail(VH_REG_MR, seq, EINVAL, "reg_mr: offset %llu length %llu (the offset must be page-aligned)",
			    (unsigned long long)off, (unsigned long long)length);
	if (iova > UINT64_MAX - length)
		return fail(VH_REG_MR, seq, EINVAL, "reg_mr: iova %#llx length %llu wraps",
			    (unsigned long long)iova, (unsigned long long)length);
	if (access & ~allowed)
		return fail(VH_REG_MR, seq, EINVAL, "reg_mr: access flags %#x beyond %#x", access, allowed);
	for (h = 0; h < VH_MAX_MRS && mrs[h].mr; h++)
		;
	if (h == VH_MAX_MRS)
		return fail(VH_REG_MR, seq, ENOSPC, "reg_mr: %d regions registered already", VH_MAX_MRS);
	addr = mmap(NULL, (size_t)length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	if (addr == MAP_FAILED)
		return fail(VH_REG_MR, seq, errno, "reg_mr: mmap of the memfd: %s", strerror(errno));
	mr = ibv_reg_mr_iova(pd, addr, (size_t)length, iova, (int)access);
	if (!mr) {
		err = errno;
		munmap(addr, (size_t)length);
		return fail(VH_REG_MR, seq, err, "ibv_reg_mr_iova: %s", strerror(err));
	}
	mrs[h].mr = mr;
	mrs[h].addr = addr;
	mrs[h].len = (size_t)length;
	mrs[h].iova = iova;
	begin(VH_REG_MR | VH_REPLY, seq, 0);
	put32(h);
	put32(mr->lkey);
	put32(mr->rkey);
	put32(0);
	put64((uint64_t)(uintptr_t)addr);
	return finish();
}

/* do_dereg_mr deregisters and unmaps a region. Body: u32 handle. */
static int do_dereg_mr(uint32_t seq, const unsigned char *body, size_t len)
{
	uint32_t h;
	int err;

	if (len != 4)
		return fail(VH_DEREG_MR, seq, EINVAL, "dereg_mr: %zu-byte body, want 4", len);
	memcpy(&h, body, 4);
	if (h >= VH_MAX_MRS || !mrs[h].mr)
		return fail(VH_DEREG_MR, seq, ENOENT, "dereg_mr: no region %u", h);
	err = ibv_dereg_mr(mrs[h].mr);
	if (err)
		return fail(VH_DEREG_MR, seq, err, "ibv_dereg_mr: %s", strerror(err));
	munmap(mrs[h].addr, mrs[h].len);
	memset(&mrs[h], 0, sizeof(mrs[h]));
	begin(VH_DEREG_MR | VH_REPLY, seq, 0);
	return finish();
}

int mr_sge(uint32_t handle, uint64_t offset, uint32_t length, struct ibv_sge *sge)
{
	if (handle >= VH_MAX_MRS || !mrs[handle].mr || offset > mrs[handle].len || length > mrs[handle].len - offset)
		return -1;
	sge->addr = mrs[handle].iova + offset; /* the device's address space is the iova's */
	sge->length = length;
	sge->lkey = mrs[handle].mr->lkey;
	return 0;
}

/* receive reads one message and at most one descriptor with it (*fd, -1
 * if none; any more are closed). */
static ssize_t receive(unsigned char *buf, size_t size, int *fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} c;
	struct iovec iov = { .iov_base = buf, .iov_len = size };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof(c.buf) };
	struct cmsghdr *cm;
	ssize_t n;

	*fd = -1;
	n = recvmsg(VH_SOCK, &m, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
		size_t i, k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < k; i++) {
			int f;
			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (*fd < 0)
				*fd = f;
			else
				close(f);
		}
	}
	if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		errno = EMSGSIZE;
		return -1;
	}
	return n;
}

int main(void)
{
	static unsigned char in[VH_MAX];

	begin(VH_HELLO, 0, 0);
	put32(VH_VERSION);
	if (finish())
		return 1;
	for (;;) {
		uint32_t len, seq;
		uint16_t op;
		int fd, r;
		ssize_t n;
		struct pollfd pf[4] = { { .fd = VH_SOCK, .events = POLLIN }, { .fd = datapath_fd(), .events = POLLIN },
					{ .fd = async_fd(), .events = POLLIN }, { .fd = cm_fd(), .events = POLLIN } };

		/* Requests, the completion channel's events for CQs whose
		 * completions are pushed (datapath.c), the device's
		 * asynchronous events (async.c) and the CM's events (cm.c);
		 * poll skips a descriptor of -1. */
		r = poll(pf, 4, ctx ? VH_WATCH_MS : -1);
		async_watch();
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (pf[1].fd >= 0 && (pf[1].revents & POLLIN) && datapath_event())
			return 1;
		if (pf[2].fd >= 0 && (pf[2].revents & POLLIN) && async_event())
			return 1;
		if (pf[3].fd >= 0 && (pf[3].revents & POLLIN) && cm_event())
			return 1;
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = receive(in, sizeof(in), &fd);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if ((size_t)n < VH_HDR) {
			if (fd >= 0)
				close(fd);
			return 2;
		}
		memcpy(&len, in, 4);
		memcpy(&op, in + 4, 2);
		memcpy(&seq, in + 8, 4);
		if (len != (uint32_t)n) {
			if (fd >= 0)
				close(fd);
			return 2;
		}
		switch (op) {
		case VH_OPEN:
			r = do_open(seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_QUERY_PORT:
			r = do_query_port(seq);
			break;
		case VH_PING: /* an empty reply: liveness, and the relay's cost */
			begin(VH_PING | VH_REPLY, seq, 0);
			r = finish();
			break;
		case VH_REG_MR:
			r = do_reg_mr(seq, in + VH_HDR, (size_t)n - VH_HDR, fd);
			break;
		case VH_DEREG_MR:
			r = do_dereg_mr(seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_CREATE_CQ:
			r = do_create_cq(seq, in + VH_HDR, (size_t)n - VH_HDR, &fd);
			break;
		case VH_DESTROY_CQ:
			r = do_destroy_cq(seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_CREATE_QP:
			r = do_create_qp(op, seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_MODIFY_QP:
			r = do_modify_qp(seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_DESTROY_QP:
			r = do_destroy_qp(seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_POST_SEND:
			r = do_post_send(seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_POST_RECV:
			r = do_post_recv(op, seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_CREATE_SRQ: r = do_create_srq(seq, in + VH_HDR, (size_t)n - VH_HDR); break;
		case VH_MODIFY_SRQ: r = do_modify_srq(seq, in + VH_HDR, (size_t)n - VH_HDR); break;
		case VH_QUERY_SRQ: r = do_query_srq(seq, in + VH_HDR, (size_t)n - VH_HDR); break;
		case VH_DESTROY_SRQ: r = do_destroy_srq(seq, in + VH_HDR, (size_t)n - VH_HDR); break;
		case VH_POST_SRQ_RECV: r = do_post_recv(op, seq, in + VH_HDR, (size_t)n - VH_HDR); break;
		case VH_CREATE_QP_SRQ: r = do_create_qp(op, seq, in + VH_HDR, (size_t)n - VH_HDR); break;
		case VH_POLL_CQ:
			r = do_poll_cq(seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_MODIFY_UD_QP:
			r = do_modify_ud_qp(seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_CREATE_AH:
			r = do_create_ah(seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_DESTROY_AH:
			r = do_destroy_ah(seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_POST_SEND_UD:
			r = do_post_send_ud(seq, in + VH_HDR, (size_t)n - VH_HDR);
			break;
		case VH_CM_OPEN:
		case VH_CM_LISTEN:
		case VH_CM_CONNECT:
		case VH_CM_ACCEPT:
		case VH_CM_REJECT:
		case VH_CM_ESTABLISH:
		case VH_CM_DISCONNECT:
		case VH_CM_DESTROY:
		case VH_CM_QP_ATTR:
			r = do_cm(op, seq, in + VH_HDR, (size_t)n - VH_HDR, &fd);
			break;
		case VH_CM_UD_LISTEN: r = do_cm_ud(op, seq, in + VH_HDR, (size_t)n - VH_HDR); break;
		case VH_CM_UD_CONNECT: r = do_cm_ud(op, seq, in + VH_HDR, (size_t)n - VH_HDR); break;
		case VH_CM_UD_ACCEPT: r = do_cm_ud(op, seq, in + VH_HDR, (size_t)n - VH_HDR); break;
		default:
			r = fail(op, seq, EOPNOTSUPP, "unknown op %u", op);
		}
		if (fd >= 0)
			close(fd); /* mapped, or not wanted (a push socket taken is -1) */
		if (r)
			return 1;
	}
	cm_close(); /* the ids before their QPs */
	datapath_close(); /* QPs and CQs before the regions and the PD */
	ud_close();
	srq_close();
	for (unsigned i = 0; i < VH_MAX_MRS; i++)
		if (mrs[i].mr) {
			ibv_dereg_mr(mrs[i].mr);
			munmap(mrs[i].addr, mrs[i].len);
		}
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	return 0;
}
