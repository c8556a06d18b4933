/* Shared receive queues on the device: ibv_create_srq, ibv_modify_srq
 * (resize, arm the limit), ibv_query_srq, ibv_destroy_srq. Receives are
 * posted to them by datapath.c's post_recv (op VH_POST_SRQ_RECV), and RC
 * QPs made on them by its create_qp (op VH_CREATE_QP_SRQ). */
#include <errno.h>
#include <string.h>

#include "helper.h"

enum { VH_MAX_SRQS = 256 };

static struct ibv_srq *srqs[VH_MAX_SRQS];

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

struct ibv_srq *srq_at(uint32_t h) { return h < VH_MAX_SRQS ? srqs[h] : NULL; }

/* Body: u32 max_wr, u32 max_sge, u32 srq_limit, u32 0. Reply: u32 handle,
 * the max_wr, max_sge and srq_limit the device gave. */
int do_create_srq(uint32_t seq, const unsigned char *body, size_t len)
{
	struct ibv_srq_init_attr ia;
	struct ibv_srq *s;
	uint32_t h;

	if (!pd)
		return fail(VH_CREATE_SRQ, seq, ENODEV, "no device is open");
	if (len != 16 || get32(body + 12))
		return fail(VH_CREATE_SRQ, seq, EINVAL, "create_srq: %zu-byte body, want 16 ending in 0", len);
	memset(&ia, 0, sizeof(ia));
	ia.attr.max_wr = get32(body);
	ia.attr.max_sge = get32(body + 4);
	ia.attr.srq_limit = get32(body + 8);
	if (ia.attr.max_sge > VH_MAX_SRQ_SGE)
		return fail(VH_CREATE_SRQ, seq, EINVAL, "create_srq: %u SGEs, the helper posts at most %d", ia.attr.max_sge,
			    VH_MAX_SRQ_SGE);
	for (h = 0; h < VH_MAX_SRQS && srqs[h]; h++)
		;
	if (h == VH_MAX_SRQS)
		return fail(VH_CREATE_SRQ, seq, ENOSPC, "create_srq: %d SRQs already", VH_MAX_SRQS);
	ia.srq_context = (void *)(uintptr_t)h; /* its async events name it (async.c) */
	s = ibv_create_srq(pd, &ia);
	if (!s)
		return fail(VH_CREATE_SRQ, seq, errno, "ibv_create_srq: %s", strerror(errno));
	srqs[h] = s;
	begin(VH_CREATE_SRQ | VH_REPLY_BIT, seq, 0);
	put32(h);
	put32(ia.attr.max_wr);
	put32(ia.attr.max_sge);
	put32(ia.attr.srq_limit);
	return finish();
}

/* Body: u32 handle, u32 mask (IBV_SRQ_MAX_WR, IBV_SRQ_LIMIT), u32 max_wr,
 * u32 srq_limit. */
int do_modify_srq(uint32_t seq, const unsigned char *body, size_t len)
{
	struct ibv_srq_attr a;
	struct ibv_srq *s;
	uint32_t mask;
	int err;

	if (len != 16)
		return fail(VH_MODIFY_SRQ, seq, EINVAL, "modify_srq: %zu-byte body, want 16", len);
	s = srq_at(get32(body));
	if (!s)
		return fail(VH_MODIFY_SRQ, seq, ENOENT, "modify_srq: no SRQ %u", get32(body));
	mask = get32(body + 4);
	if (!mask || (mask & ~(uint32_t)(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return fail(VH_MODIFY_SRQ, seq, EINVAL, "modify_srq: mask %#x, want IBV_SRQ_MAX_WR and/or IBV_SRQ_LIMIT", mask);
	memset(&a, 0, sizeof(a));
	a.max_wr = get32(body + 8);
	a.srq_limit = get32(body + 12);
	err = ibv_modify_srq(s, &a, (int)mask);
	if (err)
		return fail(VH_MODIFY_SRQ, seq, err, "ibv_modify_srq: %s", strerror(err));
	begin(VH_MODIFY_SRQ | VH_REPLY_BIT, seq, 0);
	return finish();
}

/* Body: u32 handle. Reply: u32 max_wr, u32 max_sge, u32 srq_limit, u32 0. */
int do_query_srq(uint32_t seq, const unsigned char *body, size_t len)
{
	struct ibv_srq_attr a;
	struct ibv_srq *s;
	int err;

	if (len != 4)
		return fail(VH_QUERY_SRQ, seq, EINVAL, "query_srq: %zu-byte body, want 4", len);
	s = srq_at(get32(body));
	if (!s)
		return fail(VH_QUERY_SRQ, seq, ENOENT, "query_srq: no SRQ %u", get32(body));
	memset(&a, 0, sizeof(a));
	err = ibv_query_srq(s, &a);
	if (err)
		return fail(VH_QUERY_SRQ, seq, err, "ibv_query_srq: %s", strerror(err));
	begin(VH_QUERY_SRQ | VH_REPLY_BIT, seq, 0);
	put32(a.max_wr);
	put32(a.max_sge);
	put32(a.srq_limit);
	put32(0);
	return finish();
}

/* Body: u32 handle. */
int do_destroy_srq(uint32_t seq, const unsigned char *body, size_t len)
{
	uint32_t h;
	int err;

	if (len != 4)
		return fail(VH_DESTROY_SRQ, seq, EINVAL, "destroy_srq: %zu-byte body, want 4", len);
	h = get32(body);
	if (!srq_at(h))
		return fail(VH_DESTROY_SRQ, seq, ENOENT, "destroy_srq: no SRQ %u", h);
	err = ibv_destroy_srq(srqs[h]);
	if (err)
		return fail(VH_DESTROY_SRQ, seq, err, "ibv_destroy_srq: %s", strerror(err));
	srqs[h] = NULL;
	begin(VH_DESTROY_SRQ | VH_REPLY_BIT, seq, 0);
	return finish();
}

void srq_close(void)
{
	for (unsigned i = 0; i < VH_MAX_SRQS; i++)
		if (srqs[i]) {
			ibv_destroy_srq(srqs[i]);
			srqs[i] = NULL;
		}
}
