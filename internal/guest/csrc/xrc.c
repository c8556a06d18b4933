/*
 * xrc.c: XRC domains, XRC SRQs and their numbers (docs/design/xrc.md).
 * The XRC QPs themselves are created in qp.c (create_qp_ex) and posted to
 * in post.c (the work request's remote_srqn).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "verbs_int.h"

/* open_xrcd: with a file descriptor, the domain of that file's inode,
 * shared by the processes (of the same uid) that open it, created with
 * O_CREAT, refused with O_EXCL if it exists; fd -1 gives a private one.
 * Errors as the kernel's: EAGAIN without O_CREAT when there is none,
 * EINVAL with O_EXCL when there is one. */
static struct ibv_xrcd *open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr)
{
	if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ||
	    (attr->oflags & ~(O_CREAT | O_EXCL)) || attr->fd < -1) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->fd >= 0 && fcntl(attr->fd, F_GETFD) < 0) {
		errno = EBADF;
		return NULL;
	}
	struct vrdma_context *ctx = to_vctx(context);
	struct vrdma_xrcd *x = calloc(1, sizeof *x);
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	struct vj_doc doc = {0};
	int fd = attr->fd;
	int rc = vrdma_cmd(ctx, VRDMA_CMD_OPEN_XRCD, &doc, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0, NULL, NULL,
			   "{\"fd\":%s,\"oflags\":%d}", fd >= 0 ? "true" : "false", attr->oflags);
	uint64_t h = 0;
	if (!rc && (vj_get_u64(&doc, 0, "handle", &h) || h == 0 || h > UINT32_MAX))
		rc = EPROTO;
	vrdma_doc_free(&doc);
	if (rc) {
		free(x);
		errno = rc == ENOENT ? EAGAIN : rc; /* no domain of the file, no O_CREAT */
		return NULL;
	}
	x->handle = (uint32_t)h;
	x->ibxrcd.context = context;
	vrdma_live(ctx, 1);
	return &x->ibxrcd;
}

/* close_xrcd: EBUSY while XRC SRQs or XRC_RECV QPs made through this
 * handle exist. */
static int close_xrcd(struct ibv_xrcd *xrcd)
{
	struct vrdma_xrcd *x = (struct vrdma_xrcd *)xrcd;
	struct vrdma_context *ctx = to_vctx(xrcd->context);
	int rc = vrdma_cmd_simple(ctx, VRDMA_CMD_CLOSE_XRCD, x->handle);
	if (vrdma_destroy_kept(ctx, rc))
		return rc;
	free(x);
	vrdma_live(ctx, -1);
	return 0;
}

/* create_srq_ex: a basic SRQ, or an XRC one of an XRC domain whose
 * receives complete on cq (all three are required, as the kernel's). */
static struct ibv_srq *create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *ax)
{
	uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	if (ax->comp_mask & ~known) {
		errno = EOPNOTSUPP; /* tag matching */
		return NULL;
	}
	enum ibv_srq_type t = ax->comp_mask & IBV_SRQ_INIT_ATTR_TYPE ? ax->srq_type : IBV_SRQT_BASIC;
	if (t != IBV_SRQT_BASIC && t != IBV_SRQT_XRC) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(ax->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !ax->pd || ax->pd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_srq_init_attr a = {.srq_context = ax->srq_context, .attr = ax->attr};
	struct ibv_srq *srq;
	if (t == IBV_SRQT_BASIC) {
		srq = vrdma_create_srq(ax->pd, &a, 0, 0);
	} else {
		uint32_t need = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
		if ((ax->comp_mask & need) != need || !ax->xrcd || !ax->cq || ax->xrcd->context != context ||
		    ax->cq->context != context) {
			errno = EINVAL;
			return NULL;
		}
		srq = vrdma_create_srq(ax->pd, &a, ((struct vrdma_xrcd *)ax->xrcd)->handle,
				       ((struct vrdma_cq *)ax->cq)->handle);
		if (srq)
			((struct vrdma_srq *)srq)->xcq = ax->cq;
	}
	if (srq)
		ax->attr = a.attr;
	return srq;
}

/* get_srq_num: an XRC SRQ's number, which initiators put in their work
 * requests (remote_srqn); a basic SRQ has none. */
static int get_srq_num(struct ibv_srq *srq, uint32_t *srq_num)
{
	struct vrdma_srq *s = (struct vrdma_srq *)srq;
	if (!s->srqn)
		return EINVAL;
	*srq_num = s->srqn;
	return 0;
}

void vrdma_set_xrc_ops(struct verbs_context *vctx)
{
	vctx->open_xrcd = open_xrcd;
	vctx->close_xrcd = close_xrcd;
	vctx->create_srq_ex = create_srq_ex;
	vctx->get_srq_num = get_srq_num;
}
