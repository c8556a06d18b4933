/*
 * mcast.c: ibv_attach_mcast and ibv_detach_mcast. The daemon keeps the
 * groups (docs/design/multicast.md); errors are rdma-core's over rdma_rxe:
 * EINVAL for a GID that is not multicast, a QP that is not UD or a group
 * the QP is not attached to, ENOMEM past a limit.
 */
#include <errno.h>
#include <stdio.h>

#include "verbs_int.h"

static int mcast_cmd(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid, uint16_t op)
{
	if (!qp || !gid)
		return EINVAL;
	if (gid->raw[0] != 0xff &&
	    !(gid->raw[10] == 0xff && gid->raw[11] == 0xff && (gid->raw[12] & 0xf0) == 0xe0 && !gid->raw[0] &&
	      !gid->raw[1] && !gid->raw[2] && !gid->raw[3] && !gid->raw[4] && !gid->raw[5] && !gid->raw[6] &&
	      !gid->raw[7] && !gid->raw[8] && !gid->raw[9]))
		return EINVAL; /* ib_attach_mcast: not a multicast GID */
	if (qp->qp_type != IBV_QPT_UD)
		return EINVAL; /* ib_attach_mcast: only UD QPs */
	struct vrdma_qp *q = (struct vrdma_qp *)qp;
	char g[80];
	int n = 0;
	for (int i = 0; i < 16; i++)
		n += snprintf(g + n, sizeof g - (size_t)n, i ? ",%u" : "%u", gid->raw[i]);
	return vrdma_cmd(to_vctx(qp->context), op, NULL, NULL, 0, NULL, NULL, "{\"qp\":%u,\"gid\":[%s],\"lid\":%u}",
			 q->handle, g, lid);
}

VRDMA_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return mcast_cmd(qp, gid, lid, VRDMA_CMD_ATTACH_MCAST);
}

VRDMA_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return mcast_cmd(qp, gid, lid, VRDMA_CMD_DETACH_MCAST);
}
