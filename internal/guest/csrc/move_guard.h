/*
 * move_guard.h: holds other threads' writes to pages while mem.c moves
 * them (docs/design/registration-move.md).
 *
 * Registering copies a buffer's whole pages into a memfd and maps the
 * memfd over them; deregistering copies them back into private memory.
 * A write another thread makes to those pages between the copy and the
 * map lands on the old pages and is lost, and whole pages hold more than
 * the buffer: a malloc neighbour, a mutex. The guard write-protects the
 * pages through a userfaultfd (UFFDIO_REGISTER_MODE_WP) before the copy:
 * a thread that writes them meanwhile waits in the kernel, and when the
 * guard ends (the userfaultfd is closed, which wakes every waiter) its
 * write is retried on what is mapped then, the new pages. Reads go on.
 *
 * The userfaultfd is the best the process may have: one that also holds
 * the kernel's writes (read(2) into the page) where the process is
 * privileged, vm.unprivileged_userfaultfd is 1, or /dev/userfaultfd is
 * open to it; else one that holds user-mode writes only
 * (UFFD_USER_MODE_ONLY: a system call writing the page meanwhile fails
 * with EFAULT instead of being lost); else none (seccomp, an old kernel):
 * the move is unguarded, as before, and the library says so once.
 *
 * Only direct system calls: memory hooks (UCX's) must not see them, and
 * between guard_on and guard_off the calling thread writes nothing the
 * guard protects (its signals are blocked; errno's page is never
 * guarded), or it would wait for itself.
 */
#ifndef VRDMA_MOVE_GUARD_H
#define VRDMA_MOVE_GUARD_H

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "verbs_int.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif
#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1 << 12)
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/* How the process gets a userfaultfd, found at the first move. */
enum guard_kind {
	GUARD_UNKNOWN,
	GUARD_FULL,      /* userfaultfd(2): user and kernel writes wait */
	GUARD_DEV,       /* /dev/userfaultfd: the same */
	GUARD_USER_ONLY, /* UFFD_USER_MODE_ONLY: user-mode writes wait */
	GUARD_NONE,      /* none: unguarded */
};

static enum guard_kind guard_kind;
static uint64_t guard_features; /* the kernel's userfaultfd features */

/* guard_new_fd opens a userfaultfd of kind k, or returns -1. */
static int guard_new_fd(enum guard_kind k)
{
	int flags = O_CLOEXEC | O_NONBLOCK;
	switch (k) {
	case GUARD_FULL:
		return (int)syscall(SYS_userfaultfd, flags);
	case GUARD_USER_ONLY:
		return (int)syscall(SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY);
	case GUARD_DEV: {
		int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		if (dev < 0)
			return -1;
		int fd = ioctl(dev, USERFAULTFD_IOC_NEW, flags);
		close(dev);
		return fd;
	}
	default:
		return -1;
	}
}

/* guard_probe finds the best kind of userfaultfd the process may open and
 * the features of the kernel's; it says once when the guard is partial or
 * missing, and how to get the whole of it. Called with backings_mu held. */
static void guard_probe(void)
{
#ifdef VRDMA_GUARD_USER_ONLY
	/* A test build: the guard an unprivileged process gets on Debian 12
	 * (user-mode faults only, no UFFD_FEATURE_WP_UNPOPULATED). */
	static const enum guard_kind kinds[] = {GUARD_USER_ONLY};
#else
	static const enum guard_kind kinds[] = {GUARD_FULL, GUARD_DEV, GUARD_USER_ONLY};
#endif
	guard_kind = GUARD_NONE;
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		int fd = guard_new_fd(kinds[i]);
		if (fd < 0)
			continue;
		struct uffdio_api api = {.api = UFFD_API};
		int ok = ioctl(fd, UFFDIO_API, &api) == 0 && (api.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP);
		close(fd);
		if (ok) {
			guard_kind = kinds[i];
			guard_features = api.features;
#ifdef VRDMA_GUARD_USER_ONLY
			guard_features &= ~(uint64_t)UFFD_FEATURE_WP_UNPOPULATED;
#endif
			break;
		}
	}
	if (guard_kind == GUARD_USER_ONLY)
		vrdma_log("ibv_reg_mr: registering moves whole pages; other threads' writes to them meanwhile are held, "
			  "but a system call that writes them meanwhile (read(2) into a neighbouring buffer) fails with "
			  "EFAULT: this process may hold only user-mode faults (vm.unprivileged_userfaultfd is 0). "
			  "Set it to 1 (sysctl), or give the user /dev/userfaultfd, to hold those too");
	else if (guard_kind == GUARD_NONE)
		vrdma_log("ibv_reg_mr: registering moves whole pages, and here nothing holds other threads' writes to "
			  "them meanwhile (no userfaultfd write-protection: Linux 5.7 or later, not forbidden by seccomp): "
			  "a write to memory beside a buffer during ibv_reg_mr or ibv_dereg_mr can be lost; register "
			  "buffers on pages of their own (posix_memalign to the page size)");
}

/* guard_missing_once says, the first time only, why moves are unguarded
 * where the process has a userfaultfd but the kernel lacks a part. */
static void guard_missing_once(const char *why)
{
	static int said;
	if (!said) {
		said = 1;
		vrdma_log("%s", why);
	}
}

/* A guard over [start, start+len) while it is moved. */
struct move_guard {
	int fd; /* the userfaultfd, -1: unguarded */
	uintptr_t start;
	size_t len;
	uint64_t oldmask;
};

/* guard_on write-protects [start, start+len) against every thread but the
 * caller, whose signals it blocks, unless the range cannot be written
 * (prot) or cannot be guarded (then the move goes on unguarded). shmem:
 * the pages are a memfd's (deregistering), which needs Linux 5.19.
 * Called with backings_mu held. */
static void guard_on(struct move_guard *g, uintptr_t start, size_t len, int prot, int shmem)
{
	g->fd = -1;
	g->start = start;
	g->len = len;
	if (!(prot & PROT_WRITE))
		return; /* nobody can write them */
	if (guard_kind == GUARD_UNKNOWN)
		guard_probe();
	if (guard_kind == GUARD_NONE)
		return;
	if (shmem && !(guard_features & UFFD_FEATURE_WP_HUGETLBFS_SHMEM)) {
		guard_missing_once("ibv_dereg_mr: this kernel cannot write-protect a memfd's pages (Linux 5.19 or later "
				   "can): a write to memory beside a buffer while it is deregistered can be lost");
		return;
	}
	uintptr_t e = (uintptr_t)&errno;
	if (e >= start && e < start + len)
		return; /* the caller writes errno there: it would wait for itself */
	int fd = guard_new_fd(guard_kind);
	if (fd < 0)
		return;
	struct uffdio_api api = {.api = UFFD_API,
				 .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP |
					     (guard_features & (UFFD_FEATURE_WP_HUGETLBFS_SHMEM | UFFD_FEATURE_WP_UNPOPULATED))};
	if (ioctl(fd, UFFDIO_API, &api)) {
		close(fd);
		return;
	}
	uint64_t all = ~(uint64_t)0;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &g->oldmask, sizeof all);
	/* Pages never touched have no page-table entry to protect before
	 * UFFD_FEATURE_WP_UNPOPULATED (Linux 6.4): map them first. */
	int populated = (api.features & UFFD_FEATURE_WP_UNPOPULATED) ||
			syscall(SYS_madvise, (void *)start, len, MADV_POPULATE_READ) == 0;
	struct uffdio_register reg = {.range = {.start = start, .len = len}, .mode = UFFDIO_REGISTER_MODE_WP};
	struct uffdio_writeprotect wp = {.range = {.start = start, .len = len}, .mode = UFFDIO_WRITEPROTECT_MODE_WP};
	if (!populated || ioctl(fd, UFFDIO_REGISTER, &reg) || ioctl(fd, UFFDIO_WRITEPROTECT, &wp)) {
		/* Already another userfaultfd's (the application's own), or
		 * not memory a userfaultfd takes (a file's private mapping):
		 * unguarded. */
		int err = errno;
		close(fd); /* wakes any writer held by a protection half made */
		syscall(SYS_rt_sigprocmask, SIG_SETMASK, &g->oldmask, NULL, sizeof g->oldmask);
		if (!populated && err == EINVAL)
			guard_missing_once("ibv_reg_mr: this kernel cannot map untouched pages before write-protecting "
					   "them (MADV_POPULATE_READ: Linux 5.14 or later): a write to memory beside a "
					   "buffer while it is registered can be lost");
		vrdma_debug("ibv_reg_mr: the move of [0x%lx, 0x%lx) is unguarded: %s", (unsigned long)start,
			    (unsigned long)(start + len), strerror(err));
		return;
	}
	g->fd = fd;
}

/* guard_off ends the guard: the writers that waited retry on what is
 * mapped there now, the new pages once moved (the protection went with
 * the old ones) or the old pages, unprotected, where the move failed.
 * Closing the userfaultfd wakes every writer it held. */
static void guard_off(struct move_guard *g, int moved)
{
	if (g->fd < 0)
		return;
	int e = errno;
	if (!moved) {
		struct uffdio_writeprotect wp = {.range = {.start = g->start, .len = g->len}, .mode = 0};
		ioctl(g->fd, UFFDIO_WRITEPROTECT, &wp);
	}
	close(g->fd);
	errno = e;
	g->fd = -1;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &g->oldmask, NULL, sizeof g->oldmask);
}

#endif
