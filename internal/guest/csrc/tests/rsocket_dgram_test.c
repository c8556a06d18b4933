/*
 * rsocket_dgram_test.c: datagram rsockets (rdma-core's UDP rsockets) on a
 * daemon. Two rsockets on 127.0.0.1 exchange datagrams both ways (the
 * first over UDP, which teaches each side the other's UD QP, then over the
 * UD QPs), with the sender's address from rrecvfrom, rpoll, MSG_PEEK,
 * nonblocking calls, iovecs and the calls' misuse errnos. Then hostile
 * peers: a kernel UDP socket sends headers that are short, of another tag,
 * version or length, or name an unknown op; a raw UD QP (rdma_cm and verbs
 * in this process) sends messages shorter than a header, whose header's
 * version and length disagree, or claim 24 header bytes of a 10-byte
 * message. Each must be dropped (nothing to read), never read beyond what
 * arrived (ASan watches), and a valid datagram after them still arrives.
 *
 * needs: daemon
 */
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"
#include "rdmacm/rsocket.h"

/* A bound datagram rsocket on 127.0.0.1 (an ephemeral port); its address in a. */
static int bound(struct sockaddr_in *a)
{
	int s = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK(s >= 0, "rsocket(SOCK_DGRAM): %s", strerror(errno));
	if (s < 0)
		return -1;
	struct sockaddr_in b = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	CHECK(rbind(s, (struct sockaddr *)&b, sizeof(b)) == 0, "rbind: %s", strerror(errno));
	socklen_t len = sizeof(*a);
	CHECK(rgetsockname(s, (struct sockaddr *)a, &len) == 0 && a->sin_port != 0, "rgetsockname: %s", strerror(errno));
	return s;
}

/* Waits (rpoll, a generous deadline) until fd is readable: whether it is. */
static int readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int r = rpoll(&p, 1, 20000);
	return r == 1 && (p.revents & POLLIN);
}

/* The nothing-to-read answer of a nonblocking rrecv. */
static void check_empty(int s, const char *after)
{
	char buf[64];
	errno = 0;
	ssize_t n = rrecv(s, buf, sizeof(buf), MSG_DONTWAIT);
	CHECK(n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK), "after %s: rrecv %zd (errno %s), want EWOULDBLOCK", after,
	      n, strerror(errno));
}

static void test_exchange(void)
{
	struct sockaddr_in sa, ca;
	int s = bound(&sa);
	int c = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK(c >= 0, "rsocket: %s", strerror(errno));
	if (s < 0 || c < 0)
		return;

	errno = 0;
	CHECK(rsend(c, "x", 1, 0) == -1 && errno == EDESTADDRREQ, "rsend before rconnect: errno %s, want EDESTADDRREQ",
	      strerror(errno));
	char big[DS_MSG_SIZE];
	memset(big, 7, sizeof(big));
	errno = 0;
	CHECK(rsendto(c, big, sizeof(big), 0, (struct sockaddr *)&sa, sizeof(sa)) == -1 && errno == EMSGSIZE,
	      "a datagram of %zu bytes: errno %s, want EMSGSIZE", sizeof(big), strerror(errno));
	CHECK(rconnect(c, (struct sockaddr *)&sa, sizeof(sa)) == 0, "rconnect: %s", strerror(errno));
	socklen_t len = sizeof(ca);
	CHECK(rgetsockname(c, (struct sockaddr *)&ca, &len) == 0 && ca.sin_port != 0, "rgetsockname after rconnect: %s",
	      strerror(errno));
	errno = 0;
	CHECK(rlisten(s, 1) == -1 && errno == EOPNOTSUPP, "rlisten on a datagram rsocket: errno %s, want EOPNOTSUPP",
	      strerror(errno));

	/* Round trips: the first goes over UDP, the others over the UD QPs. */
	for (int i = 0; i < 50; i++) {
		char msg[1200], got[1300];
		memset(msg, 'a' + i % 26, sizeof(msg));
		size_t n = (size_t)(1 + i * 23);
		CHECK(rsend(c, msg, n, 0) == (ssize_t)n, "rsend %d: %s", i, strerror(errno));
		CHECK(readable(s), "the server's rsocket is not readable after datagram %d", i);
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		memset(&from, 0, sizeof(from));
		ssize_t r = rrecvfrom(s, got, sizeof(got), 0, (struct sockaddr *)&from, &flen);
		CHECK(r == (ssize_t)n && memcmp(got, msg, n) == 0, "datagram %d: %zd bytes, want %zu", i, r, n);
		CHECK(flen == sizeof(from) && from.sin_family == AF_INET && from.sin_port == ca.sin_port &&
			      from.sin_addr.s_addr == htonl(INADDR_LOOPBACK),
		      "datagram %d: from %s:%u, want 127.0.0.1:%u", i, inet_ntoa(from.sin_addr), ntohs(from.sin_port),
		      ntohs(ca.sin_port));
		/* The answer, two pieces in one datagram. */
		struct iovec v[2] = {{msg, n / 2}, {msg + n / 2, n - n / 2}};
		struct msghdr m = {.msg_name = &from, .msg_namelen = flen, .msg_iov = v, .msg_iovlen = 2};
		CHECK(rsendmsg(s, &m, 0) == (ssize_t)n, "rsendmsg %d: %s", i, strerror(errno));
		memset(got, 0, sizeof(got));
		r = rrecv(c, got, sizeof(got), 0);
		CHECK(r == (ssize_t)n && memcmp(got, msg, n) == 0, "the answer to %d: %zd bytes, want %zu", i, r, n);
	}

	/* MSG_PEEK leaves it; a short buffer truncates, MSG_TRUNC tells the length. */
	CHECK(rsend(c, "peekaboo", 8, 0) == 8, "rsend: %s", strerror(errno));
	CHECK(readable(s), "not readable");
	char buf[16] = {0};
	CHECK(rrecv(s, buf, sizeof(buf), MSG_PEEK) == 8 && memcmp(buf, "peekaboo", 8) == 0, "MSG_PEEK: %s", buf);
	CHECK(rrecv(s, buf, 4, MSG_TRUNC) == 8 && memcmp(buf, "peek", 4) == 0, "MSG_TRUNC into 4 bytes");
	check_empty(s, "the datagram was read");

	/* rpoll: writable; not readable with nothing there. */
	struct pollfd p = {.fd = c, .events = POLLIN | POLLOUT};
	CHECK(rpoll(&p, 1, 0) == 1 && p.revents == POLLOUT, "rpoll: revents %#x, want POLLOUT", p.revents);

	CHECK(rclose(c) == 0 && rclose(s) == 0, "rclose: %s", strerror(errno));
}

static void test_misuse(void)
{
	int s = rsocket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	char buf[8];
	errno = 0;
	CHECK(rrecv(s, buf, sizeof(buf), 0) == -1 && errno == EINVAL, "rrecv before rbind: errno %s, want EINVAL",
	      strerror(errno));
	errno = 0;
	CHECK(raccept(s, NULL, NULL) == -1 && errno == EOPNOTSUPP, "raccept: errno %s", strerror(errno));
	int v = 0;
	socklen_t len = sizeof(v);
	CHECK(rgetsockopt(s, SOL_SOCKET, SO_TYPE, &v, &len) == 0 && v == SOCK_DGRAM, "SO_TYPE %d", v);
	v = 1 << 16;
	CHECK(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) == 0, "SO_RCVBUF: %s", strerror(errno));
	errno = 0;
	CHECK(rsetsockopt(s, IPPROTO_TCP, 1 /* TCP_NODELAY */, &v, sizeof(v)) == -1,
	      "a TCP option on a datagram rsocket was taken");
	CHECK(rfcntl(s, F_GETFL) & O_NONBLOCK, "SOCK_NONBLOCK is not in F_GETFL");
	rclose(s);
}

/* ---- hostile peers ---- */

struct ud_peer {
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	uint8_t buf[DS_MSG_SIZE + DS_GRH_LEN];
};

/* A raw UD QP on 127.0.0.1 with an address handle to sa's host. */
static int ud_peer_open(struct ud_peer *u, const struct sockaddr_in *sa)
{
	struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (rdma_create_id(NULL, &u->id, NULL, RDMA_PS_UDP) != 0 ||
	    rdma_resolve_addr(u->id, (struct sockaddr *)&src, (struct sockaddr *)sa, 2000) != 0 ||
	    rdma_resolve_route(u->id, 2000) != 0)
		return -1;
	u->cq = ibv_create_cq(u->id->verbs, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = {.send_cq = u->cq, .recv_cq = u->cq, .qp_type = IBV_QPT_UD, .sq_sig_all = 1,
				      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
	if (!u->cq || rdma_create_qp(u->id, NULL, &qa) != 0)
		return -1;
	struct ibv_sa_path_rec *pr = u->id->route.path_rec;
	struct ibv_ah_attr a = {.is_global = 1, .port_num = 1, .grh = {.dgid = pr->dgid, .hop_limit = 64}};
	for (int i = 0; i < 16; i++) {
		union ibv_gid g;
		if (ibv_query_gid(u->id->verbs, 1, i, &g) == 0 && memcmp(&g, &pr->sgid, 16) == 0) {
			a.grh.sgid_index = (uint8_t)i;
			break;
		}
	}
	u->ah = ibv_create_ah(u->id->pd, &a);
	u->mr = ibv_reg_mr(u->id->pd, u->buf, sizeof(u->buf), IBV_ACCESS_LOCAL_WRITE);
	return u->ah && u->mr ? 0 : -1;
}

/* Sends len bytes of u->buf to qpn and waits for the send's completion. */
static void ud_send(struct ud_peer *u, uint32_t qpn, size_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)u->buf, .length = (uint32_t)len, .lkey = u->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = IBV_WR_SEND,
				 .wr.ud = {.ah = u->ah, .remote_qpn = qpn, .remote_qkey = RDMA_UDP_QKEY}},
			   *bad;
	CHECK(ibv_post_send(u->id->qp, &wr, &bad) == 0, "ibv_post_send");
	struct ibv_wc wc;
	int n;
	for (int i = 0; i < 2000000 && (n = ibv_poll_cq(u->cq, 1, &wc)) == 0; i++)
		usleep(10);
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS, "the hostile send did not complete");
}

static void ud_peer_close(struct ud_peer *u)
{
	if (u->ah)
		ibv_destroy_ah(u->ah);
	if (u->mr)
		ibv_dereg_mr(u->mr);
	if (u->id && u->id->qp)
		rdma_destroy_qp(u->id);
	if (u->cq)
		ibv_destroy_cq(u->cq);
	if (u->id)
		rdma_destroy_id(u->id);
}

static void test_hostile_udp(void)
{
	struct sockaddr_in sa;
	int s = bound(&sa);
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || u < 0)
		return;
	struct ds_udp_header good = {.tag = htobe32(DS_UDP_TAG), .version = 4, .op = RS_OP_DATA,
				     .length = DS_UDP_IPV4_HDR_LEN, .qpn = htobe32(77)};
	static const struct {
		const char *name;
		size_t len; /* what is sent of the header (and 4 bytes of data after a whole one) */
		uint32_t tag;
		uint8_t version, op, length;
	} cases[] = {
		{"3 bytes", 3, DS_UDP_TAG, 4, RS_OP_DATA, DS_UDP_IPV4_HDR_LEN},
		{"15 bytes", 15, DS_UDP_TAG, 4, RS_OP_DATA, DS_UDP_IPV4_HDR_LEN},
		{"another tag", 20, 0x55555554, 4, RS_OP_DATA, DS_UDP_IPV4_HDR_LEN},
		{"version 6 from IPv4", 20, DS_UDP_TAG, 6, RS_OP_DATA, DS_UDP_IPV6_HDR_LEN},
		{"version 5", 20, DS_UDP_TAG, 5, RS_OP_DATA, DS_UDP_IPV4_HDR_LEN},
		{"a length of 255", 20, DS_UDP_TAG, 4, RS_OP_DATA, 255},
		{"a length of 0", 20, DS_UDP_TAG, 4, RS_OP_DATA, 0},
		{"op 3", 20, DS_UDP_TAG, 4, 3, DS_UDP_IPV4_HDR_LEN},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t msg[64] = {0};
		struct ds_udp_header h = good;
		h.tag = htobe32(cases[i].tag), h.version = cases[i].version, h.op = cases[i].op, h.length = cases[i].length;
		memcpy(msg, &h, DS_UDP_IPV4_HDR_LEN);
		memcpy(msg + DS_UDP_IPV4_HDR_LEN, "evil", 4);
		CHECK(sendto(u, msg, cases[i].len, 0, (struct sockaddr *)&sa, sizeof(sa)) == (ssize_t)cases[i].len, "sendto");
		usleep(1000); /* it has arrived on the loopback */
		check_empty(s, cases[i].name);
		struct pollfd p = {.fd = u, .events = POLLIN};
		CHECK(poll(&p, 1, 0) == 0, "%s was answered", cases[i].name);
	}
	/* A valid one after them: answered and read. */
	uint8_t msg[DS_UDP_IPV4_HDR_LEN + 4];
	memcpy(msg, &good, DS_UDP_IPV4_HDR_LEN);
	memcpy(msg + DS_UDP_IPV4_HDR_LEN, "good", 4);
	CHECK(sendto(u, msg, sizeof(msg), 0, (struct sockaddr *)&sa, sizeof(sa)) == (ssize_t)sizeof(msg), "sendto");
	CHECK(readable(s), "a valid UDP datagram after the hostile ones is not readable");
	char buf[16] = {0};
	CHECK(rrecv(s, buf, sizeof(buf), MSG_DONTWAIT) == 4 && memcmp(buf, "good", 4) == 0, "got %s", buf);
	close(u);
	rclose(s);
}

static void test_hostile_ud(void)
{
	struct sockaddr_in sa;
	int s = bound(&sa);
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	struct ud_peer *peer = calloc(1, sizeof(*peer));
	if (s < 0 || u < 0 || !peer)
		return;
	if (ud_peer_open(peer, &sa) != 0) {
		CHECK(0, "the raw UD peer: %s", strerror(errno));
		goto out;
	}
	/* Learn the server's QP: it reads its socket in rrecv. */
	struct sockaddr_in usa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	(void)bind(u, (struct sockaddr *)&usa, sizeof(usa));
	char buf[64];
	uint32_t qpn = 0;
	for (int i = 0; i < 100 && !qpn; i++) {
		struct ds_udp_header h = {.tag = htobe32(DS_UDP_TAG), .version = 4, .op = RS_OP_DATA,
					  .length = DS_UDP_IPV4_HDR_LEN, .qpn = htobe32(peer->id->qp->qp_num)};
		CHECK(sendto(u, &h, DS_UDP_IPV4_HDR_LEN, 0, (struct sockaddr *)&sa, sizeof(sa)) == DS_UDP_IPV4_HDR_LEN,
		      "sendto");
		(void)rrecv(s, buf, sizeof(buf), MSG_DONTWAIT); /* the empty datagram */
		struct ds_udp_header r;
		if (recv(u, &r, sizeof(r), MSG_DONTWAIT) >= DS_UDP_IPV4_HDR_LEN && r.op == RS_OP_CTRL)
			qpn = be32toh(r.qpn) & 0xFFFFFF;
	}
	CHECK(qpn != 0, "the server did not name its QP");
	if (!qpn)
		goto out;
	check_empty(s, "the QP number was learnt");

	struct ds_header h4 = {.version = 4, .length = DS_IPV4_HDR_LEN, .port = htons(9), .addr.ipv4 = htonl(0x0a000001)};
	struct ds_header h6 = {.version = 6, .length = DS_IPV6_HDR_LEN, .port = htons(9)};
	static const struct {
		const char *name;
		int six;        /* the IPv6 header, else the IPv4 one */
		uint8_t length; /* the header's length field */
		size_t len;     /* the message's */
	} cases[] = {
		{"an empty message", 0, DS_IPV4_HDR_LEN, 0},
		{"7 bytes", 0, DS_IPV4_HDR_LEN, 7},
		{"version 4 with a length of 24", 0, DS_IPV6_HDR_LEN, 40},
		{"version 6 with a length of 8", 1, DS_IPV4_HDR_LEN, 40},
		{"an IPv6 header of 24 bytes in 10", 1, DS_IPV6_HDR_LEN, 10},
		{"version 4, length 0", 0, 0, 40},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(peer->buf, 'x', sizeof(peer->buf));
		struct ds_header h = cases[i].six ? h6 : h4;
		h.length = cases[i].length;
		memcpy(peer->buf, &h, cases[i].len < sizeof(h) ? cases[i].len : sizeof(h));
		ud_send(peer, qpn, cases[i].len);
		usleep(1000);
		check_empty(s, cases[i].name);
	}
	/* A valid one: read, from the address its header names. */
	memcpy(peer->buf, &h4, DS_IPV4_HDR_LEN);
	memcpy(peer->buf + DS_IPV4_HDR_LEN, "fine", 4);
	ud_send(peer, qpn, DS_IPV4_HDR_LEN + 4);
	CHECK(readable(s), "a valid UD datagram after the hostile ones is not readable");
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	memset(buf, 0, sizeof(buf));
	CHECK(rrecvfrom(s, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &flen) == 4 &&
		      memcmp(buf, "fine", 4) == 0 && from.sin_addr.s_addr == htonl(0x0a000001) && from.sin_port == htons(9),
	      "the valid datagram: %s from %s:%u", buf, inet_ntoa(from.sin_addr), ntohs(from.sin_port));
out:
	ud_peer_close(peer);
	free(peer);
	close(u);
	rclose(s);
}

int main(void)
{
	static const struct test_case cases[] = {
		{"exchange", test_exchange},
		{"misuse", test_misuse},
		{"hostile UDP headers", test_hostile_udp},
		{"hostile UD messages", test_hostile_ud},
	};
	RUN_CASES(cases);
	return failures ? 1 : 0;
}
