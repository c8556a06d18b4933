/*
 * stubs.c: the rest of libibverbs' ABI. Providers (libmlx5, libefa...) that
 * programs like perftest link against import rdma-core's private driver
 * interface (IBVERBS_PRIVATE_34) and librdmacm imports the kernel-structure
 * converters; their symbols must resolve for such programs to load at all.
 * No vrdma device is ever handed to those providers, so nothing reaches
 * these: each fails with EOPNOTSUPP should anything call it.
 */
#include <errno.h>
#include <stddef.h>

#include "vrdma.h"

/* The signatures are not rdma-core's (its private headers are not
 * installed): the stubs take no arguments, which the calling convention
 * makes harmless, and return a failure in the shape the caller expects. */
#define STUB_INT(name)                         \
	VRDMA_EXPORT int name(void);           \
	VRDMA_EXPORT int name(void)            \
	{                                      \
		errno = EOPNOTSUPP;            \
		return EOPNOTSUPP;             \
	}
#define STUB_PTR(name)                         \
	VRDMA_EXPORT void *name(void);         \
	VRDMA_EXPORT void *name(void)          \
	{                                      \
		errno = EOPNOTSUPP;            \
		return NULL;                   \
	}
#define STUB_VOID(name)                        \
	VRDMA_EXPORT void name(void);          \
	VRDMA_EXPORT void name(void) {}

STUB_INT(__ioctl_final_num_attrs)
STUB_VOID(__verbs_log)
STUB_PTR(_verbs_init_and_alloc_context)
STUB_INT(execute_ioctl)
STUB_INT(ibv_cmd_advise_mr)
STUB_INT(ibv_cmd_alloc_dm)
STUB_INT(ibv_cmd_alloc_mw)
STUB_INT(ibv_cmd_alloc_pd)
STUB_INT(ibv_cmd_attach_mcast)
STUB_INT(ibv_cmd_close_xrcd)
STUB_INT(ibv_cmd_create_ah)
STUB_INT(ibv_cmd_create_counters)
STUB_INT(ibv_cmd_create_cq)
STUB_INT(ibv_cmd_create_cq_ex)
STUB_INT(ibv_cmd_create_flow)
STUB_INT(ibv_cmd_create_flow_action_esp)
STUB_INT(ibv_cmd_create_qp)
STUB_INT(ibv_cmd_create_qp_ex)
STUB_INT(ibv_cmd_create_qp_ex2)
STUB_INT(ibv_cmd_create_rwq_ind_table)
STUB_INT(ibv_cmd_create_srq)
STUB_INT(ibv_cmd_create_srq_ex)
STUB_INT(ibv_cmd_create_wq)
STUB_INT(ibv_cmd_dealloc_mw)
STUB_INT(ibv_cmd_dealloc_pd)
STUB_INT(ibv_cmd_dereg_mr)
STUB_INT(ibv_cmd_destroy_ah)
STUB_INT(ibv_cmd_destroy_counters)
STUB_INT(ibv_cmd_destroy_cq)
STUB_INT(ibv_cmd_destroy_flow)
STUB_INT(ibv_cmd_destroy_flow_action)
STUB_INT(ibv_cmd_destroy_qp)
STUB_INT(ibv_cmd_destroy_rwq_ind_table)
STUB_INT(ibv_cmd_destroy_srq)
STUB_INT(ibv_cmd_destroy_wq)
STUB_INT(ibv_cmd_detach_mcast)
STUB_INT(ibv_cmd_free_dm)
STUB_INT(ibv_cmd_get_context)
STUB_INT(ibv_cmd_modify_cq)
STUB_INT(ibv_cmd_modify_flow_action_esp)
STUB_INT(ibv_cmd_modify_qp)
STUB_INT(ibv_cmd_modify_qp_ex)
STUB_INT(ibv_cmd_modify_srq)
STUB_INT(ibv_cmd_modify_wq)
STUB_INT(ibv_cmd_open_qp)
STUB_INT(ibv_cmd_open_xrcd)
STUB_INT(ibv_cmd_poll_cq)
STUB_INT(ibv_cmd_post_recv)
STUB_INT(ibv_cmd_post_send)
STUB_INT(ibv_cmd_post_srq_recv)
STUB_INT(ibv_cmd_query_context)
STUB_INT(ibv_cmd_query_device_any)
STUB_INT(ibv_cmd_query_mr)
STUB_INT(ibv_cmd_query_port)
STUB_INT(ibv_cmd_query_qp)
STUB_INT(ibv_cmd_query_srq)
STUB_INT(ibv_cmd_read_counters)
STUB_INT(ibv_cmd_reg_dm_mr)
STUB_INT(ibv_cmd_reg_dmabuf_mr)
STUB_INT(ibv_cmd_reg_mr)
STUB_INT(ibv_cmd_req_notify_cq)
STUB_INT(ibv_cmd_rereg_mr)
STUB_INT(ibv_cmd_resize_cq)
STUB_VOID(ibv_copy_ah_attr_from_kern)
STUB_VOID(ibv_copy_path_rec_from_kern)
STUB_VOID(ibv_copy_path_rec_to_kern)
STUB_VOID(ibv_copy_qp_attr_from_kern)
STUB_INT(verbs_init_cq)
STUB_PTR(verbs_open_device)
STUB_VOID(verbs_register_driver_34)
STUB_VOID(verbs_set_ops)
STUB_VOID(verbs_uninit_context)

/* A flag rdma-core's providers read (a bool variable, not a function). */
VRDMA_EXPORT _Bool verbs_allow_disassociate_destroy;
