/*
 * vrdma_abi.h: PLACEHOLDER. The real file is generated from internal/abi and
 * internal/proto by `go generate ./internal/guest`; this one holds only the
 * command channel's constants, under the generator's names and with the
 * values of internal/proto, until the generated file replaces it.
 */
#ifndef VRDMA_ABI_H
#define VRDMA_ABI_H

/* Command channel (internal/proto/header.go). */
#define VRDMA_PROTO_VERSION 1
#define VRDMA_PROTO_HEADER_SIZE 16
#define VRDMA_PROTO_MAX_MESSAGE 65536
#define VRDMA_PROTO_MAX_FDS 4
#define VRDMA_PROTO_MAGIC 0x7652
#define VRDMA_KIND_REQUEST 1
#define VRDMA_KIND_REPLY 2
#define VRDMA_KIND_EVENT 3

/* Commands (internal/proto/ops.go). */
#define VRDMA_CMD_HELLO 1
#define VRDMA_CMD_QUERY_DEVICE 2
#define VRDMA_CMD_QUERY_PORT 3
#define VRDMA_CMD_ALLOC_PD 4
#define VRDMA_CMD_DEALLOC_PD 5
#define VRDMA_CMD_REG_MR 6
#define VRDMA_CMD_DEREG_MR 7
#define VRDMA_CMD_CREATE_CQ 8
#define VRDMA_CMD_DESTROY_CQ 9
#define VRDMA_CMD_CREATE_QP 10
#define VRDMA_CMD_MODIFY_QP 11
#define VRDMA_CMD_QUERY_QP 12
#define VRDMA_CMD_DESTROY_QP 13
#define VRDMA_CMD_CREATE_SRQ 14
#define VRDMA_CMD_DESTROY_SRQ 15
#define VRDMA_CMD_CREATE_AH 16
#define VRDMA_CMD_DESTROY_AH 17
#define VRDMA_CMD_CREATE_INSTANCE 18
#define VRDMA_CMD_DELETE_INSTANCE 19
#define VRDMA_CMD_LIST_INSTANCES 20
#define VRDMA_CMD_STATS 21
#define VRDMA_CMD_EVENT 22
#define VRDMA_CMD_MAP_MR 23
#define VRDMA_CMD_LINK_ADD 24
#define VRDMA_CMD_LINK_DELETE 25
#define VRDMA_CMD_LIST_LINKS 26
#define VRDMA_CMD_SWITCH_SHOW 27
#define VRDMA_CMD_PORTGROUP_ADD 28
#define VRDMA_CMD_PORTGROUP_DELETE 29
#define VRDMA_CMD_PORTGROUP_LIST 30
#define VRDMA_CMD_HOST_LIST 31
#define VRDMA_CMD_PATH 32
#define VRDMA_CMD_CM_LISTEN 33
#define VRDMA_CMD_CM_CANCEL_LISTEN 34
#define VRDMA_CMD_CM_CONNECT 35
#define VRDMA_CMD_CM_ACCEPT 36
#define VRDMA_CMD_CM_REJECT 37
#define VRDMA_CMD_CM_DISCONNECT 38
#define VRDMA_CMD_CM_EVENT 39

/* Error codes of replies (internal/proto/errors.go). */
#define VRDMA_CODE_OK 0
#define VRDMA_CODE_INVALID 1
#define VRDMA_CODE_NOT_FOUND 2
#define VRDMA_CODE_LIMIT 3
#define VRDMA_CODE_BUSY 4
#define VRDMA_CODE_STATE 5
#define VRDMA_CODE_MEMLOCK 6
#define VRDMA_CODE_PERMISSION 7
#define VRDMA_CODE_VERSION 8
#define VRDMA_CODE_INTERNAL 9
#define VRDMA_CODE_ATTR 10

#endif
