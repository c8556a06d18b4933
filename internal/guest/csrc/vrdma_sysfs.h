/*
 * vrdma_sysfs.h: the devices' sysfs-like tree (sysfs.c) and the names
 * device.c gives a device (docs/design/device-discovery.md).
 */
#ifndef VRDMA_SYSFS_H
#define VRDMA_SYSFS_H

#include <stddef.h>

#include "verbs_int.h"

/* VRDMA_DEV_NAME is every vrdma device's dev_name: /dev/infiniband/vrdma is
 * the node the daemon (or `vrdma guest build --out` as root) makes, a
 * character device 1:3 (/dev/null's), which programs that check for
 * /dev/infiniband/<dev_name> find. Not uverbsN: that names a real device. */
#define VRDMA_DEV_NAME "vrdma"

/* vrdma_socket_path and vrdma_instance_name are the daemon's socket and the
 * instance this process attaches to (VRDMA_SOCKET, VRDMA_INSTANCE). */
const char *vrdma_socket_path(void);
const char *vrdma_instance_name(void);

/* vrdma_sysfs_root returns the tree's top (made on the first call), or ""
 * when none could be made. */
const char *vrdma_sysfs_root(void);

/* vrdma_sysfs_ibdev_path writes the device name's directory in the tree to
 * buf; -1 when there is no tree or the name cannot be a file name. */
int vrdma_sysfs_ibdev_path(const char *name, char *buf, size_t cap);

/* vrdma_sysfs_publish writes device d's entries, from the adapter a of the
 * daemon's device list doc. */
void vrdma_sysfs_publish(const struct vj_doc *doc, int a, const struct vrdma_device *d);

#endif
