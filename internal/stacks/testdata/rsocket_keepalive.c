/*
 * rsocket_keepalive.c: a stream rsocket that waits on a peer which then
 * vanishes (TestRsocketKeepaliveBetweenHosts).
 *
 *   rsocket_keepalive server PORT   accepts one connection, turns on
 *       SO_KEEPALIVE with TCP_KEEPIDLE 1 s, reads the peer's byte, prints
 *       "ready", then blocks in rrecv and prints how it ended:
 *       "rrecv: -1 (Connection timed out) after 3.2 s". Exit 0 when rrecv
 *       reported an error or the end, 1 otherwise.
 *   rsocket_keepalive client ADDR PORT   connects, sends a byte, prints
 *       "connected" and waits to be killed.
 */
#define _POSIX_C_SOURCE 200809L
#include <rdma/rsocket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int server(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int l = rsocket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || rbind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || rlisten(l, 1) != 0) {
		perror("listen");
		return 2;
	}
	int s = raccept(l, NULL, NULL);
	int on = 1, idle = 1;
	if (s < 0 || rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) != 0 ||
	    rsetsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0) {
		perror("accept");
		return 2;
	}
	char b;
	if (rrecv(s, &b, 1, 0) != 1) {
		perror("rrecv");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	double t0 = now_s();
	ssize_t n = rrecv(s, &b, 1, 0);
	int e = errno;
	printf("rrecv: %zd (%s) after %.1f s\n", n, n < 0 ? strerror(e) : "", now_s() - t0);
	return n <= 0 ? 0 : 1;
}

static int client(const char *addr, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int c = rsocket(AF_INET, SOCK_STREAM, 0);
	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1 || c < 0 || rconnect(c, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    rsend(c, "x", 1, 0) != 1) {
		perror("connect");
		return 2;
	}
	printf("connected\n");
	fflush(stdout);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "server") == 0)
		return server(atoi(argv[2]));
	if (argc == 4 && strcmp(argv[1], "client") == 0)
		return client(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: %s server PORT | client ADDR PORT\n", argv[0]);
	return 2;
}
