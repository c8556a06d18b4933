/*
 * rsocket_api.c: the rsocket calls on one descriptor. A descriptor that is
 * not an rsocket fails with EBADF, as with rdma-core (whose librspreload
 * calls these only for its rsockets; rdma-core's rclose alone returns
 * EBADF itself rather than -1, which we do not copy). rsocket() checks its
 * arguments as rdma-core's does and then fails with ENOSYS: stream and
 * datagram rsockets are not made yet, so librspreload falls back to the
 * kernel's sockets (docs/design/rsockets.md).
 */
#include "cma.h"
#include "rsocket.h"

#include <netinet/in.h>
#include <rdma/rsocket.h>
#include <sys/socket.h>

/* -1 with errno EBADF for an ordinary descriptor, ENOSYS for an rsocket
 * (none exist yet), and a debug line saying which. */
static int rs_refuse(const char *call, int fd)
{
	if (!rs_lookup(fd)) {
		vrdma_debug("%s: descriptor %d is not an rsocket (EBADF)", call, fd);
		errno = EBADF;
	} else {
		vrdma_debug("%s is not supported on rsockets yet (ENOSYS)", call);
		errno = ENOSYS;
	}
	return -1;
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
	vrdma_debug("rsocket: rsockets are not provided yet (ENOSYS): a preloaded program falls back to the kernel's sockets");
	errno = ENOSYS;
	return -1;
}

CMA_EXPORT int rbind(int s, const struct sockaddr *addr, socklen_t len)
{
	(void)addr, (void)len;
	return rs_refuse("rbind", s);
}

CMA_EXPORT int rlisten(int s, int backlog)
{
	(void)backlog;
	return rs_refuse("rlisten", s);
}

CMA_EXPORT int raccept(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)addr, (void)len;
	return rs_refuse("raccept", s);
}

CMA_EXPORT int rconnect(int s, const struct sockaddr *addr, socklen_t len)
{
	(void)addr, (void)len;
	return rs_refuse("rconnect", s);
}

CMA_EXPORT int rshutdown(int s, int how)
{
	(void)how;
	return rs_refuse("rshutdown", s);
}

CMA_EXPORT int rclose(int s)
{
	return rs_refuse("rclose", s);
}

CMA_EXPORT ssize_t rrecv(int s, void *buf, size_t len, int flags)
{
	(void)buf, (void)len, (void)flags;
	return rs_refuse("rrecv", s);
}

CMA_EXPORT ssize_t rrecvfrom(int s, void *buf, size_t len, int flags, struct sockaddr *src, socklen_t *slen)
{
	(void)buf, (void)len, (void)flags, (void)src, (void)slen;
	return rs_refuse("rrecvfrom", s);
}

CMA_EXPORT ssize_t rrecvmsg(int s, struct msghdr *msg, int flags)
{
	(void)msg, (void)flags;
	return rs_refuse("rrecvmsg", s);
}

CMA_EXPORT ssize_t rsend(int s, const void *buf, size_t len, int flags)
{
	(void)buf, (void)len, (void)flags;
	return rs_refuse("rsend", s);
}

CMA_EXPORT ssize_t rsendto(int s, const void *buf, size_t len, int flags, const struct sockaddr *dst, socklen_t dlen)
{
	(void)buf, (void)len, (void)flags, (void)dst, (void)dlen;
	return rs_refuse("rsendto", s);
}

CMA_EXPORT ssize_t rsendmsg(int s, const struct msghdr *msg, int flags)
{
	(void)msg, (void)flags;
	return rs_refuse("rsendmsg", s);
}

CMA_EXPORT ssize_t rread(int s, void *buf, size_t count)
{
	(void)buf, (void)count;
	return rs_refuse("rread", s);
}

CMA_EXPORT ssize_t rreadv(int s, const struct iovec *iov, int iovcnt)
{
	(void)iov, (void)iovcnt;
	return rs_refuse("rreadv", s);
}

CMA_EXPORT ssize_t rwrite(int s, const void *buf, size_t count)
{
	(void)buf, (void)count;
	return rs_refuse("rwrite", s);
}

CMA_EXPORT ssize_t rwritev(int s, const struct iovec *iov, int iovcnt)
{
	(void)iov, (void)iovcnt;
	return rs_refuse("rwritev", s);
}

CMA_EXPORT int rgetpeername(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)addr, (void)len;
	return rs_refuse("rgetpeername", s);
}

CMA_EXPORT int rgetsockname(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)addr, (void)len;
	return rs_refuse("rgetsockname", s);
}

CMA_EXPORT int rsetsockopt(int s, int level, int optname, const void *optval, socklen_t optlen)
{
	(void)level, (void)optname, (void)optval, (void)optlen;
	return rs_refuse("rsetsockopt", s);
}

CMA_EXPORT int rgetsockopt(int s, int level, int optname, void *optval, socklen_t *optlen)
{
	(void)level, (void)optname, (void)optval, (void)optlen;
	return rs_refuse("rgetsockopt", s);
}

CMA_EXPORT int rfcntl(int s, int cmd, ...)
{
	(void)cmd;
	return rs_refuse("rfcntl", s);
}

CMA_EXPORT off_t riomap(int s, void *buf, size_t len, int prot, int flags, off_t offset)
{
	(void)buf, (void)len, (void)prot, (void)flags, (void)offset;
	return rs_refuse("riomap", s);
}

CMA_EXPORT int riounmap(int s, void *buf, size_t len)
{
	(void)buf, (void)len;
	return rs_refuse("riounmap", s);
}

/* A count, as rdma-core's: (size_t)-1 on failure, with errno. */
CMA_EXPORT size_t riowrite(int s, const void *buf, size_t count, off_t offset, int flags)
{
	(void)buf, (void)count, (void)offset, (void)flags;
	return (size_t)rs_refuse("riowrite", s);
}
