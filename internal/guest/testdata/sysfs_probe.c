/*
 * sysfs_probe: what a program that checks a device's sysfs entries before
 * using it sees (tools_sysfs_test.go). Linked against rdma-core's
 * libibverbs, run on vrdma's. For each device it prints key=value lines:
 * the names and paths of struct ibv_device, ibv_get_sysfs_path(), the
 * port's state from ibv_query_port, and each sysfs file read with
 * ibv_read_sysfs_file under the device's ibdev_path.
 */
#include <infiniband/verbs.h>
#include <stdio.h>

const char *ibv_get_sysfs_path(void); /* rdma-core's libibverbs/driver.h */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

static const char *const files[] = {
	"node_guid",	  "sys_image_guid",	 "node_type",		 "ports/1/state",	  "ports/1/phys_state",
	"ports/1/link_layer", "ports/1/gids/0", "ports/1/gid_attrs/types/0", "device/numa_node", "device/local_cpus",
};

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list) {
		perror("ibv_get_device_list");
		return 1;
	}
	printf("sysfs=%s\n", ibv_get_sysfs_path());
	for (int i = 0; i < n; i++) {
		struct ibv_device *d = list[i];
		printf("device=%s\ndev_name=%s\ndev_path=%s\nibdev_path=%s\n", d->name, d->dev_name, d->dev_path,
		       d->ibdev_path);
		struct ibv_context *ctx = ibv_open_device(d);
		struct ibv_port_attr pa;
		if (!ctx || ibv_query_port(ctx, 1, &pa)) {
			perror("ibv_open_device/ibv_query_port");
			return 1;
		}
		printf("verbs_state=%d\n", (int)pa.state);
		ibv_close_device(ctx);
		for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
			char buf[512];
			if (ibv_read_sysfs_file(d->ibdev_path, files[f], buf, sizeof buf) < 0)
				printf("file %s=(unreadable)\n", files[f]);
			else
				printf("file %s=%s\n", files[f], buf);
		}
	}
	ibv_free_device_list(list);
	return 0;
}
