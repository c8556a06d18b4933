/*
 * rsocket_poll.c: rpoll and rselect. Librspreload routes every select()
 * of a program through rpoll, and every poll() that names an rsocket, so
 * these must serve ordinary descriptors exactly as the kernel does: when
 * none of the descriptors is an rsocket, the arguments go to poll() or
 * select() untouched (the same results, errnos and timeout updates).
 * With rsockets among them, each rsocket's state is checked (completions
 * and CM events taken without waiting), and the wait is one poll() over
 * the ordinary descriptors and, for each rsocket, its CQ channel and its
 * CM event channel.
 */
#include "cma.h"
#include "rsocket.h"

#include <poll.h>
#include <rdma/rsocket.h>
#include <stdlib.h>
#include <sys/select.h>
#include <time.h>

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

/* The events of rs among events, after taking what has arrived; rs->mu held. */
static short rs_revents(struct rsocket *rs, short events)
{
	short rev = 0;
	if (rs->dg)
		return ds_revents(rs, events);
	if (rs->state == RS_CONNECTING && rs_connect_step(rs, 1) != 0 && errno == EINPROGRESS)
		return 0;
	switch (rs->state) {
	case RS_CONNECTED:
		rs_cm_events(rs);
		rs_progress(rs);
		(void)rs_keepalive(rs);
		/* fall through */
	case RS_DISCONNECTED:
	case RS_ERROR:
		if ((events & POLLIN) && (rs_have_rdata(rs) || !rs->readable))
			rev |= POLLIN;
		if ((events & POLLOUT) && rs->writable && rs_can_send(rs))
			rev |= POLLOUT;
		/* POLLHUP once what arrived before the end is read, as a TCP
		 * socket has it (rdma-core's sets it at once: rstream -T a then
		 * fails when the last data and the peer's close come together). */
		if (rs->state == RS_DISCONNECTED && !rs_have_rdata(rs))
			rev |= POLLHUP;
		else if (rs->state == RS_ERROR)
			rev |= POLLERR;
		return rev;
	case RS_LISTENING: {
		struct pollfd p = {.fd = rs->fd, .events = POLLIN};
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN))
			rev |= events & POLLIN;
		return rev;
	}
	case RS_CONNECT_ERROR:
		return (short)((events & (POLLIN | POLLOUT)) | POLLERR);
	default:
		return 0;
	}
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One look at every descriptor, without waiting: how many have events. */
static int rs_poll_check(struct pollfd *fds, nfds_t nfds)
{
	int cnt = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		struct rsocket *rs = rs_lookup(fds[i].fd);
		if (rs) {
			pthread_mutex_lock(&rs->mu);
			fds[i].revents = rs_revents(rs, fds[i].events);
			pthread_mutex_unlock(&rs->mu);
		} else {
			fds[i].revents = 0;
			if (poll(&fds[i], 1, 0) < 0)
				return -1;
		}
		if (fds[i].revents)
			cnt++;
	}
	return cnt;
}

/* The wait array of rs_poll_mixed, kept per thread (as rdma-core keeps
 * its own), so a program polling in a loop does not allocate each time. */
static __thread struct pollfd *rs_wait_fds;
static __thread nfds_t rs_wait_cap;

static struct pollfd *rs_wait_array(nfds_t n)
{
	if (n > rs_wait_cap) {
		struct pollfd *p = realloc(rs_wait_fds, n * sizeof(*p));
		if (!p)
			return NULL;
		rs_wait_fds = p;
		rs_wait_cap = n;
	}
	return rs_wait_fds;
}

static int rs_poll_mixed(struct pollfd *fds, nfds_t nfds, int timeout)
{
	int64_t deadline = timeout > 0 ? now_ms() + timeout : 0;
	struct pollfd *w = rs_wait_array(2 * nfds);
	if (!w) {
		errno = ENOMEM;
		return -1;
	}
	int ret;
	for (;;) {
		ret = rs_poll_check(fds, nfds);
		if (ret != 0 || timeout == 0)
			break;
		/* What to wait on: each rsocket's CQ channel (armed) and CM channel;
		 * until the first keepalive probe due. */
		int ka_wait = -1;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsocket *rs = rs_lookup(fds[i].fd);
			w[2 * i] = (struct pollfd){.fd = -1};
			w[2 * i + 1] = (struct pollfd){.fd = -1};
			if (!rs) {
				w[2 * i] = (struct pollfd){.fd = fds[i].fd, .events = fds[i].events};
				continue;
			}
			pthread_mutex_lock(&rs->mu);
			if (rs->dg) {
				w[2 * i] = (struct pollfd){.fd = ds_arm(rs), .events = POLLIN};
			} else if (rs->cq && rs->state == RS_CONNECTED) {
				rs_arm(rs);
				w[2 * i] = (struct pollfd){.fd = rs->cch->fd, .events = POLLIN};
			}
			w[2 * i + 1] = (struct pollfd){.fd = rs->fd, .events = POLLIN};
			int ka = rs->dg ? -1 : rs_keepalive(rs);
			if (ka >= 0 && (ka_wait < 0 || ka < ka_wait))
				ka_wait = ka;
			/* What completed before the arm. */
			short rev = rs_revents(rs, fds[i].events);
			pthread_mutex_unlock(&rs->mu);
			if (rev)
				goto again;
		}
		int wait = -1;
		if (timeout > 0) {
			int64_t left = deadline - now_ms();
			if (left <= 0) {
				ret = 0;
				break;
			}
			wait = (int)left;
		}
		if (ka_wait >= 0 && (wait < 0 || ka_wait < wait))
			wait = ka_wait;
		if (poll(w, 2 * nfds, wait) < 0) {
			ret = -1;
			break;
		}
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsocket *rs = rs_lookup(fds[i].fd);
			if (rs && w[2 * i].revents) {
				pthread_mutex_lock(&rs->mu);
				if (rs->dg)
					ds_take_cq_events(rs);
				else
					rs_take_cq_events(rs);
				pthread_mutex_unlock(&rs->mu);
			}
		}
	again:;
	}
	return ret;
}

CMA_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	/* No rsocket at all: not even a look at fds (poll reports EFAULT). */
	if (rs_count() == 0 || !rs_poll_has_rsocket(fds, nfds))
		return poll(fds, nfds, timeout);
	return rs_poll_mixed(fds, nfds, timeout);
}

CMA_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	if (rs_count() == 0 || nfds < 0 || !rs_select_has_rsocket(nfds, readfds, writefds, exceptfds))
		return select(nfds, readfds, writefds, exceptfds, timeout);
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	struct pollfd *fds = calloc((size_t)nfds, sizeof(*fds));
	if (!fds) {
		errno = ENOMEM;
		return -1;
	}
	int n = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		int x = exceptfds && FD_ISSET(fd, exceptfds);
		if (readfds && FD_ISSET(fd, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			ev |= POLLOUT;
		if (ev || x)
			fds[n++] = (struct pollfd){.fd = fd, .events = (short)(ev | (x ? POLLPRI : 0))};
	}
	int ms = -1;
	if (timeout) {
		if (timeout->tv_sec < 0 || timeout->tv_usec < 0) {
			free(fds);
			errno = EINVAL;
			return -1;
		}
		ms = (int)(timeout->tv_sec * 1000 + timeout->tv_usec / 1000);
	}
	int ret = rs_poll_mixed(fds, (nfds_t)n, ms);
	for (int i = 0; ret > 0 && i < n; i++) {
		if (fds[i].revents & POLLNVAL) { /* as select: a descriptor that is not open */
			free(fds);
			errno = EBADF;
			return -1;
		}
	}
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	if (ret > 0) {
		ret = 0;
		for (int i = 0; i < n; i++) {
			short r = fds[i].revents;
			if (readfds && (fds[i].events & POLLIN) && (r & (POLLIN | POLLHUP | POLLERR)))
				FD_SET(fds[i].fd, readfds), ret++;
			if (writefds && (fds[i].events & POLLOUT) && (r & (POLLOUT | POLLERR)))
				FD_SET(fds[i].fd, writefds), ret++;
			if (exceptfds && (fds[i].events & POLLPRI) && (r & POLLPRI))
				FD_SET(fds[i].fd, exceptfds), ret++;
		}
	}
	int e = errno;
	free(fds);
	errno = e;
	return ret;
}
