/*
 * rdmacm_xrc_test.c: XRC through the drop-in librdmacm, as rdma_xserver
 * and rdma_xclient -c x use it, against a real daemon (the Go test starts
 * one and passes its socket in VRDMA_SOCKET), both sides in this one
 * process on the first adapter (127.0.0.1).
 *
 * It asserts what rdma-core's librdmacm gives: rdma_create_ep with an
 * XRC_SEND address makes an XRC_SEND QP with a send CQ and no receive
 * queue, in RESET until rdma_connect; rdma_get_request on an XRC_RECV
 * listener makes an XRC_RECV QP, in INIT, with no CQs; rdma_create_srq on
 * that id makes an XRC SRQ (it has a number) completing on the id's
 * receive CQ; the connection carries a SEND to that SRQ number, completed
 * in the target's QP number from the initiator's; rdma_create_srq_ex
 * refuses SRQ types vrdma lacks; an RC listener refuses an XRC request and
 * its requester hears so; teardown frees all of it (the sanitized build's
 * leak check).
 *
 * needs: daemon
 */
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			failures++;                                           \
			fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
		}                                                             \
	} while (0)

#define REQUIRE(cond, ...)                        \
	do {                                      \
		if (!(cond)) {                    \
			CHECK(cond, __VA_ARGS__); \
			return;                   \
		}                                 \
	} while (0)

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	return ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0 ? a.qp_state : (enum ibv_qp_state)-1;
}

struct server {
	struct rdma_cm_id *listen;
	uint32_t client_qpn; /* set by the client before it connects */
	int ok;
};

/* rdma_xserver -c x's side: the request, an XRC SRQ, its number in the
 * reply, one receive. */
static void *serve(void *p)
{
	struct server *sv = p;
	struct rdma_cm_id *id;
	char buf[16] = "";

	if (rdma_get_request(sv->listen, &id) != 0) {
		CHECK(0, "rdma_get_request: %s", strerror(errno));
		return NULL;
	}
	CHECK(id->qp != NULL && id->qp->qp_type == IBV_QPT_XRC_RECV && qp_state(id->qp) == IBV_QPS_INIT,
	      "the request's QP: type %d, state %d; want an XRC_RECV QP in INIT", id->qp ? (int)id->qp->qp_type : -1,
	      id->qp ? (int)qp_state(id->qp) : -1);
	CHECK(id->send_cq == NULL && id->recv_cq == NULL, "an XRC_RECV QP has no CQs: send %p recv %p", (void *)id->send_cq,
	      (void *)id->recv_cq);

	struct ibv_srq_init_attr_ex tm = { .comp_mask = IBV_SRQ_INIT_ATTR_TYPE, .srq_type = IBV_SRQT_TM };
	CHECK(rdma_create_srq_ex(id, &tm) == -1 && errno == EOPNOTSUPP, "a tag-matching SRQ: errno %d, want EOPNOTSUPP",
	      errno);

	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 1, .max_sge = 1 }, .srq_context = id };
	uint32_t srqn = 0;
	if (rdma_create_srq(id, NULL, &sa) != 0 || ibv_get_srq_num(id->srq, &srqn) != 0) {
		CHECK(0, "an XRC SRQ on the id: %s", strerror(errno));
		rdma_destroy_ep(id);
		return NULL;
	}
	CHECK(srqn != 0 && id->recv_cq != NULL && id->recv_cq_channel != NULL,
	      "the XRC SRQ: number %u, the id's receive CQ %p: want a number and a CQ with a channel", srqn, (void *)id->recv_cq);
	struct ibv_mr *mr = rdma_reg_msgs(id, buf, sizeof buf);
	CHECK(mr != NULL, "rdma_reg_msgs: %s", strerror(errno));
	__be32 be = htobe32(srqn);
	struct rdma_conn_param param = { .private_data = &be, .private_data_len = sizeof be };
	if (mr && rdma_post_recv(id, NULL, buf, sizeof buf, mr) == 0 && rdma_accept(id, &param) == 0) {
		CHECK(qp_state(id->qp) == IBV_QPS_RTS, "the target after rdma_accept: state %d, want RTS", qp_state(id->qp));
		struct ibv_wc wc;
		int n = rdma_get_recv_comp(id, &wc);
		sv->ok = n == 1 && wc.status == IBV_WC_SUCCESS && strcmp(buf, "xrc") == 0;
		CHECK(sv->ok, "the receive: %d completions, status %d, data %.16s", n, wc.status, buf);
		CHECK(n != 1 || (wc.qp_num == id->qp->qp_num && wc.src_qp == sv->client_qpn),
		      "the completion names QP %u from %u; want the target %u from the initiator %u", wc.qp_num, wc.src_qp,
		      id->qp->qp_num, sv->client_qpn);
		rdma_disconnect(id);
	} else {
		CHECK(0, "posting or accepting: %s", strerror(errno));
	}
	if (mr)
		rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	return NULL;
}

static void test_xrc(void)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_IB, .ai_qp_type = IBV_QPT_XRC_RECV };
	struct rdma_addrinfo *res;
	struct ibv_qp_init_attr attr = { .cap = { .max_recv_wr = 1, .max_recv_sge = 1 } };
	struct server sv = { 0 };
	pthread_t t;

	REQUIRE(rdma_getaddrinfo("127.0.0.1", "0", &hints, &res) == 0, "rdma_getaddrinfo: %s", strerror(errno));
	REQUIRE(rdma_create_ep(&sv.listen, res, NULL, &attr) == 0, "rdma_create_ep (passive): %s", strerror(errno));
	rdma_freeaddrinfo(res);
	REQUIRE(rdma_listen(sv.listen, 0) == 0, "rdma_listen: %s", strerror(errno));
	char port[8];
	snprintf(port, sizeof port, "%u", ntohs(rdma_get_src_port(sv.listen)));

	struct rdma_addrinfo chints = { .ai_port_space = RDMA_PS_IB, .ai_qp_type = IBV_QPT_XRC_SEND };
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr cattr = { .cap = { .max_send_wr = 1, .max_send_sge = 1 }, .sq_sig_all = 1 };
	REQUIRE(rdma_getaddrinfo("127.0.0.1", port, &chints, &res) == 0, "rdma_getaddrinfo: %s", strerror(errno));
	int r = rdma_create_ep(&id, res, NULL, &cattr);
	rdma_freeaddrinfo(res);
	REQUIRE(r == 0, "rdma_create_ep: %s", strerror(errno));
	CHECK(id->qp != NULL && id->qp->qp_type == IBV_QPT_XRC_SEND && qp_state(id->qp) == IBV_QPS_RESET,
	      "the client's QP: want an XRC_SEND QP in RESET");
	CHECK(id->send_cq != NULL && id->send_cq_channel != NULL && id->recv_cq == NULL,
	      "an initiator's CQs: send %p recv %p; want a send CQ only", (void *)id->send_cq, (void *)id->recv_cq);
	sv.client_qpn = id->qp->qp_num;
	pthread_create(&t, NULL, serve, &sv);

	char buf[16] = "xrc";
	struct ibv_mr *mr = rdma_reg_msgs(id, buf, sizeof buf);
	CHECK(mr != NULL, "rdma_reg_msgs: %s", strerror(errno));
	if (rdma_connect(id, NULL) != 0) {
		CHECK(0, "rdma_connect: %s", strerror(errno));
	} else {
		CHECK(qp_state(id->qp) == IBV_QPS_RTS, "the initiator after rdma_connect: state %d, want RTS", qp_state(id->qp));
		REQUIRE(id->event != NULL && id->event->param.conn.private_data_len >= 4, "the reply's private data");
		/* Read as rdma_xclient reads it: a __be32 at the front (the
		 * library keeps private data aligned, as rdma-core does). */
		uint32_t srqn = be32toh(*(const __be32 *)id->event->param.conn.private_data);
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 4, .lkey = mr ? mr->lkey : 0 };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
		wr.qp_type.xrc.remote_srqn = srqn;
		struct ibv_wc wc;
		CHECK(ibv_post_send(id->qp, &wr, &bad) == 0 && rdma_get_send_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
		      "a SEND to SRQ %u: status %d", srqn, wc.status);
	}
	pthread_join(t, NULL);
	CHECK(sv.ok, "the server did not receive the message");
	rdma_disconnect(id);
	if (mr)
		rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(sv.listen);
}

/* An RC listener's side of an XRC request: its RC QP cannot answer. */
static void *refuse(void *p)
{
	struct server *sv = p;
	struct rdma_cm_id *id;

	if (rdma_get_request(sv->listen, &id) != 0) {
		CHECK(0, "rdma_get_request: %s", strerror(errno));
		return NULL;
	}
	int r = rdma_accept(id, NULL);
	sv->ok = r == -1 && errno == EINVAL;
	CHECK(sv->ok, "answering an XRC request with an RC QP: %d (%s), want -1 EINVAL", r, strerror(errno));
	rdma_destroy_ep(id);
	return NULL;
}

/* An XRC request to an RC listener: refused, and the requester is told
 * at once (REJECTED, IBTA's invalid transport type), not left to time
 * out. */
static void test_xrc_to_rc(void)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_IB, .ai_qp_type = IBV_QPT_RC };
	struct rdma_addrinfo *res;
	struct ibv_qp_init_attr attr = { .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct server sv = { 0 };
	pthread_t t;

	REQUIRE(rdma_getaddrinfo("127.0.0.1", "0", &hints, &res) == 0, "rdma_getaddrinfo: %s", strerror(errno));
	REQUIRE(rdma_create_ep(&sv.listen, res, NULL, &attr) == 0, "rdma_create_ep (passive): %s", strerror(errno));
	rdma_freeaddrinfo(res);
	REQUIRE(rdma_listen(sv.listen, 0) == 0, "rdma_listen: %s", strerror(errno));
	char port[8];
	snprintf(port, sizeof port, "%u", ntohs(rdma_get_src_port(sv.listen)));
	pthread_create(&t, NULL, refuse, &sv);

	struct rdma_addrinfo chints = { .ai_port_space = RDMA_PS_IB, .ai_qp_type = IBV_QPT_XRC_SEND };
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr cattr = { .cap = { .max_send_wr = 1, .max_send_sge = 1 } };
	REQUIRE(rdma_getaddrinfo("127.0.0.1", port, &chints, &res) == 0, "rdma_getaddrinfo: %s", strerror(errno));
	int r = rdma_create_ep(&id, res, NULL, &cattr);
	rdma_freeaddrinfo(res);
	if (r == 0) {
		r = rdma_connect(id, NULL);
		CHECK(r == -1 && errno == ECONNREFUSED && id->event != NULL && id->event->event == RDMA_CM_EVENT_REJECTED &&
			      id->event->status == 9,
		      "an XRC request to an RC listener: %d (%s), event %s status %d; want -1 ECONNREFUSED, REJECTED 9", r,
		      strerror(errno), id->event ? rdma_event_str(id->event->event) : "none", id->event ? id->event->status : 0);
		rdma_destroy_ep(id);
	} else {
		CHECK(0, "rdma_create_ep: %s", strerror(errno));
	}
	pthread_join(t, NULL);
	rdma_destroy_ep(sv.listen);
}

int main(void)
{
	alarm(60); /* a hang guard */
	test_xrc();
	test_xrc_to_rc();
	if (failures) {
		fprintf(stderr, "rdmacm_xrc_test: %d failures\n", failures);
		return 1;
	}
	printf("rdmacm_xrc_test: ok\n");
	return 0;
}
