/*
 * cm_event.c: decoding the daemon's connection manager events (cm_event,
 * internal/proto's CMEvent) for librdmacm. The daemon is trusted less than
 * fully: every field is checked against its range, strings and byte fields
 * against their bounds, and an event that breaks one is refused whole.
 */
#include "vrdma.h"
#include "vrdma_private.h"

#include <errno.h>
#include <string.h>

/* An optional unsigned field no larger than max; absent is 0. */
static int get_uint(const struct vj_doc *d, const char *key, uint64_t max, uint64_t *v)
{
	int tok = vj_get(d, 0, key);
	*v = 0;
	if (tok < 0)
		return 0;
	if (vj_u64(d, tok, v) < 0 || *v > max)
		return -EINVAL;
	return 0;
}

/* An optional 16-byte field (GID or address): absent, null or exactly 16. */
static int get_gid(const struct vj_doc *d, const char *key, uint8_t out[16])
{
	int tok = vj_get(d, 0, key);
	size_t n = 0;
	memset(out, 0, 16);
	if (tok < 0)
		return 0;
	if (vj_b64(d, tok, out, 16, &n) < 0 || (n != 0 && n != 16))
		return -EINVAL;
	return 0;
}

int vrdma_cm_event_parse(const char *body, size_t len, struct vrdma_cm_ev *ev)
{
	struct vj_doc d;
	uint64_t v[13];
	int r;

	memset(ev, 0, sizeof *ev);
	if (body == NULL || vj_parse(&d, body, len) < 0)
		return -EINVAL;
	r = -EINVAL;
	if (d.tok[0].type != VJ_OBJECT)
		goto out;
	if (get_uint(&d, "type", VRDMA_CM_EV_DISCONNECT_DONE, &v[0]) < 0 || v[0] < VRDMA_CM_EV_REQUEST ||
	    vj_get(&d, 0, "id") < 0 || get_uint(&d, "id", UINT32_MAX, &v[1]) < 0 ||
	    get_uint(&d, "listener", UINT32_MAX, &v[2]) < 0 || get_uint(&d, "qp_type", UINT8_MAX, &v[3]) < 0 ||
	    get_uint(&d, "qpn", 0xffffff, &v[4]) < 0 || get_uint(&d, "psn", 0xffffff, &v[5]) < 0 ||
	    get_uint(&d, "qkey", UINT32_MAX, &v[6]) < 0 || get_uint(&d, "mtu", IBV_MTU_4096, &v[7]) < 0 ||
	    get_uint(&d, "rd_atomic", UINT8_MAX, &v[8]) < 0 || get_uint(&d, "sgid_index", UINT8_MAX, &v[9]) < 0 ||
	    get_uint(&d, "local_port", UINT16_MAX, &v[10]) < 0 ||
	    get_uint(&d, "remote_port", UINT16_MAX, &v[11]) < 0 || get_uint(&d, "reason", UINT16_MAX, &v[12]) < 0)
		goto out;
	if (get_gid(&d, "gid", ev->gid) < 0 || get_gid(&d, "local_addr", ev->local_addr) < 0 ||
	    get_gid(&d, "remote_addr", ev->remote_addr) < 0)
		goto out;
	int lp = vj_get(&d, 0, "local_psn");
	uint64_t local_psn = 0;
	if (lp >= 0 && (vj_u64(&d, lp, &local_psn) < 0 || local_psn > 0xffffff))
		goto out;
	int t = vj_get(&d, 0, "text");
	if (t >= 0 && vj_str(&d, t, ev->text, sizeof ev->text) < 0)
		goto out;
	int p = vj_get(&d, 0, "private_data");
	if (p >= 0 && vj_b64(&d, p, ev->private_data, sizeof ev->private_data, &ev->private_len) < 0)
		goto out;
	if (v[0] == VRDMA_CM_EV_REQUEST && v[1] < VRDMA_CM_DAEMON_ID_BASE)
		goto out; /* the daemon picks a request's id, above the library's */
	ev->type = (uint8_t)v[0];
	ev->id = (uint32_t)v[1];
	ev->listener = (uint32_t)v[2];
	ev->qp_type = (uint8_t)v[3];
	ev->qpn = (uint32_t)v[4];
	ev->psn = (uint32_t)v[5];
	ev->qkey = (uint32_t)v[6];
	ev->mtu = (uint8_t)v[7];
	ev->rd_atomic = (uint8_t)v[8];
	ev->sgid_index = (uint8_t)v[9];
	ev->local_port = (uint16_t)v[10];
	ev->remote_port = (uint16_t)v[11];
	ev->reason = (uint16_t)v[12];
	ev->local_psn = (uint32_t)local_psn;
	ev->has_local_psn = lp >= 0;
	r = 0;
out:
	vj_free(&d);
	if (r < 0) {
		struct vrdma_cm_ev zero = { 0 };
		*ev = zero;
	}
	return r;
}
