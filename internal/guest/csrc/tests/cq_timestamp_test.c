/*
 * cq_timestamp_test.c: completion timestamps against a real daemon
 * (docs/design/cq-timestamps.md). The device's free-running clock is
 * CLOCK_MONOTONIC in nanoseconds: ibv_query_device_ex says 1 GHz
 * (hca_core_clock 1,000,000 kHz) and a 64-bit mask, ibv_query_rt_values_ex
 * reads it. An extended CQ with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP and
 * _WALLCLOCK gives each completion the time the daemon wrote it, on both
 * clocks: between the test's readings before the post and after the poll;
 * the ordinary ibv_poll_cq and ibv_resize_cq work on such a CQ, and its
 * completions after a resize are stamped too.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "loopback.h"

#define TS_FLAGS                                                                                                 \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |              \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

static uint64_t ns(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static void test_device_clock(void)
{
	struct ibv_device_attr_ex ax;
	CHECK(ibv_query_device_ex(ctx, NULL, &ax) == 0, "ibv_query_device_ex");
	CHECK(ax.hca_core_clock == 1000000 && ax.completion_timestamp_mask == UINT64_MAX,
	      "hca_core_clock %llu kHz, completion_timestamp_mask 0x%llx: want 1000000 (1 GHz) and all 64 bits",
	      (unsigned long long)ax.hca_core_clock, (unsigned long long)ax.completion_timestamp_mask);
}

static void test_rt_values(void)
{
	struct ibv_values_ex v = {.comp_mask = IBV_VALUES_MASK_RAW_CLOCK};
	uint64_t t0 = ns(CLOCK_MONOTONIC);
	int rc = ibv_query_rt_values_ex(ctx, &v);
	uint64_t t1 = ns(CLOCK_MONOTONIC);
	CHECK(rc == 0, "ibv_query_rt_values_ex: %d (%s)", rc, strerror(rc));
	if (rc == 0) {
		uint64_t raw = (uint64_t)v.raw_clock.tv_sec * 1000000000ULL + (uint64_t)v.raw_clock.tv_nsec;
		CHECK(v.comp_mask == IBV_VALUES_MASK_RAW_CLOCK && v.raw_clock.tv_sec == 0 && raw >= t0 && raw <= t1,
		      "comp_mask 0x%x, raw_clock %lld s %ld ns: want RAW_CLOCK, tv_sec 0, tv_nsec within [%llu, %llu]",
		      v.comp_mask, (long long)v.raw_clock.tv_sec, v.raw_clock.tv_nsec, (unsigned long long)t0,
		      (unsigned long long)t1);
	}
	struct ibv_values_ex none = {.comp_mask = 0};
	CHECK(ibv_query_rt_values_ex(ctx, &none) == 0 && none.comp_mask == 0, "comp_mask 0: nothing asked, nothing given");
	struct ibv_values_ex bad = {.comp_mask = IBV_VALUES_MASK_RAW_CLOCK | (1u << 5)};
	CHECK(ibv_query_rt_values_ex(ctx, &bad) == EINVAL, "an unknown comp_mask bit is not EINVAL");
}

/* start waits for ibv_start_poll to find a completion: its return value. */
static int start(struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr pa = {0};
	double t0 = lb_now();
	int rc;
	while ((rc = ibv_start_poll(cq, &pa)) == ENOENT && lb_now() - t0 < HANG_GUARD_SECONDS)
		;
	return rc;
}

/* check_stamped checks the current completion's two timestamps against
 * the clocks read before the post (m0, w0) and after the poll. */
static void check_stamped(const char *what, struct ibv_cq_ex *cq, uint64_t m0, uint64_t w0)
{
	uint64_t m1 = ns(CLOCK_MONOTONIC), w1 = ns(CLOCK_REALTIME);
	uint64_t ts = ibv_wc_read_completion_ts(cq), wall = ibv_wc_read_completion_wallclock_ns(cq);
	CHECK(ts >= m0 && ts <= m1, "%s: completion_ts %llu not within [%llu, %llu] (CLOCK_MONOTONIC)", what,
	      (unsigned long long)ts, (unsigned long long)m0, (unsigned long long)m1);
	CHECK(wall >= w0 && wall <= w1, "%s: completion_wallclock_ns %llu not within [%llu, %llu] (CLOCK_REALTIME)",
	      what, (unsigned long long)wall, (unsigned long long)w0, (unsigned long long)w1);
}

static void test_stamped(void)
{
	struct ibv_cq_init_attr_ex attr = {.cqe = 8, .wc_flags = TS_FLAGS};
	struct ibv_cq_ex *ca = ibv_create_cq_ex(ctx, &attr), *cb = ibv_create_cq_ex(ctx, &attr);
	struct ibv_qp *a = NULL, *b = NULL;
	CHECK(ca && cb, "ibv_create_cq_ex with both timestamp flags: %s", strerror(errno));
	if (ca && cb && !lb_pair(ibv_cq_ex_to_cq(ca), ibv_cq_ex_to_cq(cb), 32, &a, &b)) {
		uint64_t m0 = ns(CLOCK_MONOTONIC), w0 = ns(CLOCK_REALTIME);
		CHECK(lb_recv(b, 70) == 0, "post_recv");
		CHECK(lb_write(a, 7, 64, 0x99) == 0, "post WRITE_WITH_IMM");
		CHECK(start(cb) == 0 && cb->wr_id == 70 && cb->status == IBV_WC_SUCCESS &&
			      ibv_wc_read_byte_len(cb) == 64 && ibv_wc_read_qp_num(cb) == b->qp_num,
		      "the responder's completion (wr_id %llu)", (unsigned long long)cb->wr_id);
		check_stamped("the responder's", cb, m0, w0);
		ibv_end_poll(cb);
		CHECK(start(ca) == 0 && ca->wr_id == 7 && ca->status == IBV_WC_SUCCESS, "the requester's completion");
		check_stamped("the requester's", ca, m0, w0);
		uint64_t first = ibv_wc_read_completion_ts(ca);
		ibv_end_poll(ca);

		/* The ordinary poll reads the 64-byte entries in order. */
		for (uint64_t id = 1; id <= 6; id++)
			CHECK(lb_write(a, id, 8, 0) == 0, "post %llu", (unsigned long long)id);
		uint64_t next = 1;
		double t0 = lb_now();
		while (next <= 6 && lb_now() - t0 < HANG_GUARD_SECONDS) {
			struct ibv_wc wc[4];
			int n = ibv_poll_cq(ibv_cq_ex_to_cq(ca), 4, wc);
			CHECK(n >= 0, "ibv_poll_cq: %d", n);
			if (n < 0)
				break;
			for (int i = 0; i < n; i++, next++)
				CHECK(wc[i].wr_id == next && wc[i].status == IBV_WC_SUCCESS && wc[i].qp_num == a->qp_num,
				      "ibv_poll_cq: wr %llu status %d where %llu was due", (unsigned long long)wc[i].wr_id,
				      wc[i].status, (unsigned long long)next);
		}
		CHECK(next == 7, "%llu of 6 completions through ibv_poll_cq", (unsigned long long)(next - 1));

		/* Resized, it stays timestamped: a completion written before
		 * or during the resize keeps its stamp, a later one gets its own. */
		m0 = ns(CLOCK_MONOTONIC);
		w0 = ns(CLOCK_REALTIME);
		CHECK(lb_write(a, 100, 8, 0) == 0, "post 100");
		CHECK(start(ca) == 0 && ca->wr_id == 100, "wr %llu where 100 was due", (unsigned long long)ca->wr_id);
		check_stamped("before the resize", ca, m0, w0);
		CHECK(ibv_wc_read_completion_ts(ca) > first, "a later completion's timestamp is not later");
		ibv_end_poll(ca);
		CHECK(lb_write(a, 101, 8, 0) == 0, "post 101");
		CHECK(ibv_resize_cq(ibv_cq_ex_to_cq(ca), 100) == 0 && ibv_cq_ex_to_cq(ca)->cqe == 128,
		      "ibv_resize_cq of a timestamped CQ");
		CHECK(start(ca) == 0 && ca->wr_id == 101, "the completion across the resize: wr %llu",
		      (unsigned long long)ca->wr_id);
		check_stamped("across the resize", ca, m0, w0);
		ibv_end_poll(ca);
		m0 = ns(CLOCK_MONOTONIC);
		w0 = ns(CLOCK_REALTIME);
		CHECK(lb_write(a, 102, 8, 0) == 0, "post 102");
		CHECK(start(ca) == 0 && ca->wr_id == 102, "the completion after the resize: wr %llu",
		      (unsigned long long)ca->wr_id);
		check_stamped("after the resize", ca, m0, w0);
		ibv_end_poll(ca);
	}
	lb_unpair(a, b);
	CHECK(!ca || ibv_destroy_cq(ibv_cq_ex_to_cq(ca)) == 0, "ibv_destroy_cq");
	CHECK(!cb || ibv_destroy_cq(ibv_cq_ex_to_cq(cb)) == 0, "ibv_destroy_cq");
}

int main(void)
{
	if (lb_open())
		return 1;
	static const struct test_case cases[] = {
		{"device clock", test_device_clock},
		{"rt values", test_rt_values},
		{"stamped", test_stamped},
	};
	RUN_CASES(cases);
	lb_close();
	printf("cq_timestamp_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
