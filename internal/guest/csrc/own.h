/*
 * own.h: memory on pages of the library's own, for the objects that
 * threads write while they live (docs/design/guest-memory.md, "The
 * library's own objects").
 *
 * ibv_reg_mr and ibv_dereg_mr replace the pages that hold a registered
 * buffer: they copy them, then map the copy over them (mem.c). A write by
 * another thread to those pages between the copy and the map is lost. A
 * malloc'd buffer shares its pages with whatever malloc put beside it, and
 * that was the library's own objects too: rping's client deregistered its
 * buffers while its CM thread locked the context's command mutex on the
 * same page, the unlock was lost, and the next command waited for ever.
 * The application's own neighbours are its business (guest-memory.md says
 * so); the library's must never be there. These objects live in anonymous
 * mappings of their own, which no buffer of the application shares.
 *
 * Direct system calls, not libc's mmap: memory hooks (UCX's) must not take
 * the library's objects for the application's memory.
 */
#ifndef VRDMA_OWN_H
#define VRDMA_OWN_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The bytes before an object: its mapping's length, and room to keep the
 * object aligned to a cache line. */
#define VRDMA_OWN_HEADER 64

/* vrdma_own_zalloc returns size zeroed bytes on pages no other memory
 * shares, aligned to 64 bytes, or NULL with errno ENOMEM. */
static inline void *vrdma_own_zalloc(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	if (size > SIZE_MAX - VRDMA_OWN_HEADER - page) {
		errno = ENOMEM;
		return NULL;
	}
	size_t len = (size + VRDMA_OWN_HEADER + page - 1) / page * page;
	void *p = (void *)syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	*(size_t *)p = len;
	return (char *)p + VRDMA_OWN_HEADER;
}

/* vrdma_own_free frees what vrdma_own_zalloc returned (NULL: nothing). */
static inline void vrdma_own_free(void *obj)
{
	if (obj == NULL)
		return;
	int e = errno;
	char *p = (char *)obj - VRDMA_OWN_HEADER;
	(void)syscall(SYS_munmap, p, *(size_t *)p);
	errno = e;
}

#endif
