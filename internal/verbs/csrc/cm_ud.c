/* The helper's connection manager for UD QPs: rdma_cm ids of the UDP port
 * space (RDMA_PS_UDP) on the device's own CM, whose "connection" is one
 * SIDR exchange: the dialling side's SIDR_REQ (VH_CM_UD_CONNECT: the
 * address and route are resolved first, as cm.c dials), the listener's
 * SIDR_REP naming its UD QP by number (VH_CM_UD_ACCEPT; the Q_Key is the
 * kernel's, RDMA_UDP_QKEY for an IP address), or a rejection (VH_CM_REJECT,
 * cm.c). The ids share cm.c's table and event channel; their events carry
 * rdma_cm's param.ud (VH_CM_UD_EVENT): the address handle's attributes the
 * kernel resolved, the peer's QPN and Q_Key. Layouts: verbs/cm_ud_msg.go. */
#include <errno.h>
#include <string.h>

#include "cm.h"

enum {
	VH_CM_UD_ACCEPT_SIZE = 12,
	VH_CM_UD_PDATA = 256,
};

#if !VH_HAVE_CMA

int do_cm_ud(uint16_t op, uint32_t seq, const unsigned char *body, size_t len)
{
	(void)body;
	(void)len;
	return fail(op, seq, EOPNOTSUPP,
		    "this helper was built without rdma/rdma_cma.h: install librdmacm-dev (`apt-get install librdmacm-dev`) and let the daemon build it again");
}

#else

static uint32_t ud_get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* Body: u32 id, u32 QPN, u32 private data length, the data. The SIDR_REP
 * names the QP; the kernel puts its Q_Key in. */
static int ud_accept(uint32_t seq, const unsigned char *body, size_t len)
{
	struct rdma_conn_param p;
	struct rdma_cm_id *id;
	uint32_t n, qpn;

	if (len < VH_CM_UD_ACCEPT_SIZE)
		return fail(VH_CM_UD_ACCEPT, seq, EINVAL, "cm_ud_accept: %zu-byte body, want %d and the data", len, VH_CM_UD_ACCEPT_SIZE);
	id = cm_id_at(ud_get32(body));
	qpn = ud_get32(body + 4);
	n = ud_get32(body + 8);
	if (!id)
		return fail(VH_CM_UD_ACCEPT, seq, ENOENT, "cm_ud_accept: no id %u", ud_get32(body));
	if (id->ps != RDMA_PS_UDP)
		return fail(VH_CM_UD_ACCEPT, seq, EINVAL, "cm_ud_accept: id %u is not a UD one (accept it with VH_CM_ACCEPT)", ud_get32(body));
	if (qpn > 0xffffff || n > VH_CM_UD_PDATA || len != VH_CM_UD_ACCEPT_SIZE + n)
		return fail(VH_CM_UD_ACCEPT, seq, EINVAL, "cm_ud_accept: QPN %#x, %u bytes of private data in %zu", qpn, n, len);
	memset(&p, 0, sizeof(p));
	p.qp_num = qpn;
	p.private_data = n ? body + VH_CM_UD_ACCEPT_SIZE : NULL;
	p.private_data_len = (uint8_t)n;
	if (cm_rdma_accept(id, &p))
		return fail(VH_CM_UD_ACCEPT, seq, errno, "rdma_accept (SIDR_REP): %s", strerror(errno));
	begin(VH_CM_UD_ACCEPT | VH_REPLY_BIT, seq, 0);
	return finish();
}

int do_cm_ud(uint16_t op, uint32_t seq, const unsigned char *body, size_t len)
{
	if (cm_fd() < 0)
		return fail(op, seq, ENOTCONN, "the CM is not open (VH_CM_OPEN first)");
	switch (op) {
	case VH_CM_UD_LISTEN:
		return cm_listen_ps(op, seq, body, len, RDMA_PS_UDP);
	case VH_CM_UD_CONNECT:
		return cm_connect_ps(op, seq, body, len, RDMA_PS_UDP);
	default:
		return ud_accept(seq, body, len);
	}
}

/* cm_ud_push sends a UD id's event: u32 id, u32 listener, u32 event, i32
 * status, u32 the peer's QPN, u32 its Q_Key, then the address handle's
 * attributes (u32 flow label, u16 DLID, u8 is_global, u8 SGID index, u8
 * hop limit, u8 traffic class, u8 SL, u8 port, 16-byte DGID), the local
 * and the peer's address (u32 port, 16 bytes each), u32 private data
 * length, u32 0, the data. */
int cm_ud_push(uint32_t h, uint32_t listener, int event, int status, const struct rdma_cm_event *ev,
	       const struct rdma_cm_id *id)
{
	const struct rdma_ud_param *u = ev ? &ev->param.ud : NULL;
	uint32_t n = u && u->private_data ? u->private_data_len : 0;
	struct ibv_ah_attr ah;

	memset(&ah, 0, sizeof(ah));
	/* Only an ESTABLISHED event (the SIDR_REP) carries an address handle
	 * and the peer's QP; a request's param.ud has its private data. */
	if (u && event == RDMA_CM_EVENT_ESTABLISHED)
		ah = u->ah_attr;
	if (n > VH_CM_UD_PDATA)
		n = VH_CM_UD_PDATA;
	begin(VH_CM_UD_EVENT, 0, 0);
	put32(h);
	put32(listener);
	put32((uint32_t)event);
	put32((uint32_t)status);
	put32(u && event == RDMA_CM_EVENT_ESTABLISHED ? u->qp_num & 0xffffff : 0);
	put32(u && event == RDMA_CM_EVENT_ESTABLISHED ? u->qkey : 0);
	put32(ah.grh.flow_label & 0xfffff);
	putbytes(&ah.dlid, 2);
	putbytes((unsigned char[6]){ ah.is_global ? 1 : 0, ah.grh.sgid_index, ah.grh.hop_limit, ah.grh.traffic_class,
				     ah.sl & 0xf, ah.port_num },
		 6);
	putbytes(ah.grh.dgid.raw, 16);
	cm_put_sockaddr((const struct sockaddr *)&id->route.addr.src_addr);
	cm_put_sockaddr((const struct sockaddr *)&id->route.addr.dst_addr);
	put32(n);
	put32(0);
	if (n)
		putbytes(u->private_data, n);
	return finish_to(cm_push_sock());
}

#endif
