/*
 * chan_peer.c: the command channel against the Go side of the protocol.
 * Not a standalone test: the Go test TestChanAgainstGo serves the socket
 * given as argv[1] with internal/proto and its encoding/json, and checks this
 * program's exit status. Both sides follow one script:
 *
 *   query_device {"port":1}  -> an event, a cm_event, then a reply with a
 *                               memfd holding "vrdma" and a body that Go
 *                               escapes ([]byte as base64, <>& as \uXXXX)
 *   alloc_pd {"name":"..."}  -> not_found {"error":"..."}
 *   query_port               -> the Go side closes the connection
 */
#include "vrdma.h"
#include "vrdma_abi.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
	struct vrdma_chan c;
	struct vrdma_event ev = { 0 };
	struct vj_doc d;
	char reply[1024], s[64], req[128];
	uint8_t gid[16];
	size_t n = 0;
	uint64_t u = 0;
	int fds[2] = { -1, -1 }, nfds = 2;

	if (argc != 2) {
		fprintf(stderr, "usage: chan_peer SOCKET\n");
		return 2;
	}
	int r = vrdma_chan_open(&c, argv[1]);
	if (r != 0) {
		fprintf(stderr, "open: %d: %s\n", r, c.err);
		return 1;
	}

	r = vrdma_call(&c, VRDMA_CMD_QUERY_DEVICE, "{\"port\":1}", 10, NULL, 0, reply, sizeof reply, &n, fds, &nfds);
	CHECK(r == 0 && nfds == 1, "query_device = %d with %d descriptors (%s)", r, nfds, c.err);
	if (r == 0 && nfds == 1) {
		char b[8] = "";
		CHECK(pread(fds[0], b, 5, 0) == 5 && memcmp(b, "vrdma", 5) == 0, "the memfd holds %s", b);
		close(fds[0]);
	}
	CHECK(r == 0 && vj_parse(&d, reply, n) == 0, "reply %s does not parse", reply);
	if (r == 0) {
		CHECK(vj_get_str(&d, 0, "name", s, sizeof s) == 0 && strcmp(s, "vrdma0") == 0, "name = %s", s);
		CHECK(vj_b64(&d, vj_get(&d, 0, "gid"), gid, sizeof gid, &n) == 0 && n == 16 && gid[0] == 0xfe &&
			      gid[1] == 0x80 && gid[15] == 0xff,
		      "gid: %zu bytes", n);
		CHECK(vj_b64(&d, vj_get(&d, 0, "none"), gid, sizeof gid, &n) == 0 && n == 0, "a nil []byte");
		CHECK(vj_get_u64(&d, 0, "max_mr_size", &u) == 0 && u == UINT64_MAX, "max_mr_size = %llu",
		      (unsigned long long)u);
		CHECK(vj_get_str(&d, 0, "escaped", s, sizeof s) == 0 && strcmp(s, "<a&b>\xe2\x80\xa8\"\n\\") == 0,
		      "escaped = %s", s);
		vj_free(&d);
	}
	r = vrdma_chan_event(&c, &ev, 0);
	CHECK(r == 1 && ev.type == 1 && ev.handle == 7 && ev.qpn == 3, "event = %d: type %u handle %u qpn %u", r,
	      ev.type, ev.handle, ev.qpn);
	CHECK(vrdma_chan_event(&c, &ev, 0) == 0, "a second event (the cm_event?)");

	int len = vj_escape(req, sizeof req, "pd \"1\"\n");
	char body[160];
	snprintf(body, sizeof body, "{\"name\":%s}", req);
	r = vrdma_call(&c, VRDMA_CMD_ALLOC_PD, body, strlen(body), NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(len > 0 && r == -ENOENT && strcmp(c.err, "no PD named pd \"1\"\n") == 0, "alloc_pd = %d (%s)", r, c.err);

	r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, NULL, 0, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -EIO && c.dead, "query_port after the end = %d (%s)", r, c.err);
	vrdma_chan_close(&c);
	if (failures) {
		fprintf(stderr, "chan_peer: %d failures\n", failures);
		return 1;
	}
	printf("chan_peer: ok\n");
	return 0;
}
