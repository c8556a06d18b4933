/* What cm.c (the connection manager's RC ids) shares with cm_ud.c (its UD
 * ids: SIDR). Layouts: verbs/cm_msg.go, verbs/cm_ud_msg.go. */
#ifndef VRDMA_VERBS_CM_H
#define VRDMA_VERBS_CM_H

#include "helper.h"

#if __has_include(<rdma/rdma_cma.h>) && !defined(VH_NO_CMA)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#define VH_HAVE_CMA 1
#else
#define VH_HAVE_CMA 0
#endif

#if VH_HAVE_CMA
/* cm_listen_ps and cm_connect_ps are VH_CM_LISTEN's and VH_CM_CONNECT's
 * bodies for an id of port space ps, answering as op (cm.c). */
int cm_listen_ps(uint16_t op, uint32_t seq, const unsigned char *body, size_t len, enum rdma_port_space ps);
int cm_connect_ps(uint16_t op, uint32_t seq, const unsigned char *body, size_t len, enum rdma_port_space ps);
/* cm_id_at is the rdma_cm id of handle h, NULL if none (cm.c). */
struct rdma_cm_id *cm_id_at(uint32_t h);
/* cm_rdma_accept is librdmacm's rdma_accept (cm.c). */
int cm_rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p);
/* cm_put_sockaddr appends u32 port and the 16-byte address of sa (cm.c). */
void cm_put_sockaddr(const struct sockaddr *sa);
/* cm_push_sock is the CM's event socket (cm.c). */
int cm_push_sock(void);
/* cm_ud_push pushes an event of a UD id (cm_ud.c): 0, or -1 if the event
 * socket failed. */
int cm_ud_push(uint32_t h, uint32_t listener, int event, int status, const struct rdma_cm_event *ev,
	       const struct rdma_cm_id *id);
#endif

/* do_cm_ud serves the UD ops, VH_CM_UD_LISTEN ... VH_CM_UD_ACCEPT
 * (cm_ud.c). */
int do_cm_ud(uint16_t op, uint32_t seq, const unsigned char *body, size_t len);

#endif
