/*
 * accept_server.c: a one-connection TCP server on 127.0.0.1 that accepts
 * with accept(2), for clients under Debian 12's librspreload, which wraps
 * accept but not accept4 (nc -l, Python and Perl accept with accept4).
 *
 *   accept_server PORT http|line FILE
 *
 * Reads the request up to its first empty line (http) or its first line
 * (line), prints that first line as "got: ...", answers with FILE's bytes
 * (after an HTTP/1.0 200 header when http) and closes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			return -1;
		p += w, n -= (size_t)w;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s PORT http|line FILE\n", argv[0]);
		return 2;
	}
	int http = strcmp(argv[2], "http") == 0, one = 1;
	FILE *f = fopen(argv[3], "rb");
	static char body[1 << 20], req[8192];
	size_t blen = f ? fread(body, 1, sizeof(body), f) : 0;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (!f || l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0) {
		perror("listen");
		return 1;
	}
	int c = accept(l, NULL, NULL);
	if (c < 0) {
		perror("accept");
		return 1;
	}
	size_t n = 0;
	const char *end = http ? "\r\n\r\n" : "\n";
	while (n < sizeof(req) - 1) {
		ssize_t r = read(c, req + n, sizeof(req) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		req[n] = 0;
		if (strstr(req, end))
			break;
	}
	char *nl = strchr(req, '\n');
	if (nl)
		*nl = 0;
	printf("got: %s\n", req);
	fflush(stdout);
	char hdr[128];
	int hl = http ? snprintf(hdr, sizeof(hdr), "HTTP/1.0 200 OK\r\nContent-Length: %zu\r\n\r\n", blen) : 0;
	if (write_all(c, hdr, (size_t)hl) != 0 || write_all(c, body, blen) != 0) {
		perror("write");
		return 1;
	}
	close(c);
	close(l);
	return 0;
}
