/*
 * srq_modify_test.c: ibv_modify_srq and ibv_query_srq against a real
 * daemon, as rdma_rxe has them: IBV_SRQ_LIMIT arms the limit event, which
 * comes once (IBV_EVENT_SRQ_LIMIT_REACHED on the async fd, naming the SRQ)
 * when fewer requests than the limit remain posted, and disarms it (query
 * says 0) until it is armed again; IBV_SRQ_MAX_WR resizes the SRQ keeping
 * the requests posted in order, and a size below them, or a limit above
 * the size, fails with EINVAL and changes nothing.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "loopback.h"

/* The SRQ scene: a sends to b, which receives through srq on cqb. */
static struct ibv_cq *cqa, *cqb;
static struct ibv_srq *srq;
static struct ibv_qp *a, *b;

static int scene_open(uint32_t max_wr)
{
	cqa = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	cqb = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_srq_init_attr si = {.attr = {.max_wr = max_wr, .max_sge = 1}};
	srq = ibv_create_srq(pd, &si);
	if (!cqa || !cqb || !srq) {
		CHECK(0, "creating the CQs and the SRQ: %s", strerror(errno));
		return -1;
	}
	struct ibv_qp_init_attr ia = {.send_cq = cqa, .recv_cq = cqa, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
	a = ibv_create_qp(pd, &ia);
	ia.send_cq = ia.recv_cq = cqb;
	ia.srq = srq;
	b = ibv_create_qp(pd, &ia);
	int ok = a && b && !lb_connect(a, b->qp_num) && !lb_connect(b, a->qp_num);
	CHECK(ok, "connecting an RC pair on the SRQ: %s", strerror(errno));
	return ok ? 0 : -1;
}

static void scene_close(void)
{
	lb_unpair(a, b);
	CHECK(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq");
	CHECK(ibv_destroy_cq(cqa) == 0 && ibv_destroy_cq(cqb) == 0, "ibv_destroy_cq");
}

static void post_srq(uint64_t first, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sg = {.addr = (uintptr_t)buf + LB_BUF_SIZE / 2, .length = 64, .lkey = buf_mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = first + (uint64_t)i, .sg_list = &sg, .num_sge = 1}, *bad = NULL;
		CHECK(ibv_post_srq_recv(srq, &wr, &bad) == 0, "ibv_post_srq_recv %d", i);
	}
}

/* take sends n WRITE_WITH_IMMs, each consuming one request of the SRQ,
 * and checks that they complete on b in order, from wr_id next on. */
static void take(uint64_t next, int n)
{
	for (int i = 0; i < n; i++)
		CHECK(lb_write(a, 1000 + (uint64_t)i, 8, 7) == 0, "post write %d", i);
	double start = lb_now();
	int sent = 0, got = 0;
	while ((sent < n || got < n) && lb_now() - start < HANG_GUARD_SECONDS) {
		struct ibv_wc wc[8];
		int r = ibv_poll_cq(cqa, 8, wc);
		for (int i = 0; i < r; i++, sent++)
			CHECK(wc[i].status == IBV_WC_SUCCESS, "send completion status %d", wc[i].status);
		r = ibv_poll_cq(cqb, 8, wc);
		for (int i = 0; i < r; i++, got++, next++)
			CHECK(wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == next,
			      "receive completion: wr %llu status %d, want wr %llu", (unsigned long long)wc[i].wr_id,
			      wc[i].status, (unsigned long long)next);
	}
	CHECK(sent == n && got == n, "%d of %d sends, %d of %d receives completed", sent, n, got, n);
}

/* events reads the async events that come within ms milliseconds (0: those
 * already queued) and counts the SRQ limit events naming srq; any other is
 * a failure. */
static int limit_events(int ms)
{
	int n = 0;
	for (;;) {
		struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
		if (poll(&p, 1, ms) != 1)
			return n;
		struct ibv_async_event ev;
		if (ibv_get_async_event(ctx, &ev))
			return n;
		CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq,
		      "async event %d (%s), want SRQ_LIMIT_REACHED on the SRQ", ev.event_type,
		      ibv_event_type_str(ev.event_type));
		if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq)
			n++;
		ibv_ack_async_event(&ev);
		ms = 0;
	}
}

static uint32_t query_limit(uint32_t *max_wr)
{
	struct ibv_srq_attr qa = {.srq_limit = 12345};
	CHECK(ibv_query_srq(srq, &qa) == 0, "ibv_query_srq");
	if (max_wr)
		*max_wr = qa.max_wr;
	return qa.srq_limit;
}

static void test_limit_event_once_and_rearm(void)
{
	if (scene_open(16))
		return;
	CHECK(query_limit(NULL) == 0, "a new SRQ's limit is armed");
	post_srq(1, 8);
	struct ibv_srq_attr at = {.srq_limit = 4};
	CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_LIMIT) == 0, "arming the limit at 4");
	CHECK(query_limit(NULL) == 4, "ibv_query_srq's srq_limit after arming 4: %u", query_limit(NULL));
	take(1, 4); /* 4 left: not below the limit */
	CHECK(query_limit(NULL) == 4, "the limit was disarmed with 4 requests posted and a limit of 4");
	take(5, 1); /* 3 left */
	CHECK(limit_events(HANG_GUARD_SECONDS * 1000) == 1, "no SRQ_LIMIT_REACHED when 3 requests were left of a limit of 4");
	CHECK(query_limit(NULL) == 0, "the limit is still armed after its event: %u", query_limit(NULL));
	take(6, 2); /* 1 left: the limit is disarmed, no second event */
	CHECK(limit_events(100) == 0, "a second SRQ_LIMIT_REACHED from one arming");
	at.srq_limit = 3;
	CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_LIMIT) == 0, "re-arming the limit at 3");
	take(8, 1); /* 0 left, below 3 */
	CHECK(limit_events(HANG_GUARD_SECONDS * 1000) == 1, "no SRQ_LIMIT_REACHED after re-arming");
	CHECK(limit_events(100) == 0, "more than one SRQ_LIMIT_REACHED after re-arming");
	scene_close();
}

static void test_resize(void)
{
	if (scene_open(8))
		return;
	uint32_t max_wr = 0;
	query_limit(&max_wr);
	CHECK(max_wr == 8, "a new SRQ of 8 reports max_wr %u", max_wr);
	post_srq(1, 6);
	struct ibv_srq_attr at = {.max_wr = 100};
	CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_MAX_WR) == 0, "growing the SRQ to 100");
	query_limit(&max_wr);
	CHECK(max_wr >= 100, "max_wr %u after growing to 100", max_wr);
	post_srq(7, 60); /* more than the old ring held */
	take(1, 10);
	/* 56 posted: shrinking below them fails and changes nothing. */
	at.max_wr = 40;
	CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_MAX_WR) == EINVAL, "shrinking an SRQ holding 56 requests to 40 did not fail with EINVAL");
	uint32_t after = 0;
	query_limit(&after);
	CHECK(after == max_wr, "max_wr %u after a refused shrink, want %u", after, max_wr);
	take(11, 50);
	at.max_wr = 8; /* 6 left */
	CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_MAX_WR) == 0, "shrinking an SRQ holding 6 requests to 8");
	query_limit(&after);
	CHECK(after == 8, "max_wr %u after shrinking to 8", after);
	post_srq(67, 2);
	take(61, 8);
	/* A limit above the size, alone or with a resize, is refused. */
	at.srq_limit = 9;
	CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_LIMIT) == EINVAL, "a limit of 9 on an SRQ of 8 was not refused with EINVAL");
	at.max_wr = 4;
	at.srq_limit = 5;
	CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) == EINVAL, "max_wr 4 with srq_limit 5 was not refused");
	at.srq_limit = 2;
	CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_LIMIT) == 0, "arming a limit of 2");
	at.max_wr = 1;
	CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_MAX_WR) == EINVAL, "shrinking below the armed limit was not refused");
	CHECK(query_limit(&after) == 2 && after == 8, "limit %u max_wr %u after refusals, want 2 and 8", query_limit(NULL), after);
	/* Bad masks and sizes. */
	CHECK(ibv_modify_srq(srq, &at, 1 << 5) == EINVAL, "an unknown mask bit was not refused");
	at.max_wr = 0;
	CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_MAX_WR) == EINVAL, "max_wr 0 was not refused");
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0 && (da.device_cap_flags & IBV_DEVICE_SRQ_RESIZE),
	      "the device does not say IBV_DEVICE_SRQ_RESIZE");
	at.max_wr = (uint32_t)da.max_srq_wr + 1;
	CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_MAX_WR) == EINVAL, "max_wr above max_srq_wr %d was not refused", da.max_srq_wr);
	scene_close();
}

int main(void)
{
	if (lb_open())
		return 1;
	static const struct test_case cases[] = {
		{"limit_event_once_and_rearm", test_limit_event_once_and_rearm},
		{"resize", test_resize},
	};
	RUN_CASES(cases);
	lb_close();
	printf("srq_modify_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
