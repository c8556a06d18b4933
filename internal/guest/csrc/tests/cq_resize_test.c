/*
 * cq_resize_test.c: ibv_resize_cq against a real daemon, as rdma-core
 * documents it (rdma_rxe's behaviour where it leaves it open): the CQ grows
 * or shrinks, reports its new size in cq->cqe, keeps the completions it
 * holds in order, stays armed and on its channel, and refuses sizes out of
 * range or below what it holds with EINVAL, unchanged. One case resizes
 * over and over while completions stream in and are polled: none may be
 * lost or seen twice.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "loopback.h"
#include "verbs_int.h" /* a white-box look at what the ring holds */

/* held waits until cq's ring holds n completions not yet polled. */
static int held(struct ibv_cq *ibcq, uint32_t n)
{
	struct vrdma_cq *cq = (struct vrdma_cq *)ibcq;
	double start = lb_now();
	for (;;) {
		pthread_spin_lock(&cq->lock);
		uint32_t have = vrdma_load32(cq->mem, VRDMA_RING_PROD_OFF) - cq->cons;
		pthread_spin_unlock(&cq->lock);
		if (have == n)
			return 0;
		if (have > n || lb_now() - start > HANG_GUARD_SECONDS) {
			CHECK(0, "the CQ holds %u completions, want %u", have, n);
			return -1;
		}
	}
}

/* expect polls n completions, which must be successful, of wr_ids next,
 * next+1, ...; then the CQ must be empty. */
static void expect(struct ibv_cq *cq, uint64_t next, int n)
{
	double start = lb_now();
	for (int got = 0; got < n;) {
		struct ibv_wc wc[8];
		int r = ibv_poll_cq(cq, 8, wc);
		if (r < 0 || lb_now() - start > HANG_GUARD_SECONDS) {
			CHECK(0, "poll_cq %d after %d of %d completions", r, got, n);
			return;
		}
		for (int i = 0; i < r; i++, got++, next++)
			CHECK(wc[i].wr_id == next && wc[i].status == IBV_WC_SUCCESS, "completion %d: wr %llu status %d, want wr %llu",
			      got, (unsigned long long)wc[i].wr_id, wc[i].status, (unsigned long long)next);
	}
	struct ibv_wc wc;
	CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "a completion more than the %d posted", n);
}

static void test_grow_keeps_order(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0), *cqb = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *a = NULL, *b = NULL;
	CHECK(cq && cqb && cq->cqe == 4, "ibv_create_cq(4): %s", strerror(errno));
	if (cq && cqb && !lb_pair(cq, cqb, 64, &a, &b)) {
		for (uint64_t id = 1; id <= 3; id++)
			CHECK(lb_write(a, id, 64, 0) == 0, "post %llu", (unsigned long long)id);
		if (!held(cq, 3)) {
			CHECK(ibv_resize_cq(cq, 100) == 0, "ibv_resize_cq(100)");
			CHECK(cq->cqe == 128, "cqe %d after resizing to 100, want 128 (a power of two, as created)", cq->cqe);
			for (uint64_t id = 4; id <= 63; id++)
				CHECK(lb_write(a, id, 64, 0) == 0, "post %llu", (unsigned long long)id);
			expect(cq, 1, 63);
		}
	}
	lb_unpair(a, b);
	CHECK(!cq || ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(!cqb || ibv_destroy_cq(cqb) == 0, "ibv_destroy_cq");
}

static void test_shrink(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0), *cqb = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *a = NULL, *b = NULL;
	CHECK(cq && cqb, "ibv_create_cq: %s", strerror(errno));
	if (cq && cqb && !lb_pair(cq, cqb, 8, &a, &b)) {
		for (uint64_t id = 1; id <= 3; id++)
			CHECK(lb_write(a, id, 8, 0) == 0, "post %llu", (unsigned long long)id);
		if (!held(cq, 3)) {
			CHECK(ibv_resize_cq(cq, 2) == EINVAL, "resizing a CQ that holds 3 completions to 2 did not fail with EINVAL");
			CHECK(cq->cqe == 64, "cqe %d after a refused resize, want 64", cq->cqe);
			CHECK(ibv_resize_cq(cq, 3) == 0, "resizing a CQ that holds 3 completions to 3");
			CHECK(cq->cqe == 4, "cqe %d after resizing to 3, want 4", cq->cqe);
			expect(cq, 1, 3);
			CHECK(ibv_resize_cq(cq, 1) == 0 && cq->cqe == 1, "resizing an empty CQ to 1: cqe %d", cq->cqe);
			CHECK(lb_write(a, 4, 8, 0) == 0, "post 4");
			expect(cq, 4, 1);
		}
	}
	lb_unpair(a, b);
	CHECK(!cq || ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(!cqb || ibv_destroy_cq(cqb) == 0, "ibv_destroy_cq");
}

static void test_bad_sizes(void)
{
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0, "ibv_query_device");
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq) {
		CHECK(0, "ibv_create_cq: %s", strerror(errno));
		return;
	}
	int bad[] = {0, -1, -65536, da.max_cqe + 1, 1 << 30};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = ibv_resize_cq(cq, bad[i]);
		CHECK(rc == EINVAL, "ibv_resize_cq(%d) = %d (%s), want EINVAL", bad[i], rc, strerror(rc));
		CHECK(cq->cqe == 16, "cqe %d after a refused resize to %d", cq->cqe, bad[i]);
	}
	if (da.max_cqe <= 1 << 16) /* a ring of a few MiB, not whatever a device may advertise */
		CHECK(ibv_resize_cq(cq, da.max_cqe) == 0 && cq->cqe == da.max_cqe, "ibv_resize_cq(max_cqe %d): cqe %d",
		      da.max_cqe, cq->cqe);
	CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
}

/* An armed CQ on a channel stays both through a resize. */
static void test_armed_channel(void)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ch ? ibv_create_cq(ctx, 8, NULL, ch, 0) : NULL, *cqb = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_qp *a = NULL, *b = NULL;
	CHECK(cq && cqb, "ibv_create_cq: %s", strerror(errno));
	if (cq && cqb && !lb_pair(cq, cqb, 8, &a, &b)) {
		CHECK(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq");
		CHECK(ibv_resize_cq(cq, 256) == 0, "ibv_resize_cq(256)");
		CHECK(lb_write(a, 7, 8, 0) == 0, "post");
		struct pollfd p = {.fd = ch->fd, .events = POLLIN};
		CHECK(poll(&p, 1, HANG_GUARD_SECONDS * 1000) == 1, "no completion event after the resize");
		struct ibv_cq *ev = NULL;
		void *cq_ctx;
		CHECK(ibv_get_cq_event(ch, &ev, &cq_ctx) == 0 && ev == cq, "ibv_get_cq_event: %s", strerror(errno));
		if (ev)
			ibv_ack_cq_events(ev, 1);
		expect(cq, 7, 1);
	}
	lb_unpair(a, b);
	CHECK(!cq || ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(!cqb || ibv_destroy_cq(cqb) == 0, "ibv_destroy_cq");
	CHECK(!ch || ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
}

/* ---- resizing while completions stream in ---- */

#define STREAM 3000     /* completions at least */
#define STREAM_RESIZES 2 /* resizes at least, while they stream */
#define STREAM_DEPTH 32
static const int stream_sizes[] = {64, 1024, 37, 256, 4096, 33, 128};
static atomic_int stream_done;
static atomic_int stream_resizes;

static void *resizer(void *arg)
{
	struct ibv_cq *cq = arg;
	for (int i = 0; !atomic_load(&stream_done); i++) {
		int rc = ibv_resize_cq(cq, stream_sizes[i % (int)(sizeof stream_sizes / sizeof stream_sizes[0])]);
		CHECK(rc == 0, "resize %d: %s", i, strerror(rc));
		if (rc)
			break;
		atomic_fetch_add(&stream_resizes, 1);
	}
	return NULL;
}

static void test_resize_while_completing(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0), *cqb = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *a = NULL, *b = NULL;
	CHECK(cq && cqb, "ibv_create_cq: %s", strerror(errno));
	if (cq && cqb && !lb_pair(cq, cqb, STREAM_DEPTH, &a, &b)) {
		pthread_t th;
		atomic_store(&stream_done, 0);
		atomic_store(&stream_resizes, 0);
		CHECK(pthread_create(&th, NULL, resizer, cq) == 0, "pthread_create");
		/* The stream goes on past STREAM until the resizer has run
		 * STREAM_RESIZES times during it: a fast daemon can complete
		 * STREAM writes before the resizer's first turn. */
		uint64_t posted = 0, next = 1, end = STREAM;
		double start = lb_now();
		while (next <= end && lb_now() - start < HANG_GUARD_SECONDS) {
			if (next > end - STREAM_DEPTH && atomic_load(&stream_resizes) < STREAM_RESIZES)
				end += STREAM_DEPTH;
			while (posted < end && posted - (next - 1) < STREAM_DEPTH) {
				int rc = lb_write(a, ++posted, 8, 0);
				CHECK(rc == 0, "post %llu: %s", (unsigned long long)posted, strerror(rc));
			}
			struct ibv_wc wc[16];
			int r = ibv_poll_cq(cq, 16, wc);
			CHECK(r >= 0, "poll_cq %d", r);
			if (r < 0)
				break;
			for (int i = 0; i < r; i++, next++)
				if (wc[i].wr_id != next || wc[i].status != IBV_WC_SUCCESS) {
					CHECK(0, "completion of wr %llu (status %d) where %llu was due", (unsigned long long)wc[i].wr_id,
					      wc[i].status, (unsigned long long)next);
					next = end + 1;
					break;
				}
		}
		int resizes = atomic_load(&stream_resizes); /* those that ran while the stream did */
		atomic_store(&stream_done, 1);
		pthread_join(th, NULL);
		CHECK(next == end + 1, "%llu of %llu completions", (unsigned long long)(next - 1), (unsigned long long)end);
		CHECK(resizes >= STREAM_RESIZES, "only %d resizes ran during the stream", resizes);
		printf("resize_while_completing: %llu completions, %d resizes\n", (unsigned long long)end, resizes);
	}
	lb_unpair(a, b);
	CHECK(!cq || ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(!cqb || ibv_destroy_cq(cqb) == 0, "ibv_destroy_cq");
}

int main(void)
{
	if (lb_open())
		return 1;
	static const struct test_case cases[] = {
		{"grow_keeps_order", test_grow_keeps_order},
		{"shrink", test_shrink},
		{"bad_sizes", test_bad_sizes},
		{"armed_channel", test_armed_channel},
		{"resize_while_completing", test_resize_while_completing},
	};
	RUN_CASES(cases);
	lb_close();
	printf("cq_resize_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
