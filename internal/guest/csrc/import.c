/*
 * import.c: ibv_import_device, ibv_import_pd/ibv_unimport_pd and
 * ibv_import_mr/ibv_unimport_mr (rdma-core v44; docs/design/import.md).
 *
 * A context's cmd_fd is its connection to the daemon. A process that holds
 * it (a dup, or passed with SCM_RIGHTS) imports the context by sending one
 * end of a socketpair of its own on it: the daemon serves that socket from
 * then on as another connection to the same session (same device, same
 * objects under the same handles) and answers there, so the importer never
 * reads the descriptor the exporter reads. The imported context owns
 * cmd_fd, as rdma-core's does, and closes it with itself. Imported PDs and
 * MRs are the session's objects by their handles: unimporting frees only
 * this process's handle on them; ibv_dealloc_pd/ibv_dereg_mr destroy them
 * for every context of the session, as the kernel's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "own.h"
#include "verbs_int.h"

/* joined opens ctx's channel as a new connection to the session of
 * cmd_fd and fills doc with the daemon's greeting: 0 or an errno. */
static int joined(struct vrdma_context *ctx, int cmd_fd, char *reply, struct vj_doc *doc)
{
	int type = 0;
	socklen_t tlen = sizeof type;
	if (getsockopt(cmd_fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0)
		return errno == ENOTSOCK ? EINVAL : errno;
	if (type != SOCK_SEQPACKET)
		return EINVAL; /* no vrdma context's descriptor: nothing is sent on it */
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return errno;
	int rc = vrdma_chan_adopt(&ctx->chan, sv[0]);
	if (rc) {
		close(sv[1]);
		return -rc;
	}
	/* The reply carries the id of the channel's first call. */
	char body[64];
	int n = snprintf(body, sizeof body, "{\"id\":%u}", ctx->chan.next_id + 1);
	size_t len = 0;
	rc = vrdma_call_via(&ctx->chan, cmd_fd, VRDMA_CMD_IMPORT_DEVICE, body, (size_t)n, &sv[1], 1, reply,
			    VRDMA_REPLY_MAX, &len, NULL, NULL);
	close(sv[1]);
	if (rc)
		return rc < 0 ? -rc : rc;
	return vj_parse(doc, reply, len) ? EPROTO : 0;
}

VRDMA_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	struct vrdma_context *ctx = vrdma_own_zalloc(sizeof *ctx); /* own.h */
	char *reply = malloc(VRDMA_REPLY_MAX);
	struct vj_doc doc = {0};
	if (!ctx || !reply) {
		vrdma_own_free(ctx);
		free(reply);
		errno = ENOMEM;
		return NULL;
	}
	ctx->chan.fd = ctx->chan.evfd = ctx->chan.pollfd = -1;
	int rc = joined(ctx, cmd_fd, reply, &doc);
	struct ibv_context *ic = rc ? NULL : vrdma_context_joined(ctx, &doc, cmd_fd);
	if (!rc && !ic)
		rc = EPROTO;
	vj_free(&doc);
	free(reply);
	if (rc) {
		vrdma_log("cannot import the device context of descriptor %d: %s", cmd_fd,
			  ctx->chan.err[0] ? ctx->chan.err : strerror(rc));
		vrdma_chan_close(&ctx->chan);
		vrdma_own_free(ctx);
		errno = rc;
		return NULL;
	}
	return ic;
}

/* import_object asks the daemon for the session's object kind/handle (pd:
 * the region's PD): 0 with doc filled, or an errno. */
static int import_object(struct vrdma_context *ctx, const char *kind, uint32_t handle, uint32_t pd, struct vj_doc *doc)
{
	return vrdma_cmd(ctx, VRDMA_CMD_IMPORT_OBJECT, doc, NULL, 0, NULL, NULL,
			 "{\"kind\":\"%s\",\"handle\":%u,\"pd\":%u}", kind, handle, pd);
}

VRDMA_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	struct vrdma_context *ctx = to_vctx(context);
	struct vrdma_pd *pd = calloc(1, sizeof *pd);
	struct vj_doc doc = {0};
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = import_object(ctx, "pd", pd_handle, 0, &doc);
	if (rc) {
		free(pd);
		errno = rc;
		return NULL;
	}
	vrdma_doc_free(&doc);
	pd->ibpd.context = context;
	pd->ibpd.handle = pd->handle = pd_handle;
	vrdma_live(ctx, 1);
	return &pd->ibpd;
}

VRDMA_EXPORT void ibv_unimport_pd(struct ibv_pd *ibpd)
{
	if (!ibpd)
		return;
	struct vrdma_context *ctx = to_vctx(ibpd->context);
	free(ibpd);
	vrdma_live(ctx, -1);
}

VRDMA_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *ibpd, uint32_t mr_handle)
{
	struct vrdma_pd *pd = (struct vrdma_pd *)ibpd;
	struct vrdma_context *ctx = to_vctx(ibpd->context);
	struct vrdma_mr *mr = calloc(1, sizeof *mr);
	struct vj_doc doc = {0};
	uint64_t lkey = 0, rkey = 0, length = 0, access = 0;
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = import_object(ctx, "mr", mr_handle, pd->handle, &doc);
	if (!rc) {
		if (vj_get_u64(&doc, 0, "lkey", &lkey) || vj_get_u64(&doc, 0, "rkey", &rkey) ||
		    vj_get_u64(&doc, 0, "length", &length))
			rc = EPROTO;
		vj_get_u64(&doc, 0, "access", &access);
		vrdma_doc_free(&doc);
	}
	if (rc) {
		free(mr);
		errno = rc;
		return NULL;
	}
	/* The address stays the exporter's: NULL here, as rdma-core's. */
	mr->ibmr.context = ibpd->context;
	mr->ibmr.pd = ibpd;
	mr->ibmr.handle = mr->handle = mr_handle;
	mr->ibmr.lkey = mr->lkey = (uint32_t)lkey;
	mr->ibmr.rkey = mr->rkey = (uint32_t)rkey;
	mr->ibmr.length = (size_t)length;
	mr->access = (unsigned int)access;
	vrdma_live(ctx, 1);
	return &mr->ibmr;
}

VRDMA_EXPORT void ibv_unimport_mr(struct ibv_mr *ibmr)
{
	if (!ibmr)
		return;
	struct vrdma_context *ctx = to_vctx(ibmr->context);
	free(ibmr);
	vrdma_live(ctx, -1);
}
