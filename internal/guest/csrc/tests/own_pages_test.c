/*
 * own_pages_test.c: the library's objects that threads write while they
 * live (the context with its command mutex, CQs, QPs, SRQs, rdma_cm ids,
 * channels and events) never share a page with the application's memory
 * (own.h). ibv_reg_mr and ibv_dereg_mr copy a buffer's pages and map the
 * copy over them; a write another thread makes to those pages in between
 * is lost. rping's client lost the unlock of its context's command mutex
 * so (its CM thread unlocked it while the main thread deregistered a
 * buffer malloc'd beside the context), and its next command waited for
 * ever.
 *
 * The application's memory here: many malloc'd buffers of assorted sizes,
 * taken after the objects, as rping mallocs its buffers beside them. None
 * may share a page with an object; and registering and deregistering the
 * first of them must leave every object's page where it was, not in a
 * memfd of the library's.
 *
 * needs: daemon
 */
#include "rdmacm/cma.h"
#include "verbs_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define NBUFS 2000

struct obj {
	const char *name;
	uintptr_t start, end;
};

static struct obj objs[16];
static int nobjs;
static uintptr_t page;

static void add(const char *name, const void *p, size_t size)
{
	objs[nobjs++] = (struct obj){ .name = name, .start = (uintptr_t)p, .end = (uintptr_t)p + size };
}

/* Whether [a, a+n) and object o share a page. */
static int shares_page(const struct obj *o, uintptr_t a, size_t n)
{
	uintptr_t lo = o->start & ~(page - 1), hi = (o->end + page - 1) & ~(page - 1);
	return a < hi && a + n > lo;
}

/* The /proc/self/maps line of the mapping holding addr, in line. */
static int mapping_of(uintptr_t addr, char *line, size_t cap)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (f == NULL)
		return -1;
	int found = -1;
	while (fgets(line, (int)cap, f) != NULL) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && addr >= lo && addr < hi) {
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

int main(void)
{
	page = (uintptr_t)sysconf(_SC_PAGESIZE);
	struct rdma_event_channel *ech = rdma_create_event_channel();
	if (ech == NULL) {
		perror("rdma_create_event_channel");
		return 2;
	}
	struct rdma_cm_id *cmid = NULL;
	if (rdma_create_id(ech, &cmid, NULL, RDMA_PS_TCP)) {
		perror("rdma_create_id");
		return 2;
	}
	int n = 0;
	struct ibv_device **devs = ibv_get_device_list(&n);
	struct ibv_context *ctx = devs && n > 0 ? ibv_open_device(devs[0]) : NULL;
	if (ctx == NULL) {
		fprintf(stderr, "no vrdma device to open\n");
		return 2;
	}
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *cch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, cch, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	if (pd == NULL || cch == NULL || cq == NULL || srq == NULL || qp == NULL) {
		fprintf(stderr, "cannot create the objects\n");
		return 2;
	}
	/* An event of the library's own making, queued on the channel. */
	if (cma_queue_local(to_cid(cmid), RDMA_CM_EVENT_ADDR_ERROR, 0) != 0) {
		fprintf(stderr, "cannot queue an event\n");
		return 2;
	}
	struct cma_chan *cc = to_cchan(ech);
	add("the context (its command mutex)", to_vctx(ctx), sizeof(struct vrdma_context));
	if (cma_ndevs > 0) /* rping's: rdma_cm opens it */
		add("rdma_cm's device context", to_vctx(cma_devs[0].verbs), sizeof(struct vrdma_context));
	add("a CQ", cq, sizeof(struct vrdma_cq));
	add("a QP", qp, sizeof(struct vrdma_qp));
	add("an SRQ", srq, sizeof(struct vrdma_srq));
	add("an rdma_cm id", to_cid(cmid), sizeof(struct cma_id));
	add("an rdma_cm event channel", cc, sizeof(struct cma_chan));
	add("a queued rdma_cm event", cc->head, sizeof(struct cma_event));

	/* The application's buffers, after the objects, as rping's. */
	static void *bufs[NBUFS];
	static size_t lens[NBUFS];
	for (int i = 0; i < NBUFS; i++) {
		lens[i] = 16 + (size_t)(i * 37) % 3000;
		bufs[i] = malloc(lens[i]);
		if (bufs[i] == NULL) {
			perror("malloc");
			return 2;
		}
	}
	int shared = 0;
	for (int o = 0; o < nobjs; o++)
		for (int i = 0; i < NBUFS; i++)
			if (shares_page(&objs[o], (uintptr_t)bufs[i], lens[i])) {
				CHECK(0, "%s [%#lx, %#lx) shares a page with the application's malloc'd buffer [%p, +%zu)",
				      objs[o].name, (unsigned long)objs[o].start, (unsigned long)objs[o].end, bufs[i], lens[i]);
				shared++;
				break;
			}

	/* Registering and deregistering the first buffer moves its pages
	 * twice; no object moves with them. */
	struct ibv_mr *mr = ibv_reg_mr(pd, bufs[0], lens[0], IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL, "ibv_reg_mr of a malloc'd buffer: %s", strerror(errno));
	char line[512];
	for (int o = 0; mr != NULL && o < nobjs; o++)
		if (mapping_of(objs[o].start, line, sizeof line) == 0)
			CHECK(strstr(line, "vrdma-mr") == NULL, "%s moved with a registered buffer into %s", objs[o].name,
			      line);
	if (mr != NULL)
		CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");

	for (int i = 0; i < NBUFS; i++)
		free(bufs[i]);
	struct rdma_cm_event *ev = NULL;
	CHECK(rdma_get_cm_event(ech, &ev) == 0, "the queued event");
	if (ev != NULL)
		rdma_ack_cm_event(ev);
	CHECK(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	CHECK(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq");
	CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(ibv_destroy_comp_channel(cch) == 0, "ibv_destroy_comp_channel");
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	ibv_free_device_list(devs);
	CHECK(rdma_destroy_id(cmid) == 0, "rdma_destroy_id");
	rdma_destroy_event_channel(ech);
	if (failures) {
		fprintf(stderr, "own_pages_test: %d failures (%d objects on the application's pages)\n", failures, shared);
		return 1;
	}
	printf("own_pages_test: ok\n");
	return 0;
}
