/*
 * memhooks.c: an LD_PRELOAD library that counts the calls a program makes
 * to mmap, munmap, mremap, madvise, mprotect, mlock and munlock through
 * the dynamic linker, as memory hooks do (UCX's UCM, Open MPI's,
 * libfabric's), and passes them on. memhooks_peer.c reads the counts
 * (TestRegMRCallsNoMemoryHooks).
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/types.h>

/* memhooks_calls counts the calls while memhooks_counting is set. */
__attribute__((visibility("default"))) volatile int memhooks_counting;
__attribute__((visibility("default"))) volatile int memhooks_calls;

static void counted(void)
{
	if (memhooks_counting)
		__atomic_add_fetch(&memhooks_calls, 1, __ATOMIC_SEQ_CST);
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

__attribute__((visibility("default"))) void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	counted();
	return NEXT(mmap)(addr, len, prot, flags, fd, off);
}

__attribute__((visibility("default"))) int munmap(void *addr, size_t len)
{
	counted();
	return NEXT(munmap)(addr, len);
}

__attribute__((visibility("default"))) void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	counted();
	void *new_addr = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	return NEXT(mremap)(old, old_len, new_len, flags, new_addr);
}

__attribute__((visibility("default"))) int madvise(void *addr, size_t len, int advice)
{
	counted();
	return NEXT(madvise)(addr, len, advice);
}

__attribute__((visibility("default"))) int mprotect(void *addr, size_t len, int prot)
{
	counted();
	return NEXT(mprotect)(addr, len, prot);
}

__attribute__((visibility("default"))) int mlock(const void *addr, size_t len)
{
	counted();
	return NEXT(mlock)(addr, len);
}

__attribute__((visibility("default"))) int munlock(const void *addr, size_t len)
{
	counted();
	return NEXT(munlock)(addr, len);
}
