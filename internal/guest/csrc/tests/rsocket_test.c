/*
 * rsocket_test.c: the rsocket calls on descriptors that are not rsockets,
 * as librspreload makes them for every program it is loaded into. rpoll
 * and rselect must give exactly what poll and select give (each case runs
 * both and compares), also beside a real rsocket; every call on one
 * socket fails with EBADF; rsocket checks its arguments (ENOTSUP) and
 * makes stream and datagram rsockets. The descriptor table
 * is checked white-box.
 *
 * needs: daemon
 */
#include <rdma/rsocket.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "rdmacm/rsocket.h"

/* Each call on one socket, made on descriptor fd: its result as a long
 * (-1 on failure, as each returns it). */
struct sock_call {
	const char *name;
	long (*call)(int fd);
};

static char buf[16];
static struct iovec iov = {buf, sizeof(buf)};

static long c_rbind(int fd)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	return rbind(fd, (struct sockaddr *)&sin, sizeof(sin));
}
static long c_rlisten(int fd) { return rlisten(fd, 1); }
static long c_raccept(int fd) { return raccept(fd, NULL, NULL); }
static long c_rconnect(int fd)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(1)};
	return rconnect(fd, (struct sockaddr *)&sin, sizeof(sin));
}
static long c_rshutdown(int fd) { return rshutdown(fd, SHUT_RDWR); }
static long c_rclose(int fd) { return rclose(fd); }
static long c_rrecv(int fd) { return rrecv(fd, buf, sizeof(buf), 0); }
static long c_rrecvfrom(int fd) { return rrecvfrom(fd, buf, sizeof(buf), 0, NULL, NULL); }
static long c_rrecvmsg(int fd)
{
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	return rrecvmsg(fd, &m, 0);
}
static long c_rsend(int fd) { return rsend(fd, "x", 1, 0); }
static long c_rsendto(int fd) { return rsendto(fd, "x", 1, 0, NULL, 0); }
static long c_rsendmsg(int fd)
{
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	return rsendmsg(fd, &m, 0);
}
static long c_rread(int fd) { return rread(fd, buf, sizeof(buf)); }
static long c_rreadv(int fd) { return rreadv(fd, &iov, 1); }
static long c_rwrite(int fd) { return rwrite(fd, "x", 1); }
static long c_rwritev(int fd) { return rwritev(fd, &iov, 1); }
static long c_rgetpeername(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	return rgetpeername(fd, (struct sockaddr *)&ss, &len);
}
static long c_rgetsockname(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	return rgetsockname(fd, (struct sockaddr *)&ss, &len);
}
static long c_rsetsockopt(int fd)
{
	int one = 1;
	return rsetsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
}
static long c_rgetsockopt(int fd)
{
	int v;
	socklen_t len = sizeof(v);
	return rgetsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &v, &len);
}
static long c_rfcntl_get(int fd) { return rfcntl(fd, F_GETFL); }
static long c_rfcntl_set(int fd) { return rfcntl(fd, F_SETFL, O_NONBLOCK); }
static long c_riomap(int fd) { return (long)riomap(fd, buf, sizeof(buf), 0, 0, -1); }
static long c_riounmap(int fd) { return riounmap(fd, buf, sizeof(buf)); }
static long c_riowrite(int fd) { return riowrite(fd, "x", 1, 0, 0) == (size_t)-1 ? -1 : 0; }

static const struct sock_call calls[] = {
	{"rbind", c_rbind},
	{"rlisten", c_rlisten},
	{"raccept", c_raccept},
	{"rconnect", c_rconnect},
	{"rshutdown", c_rshutdown},
	{"rclose", c_rclose},
	{"rrecv", c_rrecv},
	{"rrecvfrom", c_rrecvfrom},
	{"rrecvmsg", c_rrecvmsg},
	{"rsend", c_rsend},
	{"rsendto", c_rsendto},
	{"rsendmsg", c_rsendmsg},
	{"rread", c_rread},
	{"rreadv", c_rreadv},
	{"rwrite", c_rwrite},
	{"rwritev", c_rwritev},
	{"rgetpeername", c_rgetpeername},
	{"rgetsockname", c_rgetsockname},
	{"rsetsockopt", c_rsetsockopt},
	{"rgetsockopt", c_rgetsockopt},
	{"rfcntl F_GETFL", c_rfcntl_get},
	{"rfcntl F_SETFL", c_rfcntl_set},
	{"riomap", c_riomap},
	{"riounmap", c_riounmap},
	{"riowrite", c_riowrite},
};
#define NCALLS (sizeof(calls) / sizeof(calls[0]))

/* Every call on an ordinary descriptor (open or not): -1 with EBADF, and
 * the descriptor is left as it was (rclose must not close it). */
static void check_not_rsocket(int fd, const char *what, int open)
{
	for (size_t i = 0; i < NCALLS; i++) {
		errno = 0;
		long r = calls[i].call(fd);
		int e = errno;
		CHECK(r == -1 && e == EBADF, "%s on %s (%d): %ld, errno %d (%s), want -1 and EBADF", calls[i].name, what,
		      fd, r, e, strerror(e));
	}
	if (open)
		CHECK(fcntl(fd, F_GETFD) != -1 || errno != EBADF, "%s (%d) was closed by the calls", what, fd);
}

static void test_calls_on_ordinary_descriptors(int pipe_rd, int tcp)
{
	check_not_rsocket(pipe_rd, "a pipe", 1);
	check_not_rsocket(tcp, "a TCP socket", 1);
	check_not_rsocket(-1, "-1", 0);
	check_not_rsocket(1000, "a closed descriptor", 0);
	check_not_rsocket(RS_MAX_FD + 5, "a descriptor beyond the table", 0);
}

static void test_rsocket_arguments(void)
{
	static const struct {
		int domain, type, protocol, want;
	} cases[] = {
		{AF_UNIX, SOCK_STREAM, 0, ENOTSUP},
		{AF_INET, SOCK_RAW, 0, ENOTSUP},
		{AF_INET, SOCK_SEQPACKET, 0, ENOTSUP},
		{AF_INET, SOCK_STREAM, IPPROTO_UDP, ENOTSUP},
		{AF_INET6, SOCK_DGRAM, IPPROTO_TCP, ENOTSUP},
		/* valid: a datagram rsocket, whose descriptor is its UDP socket */
		{AF_INET6, SOCK_DGRAM, IPPROTO_UDP, 0},
		{AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		errno = 0;
		int r = rsocket(cases[i].domain, cases[i].type, cases[i].protocol);
		int e = errno;
		if (!cases[i].want) {
			int type = 0;
			socklen_t len = sizeof(type);
			CHECK(r >= 0 && rgetsockopt(r, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_DGRAM,
			      "rsocket(%d, %#x, %d): %d (errno %s), SO_TYPE %d: want a datagram rsocket", cases[i].domain,
			      cases[i].type, cases[i].protocol, r, strerror(e), type);
			if (r >= 0)
				CHECK(rclose(r) == 0, "rclose of a datagram rsocket: %s", strerror(errno));
			continue;
		}
		CHECK(r == -1 && e == cases[i].want, "rsocket(%d, %#x, %d): %d, errno %d (%s), want -1 and errno %d",
		      cases[i].domain, cases[i].type, cases[i].protocol, r, e, strerror(e), cases[i].want);
	}
}

/* rpoll against poll on the same descriptors: results, errnos, revents. */
static void compare_poll(const char *what, struct pollfd *fds, nfds_t n, int timeout)
{
	struct pollfd want[8], got[8];
	memcpy(want, fds, n * sizeof(*fds));
	memcpy(got, fds, n * sizeof(*fds));
	errno = 0;
	int wr = poll(want, n, timeout), we = errno;
	errno = 0;
	int gr = rpoll(got, n, timeout), ge = errno;
	CHECK(gr == wr && (gr != -1 || ge == we), "%s: rpoll %d (errno %d), poll %d (errno %d)", what, gr, ge, wr, we);
	for (nfds_t i = 0; i < n; i++)
		CHECK(got[i].revents == want[i].revents, "%s: fd %d: rpoll's revents %#x, poll's %#x", what, got[i].fd,
		      got[i].revents, want[i].revents);
}

static void *write_later(void *arg)
{
	int fd = *(int *)arg;
	usleep(20000);
	if (write(fd, "w", 1) != 1)
		return arg;
	return NULL;
}

static void test_rpoll(int p[2], int q[2], int tcp)
{
	struct pollfd fds[4] = {{p[0], POLLIN, 0}, {p[1], POLLOUT, 0}, {tcp, POLLIN | POLLOUT, 0}, {1000, POLLIN, 0}};
	compare_poll("nothing to read, a closed descriptor", fds, 4, 0);
	CHECK(write(p[1], "a", 1) == 1, "write");
	compare_poll("data to read", fds, 4, 0);
	compare_poll("data to read, blocking", fds, 2, -1);
	compare_poll("no descriptors", fds, 0, 0);
	struct pollfd neg = {-1, POLLIN, 0}; /* ignored by poll */
	compare_poll("a negative descriptor", &neg, 1, 0);
	char c;
	CHECK(read(p[0], &c, 1) == 1, "read");

	int r;
	if (rs_count() == 0) { /* with rsockets, rpoll reads fds itself (as rdma-core's) */
		errno = 0;
		r = rpoll(NULL, 1, 0);
		CHECK(r == -1 && errno == EFAULT, "rpoll(NULL, 1, 0): %d, errno %d, want -1 and EFAULT (poll's answer)", r,
		      errno);
	}

	/* Blocking until another thread writes: rpoll is poll, not a stub. */
	pthread_t th;
	pthread_create(&th, NULL, write_later, &q[1]);
	struct pollfd w = {q[0], POLLIN, 0};
	r = rpoll(&w, 1, -1);
	CHECK(r == 1 && w.revents == POLLIN, "rpoll waiting for a write: %d, revents %#x, want 1 and POLLIN", r, w.revents);
	void *res;
	pthread_join(th, &res);
	CHECK(res == NULL, "the writer failed");
	CHECK(read(q[0], &c, 1) == 1, "read");
}

/* rselect against select on copies of the same sets. */
static void compare_select(const char *what, int nfds, const fd_set *r, const fd_set *w, const fd_set *x, long usec)
{
	fd_set wr = *r, ww = *w, wx = *x, gr = *r, gw = *w, gx = *x;
	struct timeval wt = {0, usec}, gt = {0, usec};
	errno = 0;
	int want = select(nfds, &wr, &ww, &wx, &wt), we = errno;
	errno = 0;
	int got = rselect(nfds, &gr, &gw, &gx, &gt), ge = errno;
	CHECK(got == want && (got != -1 || ge == we), "%s: rselect %d (errno %d), select %d (errno %d)", what, got, ge,
	      want, we);
	if (got >= 0 && want >= 0)
		for (int fd = 0; fd < nfds; fd++)
			CHECK(FD_ISSET(fd, &gr) == FD_ISSET(fd, &wr) && FD_ISSET(fd, &gw) == FD_ISSET(fd, &ww) &&
				      FD_ISSET(fd, &gx) == FD_ISSET(fd, &wx),
			      "%s: fd %d: rselect's sets differ from select's", what, fd);
}

static void test_rselect(int p[2], int tcp)
{
	fd_set r, w, x;
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_ZERO(&x);
	/* Descriptor 0 too: rdma-core's rselect leaves it out. */
	FD_SET(0, &r);
	FD_SET(p[0], &r);
	FD_SET(p[1], &w);
	FD_SET(tcp, &r);
	FD_SET(tcp, &x);
	int nfds = (p[0] > p[1] ? p[0] : p[1]);
	nfds = (tcp > nfds ? tcp : nfds) + 1;
	compare_select("nothing to read", nfds, &r, &w, &x, 0);
	CHECK(write(p[1], "a", 1) == 1, "write");
	compare_select("data to read", nfds, &r, &w, &x, 0);
	char c;
	CHECK(read(p[0], &c, 1) == 1, "read");

	fd_set bad;
	FD_ZERO(&bad);
	FD_SET(1000, &bad);
	compare_select("a closed descriptor (EBADF)", 1001, &bad, &w, &x, 0);
	compare_select("no descriptors, a timeout", 0, &r, &w, &x, 1000);
	errno = 0;
	int ret = rselect(-1, NULL, NULL, NULL, NULL);
	CHECK(ret == -1 && errno == EINVAL, "rselect(-1, ...): %d, errno %d, want -1 and EINVAL (select's answer)", ret,
	      errno);
}

/* The descriptor table, white-box: ranges, duplicates, removal. */
static void test_table(int p[2])
{
	struct rsocket fake = {.fd = p[0]}, other = {.fd = p[0]}, out = {.fd = RS_MAX_FD}, neg = {.fd = -1};
	int before = rs_count();

	CHECK(rs_lookup(p[0]) == NULL, "a pipe is in the table");
	CHECK(rs_insert(&out) == EBADF && rs_insert(&neg) == EBADF, "descriptors out of range were entered");
	CHECK(rs_insert(&fake) == 0, "rs_insert");
	CHECK(rs_insert(&other) == EEXIST, "a descriptor entered twice");
	CHECK(rs_lookup(p[0]) == &fake && rs_lookup(p[1]) == NULL && rs_count() == before + 1, "lookups after an insert");
	rs_remove(&other); /* not the one entered: nothing happens */
	CHECK(rs_lookup(p[0]) == &fake && rs_count() == before + 1, "rs_remove of another rsocket removed the entry");
	rs_remove(&fake);
	CHECK(rs_lookup(p[0]) == NULL && rs_count() == before, "rs_remove");
}

/* A real rsocket beside ordinary descriptors: it is one (its calls are not
 * EBADF), they still poll and select as the kernel has them, and once
 * closed it is not one any more. */
static void test_beside_an_rsocket(int p[2], int q[2], int tcp)
{
	int rs = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(rs >= 0, "rsocket(AF_INET, SOCK_STREAM, 0): %s", strerror(errno));
	if (rs < 0)
		return;
	CHECK(rs_lookup(rs) != NULL && rs_count() == 1, "the rsocket is not in the table");
	int v;
	socklen_t len = sizeof(v);
	CHECK(rgetsockopt(rs, SOL_SOCKET, SO_ERROR, &v, &len) == 0 && v == 0, "SO_ERROR of a new rsocket");
	CHECK(rfcntl(rs, F_GETFL) == 0, "F_GETFL of a new rsocket: %d", rfcntl(rs, F_GETFL));

	test_rpoll(p, q, tcp);
	test_rselect(p, tcp);
	check_not_rsocket(p[1], "a pipe beside an rsocket", 1);

	/* The new rsocket has no events; with the pipe's, rpoll counts the pipe. */
	struct pollfd fds[2] = {{rs, POLLIN | POLLOUT, 0}, {p[1], POLLOUT, 0}};
	int r = rpoll(fds, 2, 0);
	CHECK(r == 1 && fds[0].revents == 0 && fds[1].revents == POLLOUT,
	      "rpoll of a new rsocket and a pipe: %d, revents %#x %#x, want 1, 0, POLLOUT", r, fds[0].revents,
	      fds[1].revents);

	CHECK(rclose(rs) == 0, "rclose: %s", strerror(errno));
	CHECK(rs_lookup(rs) == NULL && rs_count() == 0, "the closed rsocket is still in the table");
	check_not_rsocket(rs, "a closed rsocket", 0);
}

int main(void)
{
	int p[2], q[2];
	if (pipe(p) || pipe(q)) {
		perror("pipe");
		return 1;
	}
	int tcp = socket(AF_INET, SOCK_STREAM, 0);
	if (tcp < 0) {
		perror("socket");
		return 1;
	}
	test_calls_on_ordinary_descriptors(p[0], tcp);
	test_rsocket_arguments();
	test_rpoll(p, q, tcp);
	test_rselect(p, tcp);
	test_table(p);
	test_beside_an_rsocket(p, q, tcp);
	close(p[0]), close(p[1]), close(q[0]), close(q[1]), close(tcp);
	if (failures) {
		fprintf(stderr, "rsocket_test: %d failures\n", failures);
		return 1;
	}
	printf("rsocket_test: ok\n");
	return 0;
}
