/* inline_depth: a bound instance's send queue and inline sends, through
 * the guest library, on device argv[1] with GID index argv[2]. Pairs of RC
 * QPs are connected to each other through the device (it loops back).
 *   depth: with the QP's depth of unsignaled RDMA WRITEs posted and done
 *     by the device (their bytes arrived; their slots are free only at a
 *     later signaled completion), one more is refused with ENOMEM, as
 *     ibverbs refuses it;
 *   rounds: the depth of signaled WRITEs kept outstanding for 300 rounds
 *     (poll one, post one): no post fails, every completion succeeds;
 *   inline: a 48-byte IBV_SEND_INLINE SEND from a buffer in no region
 *     arrives byte for byte.
 * Prints one "ok" line per check and exits 0, or says what failed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid;
static int gidx;

static void die(const char *what, int err)
{
	fprintf(stderr, "inline_depth: %s: %s\n", what, strerror(err));
	exit(1);
}

static struct ibv_qp *make_qp(uint32_t depth, uint32_t inl)
{
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = depth, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1,
					      .max_inline_data = inl}};
	struct ibv_qp *q = ibv_create_qp(pd, &ia);
	if (!q)
		die("ibv_create_qp", errno);
	return q;
}

static void connect_qp(struct ibv_qp *q, uint32_t dest)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
	int err = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		die("to INIT", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 0x100;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = (uint8_t)gidx;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	err = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		die("to RTR", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x100;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	err = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					   IBV_QP_MAX_QP_RD_ATOMIC);
	if (err)
		die("to RTS", err);
}

/* write8 writes the 8 bytes at slot (id % 64) * 8 of src to the same place
 * in dst. */
static int write8(struct ibv_qp *q, struct ibv_mr *src, struct ibv_mr *dst, uint64_t id, int signaled)
{
	uint64_t off = (id % 64) * 8;
	struct ibv_sge s = {.addr = (uintptr_t)src->addr + off, .length = 8, .lkey = src->lkey};
	struct ibv_send_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				.send_flags = signaled ? IBV_SEND_SIGNALED : 0}, *bad;
	w.wr.rdma.remote_addr = (uintptr_t)dst->addr + off;
	w.wr.rdma.rkey = dst->rkey;
	return ibv_post_send(q, &w, &bad);
}

static struct ibv_wc poll1(void)
{
	struct ibv_wc wc;
	for (long i = 0; i < 2000000000L; i++) {
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("ibv_poll_cq", EIO);
		if (n == 1)
			return wc;
	}
	die("no completion", ETIMEDOUT);
	return wc;
}

int main(int argc, char **argv)
{
	int n, err;
	if (argc != 3) {
		fprintf(stderr, "usage: inline_depth DEVICE GID-INDEX\n");
		return 2;
	}
	gidx = atoi(argv[2]);
	struct ibv_device **l = ibv_get_device_list(&n);
	for (int i = 0; l && i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), argv[1]))
			ctx = ibv_open_device(l[i]);
	if (!ctx)
		die(argv[1], ENODEV);
	if ((err = ibv_query_gid(ctx, 1, gidx, &gid)))
		die("ibv_query_gid", err);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	if (!pd || !cq)
		die("pd/cq", errno);
	/* Page-aligned, as rdma-core's own examples allocate their buffers. */
	char *abuf = aligned_alloc(4096, 4096), *bbuf = aligned_alloc(4096, 4096);
	if (!abuf || !bbuf)
		die("aligned_alloc", ENOMEM);
	for (int i = 0; i < 4096; i++)
		abuf[i] = (char)(i / 8 + 1);
	memset(bbuf, 0, 4096);
	struct ibv_mr *ma = ibv_reg_mr(pd, abuf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_mr *mb = ibv_reg_mr(pd, bbuf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ma || !mb)
		die("ibv_reg_mr", errno);

	/* depth */
	struct ibv_qp *a1 = make_qp(16, 0), *b1 = make_qp(16, 0);
	connect_qp(a1, b1->qp_num);
	connect_qp(b1, a1->qp_num);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	if ((err = ibv_query_qp(a1, &qa, IBV_QP_CAP, &qi)))
		die("ibv_query_qp", err);
	uint32_t depth = qa.cap.max_send_wr;
	for (uint32_t i = 0; i < depth; i++)
		if ((err = write8(a1, ma, mb, i, 0)))
			die("an unsignaled WRITE within the depth", err);
	/* The device has done them all (their bytes are in b), and nothing
	 * signaled came after them: their slots are still taken. */
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (memcmp(bbuf, abuf, (size_t)depth * 8)) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 60)
			die("the unsignaled WRITEs' bytes never arrived", ETIMEDOUT);
	}
	err = write8(a1, ma, mb, depth, 0);
	if (err != ENOMEM) {
		fprintf(stderr, "inline_depth: with the depth %u done by the device and no signaled completion after them, one more: %s, want ENOMEM\n", depth,
			err ? strerror(err) : "posted");
		return 1;
	}
	printf("depth ok: %u posted, one more ENOMEM\n", depth);

	/* rounds */
	struct ibv_qp *a2 = make_qp(16, 64), *b2 = make_qp(16, 64);
	connect_qp(a2, b2->qp_num);
	connect_qp(b2, a2->qp_num);
	if ((err = ibv_query_qp(a2, &qa, IBV_QP_CAP, &qi)))
		die("ibv_query_qp", err);
	depth = qa.cap.max_send_wr;
	uint64_t next = 0, want = 0;
	for (; next < depth; next++)
		if ((err = write8(a2, ma, mb, next, 1)))
			die("a signaled WRITE within the depth", err);
	for (int r = 0; r < 300; r++) {
		struct ibv_wc wc = poll1();
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != want || wc.qp_num != a2->qp_num) {
			fprintf(stderr, "inline_depth: round %d: completion wr_id %llu status %s on QPN %u, want wr_id %llu success on %u\n", r,
				(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.qp_num, (unsigned long long)want, a2->qp_num);
			return 1;
		}
		want++;
		if ((err = write8(a2, ma, mb, next++, 1))) {
			fprintf(stderr, "inline_depth: round %d: a post after a completion: %s\n", r, strerror(err));
			return 1;
		}
	}
	while (want < next) {
		struct ibv_wc wc = poll1();
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != want++)
			die("the last completions", EIO);
	}
	printf("rounds ok: %u outstanding for 300 rounds\n", depth);

	/* inline */
	if (qa.cap.max_inline_data < 48) {
		fprintf(stderr, "inline_depth: max_inline_data %u, asked 64\n", qa.cap.max_inline_data);
		return 1;
	}
	struct ibv_sge rs = {.addr = (uintptr_t)bbuf + 1024, .length = 1024, .lkey = mb->lkey};
	struct ibv_recv_wr rw = {.wr_id = 77, .sg_list = &rs, .num_sge = 1}, *rbad;
	if ((err = ibv_post_recv(b2, &rw, &rbad)))
		die("ibv_post_recv", err);
	char msg[48];
	for (int i = 0; i < 48; i++)
		msg[i] = (char)('A' + i % 26);
	struct ibv_sge s = {.addr = (uintptr_t)msg, .length = sizeof(msg), .lkey = 0};
	struct ibv_send_wr w = {.wr_id = 88, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE}, *bad;
	if ((err = ibv_post_send(a2, &w, &bad)))
		die("an inline SEND", err);
	memset(msg, 0, sizeof(msg)); /* the bytes were taken at post */
	for (int got = 0; got < 2; got++) {
		struct ibv_wc wc = poll1();
		if (wc.status != IBV_WC_SUCCESS || (wc.wr_id != 77 && wc.wr_id != 88) || (wc.wr_id == 77 && wc.byte_len != 48)) {
			fprintf(stderr, "inline_depth: inline SEND: completion wr_id %llu status %s byte_len %u\n",
				(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.byte_len);
			return 1;
		}
	}
	for (int i = 0; i < 48; i++)
		if (bbuf[1024 + i] != (char)('A' + i % 26)) {
			fprintf(stderr, "inline_depth: the inline SEND's byte %d is %#x\n", i, bbuf[1024 + i]);
			return 1;
		}
	printf("inline ok: 48 bytes\n");
	return 0;
}
