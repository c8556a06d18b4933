/*
 * rsocket.h: the drop-in librdmacm's rsockets (rdma-core's <rdma/rsocket.h>
 * API). An rsocket is a descriptor the library made with rsocket() or
 * raccept(); the table below maps its number to its state. Every other
 * descriptor is ordinary: rpoll and rselect hand it to poll and select as
 * it is, and the calls on one socket fail with EBADF for it, as rdma-core's
 * do (docs/design/rsockets.md).
 */
#ifndef VRDMA_RSOCKET_H
#define VRDMA_RSOCKET_H

#include <stddef.h>

/* The descriptors the table can hold: 0 to RS_MAX_FD - 1 (rdma-core's
 * index map holds as many). */
#define RS_MAX_FD 65536

/* An rsocket's state. Only its descriptor exists so far: rsocket() does
 * not yet make them (docs/design/rsockets.md, "What is next"). */
struct rsocket {
	int fd; /* the descriptor the application holds */
};

/* The rsocket of descriptor fd, or NULL for an ordinary one (or a number
 * out of range). Lock-free: safe beside rs_insert and rs_remove. */
struct rsocket *rs_lookup(int fd);
/* Enters rs under rs->fd: 0, or an errno (EBADF: out of range; EEXIST: the
 * number is taken; ENOMEM). */
int rs_insert(struct rsocket *rs);
/* Removes rs from the table (its number may then be reused). */
void rs_remove(struct rsocket *rs);
/* How many rsockets the table holds: 0 lets rpoll and rselect hand their
 * arguments to the kernel untouched. */
int rs_count(void);

#endif
