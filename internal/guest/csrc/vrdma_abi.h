/*
 * vrdma_abi.h: PLACEHOLDER. The real file is generated from internal/abi and
 * internal/proto by `go generate ./internal/guest`; this one holds only the
 * command channel's constants, under the generator's names and with the
 * values of internal/proto, until the generated file replaces it.
 */
#ifndef VRDMA_ABI_H
#define VRDMA_ABI_H

/* Command channel (internal/proto/header.go). */
#define VRDMA_PROTO_VERSION 1U
#define VRDMA_PROTO_HEADER_SIZE 16U
#define VRDMA_PROTO_MAX_MESSAGE 65536U
#define VRDMA_PROTO_MAX_FDS 4U
#define VRDMA_PROTO_MAGIC 0x7652U
#define VRDMA_KIND_REQUEST 1U
#define VRDMA_KIND_REPLY 2U
#define VRDMA_KIND_EVENT 3U

/* Commands (internal/proto/ops.go). */
#define VRDMA_CMD_HELLO 1U
#define VRDMA_CMD_QUERY_DEVICE 2U
#define VRDMA_CMD_QUERY_PORT 3U
#define VRDMA_CMD_ALLOC_PD 4U
#define VRDMA_CMD_DEALLOC_PD 5U
#define VRDMA_CMD_REG_MR 6U
#define VRDMA_CMD_DEREG_MR 7U
#define VRDMA_CMD_CREATE_CQ 8U
#define VRDMA_CMD_DESTROY_CQ 9U
#define VRDMA_CMD_CREATE_QP 10U
#define VRDMA_CMD_MODIFY_QP 11U
#define VRDMA_CMD_QUERY_QP 12U
#define VRDMA_CMD_DESTROY_QP 13U
#define VRDMA_CMD_CREATE_SRQ 14U
#define VRDMA_CMD_DESTROY_SRQ 15U
#define VRDMA_CMD_CREATE_AH 16U
#define VRDMA_CMD_DESTROY_AH 17U
#define VRDMA_CMD_CREATE_INSTANCE 18U
#define VRDMA_CMD_DELETE_INSTANCE 19U
#define VRDMA_CMD_LIST_INSTANCES 20U
#define VRDMA_CMD_STATS 21U
#define VRDMA_CMD_EVENT 22U
#define VRDMA_CMD_MAP_MR 23U
#define VRDMA_CMD_LINK_ADD 24U
#define VRDMA_CMD_LINK_DELETE 25U
#define VRDMA_CMD_LIST_LINKS 26U
#define VRDMA_CMD_SWITCH_SHOW 27U
#define VRDMA_CMD_PORTGROUP_ADD 28U
#define VRDMA_CMD_PORTGROUP_DELETE 29U
#define VRDMA_CMD_PORTGROUP_LIST 30U
#define VRDMA_CMD_HOST_LIST 31U
#define VRDMA_CMD_PATH 32U
#define VRDMA_CMD_CM_LISTEN 33U
#define VRDMA_CMD_CM_CANCEL_LISTEN 34U
#define VRDMA_CMD_CM_CONNECT 35U
#define VRDMA_CMD_CM_ACCEPT 36U
#define VRDMA_CMD_CM_REJECT 37U
#define VRDMA_CMD_CM_DISCONNECT 38U
#define VRDMA_CMD_CM_EVENT 39U

/* Error codes of replies (internal/proto/errors.go). */
#define VRDMA_CODE_OK 0U
#define VRDMA_CODE_INVALID 1U
#define VRDMA_CODE_NOT_FOUND 2U
#define VRDMA_CODE_LIMIT 3U
#define VRDMA_CODE_BUSY 4U
#define VRDMA_CODE_STATE 5U
#define VRDMA_CODE_MEMLOCK 6U
#define VRDMA_CODE_PERMISSION 7U
#define VRDMA_CODE_VERSION 8U
#define VRDMA_CODE_INTERNAL 9U
#define VRDMA_CODE_ATTR 10U

#endif
