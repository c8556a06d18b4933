/*
 * rsocket_poll.c: rpoll and rselect. Librspreload routes every select()
 * of a program through rpoll, and every poll() that names an rsocket, so
 * these must serve ordinary descriptors exactly as the kernel does: when
 * none of the descriptors is an rsocket, the arguments go to poll() or
 * select() untouched (the same results, errnos and timeout updates).
 */
#include "cma.h"
#include "rsocket.h"

#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>

/* Whether any of fds is an rsocket. */
static int rs_poll_has_rsocket(const struct pollfd *fds, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++)
		if (rs_lookup(fds[i].fd))
			return 1;
	return 0;
}

/* Whether a descriptor below nfds in one of the sets is an rsocket. */
static int rs_select_has_rsocket(int nfds, const fd_set *r, const fd_set *w, const fd_set *x)
{
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE; /* what an fd_set can hold */
	for (int fd = 0; fd < nfds; fd++) {
		if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (x && FD_ISSET(fd, x)))
			if (rs_lookup(fd))
				return 1;
	}
	return 0;
}

CMA_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	/* No rsocket at all: not even a look at fds (poll reports EFAULT). */
	if (rs_count() == 0 || !rs_poll_has_rsocket(fds, nfds))
		return poll(fds, nfds, timeout);
	vrdma_debug("rpoll: waiting on rsockets is not supported yet (ENOSYS)");
	errno = ENOSYS;
	return -1;
}

CMA_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	if (rs_count() == 0 || nfds < 0 || !rs_select_has_rsocket(nfds, readfds, writefds, exceptfds))
		return select(nfds, readfds, writefds, exceptfds, timeout);
	vrdma_debug("rselect: waiting on rsockets is not supported yet (ENOSYS)");
	errno = ENOSYS;
	return -1;
}
