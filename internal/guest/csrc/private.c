/*
 * private.c: the private interface librdmacm.so.1 uses (vrdma_private.h,
 * version VRDMA_PRIVATE_1.0): CM commands on a context's command channel,
 * and the context's CM events handed to librdmacm.
 */
#include "verbs_int.h"
#include "vrdma_private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

VRDMA_EXPORT int vrdma_private_cm_call(struct ibv_context *c, uint16_t op, const char *body, size_t len, char *reply,
				       size_t cap, char *msg, size_t msgcap)
{
	if (c == NULL || body == NULL || op < VRDMA_CMD_CM_LISTEN || op > VRDMA_CMD_CM_DISCONNECT)
		return EINVAL;
	struct vrdma_context *ctx = to_vctx(c);
	if (msg != NULL && msgcap > 0)
		msg[0] = '\0';
	if (__atomic_load_n(&ctx->closed, __ATOMIC_ACQUIRE))
		return EIO;
	char *buf = malloc(VRDMA_REPLY_MAX);
	if (buf == NULL)
		return ENOMEM;
	size_t n = 0;
	int rc = vrdma_call(&ctx->chan, op, body, len, NULL, 0, buf, VRDMA_REPLY_MAX, &n, NULL, NULL);
	if (rc < 0) {
		rc = -rc; /* librdmacm says what failed */
		if (msg != NULL && msgcap > 0)
			snprintf(msg, msgcap, "%s", ctx->chan.err[0] ? ctx->chan.err : strerror(rc));
	} else if (reply != NULL && cap > 0) {
		if (n >= cap) {
			rc = EMSGSIZE;
		} else {
			memcpy(reply, buf, n);
			reply[n] = '\0';
		}
	}
	free(buf);
	return rc;
}

VRDMA_EXPORT int vrdma_private_cm_attach(struct ibv_context *c, vrdma_cm_fn fn, void *arg)
{
	if (c == NULL)
		return EINVAL;
	struct vrdma_chan *ch = &to_vctx(c)->chan;
	pthread_mutex_lock(&ch->mu);
	ch->cm_fn = fn;
	ch->cm_arg = arg;
	pthread_mutex_unlock(&ch->mu);
	return 0;
}

VRDMA_EXPORT int vrdma_private_cm_fd(struct ibv_context *c)
{
	return c == NULL ? -1 : to_vctx(c)->chan.fd;
}

VRDMA_EXPORT int vrdma_private_cm_drain(struct ibv_context *c)
{
	if (c == NULL)
		return EINVAL;
	int r = vrdma_chan_drain(&to_vctx(c)->chan);
	return r < 0 ? -r : 0;
}

VRDMA_EXPORT struct ibv_qp *vrdma_private_qp_by_num(struct ibv_context *c, uint32_t qpn)
{
	if (c == NULL)
		return NULL;
	struct vrdma_context *ctx = to_vctx(c);
	struct ibv_qp *found = NULL;
	pthread_mutex_lock(&ctx->objs_mu);
	for (struct vrdma_qp *q = ctx->qps; q && found == NULL; q = q->next)
		if (q->qpx.qp_base.qp_num == qpn)
			found = &q->qpx.qp_base;
	pthread_mutex_unlock(&ctx->objs_mu);
	return found;
}

VRDMA_EXPORT int vrdma_private_qp_handle(struct ibv_qp *qp, uint32_t *handle)
{
	if (qp == NULL || handle == NULL)
		return EINVAL;
	struct vrdma_qp *q = vrdma_container_of(qp, struct vrdma_qp, qpx.qp_base);
	*handle = q->handle;
	__atomic_store_n(&q->cm_held, 1, __ATOMIC_RELEASE);
	return 0;
}
