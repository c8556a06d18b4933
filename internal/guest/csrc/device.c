/*
 * device.c: the devices (the adapters of the process's vrdma instance),
 * contexts, queries and the command helper every verb uses.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rdma_core_private.h"
#include "verbs_int.h"
#include "vrdma_sysfs.h"

#undef ibv_query_port

#define DEFAULT_SOCKET "/run/vrdma/vrdma.sock"

static pthread_mutex_t devices_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vrdma_device *devices[VRDMA_MAX_DEVICES]; /* live as long as the process */
static int ndevices;

const char *vrdma_socket_path(void)
{
	const char *s = getenv("VRDMA_SOCKET");
	return s && *s ? s : DEFAULT_SOCKET;
}

const char *vrdma_instance_name(void)
{
	const char *s = getenv("VRDMA_INSTANCE");
	return s ? s : "";
}

/* hello sends the session's greeting; device "" lists the adapters. */
static int hello(struct vrdma_chan *c, const char *device, char *reply, size_t cap, struct vj_doc *doc)
{
	/* The program's name is for the daemon's logs: cut to fit, it always
	 * escapes into client (6 bytes a character at most, and the quotes). */
	char name[64], inst[256], dev[128], client[6 * sizeof name + 3], body[1024];
	snprintf(name, sizeof name, "%s", program_invocation_short_name);
	if (vj_escape(inst, sizeof inst, vrdma_instance_name()) < 0 || vj_escape(dev, sizeof dev, device) < 0 ||
	    vj_escape(client, sizeof client, name) < 0)
		return EINVAL;
	int n = snprintf(body, sizeof body, "{\"instance\":%s,\"device\":%s,\"client\":%s}", inst, dev, client);
	size_t len = 0;
	int rc = vrdma_call(c, VRDMA_CMD_HELLO, body, (size_t)n, NULL, 0, reply, cap, &len, NULL, NULL);
	if (rc)
		return rc < 0 ? -rc : rc;
	if (vj_parse(doc, reply, len))
		return EPROTO;
	return 0;
}

static struct vrdma_device *device_for(const struct vj_doc *doc, int a)
{
	char name[IBV_SYSFS_NAME_MAX];
	uint64_t guid = 0;
	int64_t index = 0;
	if (vj_get_str(doc, a, "name", name, sizeof name) || vj_get_u64(doc, a, "guid", &guid) ||
	    vj_get_i64(doc, a, "index", &index))
		return NULL;
	for (int i = 0; i < ndevices; i++)
		if (strcmp(devices[i]->dev.name, name) == 0) {
			devices[i]->guid = guid;
			return devices[i];
		}
	if (ndevices == VRDMA_MAX_DEVICES)
		return NULL;
	struct vrdma_device *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->dev.node_type = IBV_NODE_CA;
	d->dev.transport_type = IBV_TRANSPORT_IB;
	snprintf(d->dev.name, sizeof d->dev.name, "%s", name);
	/* Names no real device has (docs/design/device-discovery.md): the
	 * one node vrdma's devices share, and entries in vrdma's own tree. */
	snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "%s", VRDMA_DEV_NAME);
	if (vrdma_sysfs_ibdev_path(name, d->dev.ibdev_path, sizeof d->dev.ibdev_path) == 0)
		snprintf(d->dev.dev_path, sizeof d->dev.dev_path, "%s/class/infiniband_verbs/%s", vrdma_sysfs_root(),
			 name);
	d->guid = guid;
	d->index = (int)index;
	devices[ndevices++] = d;
	return d;
}

VRDMA_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	struct vrdma_chan c;
	struct vj_doc doc = {0};
	char *reply = malloc(VRDMA_REPLY_MAX);
	struct ibv_device **list = calloc(VRDMA_MAX_DEVICES + 1, sizeof *list);
	int n = 0;
	if (num)
		*num = 0;
	if (!reply || !list) {
		free(reply);
		free(list);
		errno = ENOMEM;
		return NULL;
	}
	int rc = vrdma_chan_open(&c, vrdma_socket_path());
	if (rc) {
		vrdma_log("%s", c.err);
		free(reply);
		return list; /* no daemon: no devices, as with no RDMA hardware */
	}
	rc = hello(&c, "", reply, VRDMA_REPLY_MAX, &doc);
	if (rc) {
		vrdma_log("the daemon refused to list devices: %s", c.err[0] ? c.err : strerror(rc));
	} else {
		int arr = vj_get(&doc, 0, "adapters");
		pthread_mutex_lock(&devices_mu);
		for (int i = 0; i < vj_len(&doc, arr) && n < VRDMA_MAX_DEVICES; i++) {
			int a = vj_at(&doc, arr, i);
			struct vrdma_device *d = device_for(&doc, a);
			if (d) {
				vrdma_sysfs_publish(&doc, a, d);
				list[n++] = &d->dev;
			}
		}
		pthread_mutex_unlock(&devices_mu);
	}
	vj_free(&doc);
	vrdma_chan_close(&c);
	free(reply);
	if (num)
		*num = n;
	return list;
}

VRDMA_EXPORT void ibv_free_device_list(struct ibv_device **list) { free(list); }

VRDMA_EXPORT const char *ibv_get_device_name(struct ibv_device *device) { return device->name; }

VRDMA_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	struct vrdma_device *d = vrdma_container_of(device, struct vrdma_device, dev);
	return htobe64(d->guid);
}

VRDMA_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return vrdma_container_of(device, struct vrdma_device, dev)->index;
}

static int parse_device_attr(const struct vj_doc *doc, int a, struct vrdma_device *d, struct ibv_device_attr *out)
{
	char atomic[32] = "";
	uint64_t u = 0;
	int64_t v = 0;
	if (a < 0)
		return EPROTO;
	memset(out, 0, sizeof *out);
	vj_get_str(doc, a, "fw_ver", out->fw_ver, sizeof out->fw_ver);
	if (!vj_get_u64(doc, a, "node_guid", &u))
		out->node_guid = htobe64(u);
	if (!vj_get_u64(doc, a, "sys_image_guid", &u))
		out->sys_image_guid = htobe64(u);
	if (!vj_get_u64(doc, a, "max_mr_size", &u))
		out->max_mr_size = u;
	if (!vj_get_u64(doc, a, "page_size_cap", &u))
		out->page_size_cap = u;
#define I32(key, field)                                    \
	if (!vj_get_i64(doc, a, key, &v) && v >= 0 && v <= INT32_MAX) \
		out->field = (__typeof__(out->field))v;
	I32("vendor_id", vendor_id)
	I32("vendor_part_id", vendor_part_id)
	I32("hw_ver", hw_ver)
	I32("max_qp", max_qp)
	I32("max_qp_wr", max_qp_wr)
	I32("max_sge", max_sge)
	I32("max_cq", max_cq)
	I32("max_cqe", max_cqe)
	I32("max_mr", max_mr)
	I32("max_mw", max_mw)
	I32("max_pd", max_pd)
	I32("max_qp_rd_atom", max_qp_rd_atom)
	I32("max_qp_init_rd_atom", max_qp_init_rd_atom)
	I32("max_srq", max_srq)
	I32("max_srq_wr", max_srq_wr)
	I32("max_srq_sge", max_srq_sge)
	I32("max_ah", max_ah)
	I32("max_pkeys", max_pkeys)
	I32("phys_port_cnt", phys_port_cnt)
	I32("max_mcast_grp", max_mcast_grp)
	I32("max_mcast_qp_attach", max_mcast_qp_attach)
	I32("max_total_mcast_qp_attach", max_total_mcast_qp_attach)
#undef I32
	out->max_sge_rd = out->max_sge;
	out->max_res_rd_atom = out->max_qp_rd_atom * out->max_qp;
	out->max_ee_rd_atom = 0;
	out->local_ca_ack_delay = 15;
	out->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_PORT_ACTIVE_EVENT |
				IBV_DEVICE_XRC |
				IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_CHANGE_PHY_PORT * 0;
	vj_get_str(doc, a, "atomic_cap", atomic, sizeof atomic);
	if (strcmp(atomic, "ATOMIC_GLOB") == 0)
		out->atomic_cap = IBV_ATOMIC_GLOB;
	else if (strcmp(atomic, "ATOMIC_HCA") == 0)
		out->atomic_cap = IBV_ATOMIC_HCA;
	else
		out->atomic_cap = IBV_ATOMIC_NONE;
	if (d && out->node_guid == 0)
		out->node_guid = htobe64(d->guid);
	return 0;
}

static int async_event_fd(struct vrdma_context *ctx) { return ctx->chan.pollfd; }

static void context_ops(struct vrdma_context *ctx);
static struct ibv_context *context_init(struct vrdma_context *ctx, int cmd_fd);

VRDMA_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct vrdma_device *d = vrdma_container_of(device, struct vrdma_device, dev);
	struct vrdma_context *ctx = vrdma_own_zalloc(sizeof *ctx); /* own.h */
	char *reply = malloc(VRDMA_REPLY_MAX);
	struct vj_doc doc = {0};
	int rc;
	if (!ctx || !reply) {
		vrdma_own_free(ctx);
		free(reply);
		errno = ENOMEM;
		return NULL;
	}
	rc = vrdma_chan_open(&ctx->chan, vrdma_socket_path());
	if (rc) {
		vrdma_log("%s", ctx->chan.err);
		vrdma_own_free(ctx);
		free(reply);
		errno = -rc > 0 ? -rc : rc;
		return NULL;
	}
	rc = hello(&ctx->chan, device->name, reply, VRDMA_REPLY_MAX, &doc);
	if (!rc)
		rc = parse_device_attr(&doc, vj_get(&doc, 0, "attr"), d, &ctx->attr);
	if (!rc) {
		uint64_t mtu = 0;
		vj_get_u64(&doc, vj_get(&doc, 0, "device"), "active_mtu", &mtu);
		ctx->active_mtu = (uint8_t)mtu;
	}
	vj_free(&doc);
	free(reply);
	if (rc) {
		vrdma_log("cannot open %s: %s", device->name, ctx->chan.err[0] ? ctx->chan.err : strerror(rc));
		vrdma_chan_close(&ctx->chan);
		vrdma_own_free(ctx);
		errno = rc;
		return NULL;
	}
	ctx->dev = d;
	return context_init(ctx, ctx->chan.fd);
}

/* context_init makes ctx, its channel open and its device known, a
 * context whose cmd_fd is cmd_fd. */
static struct ibv_context *context_init(struct vrdma_context *ctx, int cmd_fd)
{
	pthread_mutex_init(&ctx->objs_mu, NULL);
	struct ibv_context *ic = &ctx->vctx.context;
	ic->device = &ctx->dev->dev;
	ic->cmd_fd = cmd_fd;
	ic->async_fd = async_event_fd(ctx);
	ic->num_comp_vectors = 1;
	pthread_mutex_init(&ic->mutex, NULL);
	context_ops(ctx);
	return ic;
}

struct ibv_context *vrdma_context_joined(struct vrdma_context *ctx, const struct vj_doc *doc, int cmd_fd)
{
	pthread_mutex_lock(&devices_mu);
	struct vrdma_device *d = device_for(doc, vj_get(doc, 0, "device"));
	pthread_mutex_unlock(&devices_mu);
	if (!d)
		return NULL;
	if (parse_device_attr(doc, vj_get(doc, 0, "attr"), d, &ctx->attr))
		return NULL;
	uint64_t mtu = 0;
	vj_get_u64(doc, vj_get(doc, 0, "device"), "active_mtu", &mtu);
	ctx->active_mtu = (uint8_t)mtu;
	ctx->dev = d;
	ctx->imported = 1;
	return context_init(ctx, cmd_fd);
}

static void context_free(struct vrdma_context *ctx)
{
	pthread_mutex_destroy(&ctx->objs_mu);
	pthread_mutex_destroy(&ctx->vctx.context.mutex);
	vrdma_own_free(ctx);
}

/* ibv_close_device ends the session: the daemon releases everything it
 * held. Objects the application did not destroy stay valid memory (verbs
 * on them fail with EIO) until it destroys them, as with rdma-core, where
 * they outlive the context too. */
VRDMA_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct vrdma_context *ctx = to_vctx(context);
	vrdma_chan_close(&ctx->chan);
	if (ctx->imported)
		close(context->cmd_fd); /* as rdma-core's: the imported context owns it */
	if (__atomic_load_n(&ctx->live, __ATOMIC_ACQUIRE) == 0) {
		context_free(ctx);
		return 0;
	}
	__atomic_store_n(&ctx->closed, 1, __ATOMIC_RELEASE);
	return 0;
}

void vrdma_live(struct vrdma_context *ctx, int delta)
{
	if (__atomic_add_fetch(&ctx->live, delta, __ATOMIC_ACQ_REL) == 0 && delta < 0 &&
	    __atomic_load_n(&ctx->closed, __ATOMIC_ACQUIRE))
		context_free(ctx);
}

int vrdma_cmd(struct vrdma_context *ctx, uint16_t op, struct vj_doc *doc, const int *fds, int nfds, int *rfds,
	      int *nrfds, const char *fmt, ...)
{
	char body[2048];
	va_list ap;
	if (__atomic_load_n(&ctx->closed, __ATOMIC_ACQUIRE))
		return EIO; /* after ibv_close_device: the session is gone */
	va_start(ap, fmt);
	int n = vsnprintf(body, sizeof body, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof body)
		return EINVAL;
	char *reply = malloc(VRDMA_REPLY_MAX);
	if (!reply)
		return ENOMEM;
	size_t len = 0;
	int rc = vrdma_call(&ctx->chan, op, body, (size_t)n, fds, nfds, reply, VRDMA_REPLY_MAX, &len, rfds, nrfds);
	if (rc < 0)
		rc = -rc;
	if (rc) {
		/* A lost channel is said once, where it was lost (chan.c, lost.c),
		 * not by every command after it: a program cleaning up after
		 * the loss would repeat it once per object. */
		int gone = __atomic_load_n(&ctx->chan.dead, __ATOMIC_ACQUIRE);
		if (gone)
			vrdma_note_lost(ctx);
		if (!gone || rc != ctx->chan.deaderr)
			vrdma_debug("%s: %s", ctx->dev->dev.name, ctx->chan.err[0] ? ctx->chan.err : strerror(rc));
		free(reply);
		return rc;
	}
	if (doc) {
		rc = vj_parse(doc, reply, len);
		if (rc) {
			vrdma_log("the daemon's reply did not decode: run a library and daemon of the same release");
			free(reply);
			if (rfds && nrfds)
				for (int i = 0; i < *nrfds; i++)
					close(rfds[i]);
			return EPROTO;
		}
		/* doc->text points into reply: keep reply alive with the doc. */
		return 0;
	}
	free(reply);
	return 0;
}

int vrdma_cmd_simple(struct vrdma_context *ctx, uint16_t op, uint32_t handle)
{
	return vrdma_cmd(ctx, op, NULL, NULL, 0, NULL, NULL, "{\"handle\":%u}", handle);
}

/* vrdma_doc_free frees a reply parsed by vrdma_cmd: the document and its text. */
void vrdma_doc_free(struct vj_doc *doc)
{
	char *text = (char *)doc->text;
	vj_free(doc);
	free(text);
	doc->text = NULL;
}

uint8_t *vrdma_map_region(int fd, size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	/* A child process does not inherit the rings: it would share them. */
	madvise(p, size, MADV_DONTFORK);
	return p;
}

int vrdma_take_region(struct vrdma_context *ctx, int rc, int *fds, int nfds, size_t size, uint8_t **mem,
		      uint16_t destroy_op, uint32_t handle)
{
	if (!rc) {
		*mem = vrdma_map_region(fds[0], size); /* closes fds[0] */
		fds[0] = -1;
		if (!*mem)
			rc = errno;
	}
	if (rc) {
		for (int i = 0; i < nfds; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		if (handle)
			vrdma_cmd_simple(ctx, destroy_op, handle);
	}
	return rc;
}

int vrdma_ring_from(const struct vj_doc *doc, int tok, size_t size, struct vrdma_ring *r)
{
	int64_t off = 0, entries = 0, stride = 0;
	if (vj_get_i64(doc, tok, "offset", &off) || vj_get_i64(doc, tok, "entries", &entries) ||
	    vj_get_i64(doc, tok, "stride", &stride))
		return EPROTO;
	if (entries <= 0 || entries > VRDMA_MAX_RING_ENTRIES || (entries & (entries - 1)) || stride < 16 ||
	    (stride & (stride - 1)) || off < 0 || off % VRDMA_RING_HEADER_SIZE || (uint64_t)off > size ||
	    (uint64_t)(entries * stride) > size - (uint64_t)off ||
	    size - (uint64_t)off - (uint64_t)(entries * stride) < VRDMA_RING_HEADER_SIZE)
		return EPROTO;
	r->off = (uint32_t)off;
	r->entries = (uint32_t)entries;
	r->stride = (uint32_t)stride;
	return 0;
}

VRDMA_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	struct vrdma_context *ctx = to_vctx(context);
	struct vj_doc doc = {0};
	int rc = vrdma_cmd(ctx, VRDMA_CMD_QUERY_DEVICE, &doc, NULL, 0, NULL, NULL, "{}");
	if (rc)
		return rc;
	rc = parse_device_attr(&doc, 0, ctx->dev, attr);
	vrdma_doc_free(&doc);
	if (!rc)
		ctx->attr = *attr;
	return rc;
}

/* odp_ops: the operations an on-demand MR serves on a transport. Every
 * one, on every transport: an on-demand MR is an ordinary one whose pages
 * are not locked (docs/design/odp.md), so nothing on the data path tells
 * them apart. Not IBV_ODP_SUPPORT_IMPLICIT: no MR covers the whole address
 * space. */
#define ODP_OPS                                                                                                     \
	(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |                  \
	 IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV)

/* The kernel's IB_UVERBS_DEVICE_ATOMIC_WRITE, which rdma-core v44's
 * verbs.h does not name yet (v45: IBV_DEVICE_ATOMIC_WRITE): rxe sets it. */
#define VRDMA_DEVICE_ATOMIC_WRITE (1ULL << 40)

/* The device's free-running clock (completion timestamps, raw_clock) is
 * CLOCK_MONOTONIC in nanoseconds: 1 GHz, 64 bits (cq-timestamps.md). */
#define VRDMA_HCA_CORE_CLOCK_KHZ 1000000ULL

/* query_device_ex: the device's attributes and the extended fields rxe
 * fills (phys_port_cnt_ex; device_cap_flags_ex repeats the flags and adds
 * ATOMIC_WRITE, which the device has, as rxe's; odp_caps for explicit
 * on-demand MRs, implicit ones too), and the clock of completion
 * timestamps (hca_core_clock in kHz, completion_timestamp_mask); every
 * capability vrdma lacks (TSO, RSS, tag matching, device memory) reads 0. attr_size
 * is what the program's headers say the structure is: an older one gets
 * its prefix. */
static int query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
			   struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex a;
	if ((input && input->comp_mask) || attr_size < sizeof a.orig_attr)
		return EINVAL;
	memset(&a, 0, sizeof a);
	int rc = ibv_query_device(context, &a.orig_attr);
	if (rc)
		return rc;
	a.device_cap_flags_ex = a.orig_attr.device_cap_flags | VRDMA_DEVICE_ATOMIC_WRITE;
	a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
	a.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT; /* odp-implicit.md */
	a.odp_caps.per_transport_caps.rc_odp_caps = ODP_OPS;
	a.odp_caps.per_transport_caps.uc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE;
	a.odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
	a.xrc_odp_caps = ODP_OPS;
	a.completion_timestamp_mask = UINT64_MAX;
	a.hca_core_clock = VRDMA_HCA_CORE_CLOCK_KHZ;
	memcpy(attr, &a, attr_size < sizeof a ? attr_size : sizeof a);
	return 0;
}

/* query_rt_values (ibv_query_rt_values_ex): the device's free-running
 * clock now, the clock of IBV_WC_EX_WITH_COMPLETION_TIMESTAMP. As mlx5
 * does, the count is in raw_clock.tv_nsec with tv_sec 0, so that a program
 * reading tv_nsec alone and one adding tv_sec * 10^9 get the same. Asking
 * for a value the device does not know is EINVAL, as mlx5's. */
static int query_rt_values(struct ibv_context *context, struct ibv_values_ex *values)
{
	(void)context;
	if (values->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	uint32_t mask = 0;
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		values->raw_clock.tv_sec = 0;
		values->raw_clock.tv_nsec = (long)vrdma_clock_ns(CLOCK_MONOTONIC);
		mask |= IBV_VALUES_MASK_RAW_CLOCK;
	}
	values->comp_mask = mask;
	return 0;
}

static uint8_t mtu_enum(uint64_t v) { return v >= 1 && v <= 5 ? (uint8_t)v : IBV_MTU_1024; }

/* query_port fills attr (len bytes of it: older applications pass the
 * shorter compat structure) and, if gids is not NULL, the GID table. */
static int query_port(struct vrdma_context *ctx, uint8_t port, struct ibv_port_attr *attr, size_t len,
		      union ibv_gid *gids, int *ngids)
{
	struct vj_doc doc = {0};
	struct ibv_port_attr a;
	char state[32] = "", phys[32] = "";
	uint64_t u = 0;
	int64_t v = 0;
	int rc = vrdma_cmd(ctx, VRDMA_CMD_QUERY_PORT, &doc, NULL, 0, NULL, NULL, "{\"port\":%u}", port);
	if (rc)
		return rc;
	memset(&a, 0, sizeof a);
	vj_get_str(&doc, 0, "state", state, sizeof state);
	vj_get_str(&doc, 0, "phys_state", phys, sizeof phys);
	a.state = strcmp(state, "ACTIVE") == 0 ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	a.phys_state = strcmp(phys, "LINK_UP") == 0 ? 5 : 3; /* LinkUp, Disabled */
	if (!vj_get_u64(&doc, 0, "max_mtu", &u))
		a.max_mtu = mtu_enum(u);
	if (!vj_get_u64(&doc, 0, "active_mtu", &u))
		a.active_mtu = mtu_enum(u);
	int garr = vj_get(&doc, 0, "gids");
	if (!vj_get_i64(&doc, 0, "gid_tbl_len", &v) && v >= 0)
		a.gid_tbl_len = (int)v;
	if (vj_len(&doc, garr) > a.gid_tbl_len)
		a.gid_tbl_len = vj_len(&doc, garr);
	if (!vj_get_i64(&doc, 0, "pkey_tbl_len", &v) && v >= 0 && v <= 0xffff)
		a.pkey_tbl_len = (uint16_t)v;
	a.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	a.max_msg_sz = 1u << 31;
	if (!vj_get_i64(&doc, 0, "lid", &v) && v > 0 && v < 0xc000)
		a.lid = (uint16_t)v; /* vrdma's switch gives every port a LID */
	a.sm_lid = 0;
	a.max_vl_num = 1;
	a.subnet_timeout = 18;
	a.active_width = 2; /* 4X */
	a.active_speed = 32; /* EDR */
	a.link_layer = IBV_LINK_LAYER_ETHERNET;
	if (gids && ngids) {
		int n = 0;
		for (int i = 0; i < vj_len(&doc, garr) && n < VRDMA_MAX_GIDS; i++) {
			size_t got = 0;
			uint8_t raw[16];
			if (vj_b64(&doc, vj_at(&doc, garr, i), raw, sizeof raw, &got) == 0 && got == 16)
				memcpy(gids[n++].raw, raw, 16);
		}
		*ngids = n;
	}
	vrdma_doc_free(&doc);
	if (attr)
		memcpy(attr, &a, len < sizeof a ? len : sizeof a);
	return 0;
}

int vrdma_query_port_ex(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len)
{
	return query_port(to_vctx(c), port, attr, len, NULL, NULL);
}

/* The exported ibv_query_port takes the compat structure of older
 * binaries; ours has the same prefix. */
VRDMA_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct _compat_ibv_port_attr *port_attr)
{
	return query_port(to_vctx(context), port_num, (struct ibv_port_attr *)port_attr,
			  offsetof(struct ibv_port_attr, link_layer), NULL, NULL);
}

VRDMA_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	union ibv_gid gids[VRDMA_MAX_GIDS];
	int n = 0;
	int rc = query_port(to_vctx(context), port_num, NULL, 0, gids, &n);
	if (rc) {
		errno = rc;
		return -1;
	}
	if (index < 0 || index >= n) {
		/* An unused entry of the table reads as zero, as on rxe. */
		if (index >= 0 && index < VRDMA_MAX_GIDS) {
			memset(gid, 0, sizeof *gid);
			return 0;
		}
		errno = EINVAL;
		return -1;
	}
	*gid = gids[index];
	return 0;
}

static int gid_is_ipv4(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(g->raw, prefix, sizeof prefix) == 0;
}

/* ibv_query_gid_type is rdma-core's private (driver.h): every vrdma GID
 * is RoCE v2. */
VRDMA_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
				    enum ibv_gid_type_sysfs *type)
{
	union ibv_gid gid;
	if (ibv_query_gid(context, port_num, (int)index, &gid))
		return -1;
	*type = IBV_GID_TYPE_SYSFS_ROCE_V2;
	return 0;
}

VRDMA_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
				   struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	union ibv_gid gids[VRDMA_MAX_GIDS];
	int n = 0;
	if (flags || entry_size < sizeof *entry || port_num > 255)
		return EINVAL;
	int rc = query_port(to_vctx(context), (uint8_t)port_num, NULL, 0, gids, &n);
	if (rc)
		return rc;
	if (gid_index >= (uint32_t)n)
		return ENODATA;
	memset(entry, 0, sizeof *entry);
	entry->gid = gids[gid_index];
	entry->gid_index = gid_index;
	entry->port_num = port_num;
	entry->gid_type = IBV_GID_TYPE_ROCE_V2;
	entry->ndev_ifindex = 0;
	(void)gid_is_ipv4;
	return 0;
}

VRDMA_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
					  size_t max_entries, uint32_t flags, size_t entry_size)
{
	union ibv_gid gids[VRDMA_MAX_GIDS];
	int n = 0;
	if (flags || entry_size < sizeof *entries)
		return -EINVAL;
	int rc = query_port(to_vctx(context), 1, NULL, 0, gids, &n);
	if (rc)
		return -rc;
	if ((size_t)n > max_entries)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		struct ibv_gid_entry *e = (struct ibv_gid_entry *)(void *)((char *)entries + (size_t)i * entry_size);
		memset(e, 0, sizeof *e);
		e->gid = gids[i];
		e->gid_index = (uint32_t)i;
		e->port_num = 1;
		e->gid_type = IBV_GID_TYPE_ROCE_V2;
	}
	return n;
}

VRDMA_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	struct ibv_port_attr a;
	int rc = query_port(to_vctx(context), port_num, &a, sizeof a, NULL, NULL);
	if (rc) {
		errno = rc;
		return -1;
	}
	if (index < 0 || index >= a.pkey_tbl_len) {
		errno = EINVAL;
		return -1;
	}
	*pkey = index == 0 ? htons(0xffff) : 0;
	return 0;
}

VRDMA_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	__be16 p;
	if (ibv_query_pkey(context, port_num, 0, &p))
		return -1;
	return (p & htons(0x7fff)) == (pkey & htons(0x7fff)) ? 0 : -1;
}

/* ---- object tracking, for asynchronous events ---- */

void vrdma_track(struct vrdma_context *ctx, void *obj, int kind)
{
	pthread_mutex_lock(&ctx->objs_mu);
	switch (kind) {
	case VRDMA_OBJ_QP: {
		struct vrdma_qp *q = obj;
		q->next = ctx->qps;
		ctx->qps = q;
		break;
	}
	case VRDMA_OBJ_CQ: {
		struct vrdma_cq *q = obj;
		q->next = ctx->cqs;
		ctx->cqs = q;
		break;
	}
	case VRDMA_OBJ_SRQ: {
		struct vrdma_srq *q = obj;
		q->next = ctx->srqs;
		ctx->srqs = q;
		break;
	}
	}
	pthread_mutex_unlock(&ctx->objs_mu);
}

#define UNLINK(head, type, obj)                                   \
	for (type **pp = &(head); *pp; pp = &(*pp)->next)         \
		if (*pp == (obj)) {                               \
			*pp = (obj)->next;                        \
			break;                                    \
		}

void vrdma_untrack(struct vrdma_context *ctx, void *obj, int kind)
{
	pthread_mutex_lock(&ctx->objs_mu);
	switch (kind) {
	case VRDMA_OBJ_QP: {
		struct vrdma_qp *q = obj;
		UNLINK(ctx->qps, struct vrdma_qp, q)
		break;
	}
	case VRDMA_OBJ_CQ: {
		struct vrdma_cq *q = obj;
		UNLINK(ctx->cqs, struct vrdma_cq, q)
		break;
	}
	case VRDMA_OBJ_SRQ: {
		struct vrdma_srq *q = obj;
		UNLINK(ctx->srqs, struct vrdma_srq, q)
		break;
	}
	}
	pthread_mutex_unlock(&ctx->objs_mu);
}

/* ---- asynchronous events ---- */

VRDMA_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct vrdma_context *ctx = to_vctx(context);
	for (;;) {
		struct vrdma_event ev;
		int flags = fcntl(context->async_fd, F_GETFL);
		int block = flags < 0 || !(flags & O_NONBLOCK);
		int rc = vrdma_chan_event(&ctx->chan, &ev, block);
		if (rc < 0 && __atomic_load_n(&ctx->chan.dead, __ATOMIC_ACQUIRE)) {
			/* The daemon is gone (lost.c): DEVICE_FATAL once, then EIO. */
			vrdma_note_lost(ctx);
			if (__atomic_exchange_n(&ctx->fatal_sent, 1, __ATOMIC_ACQ_REL)) {
				errno = EIO;
				return -1;
			}
			memset(event, 0, sizeof *event);
			event->event_type = IBV_EVENT_DEVICE_FATAL;
			event->element.port_num = 1;
			return 0;
		}
		if (rc < 0) {
			errno = -rc;
			return -1;
		}
		if (rc == 0) {
			errno = EAGAIN;
			return -1;
		}
		memset(event, 0, sizeof *event);
		event->event_type = (enum ibv_event_type)ev.type;
		int found = 0;
		pthread_mutex_lock(&ctx->objs_mu);
		switch (ev.type) {
		case IBV_EVENT_CQ_ERR:
			for (struct vrdma_cq *q = ctx->cqs; q; q = q->next)
				if (q->handle == ev.handle) {
					event->element.cq = &q->ibcq;
					found = 1;
				}
			break;
		case IBV_EVENT_SRQ_ERR:
		case IBV_EVENT_SRQ_LIMIT_REACHED:
			for (struct vrdma_srq *q = ctx->srqs; q; q = q->next)
				if (q->handle == ev.handle) {
					event->element.srq = &q->ibsrq;
					found = 1;
				}
			break;
		case IBV_EVENT_DEVICE_FATAL:
		case IBV_EVENT_PORT_ACTIVE:
		case IBV_EVENT_PORT_ERR:
		case IBV_EVENT_LID_CHANGE:
		case IBV_EVENT_PKEY_CHANGE:
		case IBV_EVENT_SM_CHANGE:
		case IBV_EVENT_CLIENT_REREGISTER:
		case IBV_EVENT_GID_CHANGE:
			event->element.port_num = 1;
			found = 1;
			break;
		default:
			for (struct vrdma_qp *q = ctx->qps; q; q = q->next)
				if (q->handle == ev.handle) {
					event->element.qp = &q->qpx.qp_base;
					found = 1;
				}
			break;
		}
		pthread_mutex_unlock(&ctx->objs_mu);
		if (found)
			return 0;
		/* The object is already destroyed: its events go with it. */
	}
}

VRDMA_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		if (event->element.cq) {
			pthread_mutex_lock(&event->element.cq->mutex);
			event->element.cq->async_events_completed++;
			pthread_mutex_unlock(&event->element.cq->mutex);
		}
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		if (event->element.srq) {
			pthread_mutex_lock(&event->element.srq->mutex);
			event->element.srq->events_completed++;
			pthread_mutex_unlock(&event->element.srq->mutex);
		}
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		if (event->element.qp) {
			pthread_mutex_lock(&event->element.qp->mutex);
			event->element.qp->events_completed++;
			pthread_mutex_unlock(&event->element.qp->mutex);
		}
		break;
	default:
		break;
	}
}

static void context_ops(struct vrdma_context *ctx)
{
	struct ibv_context *ic = &ctx->vctx.context;
	ic->ops.poll_cq = vrdma_poll_cq;
	ic->ops.req_notify_cq = vrdma_req_notify_cq;
	ic->ops.post_send = vrdma_post_send;
	ic->ops.post_recv = vrdma_post_recv;
	ic->ops.post_srq_recv = vrdma_post_srq_recv;
	ic->ops.alloc_mw = vrdma_alloc_mw;
	ic->ops.dealloc_mw = vrdma_dealloc_mw;
	ic->ops.bind_mw = vrdma_bind_mw;
	ctx->vctx.advise_mr = vrdma_advise_mr;
	ctx->vctx.alloc_parent_domain = vrdma_alloc_parent_domain;
	ctx->vctx.alloc_td = vrdma_alloc_td;
	ctx->vctx.dealloc_td = vrdma_dealloc_td;
	ctx->vctx.query_port = vrdma_query_port_ex;
	ctx->vctx.query_device_ex = query_device_ex;
	ctx->vctx.query_rt_values = query_rt_values;
	vrdma_set_create_qp_ex(&ctx->vctx);
	vrdma_set_xrc_ops(&ctx->vctx);
	ctx->vctx.create_cq_ex = vrdma_create_cq_ex;
	ctx->vctx.sz = sizeof ctx->vctx;
	ic->abi_compat = __VERBS_ABI_IS_EXTENDED;
}
