/* The helper's UD pieces: a UD QP's state transitions (with its Q_Key),
 * address handles, and posting UD sends that name an address handle, the
 * remote QPN and Q_Key. UD QPs are made by do_create_qp (datapath.c) and
 * take receives and report completions as RC ones do; a receive gets the
 * 40-byte GRH in front of the payload, as rdma-core delivers it. Layouts:
 * verbs/ud_msg.go. As in datapath.c, every handle, count and range is
 * checked before anything is posted. */
#include <errno.h>
#include <string.h>

#include "helper.h"

enum {
	VH_MAX_AHS = 4096,
	VH_MAX_BATCH_UD = 64,
	VH_MAX_SGE_UD = 16,
	VH_UD_WR = 40,
	VH_SGE_UD = 16,
	VH_MODIFY_UD_SIZE = 16,
	VH_AH_SIZE = 32,
};

static struct ibv_ah *ahs[VH_MAX_AHS];
static struct ibv_send_wr uwr[VH_MAX_BATCH_UD];
static struct ibv_sge usgl[VH_MAX_BATCH_UD][VH_MAX_SGE_UD];

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static struct ibv_ah *ah_at(uint32_t h) { return h < VH_MAX_AHS ? ahs[h] : NULL; }

/* Body: u32 handle, u32 state, u32 qkey, u32 sq_psn. INIT takes the port,
 * P_Key index 0 and the Q_Key; RTR and RTS the Q_Key (the QP's, changed or
 * not), RTS from RTR the send PSN too; RESET and ERR the state. The daemon has checked the Q_Key
 * (a controlled one, high bit set, is for privileged users only). */
int do_modify_ud_qp(uint32_t seq, const unsigned char *body, size_t len)
{
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	int mask = IBV_QP_STATE, err;
	uint32_t state;

	if (len != VH_MODIFY_UD_SIZE)
		return fail(VH_MODIFY_UD_QP, seq, EINVAL, "modify_ud_qp: %zu-byte body, want %d", len, VH_MODIFY_UD_SIZE);
	qp = qp_at(get32(body));
	if (!qp)
		return fail(VH_MODIFY_UD_QP, seq, ENOENT, "modify_ud_qp: no QP %u", get32(body));
	if (qp->qp_type != IBV_QPT_UD)
		return fail(VH_MODIFY_UD_QP, seq, EINVAL, "modify_ud_qp: QP %u is not a UD QP", get32(body));
	memset(&a, 0, sizeof(a));
	state = get32(body + 4);
	a.qp_state = (enum ibv_qp_state)state;
	switch (state) {
	case IBV_QPS_RESET:
	case IBV_QPS_ERR:
		break;
	case IBV_QPS_INIT: /* from RESET, or INIT again */
		a.pkey_index = 0;
		a.port_num = port_num;
		a.qkey = get32(body + 8);
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		break;
	case IBV_QPS_RTR:
		a.qkey = get32(body + 8);
		mask |= IBV_QP_QKEY;
		break;
	case IBV_QPS_RTS: /* the send PSN from RTR only; RTS to RTS changes the Q_Key */
		a.qkey = get32(body + 8);
		mask |= IBV_QP_QKEY;
		if (qp->state == IBV_QPS_RTR) {
			a.sq_psn = get32(body + 12);
			if (a.sq_psn > 0xffffff)
				return fail(VH_MODIFY_UD_QP, seq, EINVAL, "modify_ud_qp: PSN %#x", a.sq_psn);
			mask |= IBV_QP_SQ_PSN;
		}
		break;
	default:
		return fail(VH_MODIFY_UD_QP, seq, EINVAL, "modify_ud_qp: state %u is not RESET, INIT, RTR, RTS or ERR",
			    state);
	}
	err = ibv_modify_qp(qp, &a, mask);
	if (err)
		return fail(VH_MODIFY_UD_QP, seq, err, "ibv_modify_qp (UD) to state %u: %s", state, strerror(err));
	begin(VH_MODIFY_UD_QP | VH_REPLY_BIT, seq, 0);
	return finish();
}

/* Body (32 bytes): 16-byte dgid, u32 flow_label, u16 dlid, u8 sgid_index,
 * hop_limit, traffic_class, sl, is_global, u8 0, u32 0. Reply: u32
 * handle, u32 0. On RoCE the AH has a GRH (is_global); on InfiniBand it
 * routes by dlid. */
int do_create_ah(uint32_t seq, const unsigned char *body, size_t len)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;
	uint32_t h;

	if (!pd)
		return fail(VH_CREATE_AH, seq, ENODEV, "no device is open");
	if (len != VH_AH_SIZE)
		return fail(VH_CREATE_AH, seq, EINVAL, "create_ah: %zu-byte body, want %d", len, VH_AH_SIZE);
	memset(&a, 0, sizeof(a));
	memcpy(a.grh.dgid.raw, body, 16);
	a.grh.flow_label = get32(body + 16);
	memcpy(&a.dlid, body + 20, 2);
	a.grh.sgid_index = body[22];
	a.grh.hop_limit = body[23];
	a.grh.traffic_class = body[24];
	a.sl = body[25];
	a.is_global = body[26];
	a.port_num = port_num;
	if (a.grh.flow_label > 0xfffff || a.is_global > 1 || a.sl > 15 || body[27] || get32(body + 28))
		return fail(VH_CREATE_AH, seq, EINVAL, "create_ah: flow label %#x, is_global %u, SL %u", a.grh.flow_label,
			    a.is_global, a.sl);
	for (h = 0; h < VH_MAX_AHS && ahs[h]; h++)
		;
	if (h == VH_MAX_AHS)
		return fail(VH_CREATE_AH, seq, ENOSPC, "create_ah: %d AHs already", VH_MAX_AHS);
	ah = ibv_create_ah(pd, &a);
	if (!ah)
		return fail(VH_CREATE_AH, seq, errno, "ibv_create_ah: %s", strerror(errno));
	ahs[h] = ah;
	begin(VH_CREATE_AH | VH_REPLY_BIT, seq, 0);
	put32(h);
	put32(0);
	return finish();
}

/* Body: u32 handle. */
int do_destroy_ah(uint32_t seq, const unsigned char *body, size_t len)
{
	uint32_t h;
	int err;

	if (len != 4)
		return fail(VH_DESTROY_AH, seq, EINVAL, "destroy_ah: %zu-byte body, want 4", len);
	h = get32(body);
	if (!ah_at(h))
		return fail(VH_DESTROY_AH, seq, ENOENT, "destroy_ah: no AH %u", h);
	err = ibv_destroy_ah(ahs[h]);
	if (err)
		return fail(VH_DESTROY_AH, seq, err, "ibv_destroy_ah: %s", strerror(err));
	ahs[h] = NULL;
	begin(VH_DESTROY_AH | VH_REPLY_BIT, seq, 0);
	return finish();
}

/* Body: u32 QP, u32 count, then count work requests of 40 bytes: u64
 * wr_id, u32 opcode (SEND or SEND_WITH_IMM), u32 send_flags, u32 imm_data,
 * u32 SGE count, u32 AH handle, u32 remote QPN, u32 remote Q_Key, u32 0;
 * each followed by its SGEs (u32 region, u32 length, u64 offset). All are
 * posted with one ibv_post_send. */
int do_post_send_ud(uint32_t seq, const unsigned char *body, size_t len)
{
	const uint32_t flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	struct ibv_send_wr *bad = NULL;
	struct ibv_qp *qp;
	uint32_t n, i;
	size_t at = 8;
	int err;

	if (len < 8)
		return fail(VH_POST_SEND_UD, seq, EINVAL, "post_send_ud: %zu-byte body", len);
	qp = qp_at(get32(body));
	n = get32(body + 4);
	if (!qp)
		return fail(VH_POST_SEND_UD, seq, ENOENT, "post_send_ud: no QP %u", get32(body));
	if (qp->qp_type != IBV_QPT_UD)
		return fail(VH_POST_SEND_UD, seq, EINVAL, "post_send_ud: QP %u is not a UD QP", get32(body));
	if (n == 0 || n > VH_MAX_BATCH_UD)
		return fail(VH_POST_SEND_UD, seq, EINVAL, "post_send_ud: %u work requests, 1..%d per batch", n,
			    VH_MAX_BATCH_UD);
	for (i = 0; i < n; i++) {
		struct ibv_send_wr *w = &uwr[i];
		const unsigned char *p = body + at;
		uint32_t op, nsge, qpn;

		if (len - at < VH_UD_WR)
			return fail(VH_POST_SEND_UD, seq, EINVAL, "post_send_ud: work request %u is cut short", i);
		memset(w, 0, sizeof(*w));
		w->wr_id = get64(p);
		op = get32(p + 8);
		w->send_flags = get32(p + 12);
		w->imm_data = get32(p + 16);
		nsge = get32(p + 20);
		w->wr.ud.ah = ah_at(get32(p + 24));
		qpn = get32(p + 28);
		w->wr.ud.remote_qkey = get32(p + 32);
		if ((op != IBV_WR_SEND && op != IBV_WR_SEND_WITH_IMM) || (w->send_flags & ~flags) ||
		    nsge > VH_MAX_SGE_UD || (size_t)nsge * VH_SGE_UD > len - at - VH_UD_WR || qpn > 0xffffff ||
		    get32(p + 36) || !w->wr.ud.ah)
			return fail(VH_POST_SEND_UD, seq, EINVAL,
				    "post_send_ud: work request %u: opcode %u, flags %#x, %u SGEs, AH %u, QPN %#x", i, op,
				    w->send_flags, nsge, get32(p + 24), qpn);
		w->opcode = (enum ibv_wr_opcode)op;
		w->wr.ud.remote_qpn = qpn;
		p += VH_UD_WR;
		for (uint32_t j = 0; j < nsge; j++, p += VH_SGE_UD)
			if (mr_sge(get32(p), get64(p + 8), get32(p + 4), &usgl[i][j]))
				return fail(VH_POST_SEND_UD, seq, EINVAL,
					    "post_send_ud: work request %u: an SGE outside its region", i);
		w->sg_list = nsge ? usgl[i] : NULL;
		w->num_sge = (int)nsge;
		w->next = i + 1 < n ? &uwr[i + 1] : NULL;
		at += VH_UD_WR + (size_t)nsge * VH_SGE_UD;
	}
	if (at != len)
		return fail(VH_POST_SEND_UD, seq, EINVAL, "post_send_ud: %zu bytes after the work requests", len - at);
	err = ibv_post_send(qp, uwr, &bad);
	if (err)
		return fail(VH_POST_SEND_UD, seq, err, "ibv_post_send (UD): work request %ld of %u: %s",
			    bad ? (long)(bad - uwr) : -1L, n, strerror(err));
	begin(VH_POST_SEND_UD | VH_REPLY_BIT, seq, 0);
	return finish();
}

void ud_close(void)
{
	for (int i = 0; i < VH_MAX_AHS; i++)
		if (ahs[i]) {
			ibv_destroy_ah(ahs[i]);
			ahs[i] = NULL;
		}
}
