/*
 * cma_stubs.c: what vrdma's rdma_cm does not do: multicast, notifications
 * of communication events, alternate paths and the QP attributes of QPs
 * the application moves itself, ECE, and rsockets. Each fails with
 * EOPNOTSUPP (ENOSYS for rsockets) and says so in a debug line.
 */
#include "cma.h"

#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#define UNSUPPORTED(name, e)                                                              \
	do {                                                                              \
		vrdma_debug("%s is not supported by vrdma's rdma_cm (%s)", name, #e); \
		errno = e;                                                                \
	} while (0)

CMA_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	(void)id, (void)addr, (void)context;
	UNSUPPORTED("rdma_join_multicast", EOPNOTSUPP);
	return -1;
}

CMA_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr, void *context)
{
	(void)id, (void)attr, (void)context;
	UNSUPPORTED("rdma_join_multicast_ex", EOPNOTSUPP);
	return -1;
}

CMA_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	(void)id, (void)addr;
	UNSUPPORTED("rdma_leave_multicast", EOPNOTSUPP);
	return -1;
}

CMA_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	(void)id, (void)event;
	UNSUPPORTED("rdma_notify", EOPNOTSUPP);
	return -1;
}

CMA_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	(void)id, (void)qp_attr, (void)qp_attr_mask;
	UNSUPPORTED("rdma_init_qp_attr", EOPNOTSUPP);
	return -1;
}

CMA_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id, (void)ece;
	UNSUPPORTED("rdma_set_local_ece", EOPNOTSUPP);
	return -1;
}

CMA_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id, (void)ece;
	UNSUPPORTED("rdma_get_remote_ece", EOPNOTSUPP);
	return -1;
}

/* rsockets: sockets over RDMA, a library of their own in rdma-core. */
#define RSOCKET_STUB(name) UNSUPPORTED(name, ENOSYS)

CMA_EXPORT int rsocket(int domain, int type, int protocol)
{
	(void)domain, (void)type, (void)protocol;
	RSOCKET_STUB("rsocket");
	return -1;
}
CMA_EXPORT int rbind(int s, const struct sockaddr *addr, socklen_t len)
{
	(void)s, (void)addr, (void)len;
	RSOCKET_STUB("rbind");
	return -1;
}
CMA_EXPORT int rlisten(int s, int backlog)
{
	(void)s, (void)backlog;
	RSOCKET_STUB("rlisten");
	return -1;
}
CMA_EXPORT int raccept(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)s, (void)addr, (void)len;
	RSOCKET_STUB("raccept");
	return -1;
}
CMA_EXPORT int rconnect(int s, const struct sockaddr *addr, socklen_t len)
{
	(void)s, (void)addr, (void)len;
	RSOCKET_STUB("rconnect");
	return -1;
}
CMA_EXPORT int rshutdown(int s, int how)
{
	(void)s, (void)how;
	RSOCKET_STUB("rshutdown");
	return -1;
}
CMA_EXPORT int rclose(int s)
{
	(void)s;
	RSOCKET_STUB("rclose");
	return -1;
}
CMA_EXPORT ssize_t rrecv(int s, void *buf, size_t len, int flags)
{
	(void)s, (void)buf, (void)len, (void)flags;
	RSOCKET_STUB("rrecv");
	return -1;
}
CMA_EXPORT ssize_t rrecvfrom(int s, void *buf, size_t len, int flags, struct sockaddr *src, socklen_t *slen)
{
	(void)s, (void)buf, (void)len, (void)flags, (void)src, (void)slen;
	RSOCKET_STUB("rrecvfrom");
	return -1;
}
CMA_EXPORT ssize_t rrecvmsg(int s, struct msghdr *msg, int flags)
{
	(void)s, (void)msg, (void)flags;
	RSOCKET_STUB("rrecvmsg");
	return -1;
}
CMA_EXPORT ssize_t rsend(int s, const void *buf, size_t len, int flags)
{
	(void)s, (void)buf, (void)len, (void)flags;
	RSOCKET_STUB("rsend");
	return -1;
}
CMA_EXPORT ssize_t rsendto(int s, const void *buf, size_t len, int flags, const struct sockaddr *dst, socklen_t dlen)
{
	(void)s, (void)buf, (void)len, (void)flags, (void)dst, (void)dlen;
	RSOCKET_STUB("rsendto");
	return -1;
}
CMA_EXPORT ssize_t rsendmsg(int s, const struct msghdr *msg, int flags)
{
	(void)s, (void)msg, (void)flags;
	RSOCKET_STUB("rsendmsg");
	return -1;
}
CMA_EXPORT ssize_t rread(int s, void *buf, size_t count)
{
	(void)s, (void)buf, (void)count;
	RSOCKET_STUB("rread");
	return -1;
}
CMA_EXPORT ssize_t rreadv(int s, const struct iovec *iov, int iovcnt)
{
	(void)s, (void)iov, (void)iovcnt;
	RSOCKET_STUB("rreadv");
	return -1;
}
CMA_EXPORT ssize_t rwrite(int s, const void *buf, size_t count)
{
	(void)s, (void)buf, (void)count;
	RSOCKET_STUB("rwrite");
	return -1;
}
CMA_EXPORT ssize_t rwritev(int s, const struct iovec *iov, int iovcnt)
{
	(void)s, (void)iov, (void)iovcnt;
	RSOCKET_STUB("rwritev");
	return -1;
}
CMA_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	(void)fds, (void)nfds, (void)timeout;
	RSOCKET_STUB("rpoll");
	return -1;
}
CMA_EXPORT int rselect(int nfds, fd_set *r, fd_set *w, fd_set *x, struct timeval *timeout)
{
	(void)nfds, (void)r, (void)w, (void)x, (void)timeout;
	RSOCKET_STUB("rselect");
	return -1;
}
CMA_EXPORT int rgetpeername(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)s, (void)addr, (void)len;
	RSOCKET_STUB("rgetpeername");
	return -1;
}
CMA_EXPORT int rgetsockname(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)s, (void)addr, (void)len;
	RSOCKET_STUB("rgetsockname");
	return -1;
}
CMA_EXPORT int rsetsockopt(int s, int level, int optname, const void *optval, socklen_t optlen)
{
	(void)s, (void)level, (void)optname, (void)optval, (void)optlen;
	RSOCKET_STUB("rsetsockopt");
	return -1;
}
CMA_EXPORT int rgetsockopt(int s, int level, int optname, void *optval, socklen_t *optlen)
{
	(void)s, (void)level, (void)optname, (void)optval, (void)optlen;
	RSOCKET_STUB("rgetsockopt");
	return -1;
}
CMA_EXPORT int rfcntl(int s, int cmd, ...)
{
	(void)s, (void)cmd;
	RSOCKET_STUB("rfcntl");
	return -1;
}
CMA_EXPORT off_t riomap(int s, void *buf, size_t len, int prot, int flags, off_t offset)
{
	(void)s, (void)buf, (void)len, (void)prot, (void)flags, (void)offset;
	RSOCKET_STUB("riomap");
	return -1;
}
CMA_EXPORT int riounmap(int s, void *buf, size_t len)
{
	(void)s, (void)buf, (void)len;
	RSOCKET_STUB("riounmap");
	return -1;
}
CMA_EXPORT size_t riowrite(int s, const void *buf, size_t count, off_t offset, int flags)
{
	(void)s, (void)buf, (void)count, (void)offset, (void)flags;
	RSOCKET_STUB("riowrite");
	return 0; /* a count: nothing written */
}
