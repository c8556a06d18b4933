/* What helper.c (the protocol, discovery, memory registration) and
 * datapath.c (CQs, QPs, posting and polling) share. */
#ifndef VRDMA_VERBS_HELPER_H
#define VRDMA_VERBS_HELPER_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

enum {
	VH_CREATE_CQ = 7,
	VH_DESTROY_CQ = 8,
	VH_CREATE_QP = 9,
	VH_MODIFY_QP = 10,
	VH_DESTROY_QP = 11,
	VH_POST_SEND = 12,
	VH_POST_RECV = 13,
	VH_POLL_CQ = 14,
	VH_COMPLETIONS = 15, /* pushed, unasked, on the push socket */
	VH_MODIFY_UD_QP = 16, /* ud.c */
	VH_CREATE_AH = 17,
	VH_DESTROY_AH = 18,
	VH_POST_SEND_UD = 19,
	/* The connection manager (cm.c): ops 32 to 47. */
	VH_CM_OPEN = 32,
	VH_CM_LISTEN = 33,
	VH_CM_CONNECT = 34,
	VH_CM_ACCEPT = 35,
	VH_CM_REJECT = 36,
	VH_CM_ESTABLISH = 37,
	VH_CM_DISCONNECT = 38,
	VH_CM_DESTROY = 39,
	VH_CM_QP_ATTR = 40,
	VH_CM_EVENT = 41, /* pushed, unasked, on the CM's event socket */
	VH_CM_UD_LISTEN = 42, /* cm_ud.c: UD ids (SIDR) */
	VH_CM_UD_CONNECT = 43,
	VH_CM_UD_ACCEPT = 44,
	VH_CM_UD_EVENT = 45, /* pushed, on the CM's event socket */
	VH_ASYNC_EVENT = 48, /* pushed: a device's asynchronous event (async.c) */
	VH_CREATE_SRQ = 24,
	VH_MODIFY_SRQ = 25,
	VH_QUERY_SRQ = 26,
	VH_DESTROY_SRQ = 27,
	VH_POST_SRQ_RECV = 28,
	VH_CREATE_QP_SRQ = 29,
	VH_MAX_SRQ_SGE = 16,
	VH_REPLY_BIT = 0x8000,
};

/* The open device, its PD and port (helper.c). */
extern struct ibv_context *ctx;
extern struct ibv_pd *pd;
extern uint8_t port_num;

/* Building and sending a reply (helper.c). */
void begin(uint16_t op, uint32_t seq, int32_t status);
void put32(uint32_t v);
void put64(uint64_t v);
void putbytes(const void *p, size_t n);
int finish(void);
int finish_to(int sock); /* finish, on another socket (the push socket) */
int fail(uint16_t op, uint32_t seq, int err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* mr_sge fills sge with length bytes at offset of registered region
 * handle: 0, or -1 if there is no such region or the range leaves it. */
int mr_sge(uint32_t handle, uint64_t offset, uint32_t length, struct ibv_sge *sge);

/* The data-path ops (datapath.c): body is the request's body. */
int do_create_cq(uint32_t seq, const unsigned char *body, size_t len, int *fd);
int do_destroy_cq(uint32_t seq, const unsigned char *body, size_t len);
int do_modify_qp(uint32_t seq, const unsigned char *body, size_t len);
int do_destroy_qp(uint32_t seq, const unsigned char *body, size_t len);
int do_post_send(uint32_t seq, const unsigned char *body, size_t len);
int do_post_recv(uint16_t op, uint32_t seq, const unsigned char *body, size_t len); /* a QP's or an SRQ's */
int do_create_qp(uint16_t op, uint32_t seq, const unsigned char *body, size_t len);
int do_poll_cq(uint32_t seq, const unsigned char *body, size_t len);
void datapath_close(void);

/* qp_at is the QP of handle h, NULL if none (datapath.c). */
struct ibv_qp *qp_at(uint32_t h);

/* UD QPs' transitions and sends, address handles (ud.c). */
int do_modify_ud_qp(uint32_t seq, const unsigned char *body, size_t len);
int do_create_ah(uint32_t seq, const unsigned char *body, size_t len);
int do_destroy_ah(uint32_t seq, const unsigned char *body, size_t len);
int do_post_send_ud(uint32_t seq, const unsigned char *body, size_t len);
void ud_close(void); /* destroys the AHs, after the QPs */
/* Shared receive queues (srq.c); srq_close after datapath_close (the QPs
 * on them first). */
struct ibv_srq *srq_at(uint32_t h);
int do_create_srq(uint32_t seq, const unsigned char *body, size_t len);
int do_modify_srq(uint32_t seq, const unsigned char *body, size_t len);
int do_query_srq(uint32_t seq, const unsigned char *body, size_t len);
int do_destroy_srq(uint32_t seq, const unsigned char *body, size_t len);
void srq_close(void);

/* datapath_fd is the completion channel's descriptor, -1 until a CQ pushes
 * its completions; datapath_event handles its event: 0, or -1 if the push
 * socket failed (the daemon is gone, or gave up on the helper). */
int datapath_fd(void);
int datapath_event(void);
/* datapath_push_fd is the push socket, -1 until a CQ brought it. */
int datapath_push_fd(void);

/* async_fd is the open device's async event descriptor (non-blocking), -1
 * before a device is open; async_event takes, acks and pushes one event: 0,
 * or -1 if the push socket failed. A fatal event ends the helper (async.c). */
int async_fd(void);
int async_event(void);
/* async_watch ends the helper as DEVICE_FATAL does when the device's uverbs
 * node is gone (a driver that sends no DEVICE_FATAL); the main loop wakes
 * every VH_WATCH_MS while a device is open to call it. */
void async_watch(void);
enum { VH_WATCH_MS = 1000 };

/* The connection manager's ops (cm.c): VH_CM_OPEN brings the event
 * socket in *fd. cm_fd is the CM's event channel, -1 until it is open;
 * cm_event handles its event: 0, or -1 if the event socket failed. */
int do_cm(uint16_t op, uint32_t seq, const unsigned char *body, size_t len, int *fd);
int cm_fd(void);
int cm_event(void);
void cm_close(void);

#endif
