/*
 * cq_ex_test.c: extended CQs against a real daemon, as rdma-core documents
 * them and rdma_rxe (v44) implements them: ibv_create_cq_ex with the
 * wc_flags rxe fills (byte_len, imm, qp_num, src_qp, slid, sl,
 * dlid_path_bits), the others but the timestamps (cq_timestamp_test.c)
 * and IGNORE_OVERRUN refused with EOPNOTSUPP;
 * ibv_start_poll/ibv_next_poll/ibv_end_poll and the ibv_wc_read_*
 * accessors on the CQ's ring; ibv_cq_ex_to_cq usable with the ordinary
 * verbs (poll, notify and a completion channel, resize, destroy).
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "loopback.h"

#define ALL_FLAGS                                                                                       \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP | \
	 IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS)

static struct ibv_cq_ex *cq_ex(int cqe, uint64_t wc_flags, struct ibv_comp_channel *ch)
{
	struct ibv_cq_init_attr_ex a = {.cqe = (uint32_t)cqe, .wc_flags = wc_flags, .channel = ch};
	return ibv_create_cq_ex(ctx, &a);
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

static void test_refused(void)
{
	static const struct {
		const char *what;
		uint64_t wc_flags;
		uint32_t comp_mask, flags;
		int err;
	} cases[] = {
		{"CVLAN", IBV_WC_EX_WITH_CVLAN, 0, 0, EOPNOTSUPP},
		{"FLOW_TAG", IBV_WC_EX_WITH_FLOW_TAG, 0, 0, EOPNOTSUPP},
		{"TM_INFO", IBV_WC_EX_WITH_TM_INFO, 0, 0, EOPNOTSUPP},
		{"a supported flag and FLOW_TAG", IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_FLOW_TAG, 0, 0, EOPNOTSUPP},
		{"an unknown flag", 1ull << 40, 0, 0, EOPNOTSUPP},
		{"IGNORE_OVERRUN", 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, EOPNOTSUPP},
		{"an unknown create flag", 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, 1u << 7, EOPNOTSUPP},
		{"an unknown comp_mask bit", 0, 1u << 2, 0, EOPNOTSUPP}, /* as ibv_cmd_create_cq_ex */
		{"cqe 0", 0, 0, 0, EINVAL},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct ibv_cq_init_attr_ex a = {.cqe = i == sizeof cases / sizeof cases[0] - 1 ? 0 : 16,
						.wc_flags = cases[i].wc_flags,
						.comp_mask = cases[i].comp_mask,
						.flags = cases[i].flags};
		errno = 0;
		struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &a);
		CHECK(!cq && errno == cases[i].err, "%s: %p, errno %d (%s), want %s", cases[i].what, (void *)cq, errno,
		      strerror(errno), strerror(cases[i].err));
		if (cq)
			ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	}
	struct ibv_cq_init_attr_ex a = {.cqe = 16, .wc_flags = ALL_FLAGS, .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED};
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &a);
	CHECK(cq && ibv_cq_ex_to_cq(cq)->cqe == 16, "every supported flag and SINGLE_THREADED: %s", strerror(errno));
	if (cq)
		CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0, "ibv_destroy_cq");
}

/* The accessors read what ibv_poll_cq would return, for a WRITE_WITH_IMM's
 * two sides. */
static void test_accessors(void)
{
	struct ibv_cq_ex *ca = cq_ex(16, ALL_FLAGS, NULL), *cb = cq_ex(16, ALL_FLAGS, NULL);
	struct ibv_qp *a = NULL, *b = NULL;
	CHECK(ca && cb, "ibv_create_cq_ex: %s", strerror(errno));
	if (ca && cb && !lb_pair(ibv_cq_ex_to_cq(ca), ibv_cq_ex_to_cq(cb), 16, &a, &b)) {
		CHECK(lb_recv(b, 77) == 0, "post_recv");
		CHECK(lb_write(a, 5, 100, 0x1234) == 0, "post WRITE_WITH_IMM");
		int rc = start(cb);
		CHECK(rc == 0, "ibv_start_poll on the responder's CQ: %d", rc);
		if (rc == 0) {
			CHECK(cb->wr_id == 77 && cb->status == IBV_WC_SUCCESS, "wr_id %llu status %d",
			      (unsigned long long)cb->wr_id, cb->status);
			CHECK(ibv_wc_read_opcode(cb) == IBV_WC_RECV_RDMA_WITH_IMM, "opcode %d", ibv_wc_read_opcode(cb));
			CHECK(ibv_wc_read_byte_len(cb) == 100, "byte_len %u", ibv_wc_read_byte_len(cb));
			CHECK(ibv_wc_read_imm_data(cb) == htobe32(0x1234), "imm 0x%x", be32toh(ibv_wc_read_imm_data(cb)));
			CHECK(ibv_wc_read_qp_num(cb) == b->qp_num, "qp_num %u, want %u", ibv_wc_read_qp_num(cb), b->qp_num);
			CHECK(ibv_wc_read_wc_flags(cb) & IBV_WC_WITH_IMM, "wc_flags 0x%x", ibv_wc_read_wc_flags(cb));
			CHECK(ibv_wc_read_src_qp(cb) == a->qp_num && ibv_wc_read_slid(cb) == 0 && ibv_wc_read_sl(cb) == 0 &&
				      ibv_wc_read_dlid_path_bits(cb) == 0 && ibv_wc_read_vendor_err(cb) == 0,
			      "src_qp %u (the peer's) slid %u sl %u dlid_path_bits %u vendor_err %u on an RC QP over RoCE",
			      ibv_wc_read_src_qp(cb), ibv_wc_read_slid(cb), ibv_wc_read_sl(cb), ibv_wc_read_dlid_path_bits(cb),
			      ibv_wc_read_vendor_err(cb));
			CHECK(ibv_next_poll(cb) == ENOENT, "a second completion on the responder's CQ");
			ibv_end_poll(cb);
		}
		rc = start(ca);
		CHECK(rc == 0, "ibv_start_poll on the requester's CQ: %d", rc);
		if (rc == 0) {
			CHECK(ca->wr_id == 5 && ca->status == IBV_WC_SUCCESS, "wr_id %llu status %d",
			      (unsigned long long)ca->wr_id, ca->status);
			CHECK(ibv_wc_read_opcode(ca) == IBV_WC_RDMA_WRITE, "opcode %d", ibv_wc_read_opcode(ca));
			CHECK(ibv_wc_read_qp_num(ca) == a->qp_num, "qp_num %u, want %u", ibv_wc_read_qp_num(ca), a->qp_num);
			ibv_end_poll(ca);
		}
		struct ibv_poll_cq_attr pa = {0};
		CHECK(ibv_start_poll(ca, &pa) == ENOENT, "ibv_start_poll on an empty CQ is not ENOENT");
		pa.comp_mask = 1;
		CHECK(ibv_start_poll(ca, &pa) == EINVAL, "ibv_start_poll with comp_mask 1 is not EINVAL");
	}
	lb_unpair(a, b);
	CHECK(!ca || ibv_destroy_cq(ibv_cq_ex_to_cq(ca)) == 0, "ibv_destroy_cq");
	CHECK(!cb || ibv_destroy_cq(ibv_cq_ex_to_cq(cb)) == 0, "ibv_destroy_cq");
}

/* A batch comes out in order through next_poll, across an ibv_poll_cq of
 * the same CQ and a resize. */
static void test_batch(void)
{
	struct ibv_cq_ex *ca = cq_ex(8, IBV_WC_EX_WITH_QP_NUM, NULL);
	struct ibv_cq *cb = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *a = NULL, *b = NULL;
	CHECK(ca && cb, "creating the CQs: %s", strerror(errno));
	if (ca && cb && !lb_pair(ibv_cq_ex_to_cq(ca), cb, 32, &a, &b)) {
		for (uint64_t id = 1; id <= 6; id++)
			CHECK(lb_write(a, id, 8, 0) == 0, "post %llu", (unsigned long long)id);
		uint64_t next = 1;
		double t0 = lb_now();
		int rc = start(ca);
		while (rc == 0 && next <= 3) {
			CHECK(ca->wr_id == next, "wr %llu where %llu was due", (unsigned long long)ca->wr_id, (unsigned long long)next);
			next++;
			while ((rc = ibv_next_poll(ca)) == ENOENT && lb_now() - t0 < HANG_GUARD_SECONDS)
				;
		}
		ibv_end_poll(ca);
		CHECK(ibv_resize_cq(ibv_cq_ex_to_cq(ca), 64) == 0 && ibv_cq_ex_to_cq(ca)->cqe == 64, "ibv_resize_cq on a cq_ex");
		/* rc == 0 left the fourth taken: it is current, not lost. */
		if (rc == 0) {
			CHECK(ca->wr_id == next, "wr %llu where %llu was due", (unsigned long long)ca->wr_id, (unsigned long long)next);
			next++;
		}
		for (uint64_t id = 7; id <= 30; id++) /* within the send queue's 32 */
			CHECK(lb_write(a, id, 8, 0) == 0, "post %llu", (unsigned long long)id);
		while (next <= 30 && lb_now() - t0 < HANG_GUARD_SECONDS) {
			struct ibv_wc wc[4];
			int n = ibv_poll_cq(ibv_cq_ex_to_cq(ca), 4, wc); /* the ordinary poll, on the same ring */
			CHECK(n >= 0, "ibv_poll_cq: %d", n);
			if (n < 0)
				break;
			for (int i = 0; i < n; i++, next++)
				CHECK(wc[i].wr_id == next && wc[i].qp_num == a->qp_num, "wr %llu where %llu was due",
				      (unsigned long long)wc[i].wr_id, (unsigned long long)next);
		}
		CHECK(next == 31, "%llu of 30 completions", (unsigned long long)(next - 1));
	}
	lb_unpair(a, b);
	CHECK(!ca || ibv_destroy_cq(ibv_cq_ex_to_cq(ca)) == 0, "ibv_destroy_cq");
	CHECK(!cb || ibv_destroy_cq(cb) == 0, "ibv_destroy_cq");
}

/* A cq_ex on a completion channel: armed with the ordinary verb, it wakes
 * the channel, and the event names the cq_ex's ibv_cq. */
static void test_channel(void)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq_ex *ca = ch ? cq_ex(8, IBV_WC_EX_WITH_BYTE_LEN, ch) : NULL;
	struct ibv_cq *cb = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *a = NULL, *b = NULL;
	CHECK(ca && cb, "creating the CQs: %s", strerror(errno));
	if (ca && cb && !lb_pair(ibv_cq_ex_to_cq(ca), cb, 8, &a, &b)) {
		CHECK(ibv_req_notify_cq(ibv_cq_ex_to_cq(ca), 0) == 0, "ibv_req_notify_cq");
		CHECK(lb_write(a, 9, 16, 0) == 0, "post");
		struct pollfd p = {.fd = ch->fd, .events = POLLIN};
		CHECK(poll(&p, 1, HANG_GUARD_SECONDS * 1000) == 1, "no completion event");
		struct ibv_cq *ev = NULL;
		void *cq_ctx;
		CHECK(ibv_get_cq_event(ch, &ev, &cq_ctx) == 0 && ev == ibv_cq_ex_to_cq(ca), "ibv_get_cq_event: %s", strerror(errno));
		if (ev)
			ibv_ack_cq_events(ev, 1);
		CHECK(start(ca) == 0 && ca->wr_id == 9 && ibv_wc_read_byte_len(ca) == 16, "the completion after the event");
		ibv_end_poll(ca);
	}
	lb_unpair(a, b);
	CHECK(!ca || ibv_destroy_cq(ibv_cq_ex_to_cq(ca)) == 0, "ibv_destroy_cq");
	CHECK(!cb || ibv_destroy_cq(cb) == 0, "ibv_destroy_cq");
	CHECK(!ch || ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
}

int main(void)
{
	if (lb_open())
		return 1;
	static const struct test_case cases[] = {
		{"refused", test_refused},
		{"accessors", test_accessors},
		{"batch", test_batch},
		{"channel", test_channel},
	};
	RUN_CASES(cases);
	lb_close();
	printf("cq_ex_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
