/*
 * misc.c: the helper functions tools call (names of statuses, events and
 * states; rate conversions) and the public verbs vrdma does not provide,
 * which fail cleanly with EOPNOTSUPP as rdma-core's do on providers that
 * lack them.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdma_core_private.h"
#include "verbs_int.h"
#include "vrdma_sysfs.h"

#undef ibv_reg_mr

VRDMA_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const names[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};
	if ((unsigned)status < sizeof names / sizeof names[0] && names[status])
		return names[status];
	return "unknown";
}

VRDMA_EXPORT const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const names[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};
	if ((unsigned)event < sizeof names / sizeof names[0] && names[event])
		return names[event];
	return "unknown";
}

VRDMA_EXPORT const char *ibv_port_state_str(enum ibv_port_state state)
{
	static const char *const names[] = {"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE",
					    "PORT_ACTIVE_DEFER"};
	return (unsigned)state < sizeof names / sizeof names[0] ? names[state] : "invalid state";
}

VRDMA_EXPORT const char *ibv_node_type_str(enum ibv_node_type type)
{
	switch (type) {
	case IBV_NODE_CA:
		return "InfiniBand channel adapter";
	case IBV_NODE_SWITCH:
		return "InfiniBand switch";
	case IBV_NODE_ROUTER:
		return "InfiniBand router";
	case IBV_NODE_RNIC:
		return "iWARP NIC";
	case IBV_NODE_USNIC:
		return "usNIC";
	case IBV_NODE_USNIC_UDP:
		return "usNIC UDP";
	case IBV_NODE_UNSPECIFIED:
		return "unspecified";
	default:
		return "unknown";
	}
}

/* The static rates (enum ibv_rate) as multiples of 2.5 Gb/s and in Mb/s. */
static const struct {
	enum ibv_rate rate;
	int mult, mbps;
} rates[] = {
	{IBV_RATE_2_5_GBPS, 1, 2500},	  {IBV_RATE_5_GBPS, 2, 5000},	     {IBV_RATE_10_GBPS, 4, 10000},
	{IBV_RATE_20_GBPS, 8, 20000},	  {IBV_RATE_30_GBPS, 12, 30000},     {IBV_RATE_40_GBPS, 16, 40000},
	{IBV_RATE_60_GBPS, 24, 60000},	  {IBV_RATE_80_GBPS, 32, 80000},     {IBV_RATE_120_GBPS, 48, 120000},
	{IBV_RATE_14_GBPS, 5, 14062},	  {IBV_RATE_56_GBPS, 22, 56250},     {IBV_RATE_112_GBPS, 45, 112500},
	{IBV_RATE_168_GBPS, 67, 168750},  {IBV_RATE_25_GBPS, 10, 25781},     {IBV_RATE_100_GBPS, 40, 103125},
	{IBV_RATE_200_GBPS, 80, 206250},  {IBV_RATE_300_GBPS, 120, 309375},  {IBV_RATE_28_GBPS, 11, 28125},
	{IBV_RATE_50_GBPS, 20, 53125},	  {IBV_RATE_400_GBPS, 160, 425000},  {IBV_RATE_600_GBPS, 240, 637500},
	{IBV_RATE_800_GBPS, 320, 850000}, {IBV_RATE_1200_GBPS, 480, 1275000},
};

VRDMA_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
		if (rates[i].rate == rate)
			return rates[i].mult;
	return -1;
}

VRDMA_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
		if (rates[i].mult == mult)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

VRDMA_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
		if (rates[i].rate == rate)
			return rates[i].mbps;
	return -1;
}

VRDMA_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

/* ---- sysfs (rdma-core's driver.h) ---- */

static char sysfs_root[IBV_SYSFS_PATH_MAX] = "/sys";

static void sysfs_root_init(void)
{
	const char *env = secure_getenv("SYSFS_PATH");
	if (!env || !*env) {
		const char *tree = vrdma_sysfs_root();
		if (*tree)
			snprintf(sysfs_root, sizeof sysfs_root, "%s", tree);
		return;
	}
	snprintf(sysfs_root, sizeof sysfs_root, "%s", env);
	for (size_t n = strlen(sysfs_root); n > 1 && sysfs_root[n - 1] == '/'; n--)
		sysfs_root[n - 1] = '\0';
}

/* ibv_get_sysfs_path names the root of the tree that holds the devices'
 * sysfs entries: SYSFS_PATH when the user set it (and the program is not
 * set-uid), without trailing slashes, as with rdma-core; otherwise vrdma's
 * own tree (sysfs.c), whose class/infiniband holds the vrdma devices, or
 * /sys when it could not be made. */
VRDMA_EXPORT const char *ibv_get_sysfs_path(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, sysfs_root_init);
	return sysfs_root;
}

/* ibv_read_sysfs_file reads dir/file into buf as a string without its
 * trailing newline and returns its length, or -1 with errno set; a file
 * that does not fit in buf with its terminating NUL fails. */
VRDMA_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[IBV_SYSFS_PATH_MAX * 2];
	int n = snprintf(path, sizeof path, "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t len = read(fd, buf, size);
	int saved = errno;
	close(fd);
	errno = saved;
	if (len <= 0)
		return (int)len;
	if (buf[len - 1] == '\n')
		buf[--len] = '\0';
	else if ((size_t)len < size)
		buf[len] = '\0';
	else {
		errno = EOVERFLOW;
		return -1;
	}
	return (int)len;
}

/* ibv_read_ibdev_sysfs_file is for providers, with their own device's
 * structure: no vrdma device is ever handed to a provider. */
VRDMA_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, struct verbs_sysfs_dev *sysfs_dev, const char *fnfmt,
					   ...)
{
	(void)buf;
	(void)size;
	(void)fnfmt;
	errno = sysfs_dev ? ENOENT : EINVAL;
	return -1;
}

/* ---- fork ranges: registered pages are handled at fork already (mem.c) ---- */

VRDMA_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

VRDMA_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

/* ---- not provided: EOPNOTSUPP ---- */

VRDMA_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context;
	(void)dm_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

VRDMA_EXPORT void ibv_unimport_dm(struct ibv_dm *dm) { (void)dm; }

VRDMA_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
					      int fd, int access)
{
	(void)pd;
	(void)offset;
	(void)length;
	(void)iova;
	(void)fd;
	(void)access;
	errno = EOPNOTSUPP;
	return NULL;
}

VRDMA_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp;
	(void)op;
	(void)flags;
	/* The memcpy and wire paths both place a message's data in order. */
	return flags ? 0 : 1;
}

VRDMA_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
					     uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid)
{
	(void)context;
	(void)attr;
	(void)eth_mac;
	(void)vid;
	return EOPNOTSUPP;
}

VRDMA_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

VRDMA_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}
