/*
 * rsocket_stream_test.c: stream rsockets as an application uses them, both
 * ends in this process against a real daemon (VRDMA_SOCKET): listening on
 * a port the daemon picks, connecting blocking and nonblocking, data both
 * ways checked byte for byte (single buffers, iovecs, MSG_PEEK,
 * MSG_WAITALL, more than the receive buffer at once), rpoll and rselect on
 * rsockets, options, half and full shutdown seen by the peer, riomap and
 * riowrite, and the errnos of misuse.
 *
 * needs: daemon
 */
#include <rdma/rsocket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"

/* The hang guard of a wait: a lost event, not slowness. */
#define HANG_GUARD_MS 20000

static struct sockaddr_in loopback(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* RDMA_IOMAPSIZE of the sockets connect_pair makes (0: none). */
static int iomap_slots;

static void set_iomap(int fd)
{
	if (iomap_slots)
		CHECK(rsetsockopt(fd, SOL_RDMA, RDMA_IOMAPSIZE, &iomap_slots, sizeof(iomap_slots)) == 0,
		      "RDMA_IOMAPSIZE: %s", strerror(errno));
}

/* A listening rsocket on 127.0.0.1 and the port the daemon gave it. */
static int listen_on(uint16_t *port)
{
	int l = rsocket(AF_INET, SOCK_STREAM, 0);
	if (l < 0) {
		CHECK(0, "rsocket: %s", strerror(errno));
		return -1;
	}
	set_iomap(l);
	struct sockaddr_in a = loopback(0);
	CHECK(rbind(l, (struct sockaddr *)&a, sizeof(a)) == 0, "rbind: %s", strerror(errno));
	CHECK(rlisten(l, 4) == 0, "rlisten: %s", strerror(errno));
	struct sockaddr_in got;
	socklen_t len = sizeof(got);
	CHECK(rgetsockname(l, (struct sockaddr *)&got, &len) == 0 && len == sizeof(got) && got.sin_family == AF_INET,
	      "rgetsockname of a listener: %s", strerror(errno));
	*port = ntohs(got.sin_port);
	CHECK(*port != 0, "the listener has no port");
	return l;
}

struct acceptor {
	pthread_t th;
	int l, fd, err;
};

static void *accept_main(void *arg)
{
	struct acceptor *a = arg;
	a->fd = raccept(a->l, NULL, NULL);
	a->err = errno;
	return NULL;
}

/* A connected pair: *c dialled, *s accepted. nonblock: c is nonblocking
 * and its connection finishes through rpoll. 0 or -1. */
static int connect_pair(int *c, int *s, int nonblock)
{
	uint16_t port;
	struct acceptor a = {.l = listen_on(&port), .fd = -1};
	if (a.l < 0)
		return -1;
	pthread_create(&a.th, NULL, accept_main, &a);
	*c = rsocket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
	CHECK(*c >= 0, "rsocket: %s", strerror(errno));
	set_iomap(*c);
	struct sockaddr_in to = loopback(port);
	int r = rconnect(*c, (struct sockaddr *)&to, sizeof(to));
	/* A nonblocking rconnect may also connect within the call (the
	 * acceptor's thread answered while it took its steps), as connect(2)
	 * may: a loaded machine saw it, once in a TestCUnits run. */
	if (nonblock && r != 0) {
		CHECK(r == -1 && errno == EINPROGRESS, "a nonblocking rconnect: %d (%s), want EINPROGRESS or 0", r,
		      strerror(errno));
		struct pollfd p = {*c, POLLOUT, 0};
		r = rpoll(&p, 1, HANG_GUARD_MS);
		CHECK(r == 1 && (p.revents & POLLOUT) && !(p.revents & POLLERR),
		      "rpoll for a connection: %d, revents %#x", r, p.revents);
		int err = -1;
		socklen_t len = sizeof(err);
		CHECK(rgetsockopt(*c, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0, "SO_ERROR %d", err);
		r = 0;
	}
	CHECK(r == 0, "rconnect: %s", strerror(errno));
	pthread_join(a.th, NULL);
	CHECK(a.fd >= 0, "raccept: %s", strerror(a.err));
	*s = a.fd;
	rclose(a.l);
	return (r == 0 && a.fd >= 0) ? 0 : -1;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 11));
}

struct reader {
	pthread_t th;
	int fd;
	uint8_t *buf;
	size_t len;
	ssize_t got;
	int err;
};

static void *read_main(void *arg)
{
	struct reader *r = arg;
	r->got = rrecv(r->fd, r->buf, r->len, MSG_WAITALL);
	r->err = errno;
	return NULL;
}

/* More than the receive buffer in one rsend, read with MSG_WAITALL by a
 * thread, checked byte for byte. */
static void test_bulk(int c, int s)
{
	const size_t n = (1 << 20) + 3;
	uint8_t *out = malloc(n), *in = calloc(1, n);
	for (size_t i = 0; i < n; i++)
		out[i] = pattern(i);
	struct reader r = {.fd = s, .buf = in, .len = n};
	pthread_create(&r.th, NULL, read_main, &r);
	ssize_t w = rsend(c, out, n, 0);
	pthread_join(r.th, NULL);
	CHECK(w == (ssize_t)n, "rsend of %zu bytes: %zd (%s)", n, w, strerror(errno));
	CHECK(r.got == (ssize_t)n, "rrecv MSG_WAITALL of %zu bytes: %zd (%s)", n, r.got, strerror(r.err));
	CHECK(memcmp(in, out, n) == 0, "the bytes received differ from those sent");
	free(out);
	free(in);
}

/* iovecs both ways, MSG_PEEK, and the other direction. */
static void test_vectors(int c, int s)
{
	char a[] = "hello, ", b[] = "rsocket ", d[] = "world";
	struct iovec wv[3] = {{a, 7}, {b, 8}, {d, 5}};
	CHECK(rwritev(c, wv, 3) == 20, "rwritev: %s", strerror(errno));
	char peek[8] = {0};
	CHECK(rrecv(s, peek, 5, MSG_PEEK | MSG_WAITALL) == 5 && memcmp(peek, "hello", 5) == 0, "MSG_PEEK: %.5s", peek);
	char x[12] = {0}, y[8] = {0};
	struct iovec rv[2] = {{x, 12}, {y, 8}};
	ssize_t got = 0;
	for (int i = 0; i < 20 && got < 20; i++) { /* the bytes may come in more than one message */
		struct iovec part[2];
		int cnt = 0;
		size_t skip = (size_t)got;
		for (int k = 0; k < 2; k++) {
			if (skip >= rv[k].iov_len) {
				skip -= rv[k].iov_len;
				continue;
			}
			part[cnt].iov_base = (char *)rv[k].iov_base + skip;
			part[cnt++].iov_len = rv[k].iov_len - skip;
			skip = 0;
		}
		ssize_t r = rreadv(s, part, cnt);
		if (r <= 0)
			break;
		got += r;
	}
	CHECK(got == 20 && memcmp(x, "hello, rsock", 12) == 0 && memcmp(y, "et world", 8) == 0, "rreadv: %zd %.12s %.8s",
	      got, x, y);
	CHECK(rwrite(s, "pong", 4) == 4, "rwrite back: %s", strerror(errno));
	char p[4];
	CHECK(rrecv(c, p, 4, MSG_WAITALL) == 4 && memcmp(p, "pong", 4) == 0, "rrecv back");
	struct msghdr m = {.msg_iov = wv, .msg_iovlen = 1};
	CHECK(rsendmsg(c, &m, 0) == 7, "rsendmsg: %s", strerror(errno));
	char q[7];
	struct iovec qv = {q, 7};
	struct msghdr mr = {.msg_iov = &qv, .msg_iovlen = 1};
	CHECK(rrecvmsg(s, &mr, MSG_WAITALL) == 7 && memcmp(q, "hello, ", 7) == 0, "rrecvmsg");
}

/* O_NONBLOCK, rpoll and rselect on a connected pair. */
static void test_nonblocking(int c, int s)
{
	CHECK(rfcntl(s, F_SETFL, O_NONBLOCK) == 0 && rfcntl(s, F_GETFL) == O_NONBLOCK, "F_SETFL O_NONBLOCK");
	char buf[16];
	errno = 0;
	CHECK(rrecv(s, buf, sizeof(buf), 0) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK),
	      "rrecv with nothing to read: errno %d", errno);
	struct pollfd p[2] = {{s, POLLIN, 0}, {c, POLLOUT, 0}};
	int r = rpoll(p, 2, 0);
	CHECK(r == 1 && p[0].revents == 0 && p[1].revents == POLLOUT, "rpoll: %d, %#x %#x, want 1, 0, POLLOUT", r,
	      p[0].revents, p[1].revents);
	CHECK(rsend(c, "12345", 5, 0) == 5, "rsend");
	p[0].revents = 0;
	r = rpoll(p, 1, HANG_GUARD_MS);
	CHECK(r == 1 && p[0].revents == POLLIN, "rpoll waiting for data: %d, revents %#x", r, p[0].revents);
	CHECK(rsend(c, "6", 1, 0) == 1, "rsend");
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	struct timeval tv = {HANG_GUARD_MS / 1000, 0};
	r = rselect(s + 1, &rd, NULL, NULL, &tv);
	CHECK(r == 1 && FD_ISSET(s, &rd), "rselect: %d", r);
	size_t got = 0;
	for (int i = 0; i < 100 && got < 6; i++) {
		ssize_t n = rrecv(s, buf + got, sizeof(buf) - got, 0);
		if (n > 0)
			got += (size_t)n;
		else
			rpoll(p, 1, HANG_GUARD_MS);
	}
	CHECK(got == 6 && memcmp(buf, "123456", 6) == 0, "nonblocking rrecv: %zu bytes", got);
	CHECK(rfcntl(s, F_SETFL, 0) == 0, "F_SETFL 0");
}

static void test_options(int c)
{
	int v = 1;
	socklen_t len = sizeof(v);
	CHECK(rsetsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)) == 0, "TCP_NODELAY");
	v = 0;
	CHECK(rgetsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, &len) == 0 && v == 1, "TCP_NODELAY read back: %d", v);
	v = 64;
	errno = 0;
	CHECK(rsetsockopt(c, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)) == -1 && errno == EINVAL,
	      "RDMA_SQSIZE on a connected rsocket: errno %d, want EINVAL", errno);
	errno = 0;
	CHECK(rsetsockopt(c, SOL_SOCKET, SO_BROADCAST, &v, sizeof(v)) == -1 && errno == ENOTSUP,
	      "an option rsockets do not have: errno %d, want ENOTSUP", errno);
	errno = 0;
	CHECK(rsetsockopt(c, SOL_SOCKET, SO_REUSEADDR, &v, 2) == -1 && errno == EINVAL, "a short option: errno %d",
	      errno);
	struct linger l = {1, 0};
	len = sizeof(l);
	CHECK(rgetsockopt(c, SOL_SOCKET, SO_LINGER, &l, &len) == 0 && len == sizeof(l), "SO_LINGER");
	int e = -1;
	len = sizeof(e);
	CHECK(rgetsockopt(c, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && e == 0, "SO_ERROR: %d", e);

	/* The default buffers: 4 MiB each way for a process that may lock
	 * memory without limit (root), at least rdma-core's 128 KiB otherwise. */
	int d = rsocket(AF_INET, SOCK_STREAM, 0);
	int opts[] = {SO_RCVBUF, SO_SNDBUF};
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		len = sizeof(v);
		CHECK(rgetsockopt(d, SOL_SOCKET, opts[i], &v, &len) == 0 && v >= 1 << 17 && (geteuid() != 0 || v == 1 << 22),
		      "the default buffer (option %d): %d, want 4 MiB as root, at least 128 KiB otherwise", opts[i], v);
	}
	rclose(d);

	int n = rsocket(AF_INET, SOCK_STREAM, 0);
	v = 1 << 16;
	CHECK(rsetsockopt(n, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) == 0, "SO_RCVBUF");
	len = sizeof(v);
	CHECK(rgetsockopt(n, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 && v == 1 << 17, "SO_RCVBUF read back: %d", v);
	v = 100;
	CHECK(rsetsockopt(n, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)) == 0, "RDMA_SQSIZE before the connection");
	rclose(n);
}

/* SHUT_WR: the peer reads what was sent, then the end; it can still send. */
static void test_half_close(int c, int s)
{
	CHECK(rsend(c, "last", 4, 0) == 4, "rsend");
	CHECK(rshutdown(c, SHUT_WR) == 0, "rshutdown SHUT_WR: %s", strerror(errno));
	char buf[8];
	CHECK(rrecv(s, buf, 4, MSG_WAITALL) == 4 && memcmp(buf, "last", 4) == 0, "the data before the shutdown");
	ssize_t r = rrecv(s, buf, sizeof(buf), 0);
	CHECK(r == 0, "rrecv after the peer's SHUT_WR: %zd (%s), want 0 (the end)", r, strerror(errno));
	errno = 0;
	CHECK(rsend(c, "x", 1, 0) == -1 && errno == EPIPE, "rsend after SHUT_WR: errno %d, want EPIPE", errno);
	CHECK(rsend(s, "back", 4, 0) == 4, "the other way after SHUT_WR: %s", strerror(errno));
	CHECK(rrecv(c, buf, 4, MSG_WAITALL) == 4 && memcmp(buf, "back", 4) == 0, "rrecv the other way");
}

/* rclose of one end: the other sees the end in rpoll and rrecv. */
static void test_close(int c, int s)
{
	CHECK(rclose(c) == 0, "rclose");
	struct pollfd p = {s, POLLIN, 0};
	int r = rpoll(&p, 1, HANG_GUARD_MS);
	CHECK(r == 1 && (p.revents & POLLIN), "rpoll after the peer closed: %d, revents %#x", r, p.revents);
	char b;
	CHECK(rrecv(s, &b, 1, 0) == 0, "rrecv after the peer closed: want 0");
	CHECK(rclose(s) == 0, "rclose");
}

/* riomap on s, riowrite from c into it; the data lands in s's buffer
 * without s reading anything (c's rsend after it orders them). */
static void test_iomap(int c, int s)
{
	enum { N = 65536 };
	uint8_t *dst = NULL, *src = malloc(N);
	CHECK(posix_memalign((void **)&dst, 4096, N) == 0, "posix_memalign");
	memset(dst, 0, N);
	for (size_t i = 0; i < N; i++)
		src[i] = pattern(i + 5);
	errno = 0;
	CHECK(riomap(s, dst, N, PROT_READ, 0, 0) == -1 && errno == EINVAL, "riomap PROT_READ: errno %d", errno);
	errno = 0;
	CHECK(riomap(s, dst, N, PROT_NONE, 0, 0) == -1 && errno == ENOTSUP, "riomap PROT_NONE: errno %d", errno);
	off_t off = riomap(s, dst, N, PROT_WRITE, 0, 0);
	CHECK(off == 0, "riomap: %lld (%s)", (long long)off, strerror(errno));
	char b;
	CHECK(rsend(s, "m", 1, 0) == 1 && rrecv(c, &b, 1, MSG_WAITALL) == 1, "the message that carries the riomap");
	size_t w = riowrite(c, src, N - 10, 0, 0);
	CHECK(w == N - 10, "riowrite: %zu (%s)", w, strerror(errno));
	w = riowrite(c, src + N - 10, 100, N - 10, 0);
	CHECK(w == 10, "riowrite past the mapping's end: %zu, want the 10 bytes that fit", w);
	errno = 0;
	w = riowrite(c, src, 1, 2 * N, 0);
	CHECK(w == (size_t)-1 && errno == EINVAL, "riowrite outside every mapping: %zu, errno %d", w, errno);
	CHECK(rsend(c, "d", 1, 0) == 1 && rrecv(s, &b, 1, MSG_WAITALL) == 1, "the message after the writes");
	CHECK(memcmp(dst, src, N) == 0, "riowrite's bytes differ in the mapped buffer");
	CHECK(riounmap(s, dst, N) == 0, "riounmap: %s", strerror(errno));
	errno = 0;
	CHECK(riounmap(s, dst, N) == -1 && errno == EINVAL, "riounmap again: errno %d", errno);
	free(dst);
	free(src);
}

static void test_misuse(void)
{
	uint16_t port;
	int l = listen_on(&port);
	int u = rsocket(AF_INET, SOCK_STREAM, 0);
	char b[4];
	errno = 0;
	CHECK(raccept(u, NULL, NULL) == -1 && errno == EINVAL, "raccept on a socket that does not listen: %d", errno);
	errno = 0;
	CHECK(rsend(u, "x", 1, 0) == -1 && errno == ENOTCONN, "rsend unconnected: %d", errno);
	errno = 0;
	CHECK(rrecv(u, b, 1, 0) == -1 && errno == ENOTCONN, "rrecv unconnected: %d", errno);
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	errno = 0;
	CHECK(rgetpeername(u, (struct sockaddr *)&a, &len) == -1 && errno == ENOTCONN, "rgetpeername unconnected: %d",
	      errno);
	errno = 0;
	CHECK(rconnect(l, (struct sockaddr *)&a, sizeof(a)) == -1 && errno == EINVAL, "rconnect of a listener: %d",
	      errno);
	errno = 0;
	CHECK(rfcntl(u, F_DUPFD, 0) == -1 && errno == ENOTSUP, "rfcntl F_DUPFD: %d", errno);
	errno = 0;
	CHECK(rshutdown(u, SHUT_RDWR) == -1 && errno == ENOTCONN, "rshutdown unconnected: %d", errno);
	struct sockaddr_in lo = loopback(port);
	errno = 0;
	CHECK(rsendto(u, "x", 1, 0, (struct sockaddr *)&lo, sizeof(lo)) == -1 && errno == EISCONN,
	      "rsendto with an address on a stream: %d", errno);
	errno = 0;
	CHECK(rconnect(u, NULL, 0) == -1 && errno == EINVAL, "rconnect to nothing: %d", errno);
	rclose(l);
	/* Nobody listens there any more. */
	errno = 0;
	int r = rconnect(u, (struct sockaddr *)&lo, sizeof(lo));
	CHECK(r == -1 && errno == ECONNREFUSED, "rconnect to a port nobody listens on: %d (%s), want ECONNREFUSED", r,
	      strerror(errno));
	rclose(u);
}

int main(void)
{
	int c, s;
	if (connect_pair(&c, &s, 0) == 0) {
		struct sockaddr_in a;
		socklen_t len = sizeof(a);
		CHECK(rgetpeername(c, (struct sockaddr *)&a, &len) == 0 && a.sin_family == AF_INET &&
			      a.sin_addr.s_addr == htonl(INADDR_LOOPBACK),
		      "rgetpeername: %s", strerror(errno));
		test_bulk(c, s);
		test_bulk(s, c);
		test_vectors(c, s);
		test_nonblocking(c, s);
		test_options(c);
		test_half_close(c, s);
		CHECK(rclose(c) == 0 && rclose(s) == 0, "rclose");
	}
	if (connect_pair(&c, &s, 1) == 0) {
		CHECK(rfcntl(c, F_SETFL, 0) == 0, "F_SETFL 0");
		test_bulk(c, s);
		test_close(c, s);
	}
	/* No iomap slots offered (the default): riomap has nowhere to go. */
	if (connect_pair(&c, &s, 0) == 0) {
		char m[8];
		errno = 0;
		CHECK(riomap(c, m, sizeof(m), PROT_WRITE, 0, -1) == -1 && errno == ENOMEM,
		      "riomap without the peer's slots: errno %d, want ENOMEM", errno);
		rclose(c);
		rclose(s);
	}
	iomap_slots = 4;
	if (connect_pair(&c, &s, 0) == 0) {
		test_iomap(c, s);
		rclose(c);
		rclose(s);
	}
	iomap_slots = 0;
	int u = rsocket(AF_INET, SOCK_STREAM, 0);
	char m[8];
	errno = 0;
	CHECK(riomap(u, m, sizeof(m), PROT_WRITE, 0, -1) == -1 && errno == EINVAL, "riomap before the connection: %d",
	      errno);
	rclose(u);
	test_misuse();
	if (failures) {
		fprintf(stderr, "rsocket_stream_test: %d failures\n", failures);
		return 1;
	}
	printf("rsocket_stream_test: ok\n");
	return 0;
}
