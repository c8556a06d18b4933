/*
 * rsocket_api.c: the rsocket calls on one descriptor. A descriptor that is
 * not an rsocket fails with EBADF, as with rdma-core (whose librspreload
 * calls these only for its rsockets; rdma-core's rclose alone returns
 * EBADF itself rather than -1, which we do not copy). A call on a datagram
 * rsocket goes to rsocket_dgram.c; riomap is in rsocket_iomap.c.
 * docs/design/rsockets.md.
 */
#include "cma.h"
#include "rsocket.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* The rsocket of s, or NULL with errno EBADF and a debug line. */
static struct rsocket *rs_get(const char *call, int s)
{
	struct rsocket *rs = rs_lookup(s);
	if (!rs) {
		vrdma_debug("%s: descriptor %d is not an rsocket (EBADF)", call, s);
		errno = EBADF;
	}
	return rs;
}

CMA_EXPORT int rsocket(int domain, int type, int protocol)
{
	int stype = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);

	if ((domain != AF_INET && domain != AF_INET6 && domain != AF_IB) ||
	    (stype != SOCK_STREAM && stype != SOCK_DGRAM) ||
	    (stype == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
	    (stype == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP)) {
		vrdma_debug("rsocket: domain %d, type %d, protocol %d: rsockets are AF_INET, AF_INET6 or AF_IB, "
			    "SOCK_STREAM (TCP) or SOCK_DGRAM (UDP) (ENOTSUP)",
			    domain, type, protocol);
		errno = ENOTSUP;
		return -1;
	}
	if (stype == SOCK_DGRAM) {
		struct rsocket *rs = ds_new(domain, (type & SOCK_NONBLOCK) ? O_NONBLOCK : 0,
					    (type & SOCK_CLOEXEC) ? FD_CLOEXEC : 0);
		if (!rs)
			return -1;
		int e = rs_insert(rs);
		if (e) {
			rs_free(rs);
			errno = e == EEXIST ? EMFILE : e;
			return -1;
		}
		return rs->fd;
	}
	struct rsocket *rs = rs_new(domain, (type & SOCK_NONBLOCK) ? O_NONBLOCK : 0, (type & SOCK_CLOEXEC) ? FD_CLOEXEC : 0,
				    NULL);
	if (!rs)
		return -1;
	if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP) != 0) {
		int e = errno;
		vrdma_debug("rsocket: no rdma_cm id: %s", strerror(e));
		rs_free(rs);
		errno = e;
		return -1;
	}
	rs->id->route.addr.src_addr.sa_family = (sa_family_t)domain;
	int e = rs_insert(rs);
	if (e) {
		rs_free(rs);
		errno = e == EEXIST ? EMFILE : e;
		return -1;
	}
	return rs->fd;
}

CMA_EXPORT int rbind(int s, const struct sockaddr *addr, socklen_t len)
{
	struct rsocket *rs = rs_get("rbind", s);
	if (!rs)
		return -1;
	if (!addr || len < sizeof(sa_family_t) || (cma_sa_len(addr) && len < cma_sa_len(addr))) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&rs->mu);
	int r;
	if (rs->dg) {
		r = ds_bind(rs, addr, len);
	} else if (rs->state != RS_INIT) {
		errno = EINVAL;
		r = -1;
	} else if ((r = rdma_bind_addr(rs->id, (struct sockaddr *)addr)) == 0) {
		rs->state = RS_BOUND;
	}
	pthread_mutex_unlock(&rs->mu);
	return r;
}

CMA_EXPORT int rlisten(int s, int backlog)
{
	struct rsocket *rs = rs_get("rlisten", s);
	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->mu);
	int r = 0;
	if (rs->dg) {
		errno = EOPNOTSUPP; /* as listen(2) on a UDP socket */
		r = -1;
	} else if (rs->state == RS_LISTENING) {
		r = 0;
	} else if (rs->state != RS_INIT && rs->state != RS_BOUND) {
		errno = EINVAL;
		r = -1;
	} else if ((r = rdma_listen(rs->id, backlog)) == 0) {
		rs->state = RS_LISTENING;
	}
	pthread_mutex_unlock(&rs->mu);
	return r;
}

static void rs_copy_addr(struct sockaddr *dst, socklen_t *len, const struct sockaddr *src)
{
	socklen_t size = src->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	if (!dst || !len)
		return;
	memcpy(dst, src, *len < size ? *len : size);
	*len = size;
}

CMA_EXPORT int raccept(int s, struct sockaddr *addr, socklen_t *len)
{
	struct rsocket *ls = rs_get("raccept", s);
	if (!ls)
		return -1;
	pthread_mutex_lock(&ls->mu);
	int fd;
	if (ls->dg) {
		errno = EOPNOTSUPP;
		fd = -1;
	} else if (ls->state != RS_LISTENING) {
		errno = EINVAL;
		fd = -1;
	} else {
		fd = rs_accept(ls, ls->fs_flags & O_NONBLOCK);
	}
	pthread_mutex_unlock(&ls->mu);
	if (fd >= 0 && addr && len)
		rs_copy_addr(addr, len, rdma_get_peer_addr(rs_lookup(fd)->id));
	return fd;
}

CMA_EXPORT int rconnect(int s, const struct sockaddr *addr, socklen_t len)
{
	struct rsocket *rs = rs_get("rconnect", s);
	if (!rs)
		return -1;
	if (!addr || len < sizeof(sa_family_t) || !cma_sa_len(addr) || len < cma_sa_len(addr)) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&rs->mu);
	int r;
	if (rs->dg) {
		r = ds_connect(rs, addr, len);
		pthread_mutex_unlock(&rs->mu);
		return r;
	}
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
		r = rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)addr, 2000);
		if (r != 0)
			break;
		rs->state = RS_CONNECTING;
		rs->cm_step = 0;
		/* fall through */
	case RS_CONNECTING:
		r = rs_connect_step(rs, rs->fs_flags & O_NONBLOCK);
		break;
	case RS_CONNECTED:
		r = 0;
		break;
	default:
		errno = rs->state == RS_LISTENING ? EINVAL : (rs->err ? rs->err : ENOTCONN);
		r = -1;
	}
	pthread_mutex_unlock(&rs->mu);
	return r;
}

/* Before data moves: a connection under way takes its next steps (without
 * waiting); 0 when connected (or ended, for the data calls to say so). */
static int rs_ready(struct rsocket *rs)
{
	if (rs->state == RS_CONNECTING && rs_connect_step(rs, 1) != 0) {
		if (errno == EINPROGRESS)
			errno = EAGAIN;
		return -1;
	}
	if (rs->state == RS_CONNECTED || rs->state == RS_DISCONNECTED || rs->state == RS_ERROR)
		return 0;
	errno = ENOTCONN;
	return -1;
}

/* The rsocket of s for a data call with an iovec, or NULL with errno. */
static struct rsocket *rs_io_get(const char *call, int s, const struct iovec *iov, int iovcnt)
{
	struct rsocket *rs = rs_get(call, s);
	if (rs && (iovcnt < 0 || (iovcnt && !iov))) {
		errno = EINVAL;
		return NULL;
	}
	return rs;
}

/* A send: to dst on a datagram rsocket (its connected peer when NULL); a
 * stream's peer is fixed (rsendto refuses an address before). */
static ssize_t rs_sendv_call(const char *call, int s, const struct iovec *iov, int iovcnt, int flags,
			     const struct sockaddr *dst, socklen_t dlen)
{
	struct rsocket *rs = rs_io_get(call, s, iov, iovcnt);
	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->mu);
	ssize_t r;
	if (rs->dg) {
		r = ds_send(rs, iov, iovcnt, flags, dst, dlen);
	} else {
		r = rs_ready(rs);
		if (r == 0)
			r = rs_send(rs, iov, iovcnt, flags);
	}
	pthread_mutex_unlock(&rs->mu);
	return r;
}

/* A receive; src, when asked for, is the sender's address (a stream's peer). */
static ssize_t rs_recvv_call(const char *call, int s, const struct iovec *iov, int iovcnt, int flags,
			     struct sockaddr *src, socklen_t *slen)
{
	struct rsocket *rs = rs_io_get(call, s, iov, iovcnt);
	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->mu);
	ssize_t r;
	if (rs->dg) {
		r = ds_recv(rs, iov, iovcnt, flags, src, slen);
	} else {
		r = rs_ready(rs);
		if (r == 0)
			r = rs_recv(rs, iov, iovcnt, flags);
		if (r >= 0 && src && slen)
			rs_copy_addr(src, slen, rdma_get_peer_addr(rs->id));
	}
	pthread_mutex_unlock(&rs->mu);
	return r;
}

CMA_EXPORT int rshutdown(int s, int how)
{
	struct rsocket *rs = rs_get("rshutdown", s);
	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->mu);
	int r = rs->dg ? ds_shutdown(rs, how) : rs_shutdown(rs, how);
	pthread_mutex_unlock(&rs->mu);
	return r;
}

CMA_EXPORT int rclose(int s)
{
	struct rsocket *rs = rs_get("rclose", s);
	if (!rs)
		return -1;
	rs_remove(rs);
	pthread_mutex_lock(&rs->mu);
	if (rs->dg)
		(void)ds_shutdown(rs, SHUT_RDWR); /* what is sent completes first */
	else if (rs->state == RS_CONNECTED)
		(void)rs_shutdown(rs, SHUT_RDWR);
	pthread_mutex_unlock(&rs->mu);
	rs_free(rs);
	return 0;
}

CMA_EXPORT ssize_t rrecv(int s, void *buf, size_t len, int flags)
{
	struct iovec v = {buf, len};
	return rs_recvv_call("rrecv", s, &v, 1, flags, NULL, NULL);
}

CMA_EXPORT ssize_t rrecvfrom(int s, void *buf, size_t len, int flags, struct sockaddr *src, socklen_t *slen)
{
	struct iovec v = {buf, len};
	return rs_recvv_call("rrecvfrom", s, &v, 1, flags, src, slen);
}

CMA_EXPORT ssize_t rrecvmsg(int s, struct msghdr *msg, int flags)
{
	if (rs_lookup(s) && msg && msg->msg_control && msg->msg_controllen) {
		errno = ENOTSUP;
		return -1;
	}
	if (rs_lookup(s) && !msg) {
		errno = EFAULT;
		return -1;
	}
	struct rsocket *rs = rs_lookup(s);
	if (rs && rs->dg) {
		msg->msg_flags = 0;
		return rs_recvv_call("rrecvmsg", s, msg->msg_iov, (int)msg->msg_iovlen, flags, msg->msg_name,
				     msg->msg_name ? &msg->msg_namelen : NULL);
	}
	return rs_recvv_call("rrecvmsg", s, msg ? msg->msg_iov : NULL, msg ? (int)msg->msg_iovlen : 0, flags, NULL, NULL);
}

CMA_EXPORT ssize_t rsend(int s, const void *buf, size_t len, int flags)
{
	struct iovec v = {(void *)buf, len};
	return rs_sendv_call("rsend", s, &v, 1, flags, NULL, 0);
}

CMA_EXPORT ssize_t rsendto(int s, const void *buf, size_t len, int flags, const struct sockaddr *dst, socklen_t dlen)
{
	struct rsocket *rs = rs_lookup(s);
	if (rs && !rs->dg && (dst || dlen)) {
		errno = EISCONN; /* a stream: its peer is fixed */
		return -1;
	}
	struct iovec v = {(void *)buf, len};
	return rs_sendv_call("rsendto", s, &v, 1, flags, dst, dlen);
}

CMA_EXPORT ssize_t rsendmsg(int s, const struct msghdr *msg, int flags)
{
	if (rs_lookup(s) && msg && msg->msg_control && msg->msg_controllen) {
		errno = ENOTSUP;
		return -1;
	}
	if (rs_lookup(s) && !msg) {
		errno = EFAULT;
		return -1;
	}
	struct rsocket *rs = rs_lookup(s);
	int named = rs && rs->dg && msg->msg_name; /* a stream ignores msg_name, as TCP */
	return rs_sendv_call("rsendmsg", s, msg ? msg->msg_iov : NULL, msg ? (int)msg->msg_iovlen : 0, flags,
			     named ? msg->msg_name : NULL, named ? msg->msg_namelen : 0);
}

CMA_EXPORT ssize_t rread(int s, void *buf, size_t count)
{
	struct iovec v = {buf, count};
	return rs_recvv_call("rread", s, &v, 1, 0, NULL, NULL);
}

CMA_EXPORT ssize_t rreadv(int s, const struct iovec *iov, int iovcnt)
{
	return rs_recvv_call("rreadv", s, iov, iovcnt, 0, NULL, NULL);
}

CMA_EXPORT ssize_t rwrite(int s, const void *buf, size_t count)
{
	struct iovec v = {(void *)buf, count};
	return rs_sendv_call("rwrite", s, &v, 1, 0, NULL, 0);
}

CMA_EXPORT ssize_t rwritev(int s, const struct iovec *iov, int iovcnt)
{
	return rs_sendv_call("rwritev", s, iov, iovcnt, 0, NULL, 0);
}

CMA_EXPORT int rgetpeername(int s, struct sockaddr *addr, socklen_t *len)
{
	struct rsocket *rs = rs_get("rgetpeername", s);
	if (!rs)
		return -1;
	if (!addr || !len) {
		errno = EFAULT;
		return -1;
	}
	if (rs->dg)
		return getpeername(rs->fd, addr, len);
	if (rs->state != RS_CONNECTED && rs->state != RS_DISCONNECTED) {
		errno = ENOTCONN;
		return -1;
	}
	rs_copy_addr(addr, len, rdma_get_peer_addr(rs->id));
	return 0;
}

CMA_EXPORT int rgetsockname(int s, struct sockaddr *addr, socklen_t *len)
{
	struct rsocket *rs = rs_get("rgetsockname", s);
	if (!rs)
		return -1;
	if (!len) {
		errno = EFAULT;
		return -1;
	}
	if (rs->dg) {
		struct sockaddr_storage ss;
		socklen_t n = sizeof(ss);
		if (addr)
			return getsockname(rs->fd, addr, len);
		if (getsockname(rs->fd, (struct sockaddr *)&ss, &n) != 0)
			return -1;
		*len = n; /* librspreload asks for the length alone */
		return 0;
	}
	struct sockaddr *local = rdma_get_local_addr(rs->id);
	if (!addr) { /* librspreload asks for the length alone */
		*len = local->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
		return 0;
	}
	rs_copy_addr(addr, len, local);
	return 0;
}

/* The int an option's value holds, or -1 with EINVAL/EFAULT. */
static int opt_int(const void *optval, socklen_t optlen, int *v)
{
	if (!optval) {
		errno = EFAULT;
		return -1;
	}
	if (optlen < sizeof(int)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(v, optval, sizeof(int));
	return 0;
}

CMA_EXPORT int rsetsockopt(int s, int level, int optname, const void *optval, socklen_t optlen)
{
	struct rsocket *rs = rs_get("rsetsockopt", s);
	if (!rs)
		return -1;
	int v = 0, r = 0;
	/* A datagram rsocket's UDP socket takes the option first (rdma-core's
	 * does): what the kernel refuses is refused. */
	if (rs->dg && level != SOL_RDMA && setsockopt(rs->fd, level, optname, optval, optlen) != 0) {
		vrdma_debug("rsetsockopt: level %d option %d on datagram rsocket %d: %s", level, optname, s,
			    strerror(errno));
		return -1;
	}
	if (level == SOL_SOCKET && optname == SO_LINGER) {
		struct linger l;
		if (!optval || optlen < sizeof(l)) {
			errno = optval ? EINVAL : EFAULT;
			return -1;
		}
		memcpy(&l, optval, sizeof(l));
		pthread_mutex_lock(&rs->mu);
		rs->linger_off = !l.l_onoff;
		pthread_mutex_unlock(&rs->mu);
		return 0;
	}
	if (level == SOL_RDMA && optname == RDMA_ROUTE) {
		if (!optval) {
			errno = EFAULT;
			return -1;
		}
		return 0; /* the daemon routes; a path given is not needed */
	}
	if (opt_int(optval, optlen, &v) != 0)
		return -1;
	pthread_mutex_lock(&rs->mu);
	int before = rs->dg ? !ds_ready(rs)
			    : rs->state == RS_INIT || rs->state == RS_BOUND || rs->state == RS_LISTENING;
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			rs->reuseaddr = !!v;
			break;
		case SO_RCVBUF:
			if (!rs->rbuf && (!rs->dg || before) && v > 0)
				rs->rbuf_size = (uint32_t)v << 1, rs->rbuf_set = 1;
			break;
		case SO_SNDBUF:
			if (!rs->sbuf && (!rs->dg || before) && v > 0)
				rs->sbuf_size = (uint32_t)v << 1, rs->sbuf_set = 1;
			break;
		case SO_KEEPALIVE: /* probes go from the calls and rpoll (rs_keepalive) */
			rs->keepalive = !!v;
			if (rs->keepalive && !rs->keepidle)
				rs->keepidle = rs_default_keepidle();
			rs->ka_next = 0;
			break;
		case SO_OOBINLINE:
			rs->oobinline = !!v;
			break;
		default:
			errno = ENOTSUP, r = -1;
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			rs->nodelay = !!v;
			break;
		case TCP_KEEPIDLE:
			if (v <= 0)
				errno = EINVAL, r = -1;
			else
				rs->keepidle = v, rs->ka_next = 0;
			break;
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
		case TCP_MAXSEG:
			break;
		default:
			errno = ENOTSUP, r = -1;
		}
		break;
	case IPPROTO_IPV6:
		if (optname == IPV6_V6ONLY) {
			rs->v6only = !!v;
			if (rs->id)
				(void)rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof(v));
		} else {
			errno = ENOTSUP, r = -1;
		}
		break;
	case SOL_RDMA:
		if (!before) {
			errno = EINVAL, r = -1;
			break;
		}
		switch (optname) {
		case RDMA_SQSIZE:
			rs->sq_size = (uint32_t)v > RS_QP_MAX_SIZE ? RS_QP_MAX_SIZE : (uint32_t)v;
			break;
		case RDMA_RQSIZE:
			rs->rq_size = (uint32_t)v > RS_QP_MAX_SIZE ? RS_QP_MAX_SIZE : (uint32_t)v;
			break;
		case RDMA_INLINE:
			rs->sq_inline = (uint32_t)v > RS_QP_MAX_SIZE ? RS_QP_MAX_SIZE : (uint32_t)v;
			break;
		case RDMA_IOMAPSIZE: /* as rdma-core: rounded to what the connection data can say */
			rs->target_iomap_size = v > 0 ? (uint32_t)rs_scale_to_value(rs_value_to_scale(v, 8) & 0xff, 8) : 0;
			break;
		default:
			errno = ENOTSUP, r = -1;
		}
		break;
	default:
		errno = ENOTSUP, r = -1;
	}
	pthread_mutex_unlock(&rs->mu);
	if (r != 0)
		vrdma_debug("rsetsockopt: level %d option %d on rsocket %d: %s", level, optname, s, strerror(errno));
	return r;
}

static int put_int(void *optval, socklen_t *optlen, int v)
{
	if (!optval || !optlen) {
		errno = EFAULT;
		return -1;
	}
	if (*optlen < sizeof(int)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(int);
	return 0;
}

CMA_EXPORT int rgetsockopt(int s, int level, int optname, void *optval, socklen_t *optlen)
{
	struct rsocket *rs = rs_get("rgetsockopt", s);
	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->mu);
	int r = -1, v = 0, ok = 1;
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR: v = rs->reuseaddr; break;
		case SO_KEEPALIVE: v = rs->keepalive; break;
		case SO_OOBINLINE: v = rs->oobinline; break;
		case SO_RCVBUF: v = (int)rs->rbuf_size; break;
		case SO_SNDBUF: v = (int)rs->sbuf_size; break;
		case SO_ERROR: v = rs->err; rs->err = 0; break;
		case SO_TYPE: v = rs->dg ? SOCK_DGRAM : SOCK_STREAM; break;
		case SO_LINGER:
			ok = 0;
			if (!optval || !optlen) {
				errno = EFAULT;
			} else if (*optlen < sizeof(struct linger)) {
				errno = EINVAL;
			} else {
				struct linger l = {.l_onoff = !rs->linger_off, .l_linger = 0};
				memcpy(optval, &l, sizeof(l));
				*optlen = sizeof(l);
				r = 0;
			}
			break;
		default: ok = 0; errno = ENOTSUP;
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY: v = rs->nodelay; break;
		case TCP_KEEPIDLE: v = rs->keepidle ? rs->keepidle : rs_default_keepidle(); break;
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL: v = 1; break;
		case TCP_MAXSEG: v = 2048; break;
		default: ok = 0; errno = ENOTSUP;
		}
		break;
	case IPPROTO_IPV6:
		if (optname == IPV6_V6ONLY)
			v = rs->v6only;
		else
			ok = 0, errno = ENOTSUP;
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE: v = (int)rs->sq_size; break;
		case RDMA_RQSIZE: v = (int)rs->rq_size; break;
		case RDMA_INLINE: v = (int)rs->sq_inline; break;
		case RDMA_IOMAPSIZE: v = (int)rs->target_iomap_size; break;
		default: ok = 0; errno = ENOTSUP;
		}
		break;
	default:
		ok = 0;
		errno = ENOTSUP;
	}
	if (ok)
		r = put_int(optval, optlen, v);
	pthread_mutex_unlock(&rs->mu);
	if (r != 0)
		vrdma_debug("rgetsockopt: level %d option %d on rsocket %d: %s", level, optname, s, strerror(errno));
	return r;
}

CMA_EXPORT int rfcntl(int s, int cmd, ...)
{
	struct rsocket *rs = rs_get("rfcntl", s);
	if (!rs)
		return -1;
	va_list ap;
	va_start(ap, cmd);
	int r = 0;
	pthread_mutex_lock(&rs->mu);
	switch (cmd) {
	case F_GETFL:
		r = rs->fs_flags;
		break;
	case F_SETFL:
		rs->fs_flags = va_arg(ap, int);
		break;
	case F_GETFD:
		r = rs->fd_flags;
		break;
	case F_SETFD:
		rs->fd_flags = va_arg(ap, int);
		break;
	default:
		errno = ENOTSUP;
		r = -1;
	}
	pthread_mutex_unlock(&rs->mu);
	va_end(ap);
	return r;
}
