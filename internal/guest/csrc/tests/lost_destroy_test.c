/*
 * lost_destroy_test.c: after the loss (docs/design/lost-daemon.md) destroy,
 * dereg and dealloc succeed and free the library's side whatever error the
 * command failed with: a daemon that refused the session mid-way says why
 * with its own errno (EACCES for "permission denied"), not EIO, and the
 * objects must not stay for ever (ASan's leak check sees them).
 */
#include "verbs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

/* The daemon: it refused the session; every command fails with the
 * refusal's errno. */
static int cmd_errno = EACCES;
static int live;

int vrdma_cmd(struct vrdma_context *ctx, uint16_t op, struct vj_doc *doc, const int *fds, int nfds, int *rfds,
	      int *nrfds, const char *fmt, ...)
{
	(void)ctx, (void)op, (void)doc, (void)fds, (void)nfds, (void)rfds, (void)nrfds, (void)fmt;
	return cmd_errno;
}
int vrdma_cmd_simple(struct vrdma_context *ctx, uint16_t op, uint32_t handle)
{
	(void)ctx, (void)op, (void)handle;
	return cmd_errno;
}
int vrdma_take_region(struct vrdma_context *ctx, int rc, int *fds, int nfds, size_t size, uint8_t **mem,
		      uint16_t destroy_op, uint32_t handle)
{
	(void)ctx, (void)rc, (void)fds, (void)nfds, (void)size, (void)mem, (void)destroy_op, (void)handle;
	abort();
}
void vrdma_doc_free(struct vj_doc *doc)
{
	(void)doc;
	abort();
}
int vrdma_ring_from(const struct vj_doc *doc, int tok, size_t size, struct vrdma_ring *r)
{
	(void)doc, (void)tok, (void)size, (void)r;
	abort();
}
int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	(void)context, (void)port_num, (void)index, (void)gid;
	abort();
}
void vrdma_live(struct vrdma_context *ctx, int delta)
{
	(void)ctx;
	live += delta;
}
void vrdma_track(struct vrdma_context *ctx, void *obj, int kind)
{
	(void)ctx, (void)obj, (void)kind;
	abort();
}
void vrdma_untrack(struct vrdma_context *ctx, void *obj, int kind)
{
	(void)ctx, (void)obj, (void)kind;
}

static void *region(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

/* The library's QPs, SRQs and CQs are on pages of their own (own.h). */
static void *own_zalloc(size_t size)
{
	void *p = vrdma_own_zalloc(size);
	if (p == NULL) {
		perror("vrdma_own_zalloc");
		exit(2);
	}
	return p;
}

static void *zalloc(size_t size)
{
	void *p = calloc(1, size);
	if (p == NULL) {
		perror("calloc");
		exit(2);
	}
	return p;
}

int main(void)
{
	static struct vrdma_context ctx;
	static struct vrdma_backing backing = { .refs = 2 };
	struct ibv_context *c = &ctx.vctx.context;
	int p[2];

	ctx.chan.fd = -1;
	ctx.lost = 1;
	pthread_mutex_init(&ctx.objs_mu, NULL);
	pthread_mutex_init(&c->mutex, NULL);
	if (pipe2(p, O_CLOEXEC) < 0) {
		perror("pipe2");
		return 2;
	}

	struct vrdma_qp *qp = own_zalloc(sizeof *qp);
	qp->qpx.qp_base.context = c;
	qp->size = 4096;
	qp->mem = region(qp->size);
	qp->bell = p[1];
	pthread_spin_init(&qp->slock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rlock, PTHREAD_PROCESS_PRIVATE);
	struct vrdma_srq *srq = own_zalloc(sizeof *srq);
	srq->ibsrq.context = c;
	srq->size = 4096;
	srq->mem = region(srq->size);
	pthread_spin_init(&srq->lock, PTHREAD_PROCESS_PRIVATE);
	struct vrdma_cq *cq = own_zalloc(sizeof *cq);
	cq->ibcq.context = c;
	cq->size = 4096;
	cq->mem = region(cq->size);
	cq->rfd = p[0];
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	struct vrdma_ah *ah = zalloc(sizeof *ah);
	ah->ibah.context = c;
	struct vrdma_mr *mr = zalloc(sizeof *mr);
	mr->ibmr.context = c;
	mr->nbackings = 1;
	mr->backings[0] = &backing;
	struct vrdma_pd *pd = zalloc(sizeof *pd);
	pd->ibpd.context = c;
	live = 6;

	int r = ibv_destroy_qp(&qp->qpx.qp_base);
	CHECK(r == 0, "ibv_destroy_qp after a refusal (%s) = %d, want 0", strerror(cmd_errno), r);
	r = ibv_destroy_srq(&srq->ibsrq);
	CHECK(r == 0, "ibv_destroy_srq after a refusal = %d, want 0", r);
	r = ibv_destroy_cq(&cq->ibcq);
	CHECK(r == 0, "ibv_destroy_cq after a refusal = %d, want 0", r);
	r = ibv_destroy_ah(&ah->ibah);
	CHECK(r == 0, "ibv_destroy_ah after a refusal = %d, want 0", r);
	r = ibv_dereg_mr(&mr->ibmr);
	CHECK(r == 0, "ibv_dereg_mr after a refusal = %d, want 0", r);
	r = ibv_dealloc_pd(&pd->ibpd);
	CHECK(r == 0, "ibv_dealloc_pd after a refusal = %d, want 0", r);
	CHECK(live == 0, "%d objects still live after destroying them all", live);
	/* ASan's leak check does not see the objects on pages of their own:
	 * their pages are gone once they are freed. */
	const void *own[] = { qp, srq, cq };
	for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
		unsigned char vec;
		uintptr_t pg = (uintptr_t)own[i] & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
		CHECK(mincore((void *)pg, 1, &vec) < 0 && errno == ENOMEM, "object %zu's page is still mapped", i);
	}
	CHECK(fcntl(p[0], F_GETFD) < 0 && fcntl(p[1], F_GETFD) < 0, "the CQ's and QP's descriptors stay open");

	/* Before the loss, an error keeps the object (EBUSY: in use). */
	ctx.lost = 0;
	cmd_errno = EBUSY;
	struct vrdma_pd busy = { .ibpd.context = c };
	live = 1;
	r = ibv_dealloc_pd(&busy.ibpd);
	CHECK(r == EBUSY && live == 1, "ibv_dealloc_pd of a PD in use = %d, live %d; want EBUSY, kept", r, live);

	pthread_mutex_destroy(&c->mutex);
	pthread_mutex_destroy(&ctx.objs_mu);
	if (failures) {
		fprintf(stderr, "lost_destroy_test: %d failures\n", failures);
		return 1;
	}
	printf("lost_destroy_test: ok\n");
	return 0;
}
