/*
 * sysfs.c: the sysfs-like tree of the process's vrdma devices, which
 * ibv_get_sysfs_path() and each device's ibdev_path name
 * (docs/design/device-discovery.md). Programs check a device's entries
 * before they use it (Open MPI that <sysfs>/class/infiniband exists; UCX,
 * hwloc and others read node_guid, the port's state, the GID table,
 * device/numa_node and device/local_cpus under ibdev_path); a vrdma device
 * is no kernel device and has none in /sys.
 *
 * The tree is the user's own: a directory of mode 0700 that only the user
 * can read, one per daemon socket and instance, under $XDG_RUNTIME_DIR (or
 * /tmp). It holds what the daemon showed this user's processes, nothing of
 * another tenant's. Processes of the user that share it write identical
 * files, each by rename, so a reader sees one whole file.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vrdma_sysfs.h"

static pthread_once_t root_once = PTHREAD_ONCE_INIT;
static char root[IBV_SYSFS_PATH_MAX]; /* "" when no tree could be made */

/* private_dir reports whether path is a directory of ours that nobody else
 * can write or read. */
static int private_dir(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       (st.st_mode & (S_IRWXG | S_IRWXO)) == 0;
}

/* base_dir is where the tree's directory goes: $XDG_RUNTIME_DIR when it is
 * the user's own (not writable by others), otherwise /tmp. */
static const char *base_dir(void)
{
	const char *x = secure_getenv("XDG_RUNTIME_DIR");
	struct stat st;
	if (x && x[0] == '/' && lstat(x, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	    (st.st_mode & (S_IWGRP | S_IWOTH)) == 0)
		return x;
	return "/tmp";
}

/* mkdirs makes path and its missing parents below root, mode 0755 (the
 * tree's top is 0700: no other user reaches them). */
static int mkdirs(char *path)
{
	for (char *p = path + strlen(root) + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int rc = mkdir(path, 0755);
		*p = '/';
		if (rc && errno != EEXIST)
			return -1;
	}
	return mkdir(path, 0755) && errno != EEXIST ? -1 : 0;
}

static void root_init(void)
{
	/* One tree per daemon socket and instance: a hash of the two names. */
	uint64_t h = 14695981039346656037ull;
	const char *parts[2] = {vrdma_socket_path(), vrdma_instance_name()};
	for (int i = 0; i < 2; i++) {
		for (const char *s = parts[i]; *s; s++)
			h = (h ^ (uint8_t)*s) * 1099511628211ull;
		h = (h ^ 0xff) * 1099511628211ull;
	}
	const char *base = base_dir();
	char dir[IBV_SYSFS_PATH_MAX];
	int n = snprintf(dir, sizeof dir, "%s/vrdma-sysfs-%u-%016llx", base, (unsigned)geteuid(), (unsigned long long)h);
	if (n < 0 || (size_t)n >= sizeof dir - 64)
		return;
	if (mkdir(dir, 0700) && errno != EEXIST)
		return;
	if (!private_dir(dir)) {
		/* Someone else's, or open to others: a directory of this
		 * process's own instead (left behind when it ends). */
		n = snprintf(dir, sizeof dir, "%s/vrdma-sysfs-%u-XXXXXX", base, (unsigned)geteuid());
		if (n < 0 || (size_t)n >= sizeof dir || !mkdtemp(dir)) {
			vrdma_log("no directory for the devices' sysfs entries in %s: %s", base, strerror(errno));
			return;
		}
	}
	char cls[IBV_SYSFS_PATH_MAX + 32];
	snprintf(root, sizeof root, "%s", dir);
	snprintf(cls, sizeof cls, "%s/class/infiniband", dir);
	if (mkdirs(cls)) {
		vrdma_log("cannot make %s: %s", cls, strerror(errno));
		root[0] = '\0';
	}
}

const char *vrdma_sysfs_root(void)
{
	pthread_once(&root_once, root_init);
	return root;
}

/* put writes text to root/rel, by rename. */
static void put(const char *rel, const char *text)
{
	char path[IBV_SYSFS_PATH_MAX * 2], tmp[IBV_SYSFS_PATH_MAX * 2 + 32];
	int n = snprintf(path, sizeof path, "%s/%s", root, rel);
	if (n < 0 || (size_t)n >= sizeof path)
		return;
	char *slash = strrchr(path, '/');
	*slash = '\0';
	int rc = mkdirs(path);
	*slash = '/';
	if (rc)
		return;
	snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	size_t len = strlen(text);
	ssize_t w = write(fd, text, len);
	close(fd);
	if (w != (ssize_t)len || rename(tmp, path))
		unlink(tmp);
}

/* safe_name reports whether a device name from the daemon can be a path
 * component. */
static int safe_name(const char *s)
{
	if (!*s || *s == '.')
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
		      *s == '-' || *s == '.'))
			return 0;
	return 1;
}

int vrdma_sysfs_ibdev_path(const char *name, char *buf, size_t cap)
{
	const char *r = vrdma_sysfs_root();
	if (!*r || !safe_name(name))
		return -1;
	int n = snprintf(buf, cap, "%s/class/infiniband/%s", r, name);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* local_cpus writes the mask of every CPU as sysfs does: 32-bit hex words,
 * the highest first, separated by commas. */
static void local_cpus(char *buf, size_t cap)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	if (ncpu < 1)
		ncpu = 1;
	size_t words = (size_t)(ncpu + 31) / 32, off = 0;
	buf[0] = '\0';
	for (size_t w = words; w-- > 0 && off + 10 < cap;) {
		long bits = ncpu - (long)w * 32;
		uint32_t word = bits >= 32 ? 0xffffffffu : (uint32_t)((1ull << bits) - 1);
		off += (size_t)snprintf(buf + off, cap - off, w ? "%08x," : "%08x\n", word);
	}
}

static void guid_text(uint64_t g, char *buf, size_t cap)
{
	snprintf(buf, cap, "%04x:%04x:%04x:%04x\n", (unsigned)(g >> 48), (unsigned)(g >> 32 & 0xffff),
		 (unsigned)(g >> 16 & 0xffff), (unsigned)(g & 0xffff));
}

void vrdma_sysfs_publish(const struct vj_doc *doc, int a, const struct vrdma_device *d)
{
	const char *name = d->dev.name;
	char rel[IBV_SYSFS_PATH_MAX], text[256], state[32] = "";
	if (!*vrdma_sysfs_root() || !safe_name(name))
		return;
#define PUT(fmt, ...)                                                        \
	do {                                                                 \
		snprintf(rel, sizeof rel, "class/infiniband/%s/" fmt, name, __VA_ARGS__); \
		put(rel, text);                                              \
	} while (0)
	guid_text(d->guid, text, sizeof text);
	PUT("%s", "node_guid");
	PUT("%s", "sys_image_guid");
	snprintf(text, sizeof text, "1: CA\n");
	PUT("%s", "node_type");
	snprintf(text, sizeof text, "vrdma %s\n", name);
	PUT("%s", "node_desc");
	snprintf(text, sizeof text, "-1\n"); /* no NUMA node nearer than another */
	PUT("%s", "device/numa_node");
	local_cpus(text, sizeof text);
	PUT("%s", "device/local_cpus");

	vj_get_str(doc, a, "state", state, sizeof state);
	int active = strcmp(state, "ACTIVE") == 0;
	snprintf(text, sizeof text, active ? "4: ACTIVE\n" : "1: DOWN\n");
	PUT("%s", "ports/1/state");
	snprintf(text, sizeof text, active ? "5: LinkUp\n" : "3: Disabled\n");
	PUT("%s", "ports/1/phys_state");
	snprintf(text, sizeof text, "Ethernet\n");
	PUT("%s", "ports/1/link_layer");
	snprintf(text, sizeof text, "0x0\n");
	PUT("%s", "ports/1/lid");
	snprintf(text, sizeof text, "100 Gb/sec (4X EDR)\n"); /* what ibv_query_port reports */
	PUT("%s", "ports/1/rate");
	int garr = vj_get(doc, a, "gids");
	for (int i = 0; i < vj_len(doc, garr) && i < VRDMA_MAX_GIDS; i++) {
		uint8_t g[16];
		size_t got = 0;
		if (vj_b64(doc, vj_at(doc, garr, i), g, sizeof g, &got) || got != 16)
			continue;
		size_t off = 0;
		for (int k = 0; k < 16; k += 2)
			off += (size_t)snprintf(text + off, sizeof text - off, k < 14 ? "%02x%02x:" : "%02x%02x\n", g[k],
						g[k + 1]);
		PUT("ports/1/gids/%d", i);
		snprintf(text, sizeof text, "RoCE v2\n");
		PUT("ports/1/gid_attrs/types/%d", i);
	}
#undef PUT
}
