/*
 * cma_dev.c: the adapters, opened once for the life of the process as
 * rdma-core's librdmacm opens them, each with the library's CM function
 * attached to its command channel; rdma_get_devices.
 */
#include "cma.h"

#include <stdlib.h>
#include <string.h>

struct cma_device cma_devs[CMA_MAX_DEVICES];
int cma_ndevs;
pthread_mutex_t cma_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t cma_cond = PTHREAD_COND_INITIALIZER;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_err;

static void open_device(struct ibv_device *dev)
{
	struct cma_device *d = &cma_devs[cma_ndevs];
	struct ibv_port_attr pa;
	struct ibv_device_attr da;

	d->verbs = ibv_open_device(dev);
	if (d->verbs == NULL) {
		vrdma_debug("rdma_cm: cannot open %s: %s", ibv_get_device_name(dev), strerror(errno));
		return;
	}
	d->active_mtu = IBV_MTU_1024;
	if (ibv_query_port(d->verbs, 1, &pa) == 0) {
		d->active_mtu = (uint8_t)pa.active_mtu;
		for (int i = 0; i < pa.gid_tbl_len && d->ngids < CMA_MAX_GIDS; i++) {
			union ibv_gid g;
			if (ibv_query_gid(d->verbs, 1, i, &g) == 0)
				d->gids[d->ngids++] = g;
		}
	}
	d->max_rd_atomic = 16;
	if (ibv_query_device(d->verbs, &da) == 0 && da.max_qp_rd_atom > 0)
		d->max_rd_atomic = (uint8_t)(da.max_qp_rd_atom > 255 ? 255 : da.max_qp_rd_atom);
	pthread_mutex_init(&d->pd_mu, NULL);
	vrdma_private_cm_attach(d->verbs, cma_on_event, d);
	cma_ndevs++;
}

static void init(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (list == NULL) {
		init_err = errno ? errno : ENODEV;
		return;
	}
	for (int i = 0; i < n && cma_ndevs < CMA_MAX_DEVICES; i++)
		open_device(list[i]);
	ibv_free_device_list(list);
	if (cma_ndevs == 0)
		init_err = ENODEV;
}

int cma_init(void)
{
	pthread_once(&init_once, init);
	return init_err;
}

struct cma_device *cma_dev_by_gid(const uint8_t gid[16], int *index)
{
	for (int i = 0; i < cma_ndevs; i++)
		for (int j = 0; j < cma_devs[i].ngids; j++)
			if (memcmp(cma_devs[i].gids[j].raw, gid, 16) == 0) {
				if (index)
					*index = j;
				return &cma_devs[i];
			}
	return NULL;
}

static int gid_is_v4(const uint8_t *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	return memcmp(g, prefix, sizeof prefix) == 0;
}

static int gid_is_zero(const uint8_t *g)
{
	for (int i = 0; i < 16; i++)
		if (g[i])
			return 0;
	return 1;
}

struct cma_device *cma_dev_by_family(int v4, int *index)
{
	for (int i = 0; i < cma_ndevs; i++)
		for (int j = 0; j < cma_devs[i].ngids; j++) {
			const uint8_t *g = cma_devs[i].gids[j].raw;
			if (!gid_is_zero(g) && gid_is_v4(g) == !!v4) {
				if (index)
					*index = j;
				return &cma_devs[i];
			}
		}
	return NULL;
}

struct ibv_pd *cma_dev_pd(struct cma_device *d)
{
	pthread_mutex_lock(&d->pd_mu);
	if (d->pd == NULL)
		__atomic_store_n(&d->pd, ibv_alloc_pd(d->verbs), __ATOMIC_RELEASE); /* cma_dev_pd_peek reads it */
	struct ibv_pd *pd = d->pd;
	pthread_mutex_unlock(&d->pd_mu);
	return pd;
}

struct ibv_pd *cma_dev_pd_peek(struct cma_device *d)
{
	return __atomic_load_n(&d->pd, __ATOMIC_ACQUIRE);
}

uint32_t cma_dev_new_id(struct cma_device *d)
{
	uint32_t id;

	pthread_mutex_lock(&cma_mu);
	do {
		if (++d->next_id >= VRDMA_CM_DAEMON_ID_BASE)
			d->next_id = 1;
		id = d->next_id;
	} while (cma_find(d, id) != NULL);
	pthread_mutex_unlock(&cma_mu);
	return id;
}

CMA_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	if (num_devices)
		*num_devices = 0;
	if (cma_init() != 0 && cma_ndevs == 0) {
		struct ibv_context **none = calloc(1, sizeof *none);
		return none; /* rdma-core: an empty list when there is no device */
	}
	struct ibv_context **list = calloc((size_t)cma_ndevs + 1, sizeof *list);
	if (list == NULL)
		return NULL;
	for (int i = 0; i < cma_ndevs; i++)
		list[i] = cma_devs[i].verbs;
	if (num_devices)
		*num_devices = cma_ndevs;
	return list;
}

CMA_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}
