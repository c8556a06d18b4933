/*
 * rsocket_shutdown_test.c: shutdowns that cross on a stream rsocket, both
 * ends in this process against a real daemon (VRDMA_SOCKET). The client
 * sends a line and shuts its writing side (SHUT_WR, as `nc -N` does); the
 * server, which has not yet looked at the socket again, answers and
 * closes (or shuts its writing side too). The client's SHUTDOWN message
 * then reaches the server while the server's own shutdown waits for its
 * answer to go out: the answer must still reach the client, followed by
 * the end. Before the fix the crossed SHUTDOWN ended the server's wait at
 * once, and the QP was moved to the error state (rdma_disconnect) with
 * the answer still queued: the client saw the end without the answer
 * (TestToolRspreloadNc's nc under librspreload, now and then).
 *
 * needs: daemon
 */
#include <rdma/rsocket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"

/* The hang guard of a wait: a lost event, not slowness. */
#define HANG_GUARD_MS 20000

/* Connections per case: one crossing loses the answer only when the
 * daemon has not yet carried it when the QP fails, so each case tries
 * many times. */
#define ROUNDS 40

static const char line[] = "hello over rsockets\n";
static const char answer[] = "the answer over rsockets\n";

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

/* A connected pair on 127.0.0.1: *c dialled, *s accepted. 0 or -1. */
static int connect_pair(int *c, int *s)
{
	struct acceptor a = {.l = rsocket(AF_INET, SOCK_STREAM, 0), .fd = -1};
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(addr);
	if (a.l < 0 || rbind(a.l, (struct sockaddr *)&addr, sizeof(addr)) != 0 || rlisten(a.l, 1) != 0 ||
	    rgetsockname(a.l, (struct sockaddr *)&addr, &len) != 0) {
		CHECK(0, "a listener: %s", strerror(errno));
		return -1;
	}
	pthread_create(&a.th, NULL, accept_main, &a);
	*c = rsocket(AF_INET, SOCK_STREAM, 0);
	int r = rconnect(*c, (struct sockaddr *)&addr, sizeof(addr));
	CHECK(r == 0, "rconnect: %s", strerror(errno));
	pthread_join(a.th, NULL);
	CHECK(a.fd >= 0, "raccept: %s", strerror(a.err));
	rclose(a.l);
	*s = a.fd;
	if (r != 0 || a.fd < 0) {
		rclose(*c);
		if (a.fd >= 0)
			rclose(a.fd);
		return -1;
	}
	return 0;
}

/* How the server ends its side after answering. */
enum server_end {
	END_CLOSE,   /* rclose: SHUT_RDWR, then the rsocket is freed */
	END_SHUT_WR, /* rshutdown SHUT_WR without reading the client's end first */
};

/* One round: 0 when the client got the answer and then the end. */
static int round_trip(enum server_end end, int round)
{
	int c, s;
	if (connect_pair(&c, &s) != 0)
		return -1;
	int bad = 0;
	char buf[64];
	CHECK(rsend(c, line, sizeof(line) - 1, 0) == (ssize_t)(sizeof(line) - 1), "rsend the line: %s",
	      strerror(errno));
	ssize_t n = rrecv(s, buf, sizeof(line) - 1, MSG_WAITALL);
	CHECK(n == (ssize_t)(sizeof(line) - 1) && memcmp(buf, line, sizeof(line) - 1) == 0,
	      "the server's rrecv of the line: %zd (%s)", n, strerror(errno));
	/* The client's SHUTDOWN is acknowledged (rshutdown waits for its
	 * sends) and so lies in the server's completion queue, unread, when
	 * the server answers and ends its side below. */
	CHECK(rshutdown(c, SHUT_WR) == 0, "the client's rshutdown SHUT_WR: %s", strerror(errno));
	CHECK(rsend(s, answer, sizeof(answer) - 1, 0) == (ssize_t)(sizeof(answer) - 1), "rsend the answer: %s",
	      strerror(errno));
	if (end == END_CLOSE) {
		CHECK(rclose(s) == 0, "the server's rclose: %s", strerror(errno));
	} else {
		CHECK(rshutdown(s, SHUT_WR) == 0, "the server's rshutdown SHUT_WR: %s", strerror(errno));
	}
	/* The client reads as nc does: rpoll, then rrecv until the end. */
	size_t got = 0;
	for (;;) {
		struct pollfd p = {c, POLLIN, 0};
		int r = rpoll(&p, 1, HANG_GUARD_MS);
		if (r != 1) {
			CHECK(0, "round %d: the client's rpoll: %d (%s)", round, r, strerror(errno));
			bad = 1;
			break;
		}
		if (!(p.revents & POLLIN)) {
			CHECK(0, "round %d: the client's rpoll: revents %#x without POLLIN after %zu bytes", round,
			      p.revents, got);
			bad = 1;
			break;
		}
		n = rrecv(c, buf + got, sizeof(buf) - got, 0);
		if (n <= 0) {
			CHECK(n == 0, "round %d: the client's rrecv: %s", round, strerror(errno));
			break;
		}
		got += (size_t)n;
	}
	if (!bad && (got != sizeof(answer) - 1 || memcmp(buf, answer, got) != 0)) {
		CHECK(0, "round %d: the client got %zu bytes before the end, want the server's answer (%zu bytes)",
		      round, got, sizeof(answer) - 1);
		bad = 1;
	}
	rclose(c);
	if (end != END_CLOSE)
		rclose(s);
	return bad ? -1 : 0;
}

static void run(enum server_end end, const char *what)
{
	int lost = 0;
	for (int i = 0; i < ROUNDS; i++)
		if (round_trip(end, i) != 0)
			lost++;
	CHECK(lost == 0, "%s: the client missed the answer in %d of %d rounds", what, lost, ROUNDS);
}

static void test_close_after_peer_shut_wr(void)
{
	run(END_CLOSE, "the server answered and closed");
}

static void test_shut_wr_crossing(void)
{
	run(END_SHUT_WR, "the server answered and shut its writing side");
}

int main(void)
{
	static const struct test_case cases[] = {
		{"close after the peer's SHUT_WR", test_close_after_peer_shut_wr},
		{"SHUT_WR crossing the peer's", test_shut_wr_crossing},
	};
	RUN_CASES(cases);
	return failures ? 1 : 0;
}
