/*
 * rsocket_hostile_test.c: a stream rsocket against a peer that breaks
 * rdma-core's rsocket protocol. The peer is a raw rdma_cm/verbs program in
 * this process (the connection data it sends, the RDMA WRITE WITH IMM
 * messages it posts are its own); the rsocket is accepted in a thread and
 * read. A message claiming more bytes than half the receive buffer, more
 * unread bytes than the buffer, or an unknown operation must end the
 * connection with EPROTO, never a read outside the buffer (ASan watches);
 * connection data of another version or too short must be refused.
 *
 * needs: daemon
 */
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rdmacm/rsocket.h"

#define RBUF (1 << 16) /* the rsocket's receive buffer: SO_RCVBUF 32 KiB */

struct server {
	pthread_t th;
	int l;
	int fd, accept_err;
	ssize_t got;
	int err;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int go; /* the peer has posted its messages: read */
};

static void *serve(void *arg)
{
	struct server *s = arg;
	s->fd = raccept(s->l, NULL, NULL);
	s->accept_err = errno;
	if (s->fd < 0)
		return NULL;
	pthread_mutex_lock(&s->mu);
	while (!s->go)
		pthread_cond_wait(&s->cond, &s->mu);
	pthread_mutex_unlock(&s->mu);
	char buf[256];
	s->got = rrecv(s->fd, buf, sizeof(buf), 0);
	s->err = errno;
	return NULL;
}

/* The hostile peer's side of one case. */
struct peer {
	struct rdma_cm_id *id;
	struct ibv_mr *tmr, *dmr;
	struct rs_sge target[2];
	uint8_t data[64];
};

static int listen_rs(uint16_t *port)
{
	int l = rsocket(AF_INET, SOCK_STREAM, 0);
	int v = RBUF / 2;
	CHECK(rsetsockopt(l, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) == 0, "SO_RCVBUF");
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	CHECK(rbind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && rlisten(l, 1) == 0, "rbind/rlisten: %s",
	      strerror(errno));
	socklen_t len = sizeof(a);
	CHECK(rgetsockname(l, (struct sockaddr *)&a, &len) == 0, "rgetsockname");
	*port = ntohs(a.sin_port);
	return l;
}

static void peer_conn_data(struct peer *p, struct rs_conn_data *c, uint8_t version)
{
	memset(c, 0, sizeof(*c));
	c->version = version;
	c->credits = htobe16(8);
	c->target_sgl.addr = htobe64((uintptr_t)p->target);
	c->target_sgl.key = htobe32(p->tmr ? p->tmr->rkey : 0);
	c->target_sgl.length = htobe32(2);
	c->data_buf.addr = htobe64((uintptr_t)p->data);
	c->data_buf.key = htobe32(p->dmr ? p->dmr->rkey : 0);
	c->data_buf.length = htobe32(sizeof(p->data));
}

/* Connects p to port with connection data of version, len bytes of it
 * sent: 0 or -1 (the rsocket refused it). */
static int peer_connect(struct peer *p, uint16_t port, uint8_t version, uint8_t len)
{
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *res;
	char svc[8];
	snprintf(svc, sizeof(svc), "%u", port);
	if (rdma_getaddrinfo("127.0.0.1", svc, &hints, &res) != 0)
		return -1;
	struct ibv_qp_init_attr attr = {.sq_sig_all = 1, .qp_type = IBV_QPT_RC};
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 8;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	int r = rdma_create_ep(&p->id, res, NULL, &attr);
	rdma_freeaddrinfo(res);
	if (r)
		return -1;
	p->tmr = rdma_reg_write(p->id, p->target, sizeof(p->target));
	p->dmr = rdma_reg_write(p->id, p->data, sizeof(p->data));
	for (int i = 0; i < 8; i++) { /* the rsocket's credits and SGL updates arrive here */
		struct ibv_recv_wr wr = {.wr_id = 1}, *bad;
		ibv_post_recv(p->id->qp, &wr, &bad);
	}
	struct rs_conn_data conn;
	peer_conn_data(p, &conn, version);
	struct rdma_conn_param param = {.private_data = &conn, .private_data_len = len, .retry_count = 7,
					.rnr_retry_count = 7};
	return rdma_connect(p->id, &param);
}

static void peer_msg(struct peer *p, uint32_t imm)
{
	struct ibv_send_wr wr = {.wr_id = 2, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .imm_data = htobe32(imm)}, *bad;
	CHECK(ibv_post_send(p->id->qp, &wr, &bad) == 0, "the peer's post");
	struct ibv_wc wc;
	while (ibv_poll_cq(p->id->send_cq, 1, &wc) == 0)
		;
}

static void peer_free(struct peer *p)
{
	if (!p->id)
		return;
	rdma_disconnect(p->id);
	if (p->tmr)
		rdma_dereg_mr(p->tmr);
	if (p->dmr)
		rdma_dereg_mr(p->dmr);
	rdma_destroy_ep(p->id);
}

/* Messages that break the protocol: each must end the rsocket's read with EPROTO. */
static void test_bad_messages(void)
{
	static const struct {
		const char *name;
		uint32_t imm[3];
		int n;
	} cases[] = {
		{"a write longer than half the buffer", {rs_msg_set(RS_OP_DATA, RBUF / 2 + 1)}, 1},
		{"a length of 2^29 - 1", {rs_msg_set(RS_OP_DATA, 0x1FFFFFFF)}, 1},
		{"more unread than the buffer", {rs_msg_set(RS_OP_DATA, RBUF / 2), rs_msg_set(RS_OP_DATA, RBUF / 2), rs_msg_set(RS_OP_DATA, 1)}, 3},
		{"an unknown operation", {rs_msg_set(5, 1)}, 1},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct server s = {.fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
		uint16_t port;
		s.l = listen_rs(&port);
		pthread_create(&s.th, NULL, serve, &s);
		struct peer p = {0};
		int r = peer_connect(&p, port, 1, sizeof(struct rs_conn_data));
		CHECK(r == 0, "%s: the peer's rdma_connect: %s", cases[i].name, strerror(errno));
		if (r == 0)
			for (int m = 0; m < cases[i].n; m++)
				peer_msg(&p, cases[i].imm[m]);
		pthread_mutex_lock(&s.mu);
		s.go = 1;
		pthread_cond_signal(&s.cond);
		pthread_mutex_unlock(&s.mu);
		pthread_join(s.th, NULL);
		CHECK(s.fd >= 0, "%s: raccept: %s", cases[i].name, strerror(s.accept_err));
		CHECK(s.got == -1 && s.err == EPROTO, "%s: rrecv %zd, errno %d (%s), want -1 and EPROTO", cases[i].name,
		      s.got, s.err, strerror(s.err));
		peer_free(&p);
		rclose(s.l);
		if (s.fd >= 0)
			rclose(s.fd);
	}
}

/* Connection data that is not rdma-core's version 1, or cut short: the
 * rsocket refuses the connection (raccept fails, the peer is rejected). */
struct bad_peer {
	pthread_t th;
	struct peer p;
	uint16_t port;
	uint8_t version, len;
	int r;
};

static void *bad_connect(void *arg)
{
	struct bad_peer *b = arg;
	b->r = peer_connect(&b->p, b->port, b->version, b->len);
	return NULL;
}

static void test_bad_conn_data(void)
{
	static const struct {
		const char *name;
		uint8_t version, len;
		int err; /* raccept's errno */
	} cases[] = {
		{"version 2", 2, sizeof(struct rs_conn_data), ENOTSUP},
		{"8 bytes of 40", 1, 8, EPROTO},
		{"none", 1, 0, EPROTO},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bad_peer b = {.version = cases[i].version, .len = cases[i].len};
		int l = listen_rs(&b.port);
		pthread_create(&b.th, NULL, bad_connect, &b);
		errno = 0;
		int fd = raccept(l, NULL, NULL);
		int e = errno;
		pthread_join(b.th, NULL);
		CHECK(fd == -1 && e == cases[i].err, "%s: raccept %d, errno %d (%s), want -1 and errno %d", cases[i].name,
		      fd, e, strerror(e), cases[i].err);
		CHECK(b.r == -1, "%s: the peer's rdma_connect succeeded", cases[i].name);
		peer_free(&b.p);
		if (fd >= 0)
			rclose(fd);
		rclose(l);
	}
}

int main(void)
{
	test_bad_messages();
	test_bad_conn_data();
	if (failures) {
		fprintf(stderr, "rsocket_hostile_test: %d failures\n", failures);
		return 1;
	}
	printf("rsocket_hostile_test: ok\n");
	return 0;
}
