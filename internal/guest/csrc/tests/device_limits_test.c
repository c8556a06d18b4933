/*
 * device_limits_test.c: the device's limits and extended queries as a
 * program sees them, against a real daemon (the Go test starts one and
 * passes its socket in VRDMA_SOCKET).
 *
 * Each limit ibv_query_device advertises is one the daemon grants, and one
 * past it is refused: max_cqe (libfabric's RDM endpoint asks for a CQ of
 * 262,144), max_qp_wr, max_sge, and max_inline_data, which ibv_query_device
 * does not carry: libfabric finds it by creating QPs, then asks again for
 * what a QP reported. ibv_query_device_ex fills what rxe fills
 * (phys_port_cnt_ex, device_cap_flags_ex), the timestamps' clock
 * (cq_timestamp_test.c) and zeroes the rest;
 * ibv_create_qp_ex takes IBV_QP_INIT_ATTR_CREATE_FLAGS with no flag, and
 * refuses a flag as the kernel does. The GID table has a real device's
 * fixed length, its unused entries zero. An address handle on this RoCE
 * port needs a GRH, as on rxe.
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_STREAM stdout
#include "check.h"

/* libfabric's RDM endpoint (verbs;ofi_rxm) asks for a CQ this large. */
#define LIBFABRIC_CQE 262144

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_device_attr attr;

/* create_qp creates an RC QP with caps (its cap is updated with what it
 * got); NULL with errno set when refused. */
static struct ibv_qp *create_qp(struct ibv_qp_cap *caps)
{
	struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .cap = *caps, .qp_type = IBV_QPT_RC};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (qp)
		*caps = a.cap;
	return qp;
}

/* refused reports whether a QP of caps is refused with EINVAL. */
static int refused(struct ibv_qp_cap caps)
{
	struct ibv_qp *qp = create_qp(&caps);
	if (qp) {
		ibv_destroy_qp(qp);
		return 0;
	}
	return errno == EINVAL;
}

static void test_query_device_ex(void)
{
	struct ibv_device_attr_ex ax;
	memset(&ax, 0xEE, sizeof ax);
	CHECK(ibv_query_device_ex(ctx, NULL, &ax) == 0, "ibv_query_device_ex");
	CHECK(ax.phys_port_cnt_ex == 1, "phys_port_cnt_ex %u, want 1", ax.phys_port_cnt_ex);
	CHECK(memcmp(&ax.orig_attr, &attr, sizeof attr) == 0, "orig_attr differs from ibv_query_device's");
	/* The flags and ATOMIC_WRITE (the kernel's bit 40), as rxe's. */
	CHECK(ax.device_cap_flags_ex == (attr.device_cap_flags | (1ULL << 40)), "device_cap_flags_ex 0x%llx, flags 0x%x",
	      (unsigned long long)ax.device_cap_flags_ex, attr.device_cap_flags);
	CHECK(ax.comp_mask == 0 && ax.tso_caps.max_tso == 0 && ax.rss_caps.max_rwq_indirection_tables == 0 &&
		      ax.max_wq_type_rq == 0 && ax.raw_packet_caps == 0 && ax.tm_caps.max_num_tags == 0 &&
		      ax.max_dm_size == 0,
	      "a capability vrdma lacks is not 0");
	struct ibv_query_device_ex_input in = {.comp_mask = 1};
	CHECK(ibv_query_device_ex(ctx, &in, &ax) == EINVAL, "an input comp_mask is refused");
	/* A program built with older headers passes a shorter structure: it
	 * gets its prefix, nothing past it is written. */
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_device_ex);
	if (!vctx) {
		CHECK(0, "the context has no query_device_ex");
		return;
	}
	size_t old = offsetof(struct ibv_device_attr_ex, phys_port_cnt_ex);
	memset(&ax, 0xEE, sizeof ax);
	CHECK(vctx->query_device_ex(ctx, NULL, &ax, old) == 0, "query_device_ex of %zu bytes", old);
	CHECK(ax.phys_port_cnt_ex == 0xEEEEEEEE, "written past the %zu bytes given", old);
	CHECK(vctx->query_device_ex(ctx, NULL, &ax, sizeof ax.orig_attr - 1) == EINVAL,
	      "a structure shorter than ibv_device_attr is refused");
}

static void test_max_cqe(void)
{
	CHECK(attr.max_cqe >= LIBFABRIC_CQE, "max_cqe %d, below libfabric's %d", attr.max_cqe, LIBFABRIC_CQE);
	struct ibv_cq *big = ibv_create_cq(ctx, LIBFABRIC_CQE, NULL, NULL, 0);
	CHECK(big != NULL && big->cqe >= LIBFABRIC_CQE, "a CQ of %d: %s", LIBFABRIC_CQE, strerror(errno));
	if (big)
		CHECK(ibv_destroy_cq(big) == 0, "ibv_destroy_cq");
	big = ibv_create_cq(ctx, attr.max_cqe, NULL, NULL, 0);
	CHECK(big != NULL && big->cqe >= attr.max_cqe, "a CQ of max_cqe %d: %s", attr.max_cqe, strerror(errno));
	if (big)
		CHECK(ibv_destroy_cq(big) == 0, "ibv_destroy_cq");
	errno = 0;
	CHECK(ibv_create_cq(ctx, attr.max_cqe + 1, NULL, NULL, 0) == NULL && errno == EINVAL,
	      "a CQ of max_cqe+1: errno %s", strerror(errno));
}

static void test_max_qp_wr_and_sge(void)
{
	struct ibv_qp_cap caps = {.max_send_wr = (uint32_t)attr.max_qp_wr, .max_recv_wr = (uint32_t)attr.max_qp_wr,
				  .max_send_sge = (uint32_t)attr.max_sge, .max_recv_sge = (uint32_t)attr.max_sge};
	CHECK(attr.max_qp_wr >= 32768 && attr.max_sge >= 32, "max_qp_wr %d, max_sge %d", attr.max_qp_wr, attr.max_sge);
	struct ibv_qp *qp = create_qp(&caps);
	CHECK(qp != NULL, "a QP of max_qp_wr %d, max_sge %d: %s", attr.max_qp_wr, attr.max_sge, strerror(errno));
	if (qp) {
		CHECK(caps.max_send_wr >= (uint32_t)attr.max_qp_wr && caps.max_send_sge >= (uint32_t)attr.max_sge,
		      "got %u WRs of %u SGEs", caps.max_send_wr, caps.max_send_sge);
		CHECK(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	}
	struct ibv_qp_cap one = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1};
	struct ibv_qp_cap c = one;
	c.max_send_wr = (uint32_t)attr.max_qp_wr + 1;
	CHECK(refused(c), "max_send_wr of max_qp_wr+1");
	c = one;
	c.max_send_sge = (uint32_t)attr.max_sge + 1;
	CHECK(refused(c), "max_send_sge of max_sge+1");
	c = one;
	c.max_recv_sge = (uint32_t)attr.max_sge + 1;
	CHECK(refused(c), "max_recv_sge of max_sge+1");
}

/* test_max_inline finds the most a QP takes inline as libfabric's verbs
 * provider does (doubling, then halving the gap), then asks for what the
 * QP reported, as its endpoints do. */
static void test_max_inline(void)
{
	struct ibv_qp_cap one = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1};
	uint32_t pos = 0, neg = 0;
	for (uint32_t n = 2; n < (1u << 20); n *= 2) {
		struct ibv_qp_cap c = one;
		c.max_inline_data = n;
		if (refused(c)) {
			neg = n;
			break;
		}
		pos = n;
	}
	CHECK(neg != 0, "every inline size up to 1 MiB was accepted");
	while (neg - pos > 1) {
		uint32_t mid = pos + (neg - pos) / 2;
		struct ibv_qp_cap c = one;
		c.max_inline_data = mid;
		if (refused(c))
			neg = mid;
		else
			pos = mid;
	}
	CHECK(pos >= 448, "the most inline data a QP takes is %u; libfabric's DGRAM endpoint asks 448", pos);
	struct ibv_qp_cap c = one;
	c.max_inline_data = pos;
	struct ibv_qp *qp = create_qp(&c);
	CHECK(qp != NULL && c.max_inline_data >= pos, "a QP of %u inline: %s", pos, strerror(errno));
	if (qp)
		ibv_destroy_qp(qp);
	for (uint32_t ask = 1; ask <= pos; ask = ask * 2 + 1) {
		c = one;
		c.max_inline_data = ask;
		qp = create_qp(&c);
		CHECK(qp != NULL && c.max_inline_data >= ask, "a QP of %u inline: %s", ask, strerror(errno));
		if (!qp)
			continue;
		ibv_destroy_qp(qp);
		uint32_t got = c.max_inline_data;
		c = one;
		c.max_inline_data = got;
		qp = create_qp(&c);
		CHECK(qp != NULL, "asked %u inline, got %u, and asking for %u again is refused: %s", ask, got, got,
		      strerror(errno));
		if (qp)
			ibv_destroy_qp(qp);
	}
}

static void test_create_flags(void)
{
	struct ibv_qp_init_attr_ex a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .pd = pd,
					.cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
					.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &a);
	CHECK(qp != NULL, "create_qp_ex with IBV_QP_INIT_ATTR_CREATE_FLAGS and no flag: %s", strerror(errno));
	if (qp)
		CHECK(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	static const struct {
		uint32_t flags;
		int err;
	} bad[] = {
		{IBV_QP_CREATE_SCATTER_FCS, EOPNOTSUPP},
		{IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, EOPNOTSUPP},
		{IBV_QP_CREATE_SOURCE_QPN, EOPNOTSUPP},
		{1u << 31, EINVAL},
		{IBV_QP_CREATE_SCATTER_FCS | 1u << 30, EINVAL},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		a.create_flags = bad[i].flags;
		errno = 0;
		qp = ibv_create_qp_ex(ctx, &a);
		CHECK(qp == NULL && errno == bad[i].err, "create_flags 0x%x: errno %s, want %s", bad[i].flags,
		      strerror(errno), strerror(bad[i].err));
		if (qp)
			ibv_destroy_qp(qp);
	}
}

static void test_gid_table(void)
{
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa)) {
		CHECK(0, "ibv_query_port: %s", strerror(errno));
		return;
	}
	CHECK(pa.gid_tbl_len == 16, "gid_tbl_len %d, want 16", pa.gid_tbl_len);
	union ibv_gid g;
	CHECK(ibv_query_gid(ctx, 1, 0, &g) == 0 && g.global.interface_id != 0, "GID 0");
	int used = 0;
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		int rc = ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e, 0);
		CHECK(rc == 0 || rc == ENODATA, "ibv_query_gid_ex %d: %s", i, strerror(rc));
		CHECK(ibv_query_gid(ctx, 1, i, &g) == 0, "ibv_query_gid %d: %s", i, strerror(errno));
		if (rc == 0)
			used++;
		else
			CHECK(g.global.subnet_prefix == 0 && g.global.interface_id == 0, "unused entry %d is not zero", i);
	}
	CHECK(used >= 1, "no GID in the table");
	CHECK(ibv_query_gid(ctx, 1, pa.gid_tbl_len, &g) != 0, "GID %d, past the table", pa.gid_tbl_len);
}

int main(void)
{
	if (!getenv("VRDMA_SOCKET")) {
		fprintf(stderr, "device_limits_test: set VRDMA_SOCKET to a daemon's socket (TestCUnits starts one)\n");
		return 2;
	}
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		fprintf(stderr, "device_limits_test: no device at %s\n", getenv("VRDMA_SOCKET"));
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = ctx ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	if (!cq || ibv_query_device(ctx, &attr)) {
		fprintf(stderr, "device_limits_test: setting up: %s\n", strerror(errno));
		return 1;
	}
	static const struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{"query_device_ex", test_query_device_ex},
		{"max_cqe", test_max_cqe},
		{"max_qp_wr_and_sge", test_max_qp_wr_and_sge},
		{"max_inline", test_max_inline},
		{"create_flags", test_create_flags},
		{"gid_table", test_gid_table},
	};
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
		int before = failures;
		tests[i].fn();
		printf("%s %s\n", failures == before ? "ok  " : "FAIL", tests[i].name);
	}
	CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	printf("device_limits_test: %d failures\n", failures);
	return failures ? 1 : 0;
}
