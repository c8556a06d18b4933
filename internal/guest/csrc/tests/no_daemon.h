/*
 * no_daemon.h: the library's functions that talk to the daemon or track
 * objects (device.c, mem.c), for unit tests that link cq.c or post.c
 * without them. None may be called: each aborts (vrdma_live, which only
 * counts, does nothing). Include it in one file of
 * a test program.
 */
#ifndef VRDMA_TESTS_NO_DAEMON_H
#define VRDMA_TESTS_NO_DAEMON_H

#include <stdlib.h>

#include "verbs_int.h"

int vrdma_cmd(struct vrdma_context *ctx, uint16_t op, struct vj_doc *doc, const int *fds, int nfds, int *rfds,
	      int *nrfds, const char *fmt, ...)
{
	(void)ctx, (void)op, (void)doc, (void)fds, (void)nfds, (void)rfds, (void)nrfds, (void)fmt;
	abort();
}
void vrdma_doc_free(struct vj_doc *doc)
{
	(void)doc;
	abort();
}
int vrdma_cmd_simple(struct vrdma_context *ctx, uint16_t op, uint32_t handle)
{
	(void)ctx, (void)op, (void)handle;
	abort();
}
int vrdma_take_region(struct vrdma_context *ctx, int rc, int *fds, int nfds, size_t size, uint8_t **mem,
		      uint16_t destroy_op, uint32_t handle)
{
	(void)ctx, (void)rc, (void)fds, (void)nfds, (void)size, (void)mem, (void)destroy_op, (void)handle;
	abort();
}
uint8_t *vrdma_map_region(int fd, size_t size)
{
	(void)fd, (void)size;
	abort();
}
/* Object accounting: counts nothing here. */
void vrdma_live(struct vrdma_context *ctx, int delta)
{
	(void)ctx, (void)delta;
}
void vrdma_track(struct vrdma_context *ctx, void *obj, int kind)
{
	(void)ctx, (void)obj, (void)kind;
	abort();
}
void vrdma_untrack(struct vrdma_context *ctx, void *obj, int kind)
{
	(void)ctx, (void)obj, (void)kind;
	abort();
}
#endif
