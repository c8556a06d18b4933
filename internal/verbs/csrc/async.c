/* The device's asynchronous events (docs/design/verbs-uplink-faults.md):
 * the main loop polls the device's async descriptor with the request socket
 * and the completion channel; each event is taken, acked at once (a QP or
 * CQ with an unacked event cannot be destroyed) and pushed to the daemon on
 * the push socket as VH_ASYNC_EVENT: u32 event type, u32 element (the QP's
 * or CQ's handle, the port number, 0 for the device), u32 QPN (QP events).
 * IBV_EVENT_DEVICE_FATAL ends the helper once it is pushed: the device is
 * gone, and closing it lets the kernel finish removing it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "helper.h"

static int async_ready; /* the descriptor is non-blocking */

int async_fd(void)
{
	int fl;

	if (!ctx)
		return -1;
	if (!async_ready) {
		fl = fcntl(ctx->async_fd, F_GETFL);
		if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK))
			return -1;
		async_ready = 1;
	}
	return ctx->async_fd;
}

int async_event(void)
{
	struct ibv_async_event ev;
	uint32_t type, elem = 0, qpn = 0;
	int pfd;

	if (ibv_get_async_event(ctx, &ev))
		return 0; /* nothing after all (EAGAIN) */
	type = (uint32_t)ev.event_type;
	switch (ev.event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		elem = (uint32_t)(uintptr_t)ev.element.qp->qp_context;
		qpn = ev.element.qp->qp_num;
		break;
	case IBV_EVENT_CQ_ERR:
		elem = (uint32_t)(uintptr_t)ev.element.cq->cq_context;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		elem = (uint32_t)(uintptr_t)ev.element.srq->srq_context; /* its handle (srq.c) */
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		elem = (uint32_t)ev.element.port_num;
		break;
	default:
		break; /* the device, or a WQ (element 0) */
	}
	ibv_ack_async_event(&ev);
	if (type > IBV_EVENT_WQ_FATAL)
		return 0; /* newer than the protocol */
	pfd = datapath_push_fd();
	if (pfd >= 0) {
		begin(VH_ASYNC_EVENT, 0, 0);
		put32(type);
		put32(elem);
		put32(qpn);
		if (finish_to(pfd) && type != IBV_EVENT_DEVICE_FATAL)
			return -1;
	}
	if (type == IBV_EVENT_DEVICE_FATAL) {
		fprintf(stderr, "%s: IBV_EVENT_DEVICE_FATAL: the device is gone (rdma link delete, the module unloaded, or a hardware error)\n",
			ibv_get_device_name(ctx->device));
		_exit(3); /* the kernel closes the device; nothing on it can be freed */
	}
	return 0;
}

/* A driver without disassociate_ucontext (rdma_rxe, siw) sends no
 * DEVICE_FATAL when its device is unregistered: the kernel removes the
 * device's uverbs node and then waits for every process that has it open
 * to close it. async_watch, called on each turn of the main loop (which
 * wakes at least every VH_WATCH_MS), looks, at most once a second, whether
 * the node is still there; when it is gone it does what DEVICE_FATAL does,
 * so the removal can finish. */
void async_watch(void)
{
	static struct timespec last;
	struct timespec now;
	int pfd;

	if (!ctx || !ctx->device->dev_path[0] || clock_gettime(CLOCK_MONOTONIC, &now) || now.tv_sec == last.tv_sec)
		return; /* no node to watch (a provider that names none), or looked this second */
	last = now;
	if (access(ctx->device->dev_path, F_OK) == 0 || errno != ENOENT)
		return;
	pfd = datapath_push_fd();
	if (pfd >= 0) {
		begin(VH_ASYNC_EVENT, 0, 0);
		put32(IBV_EVENT_DEVICE_FATAL);
		put32(0);
		put32(0);
		(void)finish_to(pfd);
	}
	fprintf(stderr, "%s: its uverbs device %s is gone: the device is being removed (rdma link delete, the module unloaded)\n",
		ibv_get_device_name(ctx->device), ctx->device->dev_path);
	_exit(3);
}
