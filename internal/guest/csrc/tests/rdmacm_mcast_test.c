/*
 * rdmacm_mcast_test.c: rdma_join_multicast, rdma_join_multicast_ex and
 * rdma_leave_multicast against a real daemon, as rdma-core's librdmacm
 * over the kernel's rdma_cm on a RoCEv2 port: the join's event is
 * RDMA_CM_EVENT_MULTICAST_JOIN with ud param ah_attr (GRH to the MGID
 * ::ffff:239.2.3.4), qp_num 0xFFFFFF, qkey RDMA_UDP_QKEY and the join's
 * context; the id's QP is attached (a send-only member's datagram to the
 * group reaches it, with the GRH in front);
 * join_ex refuses other flags (EINVAL) and unknown mask bits (ENOTSUP);
 * a unicast address is EINVAL; leaving a group not joined is
 * EADDRNOTAVAIL.
 *
 * needs: daemon
 */
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define HANG_GUARD_MS 20000

static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev = NULL;
	if (poll(&p, 1, HANG_GUARD_MS) != 1 || rdma_get_cm_event(ch, &ev) != 0) {
		CHECK(0, "no event, want %s", rdma_event_str(want));
		return NULL;
	}
	if (ev->event != want) {
		CHECK(0, "event %s (status %d), want %s", rdma_event_str(ev->event), ev->status, rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

static struct sockaddr_in addr4(const char *ip)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

/* ud_id makes a UD id on ch, resolved to the group from 127.0.0.1, with a QP. */
static struct rdma_cm_id *ud_id(struct rdma_event_channel *ch, struct sockaddr_in *group)
{
	struct rdma_cm_id *id;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_UDP))
		return NULL;
	struct sockaddr_in src = addr4("127.0.0.1");
	if (rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)group, 2000))
		return NULL;
	struct rdma_cm_event *ev = expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	if (!ev)
		return NULL;
	rdma_ack_cm_event(ev);
	struct ibv_qp_init_attr a = {.qp_type = IBV_QPT_UD, .sq_sig_all = 1};
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	return rdma_create_qp(id, NULL, &a) ? NULL : id;
}

static void test_join(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in group = addr4("239.2.3.4");
	struct rdma_cm_id *rx = ud_id(ch, &group), *tx = ud_id(ch, &group);
	if (!rx || !tx) {
		CHECK(0, "setting up: %s", strerror(errno));
		return;
	}
	int ctx_tag = 7;
	CHECK(rdma_join_multicast(rx, (struct sockaddr *)&group, &ctx_tag) == 0, "rdma_join_multicast: %s",
	      strerror(errno));
	struct rdma_cm_event *ev = expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	static const uint8_t mgid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 2, 3, 4};
	if (ev) {
		struct rdma_ud_param *u = &ev->param.ud;
		CHECK(ev->id == rx && ev->status == 0, "the event's id or status %d", ev->status);
		CHECK(u->qp_num == 0xFFFFFF && u->qkey == RDMA_UDP_QKEY, "qp_num %#x qkey %#x", u->qp_num, u->qkey);
		CHECK(u->ah_attr.is_global && memcmp(u->ah_attr.grh.dgid.raw, mgid, 16) == 0, "ah_attr's DGID");
		CHECK(u->private_data == &ctx_tag, "private_data is not the join's context");
		rdma_ack_cm_event(ev);
	}
	struct rdma_cm_join_mc_attr_ex mc = {.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
					     .join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,
					     .addr = (struct sockaddr *)&group};
	CHECK(rdma_join_multicast_ex(tx, &mc, NULL) == 0, "rdma_join_multicast_ex send-only: %s", strerror(errno));
	ev = expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	struct ibv_ah *ah = NULL;
	if (ev) {
		ah = ibv_create_ah(tx->pd, &ev->param.ud.ah_attr);
		rdma_ack_cm_event(ev);
	}
	CHECK(ah != NULL, "ibv_create_ah from the event's ah_attr: %s", strerror(errno));
	/* tx, a send-only member, sends to the group: rx, attached by its join, receives. */
	static uint8_t rbuf[1][256], sbuf[64] = "to the group";
	struct ibv_mr *rmr = ibv_reg_mr(rx->pd, rbuf, sizeof rbuf, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *smr = ibv_reg_mr(tx->pd, sbuf, sizeof sbuf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(rmr && smr, "ibv_reg_mr");
	if (!rmr || !smr || !ah)
		return;
	CHECK(rdma_post_recv(rx, NULL, rbuf[0], sizeof rbuf[0], rmr) == 0, "rdma_post_recv rx");
	CHECK(rdma_post_ud_send(tx, NULL, sbuf, sizeof sbuf, smr, 0, ah, 0xFFFFFF) == 0, "rdma_post_ud_send: %s",
	      strerror(errno));
	struct ibv_wc wc;
	CHECK(rdma_get_send_comp(tx, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "the send's completion");
	CHECK(rdma_get_recv_comp(rx, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 40 + sizeof sbuf &&
		      memcmp(rbuf[0] + 40, sbuf, sizeof sbuf) == 0,
	      "rx's receive: status %d byte_len %u", wc.status, wc.byte_len);
	errno = 0;
	CHECK(rdma_leave_multicast(rx, (struct sockaddr *)&group) == 0, "rdma_leave_multicast: %s", strerror(errno));
	errno = 0;
	CHECK(rdma_leave_multicast(rx, (struct sockaddr *)&group) == -1 && errno == EADDRNOTAVAIL,
	      "leaving twice: errno %d, want EADDRNOTAVAIL", errno);
	CHECK(rdma_leave_multicast(tx, (struct sockaddr *)&group) == 0, "leaving the send-only join");
	ibv_destroy_ah(ah);
	rdma_destroy_qp(rx);
	rdma_destroy_qp(tx);
	ibv_dereg_mr(rmr);
	ibv_dereg_mr(smr);
	rdma_destroy_id(rx);
	rdma_destroy_id(tx);
	rdma_destroy_event_channel(ch);
}

static void test_refusals(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in group = addr4("239.2.3.5"), unicast = addr4("10.0.0.1");
	struct rdma_cm_id *id = ud_id(ch, &group);
	if (!id) {
		CHECK(0, "setting up: %s", strerror(errno));
		return;
	}
	errno = 0;
	CHECK(rdma_join_multicast(id, (struct sockaddr *)&unicast, NULL) == -1 && errno == EINVAL,
	      "a unicast address: errno %d, want EINVAL", errno);
	struct rdma_cm_join_mc_attr_ex mc = {.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
					     .join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER + 7,
					     .addr = (struct sockaddr *)&group};
	errno = 0;
	CHECK(rdma_join_multicast_ex(id, &mc, NULL) == -1 && errno == EINVAL, "an unknown flag: errno %d", errno);
	mc.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
	mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	errno = 0;
	CHECK(rdma_join_multicast_ex(id, &mc, NULL) == -1 && errno == EINVAL, "no flags in the mask: errno %d", errno);
	mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
	errno = 0;
	CHECK(rdma_join_multicast_ex(id, &mc, NULL) == -1 && errno == ENOTSUP, "a reserved mask bit: errno %d", errno);
	errno = 0;
	CHECK(rdma_leave_multicast(id, (struct sockaddr *)&group) == -1 && errno == EADDRNOTAVAIL,
	      "leaving a group not joined: errno %d", errno);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	static const struct test_case cases[] = {
		{"join", test_join},
		{"refusals", test_refusals},
	};
	RUN_CASES(cases);
	printf("rdmacm_mcast_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
