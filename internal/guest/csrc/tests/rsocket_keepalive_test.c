/*
 * rsocket_keepalive_test.c: a stream rsocket whose peer's process is
 * killed. The peer (a child process, its own library and connection to the
 * daemon) connects, sends a byte and kills itself with SIGKILL, so it says
 * nothing more: no rshutdown, no close. The survivor turned SO_KEEPALIVE on
 * with TCP_KEEPIDLE 1 s: its probes (a 0-byte RDMA WRITE, as rdma-core's)
 * find the dead peer, and a blocked rrecv, and rpoll, must report the
 * error within a generous deadline instead of waiting for ever. (On one
 * host the daemon also ends a dead process's connections, so these pass
 * without probes too; TestRsocketKeepaliveBetweenHosts has a peer that
 * vanishes silently.) And probes on a live connection for a few seconds
 * disturb nothing: rdma-core's peers take them (address and key 0), and so
 * must ours. Each case runs in a process of its own, which forks its peer
 * before either uses the library.
 *
 * needs: daemon
 */
#include <rdma/rsocket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define DEADLINE_S 30 /* a hang guard, not a performance bound */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The child: connects to port, sends a byte and, once the survivor says
 * on ackfd that the byte arrived (a byte posted just before a SIGKILL may
 * never leave), dies without a word; or, live, waits 3 s (the survivor
 * probes meanwhile), sends 'y' and waits for the answer 'z'. */
static void peer(int portfd, int ackfd, int live)
{
	uint16_t port;
	if (read(portfd, &port, sizeof(port)) != sizeof(port))
		_exit(2);
	int c = rsocket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (c < 0 || rconnect(c, (struct sockaddr *)&to, sizeof(to)) != 0 || rsend(c, "x", 1, 0) != 1)
		_exit(3);
	if (!live) {
		char ack;
		if (read(ackfd, &ack, 1) != 1)
			_exit(4);
		raise(SIGKILL);
	}
	sleep(3);
	char b = 0;
	if (rsend(c, "y", 1, 0) != 1 || rrecv(c, &b, 1, 0) != 1 || b != 'z')
		_exit(5);
	rclose(c);
	_exit(0);
}

/* A connection from a child (killed after its byte unless live): the survivor's descriptor. */
static int survivor(pid_t *child, int live)
{
	int pfd[2], afd[2];
	if (pipe(pfd) != 0)
		return -1;
	if (pipe(afd) != 0)
		return -1;
	*child = fork();
	if (*child == 0) {
		close(pfd[1]);
		close(afd[1]);
		peer(pfd[0], afd[0], live);
	}
	close(pfd[0]);
	close(afd[0]);
	int l = rsocket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	CHECK(l >= 0 && rbind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && rlisten(l, 1) == 0 &&
		      rgetsockname(l, (struct sockaddr *)&a, &len) == 0,
	      "listener: %s", strerror(errno));
	CHECK(write(pfd[1], &a.sin_port, sizeof(a.sin_port)) == sizeof(a.sin_port), "pipe");
	close(pfd[1]);
	int s = raccept(l, NULL, NULL);
	CHECK(s >= 0, "raccept: %s", strerror(errno));
	rclose(l);
	if (s < 0)
		return -1;
	int on = 1, idle = 1;
	CHECK(rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) == 0, "SO_KEEPALIVE: %s", strerror(errno));
	CHECK(rsetsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) == 0, "TCP_KEEPIDLE: %s", strerror(errno));
	int v = 0;
	len = sizeof(v);
	CHECK(rgetsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &v, &len) == 0 && v == 1, "TCP_KEEPIDLE reads %d", v);
	char b;
	CHECK(rrecv(s, &b, 1, 0) == 1 && b == 'x', "the peer's byte");
	CHECK(write(afd[1], "k", 1) == 1, "ack pipe");
	close(afd[1]);
	int status;
	if (!live)
		CHECK(waitpid(*child, &status, 0) == *child && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		      "the peer did not die of SIGKILL (status %#x)", status);
	return s;
}

static void test_rrecv(void)
{
	pid_t child;
	int s = survivor(&child, 0);
	if (s < 0)
		return;
	alarm(DEADLINE_S + 30); /* the hang guard's hang guard */
	double t0 = now_s();
	char b[8];
	errno = 0;
	ssize_t n = rrecv(s, b, sizeof(b), 0);
	int e = errno;
	double took = now_s() - t0;
	alarm(0);
	CHECK(n <= 0 && took < DEADLINE_S, "rrecv after the peer was killed: %zd (%s) after %.1f s, want an error or EOF",
	      n, strerror(e), took);
	rclose(s);
}

static void test_rpoll(void)
{
	pid_t child;
	int s = survivor(&child, 0);
	if (s < 0)
		return;
	double t0 = now_s();
	struct pollfd p = {.fd = s, .events = POLLIN};
	int r = rpoll(&p, 1, DEADLINE_S * 1000);
	double took = now_s() - t0;
	CHECK(r == 1 && (p.revents & (POLLERR | POLLHUP | POLLIN)) && took < DEADLINE_S,
	      "rpoll after the peer was killed: %d, revents %#x after %.1f s", r, p.revents, took);
	char b[8];
	errno = 0;
	ssize_t n = rrecv(s, b, sizeof(b), MSG_DONTWAIT);
	CHECK(n <= 0 && errno != EAGAIN, "rrecv after rpoll: %zd (%s), want an error or EOF", n, strerror(errno));
	rclose(s);
}

static void test_live(void)
{
	pid_t child;
	int s = survivor(&child, 1);
	if (s < 0)
		return;
	char b = 0;
	CHECK(rrecv(s, &b, 1, 0) == 1 && b == 'y', "after 3 s of probes: rrecv: %s", strerror(errno));
	CHECK(rsend(s, "z", 1, 0) == 1, "rsend after probes: %s", strerror(errno));
	int status = -1;
	CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the live peer ended with status %#x", status);
	rclose(s);
}

/* Runs fn in a process of its own (so that its peer forks before either
 * uses the library); its failures count here. */
static void in_child(void (*fn)(void))
{
	fflush(NULL);
	pid_t p = fork();
	if (p == 0) {
		fn();
		fflush(NULL);
		_exit(failures ? 1 : 0);
	}
	int status = -1;
	CHECK(p > 0 && waitpid(p, &status, 0) == p && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the case's process ended with status %#x", status);
}

static void case_rrecv(void) { in_child(test_rrecv); }
static void case_rpoll(void) { in_child(test_rpoll); }
static void case_live(void) { in_child(test_live); }

int main(void)
{
	static const struct test_case cases[] = {
		{"probes on a live connection", case_live},
		{"rrecv after the peer is killed", case_rrecv},
		{"rpoll after the peer is killed", case_rpoll},
	};
	RUN_CASES(cases);
	return failures ? 1 : 0;
}
