/*
 * cma_stubs.c: what vrdma's rdma_cm does not do: notifications
 * of communication events, alternate paths, and ECE. Each fails with EOPNOTSUPP and
 * says so in a debug line. (rsockets are in rsocket_*.c.)
 */
#include "cma.h"

#include <rdma/rdma_verbs.h>

#define UNSUPPORTED(name, e)                                                              \
	do {                                                                              \
		vrdma_debug("%s is not supported by vrdma's rdma_cm (%s)", name, #e); \
		errno = e;                                                                \
	} while (0)

CMA_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	(void)id, (void)event;
	UNSUPPORTED("rdma_notify", EOPNOTSUPP);
	return -1;
}

CMA_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id, (void)ece;
	UNSUPPORTED("rdma_set_local_ece", EOPNOTSUPP);
	return -1;
}

CMA_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id, (void)ece;
	UNSUPPORTED("rdma_get_remote_ece", EOPNOTSUPP);
	return -1;
}
