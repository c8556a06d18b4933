/*
 * cma_xrc.c: XRC on rdma_cm ids (docs/design/xrc.md), as rdma-core's
 * librdmacm gives it: each device has one XRC domain for its ids, private
 * to the process (opened with no file, on first use); rdma_create_qp makes
 * an XRC_SEND QP (an initiator, which dials: a send queue and its CQ) or
 * an XRC_RECV QP (a target, which answers: no PD, CQs or queues, in the
 * domain); rdma_create_srq on an XRC_RECV id makes an XRC SRQ of the
 * domain, its receives completing on the id's receive CQ, which the
 * library makes (rdma_get_recv_comp waits on it).
 */
#include "cma.h"

#include <fcntl.h>
#include <string.h>

struct ibv_xrcd *cma_dev_xrcd(struct cma_device *d)
{
	pthread_mutex_lock(&d->pd_mu);
	if (d->xrcd == NULL) {
		struct ibv_xrcd_init_attr a = {
			.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1, .oflags = O_CREAT};
		d->xrcd = ibv_open_xrcd(d->verbs, &a);
	}
	struct ibv_xrcd *x = d->xrcd;
	int e = errno;
	pthread_mutex_unlock(&d->pd_mu);
	errno = e;
	return x;
}

struct ibv_qp *cma_xrc_create_qp(struct cma_id *c, struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
				 struct ibv_xrcd *xrcd, int *made)
{
	struct rdma_cm_id *id = &c->id;
	*made = 0;
	if (attr->qp_type == IBV_QPT_XRC_SEND) {
		/* An initiator sends only: a send CQ, no receive queue. */
		attr->cap.max_recv_wr = attr->cap.max_recv_sge = 0;
		attr->recv_cq = NULL;
		attr->srq = NULL;
		if (attr->send_cq == NULL) {
			int r = cma_create_cqs(c, attr->cap.max_send_wr ? (int)attr->cap.max_send_wr : 1, 0);
			if (r != 0) {
				errno = r;
				return NULL;
			}
			attr->send_cq = id->send_cq;
			*made = 1;
		}
		return ibv_create_qp(pd, attr);
	}
	/* A target: the domain (the device's unless the caller names one),
	 * nothing else; its receives go to the XRC SRQ each request names. */
	if (xrcd == NULL && (xrcd = cma_dev_xrcd(c->dev)) == NULL)
		return NULL;
	struct ibv_qp_init_attr_ex ax = {
		.qp_context = attr->qp_context, .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd};
	struct ibv_qp *qp = ibv_create_qp_ex(id->verbs, &ax);
	if (qp != NULL) {
		memset(&attr->cap, 0, sizeof attr->cap);
		attr->send_cq = attr->recv_cq = NULL;
		attr->srq = NULL;
	}
	return qp;
}

int cma_xrc_create_srq(struct cma_id *c, struct ibv_pd *pd, struct ibv_srq_init_attr_ex *attr)
{
	struct rdma_cm_id *id = &c->id;
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || attr->xrcd == NULL) {
		if ((attr->xrcd = cma_dev_xrcd(c->dev)) == NULL)
			return errno ? errno : ENOMEM;
	}
	int made = 0;
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || attr->cq == NULL) {
		if (id->recv_cq == NULL) {
			int r = cma_create_cqs(c, 0, attr->attr.max_wr ? (int)attr->attr.max_wr : 1);
			if (r != 0)
				return r;
			made = 1;
		}
		attr->cq = id->recv_cq;
	}
	attr->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	attr->srq_type = IBV_SRQT_XRC;
	attr->pd = pd;
	struct ibv_srq *srq = ibv_create_srq_ex(id->verbs, attr);
	if (srq == NULL) {
		int e = errno ? errno : ENOMEM;
		if (made)
			cma_destroy_cqs(c);
		return e;
	}
	id->srq = srq;
	id->pd = pd;
	return 0;
}
