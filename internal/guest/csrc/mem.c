/*
 * mem.c: protection domains and memory regions on the application's own
 * memory (docs/design/guest-memory.md).
 *
 * The daemon reaches registered memory through a memfd it maps too. To
 * register [addr, addr+len) of ordinary memory (malloc, stack, mmap), the
 * library moves the whole pages that hold it into a sealed memfd mapped at
 * the same address (MAP_FIXED over the old pages, after copying their
 * contents), so the bytes keep their address and contents and what a peer
 * writes appears there. Moved pages are tracked page by page: each
 * belongs to one memfd (a backing), a registration reuses the backings of
 * pages already moved and moves only the rest, so one MR may span several
 * backings, which the daemon maps side by side.
 *
 * Every mmap, munmap, mremap, mprotect and mlock on the application's
 * memory is a direct system call, never libc's wrapper: memory hooks that
 * interpose on those (UCX's, Open MPI's, libfabric's) must not take a
 * registration for the application unmapping its memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "move_guard.h"
#include "verbs_int.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

VRDMA_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct vrdma_context *ctx = to_vctx(context);
	struct vrdma_pd *pd = calloc(1, sizeof *pd);
	struct vj_doc doc = {0};
	uint64_t h = 0;
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = vrdma_cmd(ctx, VRDMA_CMD_ALLOC_PD, &doc, NULL, 0, NULL, NULL, "{}");
	if (!rc) {
		rc = vj_get_u64(&doc, 0, "handle", &h) ? EPROTO : 0;
		vrdma_doc_free(&doc);
	}
	if (rc) {
		free(pd);
		errno = rc;
		return NULL;
	}
	pd->ibpd.context = context;
	pd->ibpd.handle = pd->handle = (uint32_t)h;
	vrdma_live(ctx, 1);
	return &pd->ibpd;
}

/* vrdma_alloc_mw: a window of type 1 or 2 from the daemon (alloc_mw),
 * its rkey the daemon's. Other types are EINVAL, as rdma_rxe's. */
struct ibv_mw *vrdma_alloc_mw(struct ibv_pd *ibpd, enum ibv_mw_type type)
{
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		vrdma_debug("ibv_alloc_mw: type %d: the types are IBV_MW_TYPE_1 and IBV_MW_TYPE_2", (int)type);
		errno = EINVAL;
		return NULL;
	}
	struct vrdma_context *ctx = to_vctx(ibpd->context);
	struct ibv_mw *mw = calloc(1, sizeof *mw);
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	struct vj_doc doc = {0};
	uint64_t h = 0, rkey = 0;
	int rc = vrdma_cmd(ctx, VRDMA_CMD_ALLOC_MW, &doc, NULL, 0, NULL, NULL, "{\"pd\":%u,\"type\":%d}",
			   ((struct vrdma_pd *)ibpd)->handle, (int)type);
	if (!rc) {
		rc = vj_get_u64(&doc, 0, "handle", &h) || vj_get_u64(&doc, 0, "rkey", &rkey) ? EPROTO : 0;
		vrdma_doc_free(&doc);
	}
	if (rc) {
		free(mw);
		errno = rc;
		return NULL;
	}
	mw->context = ibpd->context;
	mw->pd = ibpd;
	mw->handle = (uint32_t)h;
	mw->rkey = (uint32_t)rkey;
	mw->type = type;
	vrdma_live(ctx, 1);
	return mw;
}

int vrdma_dealloc_mw(struct ibv_mw *mw)
{
	int rc = vrdma_cmd_simple(to_vctx(mw->context), VRDMA_CMD_DEALLOC_MW, mw->handle);
	if (vrdma_destroy_kept(to_vctx(mw->context), rc))
		return rc;
	vrdma_live(to_vctx(mw->context), -1);
	free(mw);
	return 0;
}

/* Parent domains and thread domains (docs/design/parent-domain.md). A
 * parent domain is a PD for every verb that takes one (its handle is its
 * PD's: MRs, QPs, SRQs, AHs and CQs made with it are its PD's to the
 * daemon, as mlx5's share their PD's number) that also carries the
 * application's pd_context, allocators and thread domain. vrdma allocates
 * no buffer the allocators could honestly provide: queue rings are memfds
 * the daemon maps and seals, and the objects threads write live on pages
 * of the library's own (own.h); so, as a provider may, it never calls them.
 * A thread domain is a hint (no locking needed across threads) that
 * changes nothing here. */

/* pd_mu guards PDs' counts of parent domains. */
static pthread_mutex_t pd_mu = PTHREAD_MUTEX_INITIALIZER;

struct ibv_pd *vrdma_alloc_parent_domain(struct ibv_context *context, struct ibv_parent_domain_init_attr *attr)
{
	enum { KNOWN = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT };
	if (!attr || !attr->pd || attr->pd->context != context || ((struct vrdma_pd *)attr->pd)->parent ||
	    (attr->td && attr->td->context != context) || (attr->comp_mask & ~(uint32_t)KNOWN) ||
	    ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) && (!attr->alloc || !attr->free))) {
		vrdma_debug("ibv_alloc_parent_domain: needs a PD of this device (not a parent domain), a thread domain "
			    "of it or none, comp_mask of ALLOCATORS (with both functions) and PD_CONTEXT only");
		errno = attr && (attr->comp_mask & ~(uint32_t)KNOWN) ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	struct vrdma_pd *parent = (struct vrdma_pd *)attr->pd, *pd = calloc(1, sizeof *pd);
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibpd.context = context;
	pd->ibpd.handle = pd->handle = parent->handle;
	pd->parent = parent;
	pd->td = attr->td;
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	pthread_mutex_lock(&pd_mu);
	parent->children++;
	pthread_mutex_unlock(&pd_mu);
	vrdma_live(to_vctx(context), 1);
	return &pd->ibpd;
}

struct ibv_td *vrdma_alloc_td(struct ibv_context *context, struct ibv_td_init_attr *init_attr)
{
	if (!init_attr || init_attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_td *td = calloc(1, sizeof *td);
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	td->context = context;
	vrdma_live(to_vctx(context), 1);
	return td;
}

int vrdma_dealloc_td(struct ibv_td *td)
{
	vrdma_live(to_vctx(td->context), -1);
	free(td);
	return 0;
}

VRDMA_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct vrdma_pd *pd = (struct vrdma_pd *)ibpd;
	if (pd->parent) { /* a parent domain: the daemon knows only its PD */
		pthread_mutex_lock(&pd_mu);
		pd->parent->children--;
		pthread_mutex_unlock(&pd_mu);
		vrdma_live(to_vctx(ibpd->context), -1);
		free(pd);
		return 0;
	}
	pthread_mutex_lock(&pd_mu);
	int busy = pd->children > 0;
	pthread_mutex_unlock(&pd_mu);
	if (busy)
		return EBUSY; /* parent domains use it, as mlx5 answers */
	int rc = vrdma_cmd_simple(to_vctx(ibpd->context), VRDMA_CMD_DEALLOC_PD, pd->handle);
	if (vrdma_destroy_kept(to_vctx(ibpd->context), rc))
		return rc; /* EBUSY while MRs, QPs or AHs use it, as rdma-core says */
	vrdma_live(to_vctx(ibpd->context), -1);
	free(pd);
	return 0;
}

/* ---- system calls on application memory ----
 * Direct, never through libc's wrappers (see the top of the file). */

static void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static int sys_munmap(void *addr, size_t len) { return (int)syscall(SYS_munmap, addr, len); }

static void *sys_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr)
{
	return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}

static int sys_mprotect(void *addr, size_t len, int prot) { return (int)syscall(SYS_mprotect, addr, len, prot); }

static int sys_mlock(const void *addr, size_t len) { return (int)syscall(SYS_mlock, addr, len); }

static int sys_munlock(const void *addr, size_t len) { return (int)syscall(SYS_munlock, addr, len); }

/* ---- backings ---- */

static pthread_mutex_t backings_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vrdma_backing *backings;
static long page_size;

static void before_fork(void);
static void after_fork_parent(void);
static void after_fork_child(void);
static int backing_in_place(const struct vrdma_backing *b, int *prot);
static void release_in_place(const struct vrdma_backing *b);

static void mem_init_once(void)
{
	page_size = sysconf(_SC_PAGESIZE);
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

void vrdma_mem_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, mem_init_once);
}

/* Replacing pages in place: copy their contents, then map something else
 * over them. When the pages hold the calling thread's stack, the two steps
 * run on a stack of their own, so no write of the caller (a return
 * address, a saved register) lands between the copy and the map. One job
 * at a time: backings_mu is held, or the process is a child just forked. */
static struct swap_job {
	uintptr_t start;
	size_t len;
	int fd;       /* the memfd mapped over the pages (move, reattach), or whose
		       * contents they take back when made private (fd >= 0) */
	off_t off;    /* from this offset of it */
	int prot;     /* the protection the pages keep */
	uint8_t *tmp; /* where the pages are copied to make them private: anonymous memory */
	int err;
} job;
static ucontext_t job_caller, job_ctx;

/* copy_pages copies whole pages of the application's memory. Not memcpy:
 * the pages may hold bytes the program must not read (a sanitizer's
 * redzones around a registered malloc buffer), or not be mapped at all. */
static int copy_pages(uint8_t *dst, uintptr_t src, size_t len)
{
	struct iovec local = {.iov_base = dst, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)src, .iov_len = len};
	ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	if (n >= 0 || errno == EFAULT)
		return EFAULT;
	/* process_vm_readv is forbidden here (seccomp): check the pages are
	 * mapped, then copy them directly. */
	unsigned char vec[1];
	for (uintptr_t p = src; p < src + len; p += (uintptr_t)page_size)
		if (mincore((void *)p, (size_t)page_size, vec) && errno == ENOMEM)
			return EFAULT;
	memcpy(dst, (const void *)src, len);
	return 0;
}

/* write_pages writes whole pages of the application's memory into memfd
 * fd at offset off: one copy into the page cache, no mapping of the memfd to
 * fault page by page. A direct system call, as process_vm_readv is, for
 * the same reasons (a sanitizer's write interceptor would check the
 * redzones the pages hold); an unmapped page is EFAULT. */
static int write_pages(int fd, off_t off, uintptr_t src, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = syscall(SYS_pwrite64, fd, (const void *)(src + done), len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return EFAULT;
		done += (size_t)n;
	}
	return 0;
}

/* read_pages reads [off, off+len) of memfd fd into dst (anonymous memory
 * of the library's), a direct system call too. */
static int read_pages(uint8_t *dst, int fd, off_t off, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = syscall(SYS_pread64, fd, dst + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return EIO; /* the memfd is sealed against shrinking: cannot happen */
		done += (size_t)n;
	}
	return 0;
}

/* map_memfd_pages copies the pages into the memfd and maps the memfd over
 * them: registering, and after a fork (below). */
static void map_memfd_pages(void)
{
	struct move_guard g;
	guard_on(&g, job.start, job.len, job.prot, 0);
	int err = write_pages(job.fd, job.off, job.start, job.len);
	if (!err && sys_mmap((void *)job.start, job.len, job.prot, MAP_SHARED | MAP_FIXED, job.fd, job.off) == MAP_FAILED)
		err = errno;
	guard_off(&g, !err);
	job.err = err;
}

/* map_private_pages copies the pages into anonymous memory (job.tmp) and
 * moves it over them: ordinary private memory again. */
static void map_private_pages(void)
{
	struct move_guard g;
	guard_on(&g, job.start, job.len, job.prot, 1);
	int err = job.fd >= 0 ? read_pages(job.tmp, job.fd, job.off, job.len) : copy_pages(job.tmp, job.start, job.len);
	if (!err && job.prot != (PROT_READ | PROT_WRITE) && sys_mprotect(job.tmp, job.len, job.prot))
		err = errno;
	if (!err && sys_mremap(job.tmp, job.len, job.len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)job.start) == MAP_FAILED)
		err = errno;
	guard_off(&g, !err);
	job.err = err;
}

/* The stack below the current frame that a job may still use before it
 * switches stacks (its own calls), and then some. */
#define STACK_MARGIN (64 << 10)

/* on_my_stack reports whether [start, end) may hold the calling thread's
 * live stack: from a little below the current frame to the top of the
 * thread's stack. Not pthread_getattr_np's bottom: for the main thread it
 * derives the bottom from the mapping below the stack, which a registration
 * of stack memory has itself split off. */
static int on_my_stack(uintptr_t start, uintptr_t end)
{
	uintptr_t lo = (uintptr_t)__builtin_frame_address(0) - STACK_MARGIN;
	if (end <= lo)
		return 0; /* below the live stack: no need for its top, which
			   * costs glibc a read of /proc/self/maps for the main thread */
	uintptr_t hi = UINTPTR_MAX; /* unknown: be careful */
	pthread_attr_t a;
	if (pthread_getattr_np(pthread_self(), &a) == 0) {
		void *base = NULL;
		size_t size = 0;
		if (pthread_attr_getstack(&a, &base, &size) == 0)
			hi = (uintptr_t)base + size;
		pthread_attr_destroy(&a);
	}
	return start < hi && end > lo;
}

/* run_job runs fn on job, on a stack of its own when job's pages hold the
 * caller's. */
static void run_job(void (*fn)(void))
{
	if (!on_my_stack(job.start, job.start + job.len)) {
		fn();
		return;
	}
	size_t ssize = 256 << 10;
	void *stack = sys_mmap(NULL, ssize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (stack == MAP_FAILED) {
		job.err = errno;
		return;
	}
	getcontext(&job_ctx);
	job_ctx.uc_stack.ss_sp = stack;
	job_ctx.uc_stack.ss_size = ssize;
	job_ctx.uc_link = &job_caller;
	makecontext(&job_ctx, fn, 0);
	swapcontext(&job_caller, &job_ctx);
	sys_munmap(stack, ssize);
}

/* share_pages maps memfd fd from offset off over [start, start+len), with
 * the pages' contents and protection prot. */
static int share_pages(uintptr_t start, size_t len, int fd, off_t off, int prot)
{
	job = (struct swap_job){.start = start, .len = len, .fd = fd, .off = off, .prot = prot};
	run_job(map_memfd_pages);
	return job.err;
}

/* anon_pages maps len bytes of private anonymous memory, with extra mmap
 * flags, on huge pages of size huge where huge is not 0 and the system
 * has them free, else on ordinary pages: the contents matter, the page
 * size is the best that can be had. */
static void *anon_pages(size_t len, int extra, size_t huge)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | extra;
	if (huge) {
		/* MAP_HUGETLB's page-size bits: log2 of it at MAP_HUGE_SHIFT */
		void *p = sys_mmap(NULL, len, PROT_READ | PROT_WRITE,
				   flags | MAP_HUGETLB | (__builtin_ctzl(huge) << MAP_HUGE_SHIFT), -1, 0);
		if (p != MAP_FAILED)
			return p;
		vrdma_debug("ibv_dereg_mr: no free huge pages of %zu bytes (%s): the memory goes back on ordinary pages",
			    huge, strerror(errno));
	}
	return sys_mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
}

/* move_to_memfd moves [start, start+len) into a new memfd, an ordinary
 * one (the daemon refuses hugetlbfs: SECURITY.md) even for hugetlb pages,
 * which stay on ordinary pages while registered. */
static int move_to_memfd(uintptr_t start, size_t len, int prot, int *fdp)
{
	int fd = memfd_create("vrdma-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return errno;
	if (ftruncate(fd, (off_t)len) || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		int e = errno;
		close(fd);
		return e;
	}
	int rc = share_pages(start, len, fd, 0, prot);
	if (rc) {
		if (rc == EINVAL)
			vrdma_log("ibv_reg_mr: the pages [0x%lx, 0x%lx) cannot be shared with the daemon (huge pages, or a "
				  "special mapping): register ordinary memory (malloc, mmap MAP_ANONYMOUS|MAP_PRIVATE)",
				  (unsigned long)start, (unsigned long)(start + len));
		close(fd);
		return rc;
	}
	*fdp = fd;
	return 0;
}

/* make_private_from makes [start, start+len) private anonymous memory
 * again, with its contents and protection prot: what it was before it was
 * registered. The contents are read from memfd fd at off when fd >= 0 (the
 * pages map it there), otherwise through the pages themselves
 * (make_private). */
static int make_private_from(uintptr_t start, size_t len, int prot, int fd, off_t off, size_t huge)
{
	void *anon = anon_pages(len, MAP_POPULATE, huge);
	if (anon == MAP_FAILED)
		return errno;
	job = (struct swap_job){.start = start, .len = len, .fd = fd, .prot = prot, .tmp = anon, .off = off};
	run_job(map_private_pages);
	if (job.err)
		sys_munmap(anon, len);
	return job.err;
}

static int make_private(uintptr_t start, size_t len, int prot, size_t huge)
{
	return make_private_from(start, len, prot, -1, 0, huge);
}

/* ---- fork ----
 * Registered pages are MAP_SHARED memfd pages: a child would share them
 * with the parent. It gets a private copy instead, taken at the fork, as
 * the kernel gives a child copies of pinned pages: neither process sees the
 * other's later writes, nor the child a peer's WRITE into the parent.
 *
 * before_fork copies each backing into anonymous private memory (b->snap),
 * which the child inherits and moves into place; the parent drops it. A
 * backing on the forking thread's stack cannot wait for the child: parent
 * and child would both run on the shared page between the fork and the
 * move. It is made private in the parent before the fork (the child
 * inherits it copy-on-write) and shared with the daemon again after; a
 * peer's WRITE into it during the fork is lost (docs/design/guest-memory.md).
 * A backing the application unmapped in part (without deregistering) is
 * not copied whole: the child makes private only the pages still in
 * place, copying them after the fork, and leaves alone whatever the
 * application mapped in the others' place. backings_mu is held across the fork, so the child sees no half-made
 * registration. */
static void before_fork(void)
{
	pthread_mutex_lock(&backings_mu);
	for (struct vrdma_backing *b = backings; b; b = b->next) {
		size_t len = b->end - b->start;
		b->snap = NULL;
		b->detached = 0;
		int prot;
		if (!backing_in_place(b, &prot) || prot < 0)
			continue; /* partly unmapped, or mprotected in part: the child copies what is left, piece by piece (below) */
		if (on_my_stack(b->start, b->end)) {
			b->prot = prot; /* shared again with it after the fork */
			b->detached = make_private(b->start, len, prot, b->huge) == 0;
			continue;
		}
		void *snap = anon_pages(len, 0, b->huge);
		if (snap == MAP_FAILED)
			continue; /* the child copies, later: best effort */
		if (copy_pages(snap, b->start, len) || (prot != (PROT_READ | PROT_WRITE) && sys_mprotect(snap, len, prot))) {
			sys_munmap(snap, len);
			continue;
		}
		b->snap = snap;
	}
}

static void after_fork_parent(void)
{
	for (struct vrdma_backing *b = backings; b; b = b->next) {
		size_t len = b->end - b->start;
		if (b->snap)
			sys_munmap(b->snap, len);
		if (b->detached) {
			int rc = share_pages(b->start, len, b->fd, (off_t)b->off, b->prot);
			if (rc)
				vrdma_log("fork: registered memory at 0x%lx, on the forking thread's stack, could not be shared "
					  "with the daemon again (%s): peers' WRITEs to it no longer arrive",
					  (unsigned long)b->start, strerror(rc));
			else if (b->locked)
				sys_mlock((void *)b->start, len);
		}
		b->snap = NULL;
		b->detached = 0;
	}
	pthread_mutex_unlock(&backings_mu);
}

static void after_fork_child(void)
{
	for (struct vrdma_backing *b = backings; b;) {
		size_t len = b->end - b->start;
		if (b->snap) {
			if (sys_mremap(b->snap, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)b->start) == MAP_FAILED)
				sys_munmap(b->snap, len);
		} else if (!b->detached) {
			/* No copy was made before the fork: the pages still in
			 * place become private, whatever the application mapped
			 * in place of the others stays as it is. */
			release_in_place(b);
		}
		struct vrdma_backing *next = b->next;
		close(b->fd);
		free(b);
		b = next;
	}
	backings = NULL;
	pthread_mutex_init(&backings_mu, NULL);
}

/* ---- which pages are what ---- */

/* The kernel's description of one mapping (a VMA), as the PROCMAP_QUERY
 * ioctl on /proc/self/maps gives it (Linux 6.11 and later; the layout is
 * the kernel's ABI, include/uapi/linux/fs.h), or as vma_at reads it from
 * the text of /proc/self/maps on older kernels. */
struct vma_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define VMA_QUERY_IOCTL _IOWR('f', 17, struct vma_query)
#define VMA_READABLE 0x01
#define VMA_WRITABLE 0x02
#define VMA_EXECUTABLE 0x04
#define VMA_SHARED 0x08
#define VMA_COVERING_OR_NEXT 0x10 /* query_flags: the mapping at the address, or the next one above it */

/* Set once the kernel refused PROCMAP_QUERY: read the text instead. A test
 * build defines VRDMA_MEM_MAPS_TEXT to take that path on any kernel. */
#ifdef VRDMA_MEM_MAPS_TEXT
static int no_vma_ioctl = 1;
#else
static int no_vma_ioctl;
#endif

/* maps_line fills q from one line of /proc/self/maps ("start-end perms
 * offset major:minor inode [path]"): 1 if it holds addr, 0 if not, -1 if
 * it starts above addr (the lines are in address order). */
static int maps_line(const char *line, uintptr_t addr, int next, struct vma_query *q)
{
	unsigned long long start, end, off, ino;
	unsigned int maj, min;
	char perms[5];
	int pathat = 0;
	if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj, &min, &ino, &pathat) < 7)
		return 0;
	if (start > addr && !next)
		return -1;
	if (addr >= end)
		return 0;
	const char *path = pathat > 0 ? line + pathat : "";
	q->vma_start = start;
	q->vma_end = end;
	q->vma_offset = off;
	q->inode = ino;
	q->dev_major = maj;
	q->dev_minor = min;
	q->vma_flags = (perms[0] == 'r' ? VMA_READABLE : 0) | (perms[1] == 'w' ? VMA_WRITABLE : 0) |
		       (perms[2] == 'x' ? VMA_EXECUTABLE : 0) | (perms[3] == 's' ? VMA_SHARED : 0);
	/* The text does not give the page size: MAP_HUGETLB memory is named
	 * so, and hugetlbfs is mounted there by convention. */
	int huge = strstr(path, "anon_hugepage") != NULL || strncmp(path, "/dev/hugepages/", 15) == 0;
	q->vma_page_size = huge ? (uint64_t)2 << 20 : (uint64_t)page_size;
	return 1;
}

/* maps_text_at finds addr's mapping in the text of /proc/self/maps (fd),
 * or with next the first one above addr when none holds it. */
static int maps_text_at(int fd, uintptr_t addr, int next, struct vma_query *q)
{
	char buf[8192]; /* a line is at most a path (4096) and its fields */
	size_t have = 0;
	off_t off = 0;
	for (;;) {
		ssize_t n = pread(fd, buf + have, sizeof buf - 1 - have, off);
		if (n < 0)
			return errno;
		off += n;
		have += (size_t)n;
		size_t used = 0;
		char *nl;
		while ((nl = memchr(buf + used, '\n', have - used)) != NULL) {
			*nl = '\0';
			int r = maps_line(buf + used, addr, next, q);
			if (r)
				return r > 0 ? 0 : ENOENT;
			used = (size_t)(nl - buf) + 1;
		}
		if (n == 0)
			return ENOENT;
		memmove(buf, buf + used, have - used);
		have -= used;
		if (have == sizeof buf - 1)
			return EIO; /* a line longer than any the kernel writes */
	}
}

/* vma_open opens /proc/self/maps for vma_at, or returns -1 (no /proc). */
static int vma_open(void) { return open("/proc/self/maps", O_RDONLY | O_CLOEXEC); }

/* vma_query describes the mapping that holds addr (with next: or the
 * first one above it): 0, ENOENT where there is none, or another errno. */
static int vma_query(int fd, uintptr_t addr, int next, struct vma_query *q)
{
	uint64_t flags = next ? VMA_COVERING_OR_NEXT : 0;
	*q = (struct vma_query){.size = sizeof *q, .query_flags = flags, .query_addr = addr};
	if (!__atomic_load_n(&no_vma_ioctl, __ATOMIC_RELAXED)) {
		if (ioctl(fd, VMA_QUERY_IOCTL, q) == 0)
			return 0;
		if (errno != ENOTTY && errno != EINVAL)
			return errno;
		__atomic_store_n(&no_vma_ioctl, 1, __ATOMIC_RELAXED);
		*q = (struct vma_query){.size = sizeof *q, .query_flags = flags, .query_addr = addr};
	}
	return maps_text_at(fd, addr, next, q);
}

/* vma_at describes the mapping that holds addr (ENOENT: nothing is mapped there). */
static int vma_at(int fd, uintptr_t addr, struct vma_query *q) { return vma_query(fd, addr, 0, q); }

/* vma_from finds the mapping at addr, or the next one above it (ENOENT: none). */
static int vma_from(int fd, uintptr_t addr, struct vma_query *q) { return vma_query(fd, addr, 1, q); }

/* vma_prot is the protection (PROT_*) of the mapping q describes. */
static int vma_prot(const struct vma_query *q)
{
	return (q->vma_flags & VMA_READABLE ? PROT_READ : 0) | (q->vma_flags & VMA_WRITABLE ? PROT_WRITE : 0) |
	       (q->vma_flags & VMA_EXECUTABLE ? PROT_EXEC : 0);
}

/* backing_in_place reports whether b's pages are still its memfd's at its
 * address: the application may have unmapped them (free, munmap) and
 * mapped other memory there since, without deregistering. Every mapping
 * over them must map its memfd (its inode), at the place. With prot, it
 * also gives the protection the pages have now (the application may have
 * changed it since: mprotect), or -1 where it differs between them.
 * Without /proc the table is trusted. */
static int backing_in_place(const struct vrdma_backing *b, int *prot)
{
	if (prot)
		*prot = b->prot;
	int vfd = vma_open();
	if (vfd < 0)
		return 1;
	int ok = 1;
	struct vma_query q;
	for (uintptr_t at = b->start; ok && at < b->end; at = (uintptr_t)q.vma_end) {
		ok = vma_at(vfd, at, &q) == 0 && (q.vma_flags & VMA_SHARED) && q.inode == b->ino &&
		     q.vma_offset + (at - q.vma_start) == b->off + (at - b->start);
		if (ok && prot)
			*prot = at == b->start || *prot == vma_prot(&q) ? vma_prot(&q) : -1;
	}
	close(vfd);
	return ok;
}

/* ---- registering ---- */

/* backing_unlink takes b off the list; backings_mu held. */
static void backing_unlink(struct vrdma_backing *b)
{
	for (struct vrdma_backing **pp = &backings; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			return;
		}
}

/* release_piece makes [start, end) of b, still mapping b's memfd at its
 * place, ordinary memory again with its contents and protection prot: a
 * later fork copies it as usual, and an munmap frees it. */
static void release_piece(const struct vrdma_backing *b, uintptr_t start, uintptr_t end, int prot)
{
	/* The pages map b's memfd there (release_in_place checked): their
	 * contents are read from the memfd, not through the mapping. No
	 * munlock before: the private pages replace the locked mapping, and
	 * unmapping it unlocks. */
	int rc = make_private_from(start, end - start, prot, b->fd, (off_t)(b->off + (start - b->start)), b->huge);
	if (rc) {
		sys_munlock((void *)start, end - start);
		vrdma_debug("ibv_dereg_mr: memory at 0x%lx stays shared with the daemon (%s)", (unsigned long)start,
			    strerror(rc));
	}
}

/* release_in_place releases every run of b's pages that still maps its
 * memfd at its place. That is all of them, unless the application
 * unmapped some without deregistering: a heap that shrinks (brk) takes a
 * backing's tail and leaves the rest, which must not stay shared and
 * forgotten (a later registration of those pages would find memory shared
 * with another process, and a fork would share it with the child). */
static void release_in_place(const struct vrdma_backing *b)
{
	if (b->pieces_made)
		return; /* what was in place is its pieces', released with them */
	int vfd = vma_open();
	if (vfd < 0) { /* no /proc: the table is trusted */
		release_piece(b, b->start, b->end, b->prot);
		return;
	}
	struct vma_query q;
	for (uintptr_t at = b->start; at < b->end && vma_from(vfd, at, &q) == 0 && q.vma_start < b->end;) {
		uintptr_t s = at > q.vma_start ? at : (uintptr_t)q.vma_start;
		uintptr_t e = q.vma_end < b->end ? (uintptr_t)q.vma_end : b->end;
		if ((q.vma_flags & VMA_SHARED) && q.inode == b->ino &&
		    q.vma_offset + (s - q.vma_start) == b->off + (s - b->start)) {
			release_piece(b, s, e, vma_prot(&q));
		}
		at = e;
	}
	close(vfd);
}

static void backing_put(struct vrdma_backing *b)
{
	if (--b->refs > 0)
		return;
	backing_unlink(b);
	release_in_place(b);
	for (struct vrdma_backing *pc = b->pieces, *next; pc; pc = next) {
		next = pc->piece_next;
		backing_put(pc);
	}
	close(b->fd);
	free(b);
}

/* split_in_place hands the pages of stale backing b still in place, each
 * run of them, to new backings of b's memfd at the same offsets (its
 * pieces, which b holds while it lives): a later registration reuses
 * them, so it reaches the very pages b's MRs reach, as with rdma-core.
 * All or nothing: on failure b keeps them (and they cannot be registered
 * again until its MRs are gone). backings_mu held. */
static void split_in_place(struct vrdma_backing *b)
{
	int vfd = vma_open();
	if (vfd < 0)
		return;
	struct vrdma_backing *made = NULL;
	int ok = 1;
	struct vma_query q;
	for (uintptr_t at = b->start; ok && at < b->end && vma_from(vfd, at, &q) == 0 && q.vma_start < b->end;) {
		uintptr_t s = at > q.vma_start ? at : (uintptr_t)q.vma_start;
		uintptr_t e = q.vma_end < b->end ? (uintptr_t)q.vma_end : b->end;
		if ((q.vma_flags & VMA_SHARED) && q.inode == b->ino &&
		    q.vma_offset + (s - q.vma_start) == b->off + (s - b->start)) {
			struct vrdma_backing *pc = calloc(1, sizeof *pc);
			int fd = pc ? fcntl(b->fd, F_DUPFD_CLOEXEC, 0) : -1;
			if (fd < 0) {
				free(pc);
				ok = 0;
				break;
			}
			*pc = (struct vrdma_backing){.start = s, .end = e, .fd = fd, .off = b->off + (s - b->start),
						     .ino = b->ino, .refs = 1, .prot = vma_prot(&q), .locked = b->locked, .huge = b->huge,
						     .piece_next = made};
			made = pc;
		}
		at = e;
	}
	close(vfd);
	if (!ok) {
		for (struct vrdma_backing *pc = made, *next; pc; pc = next) {
			next = pc->piece_next;
			close(pc->fd);
			free(pc);
		}
		return;
	}
	for (struct vrdma_backing *pc = made; pc; pc = pc->piece_next) {
		pc->next = backings;
		backings = pc;
	}
	b->pieces = made;
	b->pieces_made = 1;
}

/* lock_pages locks [start, end) in RAM (mlock), with the memlock
 * message when the limit forbids it; 0 or ENOMEM. */
static int lock_pages(uintptr_t start, uintptr_t end)
{
	if (!sys_mlock((void *)start, end - start))
		return 0;
	struct rlimit rl = {0};
	getrlimit(RLIMIT_MEMLOCK, &rl);
	vrdma_log("ibv_reg_mr: cannot lock %zu bytes of registered memory (RLIMIT_MEMLOCK is %llu bytes): "
		  "raise it with `ulimit -l unlimited` or in /etc/security/limits.conf, or register it with "
		  "IBV_ACCESS_ON_DEMAND, which locks nothing",
		  (size_t)(end - start), (unsigned long long)rl.rlim_cur);
	return ENOMEM;
}

/* backing_new moves [start, end) into a backing of its own with
 * protection prot, locked unless odp (an on-demand registration: its
 * pages stay pageable, docs/design/odp.md); backings_mu held. */
static int backing_new(uintptr_t start, uintptr_t end, int prot, int odp, size_t huge, struct vrdma_backing **out)
{
	struct vrdma_backing *b = calloc(1, sizeof *b);
	if (!b)
		return ENOMEM;
	int rc = move_to_memfd(start, end - start, prot, &b->fd);
	if (rc) {
		free(b);
		return rc;
	}
	if (!odp && lock_pages(start, end)) {
		/* Private again, as before: left a shared memfd, a fork would
		 * share the pages (and their other bytes) with the child. */
		make_private(start, end - start, prot, huge);
		close(b->fd);
		free(b);
		return ENOMEM;
	}
	struct stat st;
	b->ino = fstat(b->fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
	b->start = start;
	b->end = end;
	b->prot = prot;
	b->huge = huge;
	b->locked = !odp;
	b->refs = 1;
	b->next = backings;
	backings = b;
	*out = b;
	return 0;
}

/* overlapping collects, in address order, the live backings that share
 * pages with [start, end), up to max; it returns how many there are
 * (maybe more than max). Backings the application unmapped since, wholly
 * or in part, are marked stale on the way and never reused: their MRs
 * keep them, what of them is still in place goes to pieces of their own
 * (split_in_place), which are reused, and they stay on the list until
 * their last MR is gone. backings_mu held. */
static int overlapping(uintptr_t start, uintptr_t end, struct vrdma_backing **out, int max)
{
	for (struct vrdma_backing *b = backings; b; b = b->next)
		if (!b->stale && b->end > start && b->start < end && !backing_in_place(b, NULL)) {
			b->stale = 1;
			split_in_place(b); /* its pieces go at the list's head: seen below */
		}
	int n = 0;
	for (struct vrdma_backing *b = backings; b; b = b->next) {
		if (b->stale || b->end <= start || b->start >= end)
			continue;
		if (n < max) {
			int i = n;
			for (; i > 0 && out[i - 1]->start > b->start; i--)
				out[i] = out[i - 1];
			out[i] = b;
		}
		n++;
	}
	return n;
}

/* gap_run finds how much of [at, end), pages not moved yet, lies in one
 * mapping, so has the protection of its first page (*run bytes; *prot is
 * that protection: read, and write and execute where the mapping has
 * them), and refuses memory the library cannot move without changing what the
 * application sees: shared mappings (a file's, or memory shared with other
 * processes), which would no longer reach their file or the other
 * processes, and huge pages. */
static int gap_run(uintptr_t at, uintptr_t end, size_t *run, int *prot, size_t *huge)
{
	*huge = 0;
	int vfd = vma_open();
	if (vfd < 0) {
		*prot = PROT_READ | PROT_WRITE; /* no /proc: private and writable, as it was taken before */
		*run = end - at;
		return 0;
	}
	struct vma_query q;
	int rc = vma_at(vfd, at, &q);
	close(vfd);
	if (rc == ENOENT || (!rc && !(q.vma_flags & VMA_READABLE)))
		return EFAULT; /* nothing mapped there, or nothing to read: as the kernel */
	if (rc)
		return rc;
	if (q.vma_flags & VMA_SHARED) {
		vrdma_log("ibv_reg_mr: the memory at 0x%lx is a shared mapping (MAP_SHARED: a file's, or shared with "
			  "other processes), which vrdma cannot register without cutting it off from the file or the "
			  "other processes: register private memory (malloc, mmap MAP_PRIVATE|MAP_ANONYMOUS)",
			  (unsigned long)at);
		return EINVAL;
	}
	if (q.vma_page_size > (uint64_t)page_size) {
		/* hugetlb memory (MAP_HUGETLB, hugetlbfs): moved whole huge
		 * pages at a time, a hugetlb mapping cannot be split at a
		 * small page (docs/design/guest-memory.md) */
		if (q.vma_page_size & (q.vma_page_size - 1) || (q.vma_start | q.vma_end) & (q.vma_page_size - 1)) {
			vrdma_log("ibv_reg_mr: the memory at 0x%lx is on huge pages of %llu bytes, a size vrdma cannot "
				  "register: register memory on ordinary or 2 MiB pages",
				  (unsigned long)at, (unsigned long long)q.vma_page_size);
			return EINVAL;
		}
		*huge = (size_t)q.vma_page_size;
	}
	*prot = PROT_READ | (q.vma_flags & VMA_WRITABLE ? PROT_WRITE : 0) | (q.vma_flags & VMA_EXECUTABLE ? PROT_EXEC : 0);
	*run = (size_t)((q.vma_end < end ? q.vma_end : end) - at);
	return 0;
}

/* backings_get fills mr->backings with the backings that hold [start,
 * end): those of pages moved before, and new ones for the pages between
 * them. Access that lets anything write the memory needs writable pages,
 * as the kernel's ibv_reg_mr does (EFAULT). backings_mu held. */
static int backings_get(uintptr_t start, uintptr_t end, unsigned int access, struct vrdma_mr *mr)
{
	enum { MAXB = VRDMA_PROTO_MAX_FDS };
	struct vrdma_backing *old[MAXB];
	int nold = overlapping(start, end, old, MAXB);
	int writes = (access & IBV_ACCESS_LOCAL_WRITE) != 0;
	int odp = (access & IBV_ACCESS_ON_DEMAND) != 0;
	int n = 0, rc = 0;
	struct vrdma_backing *got[MAXB];
	if (nold > MAXB)
		goto too_many;
	uintptr_t at = start;
	for (int i = 0; i <= nold && at < end; i++) {
		uintptr_t gap_end = i < nold ? old[i]->start : end;
		while (at < gap_end) {
			int prot = PROT_READ | PROT_WRITE;
			size_t run, huge;
			rc = gap_run(at, gap_end, &run, &prot, &huge);
			if (rc)
				goto fail;
			uintptr_t bstart = at, bend = at + run;
			if (huge) {
				/* whole huge pages: the mapping (and any backing
				 * in it) starts and ends on their boundaries */
				bstart = at & ~((uintptr_t)huge - 1);
				bend = (bend + (uintptr_t)huge - 1) & ~((uintptr_t)huge - 1);
			}
			if (writes && !(prot & PROT_WRITE)) {
				vrdma_log("ibv_reg_mr: the memory at 0x%lx is read-only, and the access asked lets it be "
					  "written: register it without IBV_ACCESS_LOCAL_WRITE (and remote write and atomic)",
					  (unsigned long)at);
				rc = EFAULT;
				goto fail;
			}
			if (n == MAXB)
				goto too_many;
			rc = backing_new(bstart, bend, prot, odp, huge, &got[n]);
			if (rc)
				goto fail;
			n++;
			at = bend;
		}
		if (i < nold) {
			if (writes && !(old[i]->prot & PROT_WRITE)) {
				vrdma_log("ibv_reg_mr: the memory at 0x%lx is read-only, and the access asked lets it be "
					  "written: register it without IBV_ACCESS_LOCAL_WRITE (and remote write and atomic)",
					  (unsigned long)old[i]->start);
				rc = EFAULT;
				goto fail;
			}
			if (n == MAXB)
				goto too_many;
			if (!odp && !old[i]->locked) {
				/* moved by on-demand registrations only: this one pins */
				rc = lock_pages(old[i]->start, old[i]->end);
				if (rc)
					goto fail;
				old[i]->locked = 1;
			}
			old[i]->refs++;
			got[n++] = old[i];
			at = old[i]->end;
		}
	}
	mr->nbackings = n;
	memcpy(mr->backings, got, (size_t)n * sizeof got[0]);
	return 0;
too_many:
	vrdma_log("ibv_reg_mr: [0x%lx, 0x%lx) spans more than %d pieces of memory registered separately before: "
		  "register the larger buffer first, or fewer pieces inside it",
		  (unsigned long)start, (unsigned long)end, MAXB);
	rc = EINVAL;
fail:
	for (int i = n - 1; i >= 0; i--)
		backing_put(got[i]);
	return rc;
}

#define ACCESS_SUPPORTED                                                                             \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |     \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND)

/* segments_json writes the request's list of segments: for each backing,
 * the part of it that holds [start, end). */
static void segments_json(const struct vrdma_mr *mr, uintptr_t start, uintptr_t end, char *out, size_t cap)
{
	size_t o = (size_t)snprintf(out, cap, "[");
	for (int i = 0; i < mr->nbackings && o < cap; i++) {
		const struct vrdma_backing *b = mr->backings[i];
		uintptr_t lo = b->start > start ? b->start : start, hi = b->end < end ? b->end : end;
		o += (size_t)snprintf(out + o, cap - o, "%s{\"offset\":%llu,\"length\":%llu}", i ? "," : "",
				      (unsigned long long)(b->off + (lo - b->start)), (unsigned long long)(hi - lo));
	}
	if (o < cap)
		snprintf(out + o, cap - o, "]");
}

static void backings_put(struct vrdma_mr *mr)
{
	for (int i = mr->nbackings - 1; i >= 0; i--)
		backing_put(mr->backings[i]);
	mr->nbackings = 0;
}

/* access_valid: what ibv_reg_mr accepts (IBV_ACCESS_OPTIONAL_RANGE is
 * taken off before). */
static int access_valid(unsigned int access)
{
	return !(access & ~ACCESS_SUPPORTED) &&
	       !((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE));
}

/* mr_register registers [addr, addr+length) with the daemon into mr: its
 * backings (taken here), handle, keys, access and iova; the ibv_mr is the
 * caller's to fill. With rereg (a region's handle, not 0) the daemon puts
 * the registration in that region's place, under its keys. 0 or the errno;
 * on error mr holds no backings. */
static int mr_register(struct vrdma_context *ctx, const struct vrdma_pd *pd, void *addr, size_t length, uint64_t iova,
		       unsigned int access, uint32_t rereg, struct vrdma_mr *mr)
{
	uintptr_t start = (uintptr_t)addr & ~((uintptr_t)page_size - 1);
	uintptr_t end = ((uintptr_t)addr + length + (uintptr_t)page_size - 1) & ~((uintptr_t)page_size - 1);
	pthread_mutex_lock(&backings_mu);
	int rc = backings_get(start, end, access, mr);
	if (rc) {
		pthread_mutex_unlock(&backings_mu);
		return rc;
	}
	struct vj_doc doc = {0};
	int fds[VRDMA_PROTO_MAX_FDS];
	for (int i = 0; i < mr->nbackings; i++)
		fds[i] = mr->backings[i]->fd;
	char segs[96 * VRDMA_PROTO_MAX_FDS]; /* a segment takes at most 64 bytes */
	segments_json(mr, start, end, segs, sizeof segs);
	char which[32] = "";
	if (rereg)
		snprintf(which, sizeof which, "\"handle\":%u,", rereg);
	rc = vrdma_cmd(ctx, rereg ? VRDMA_CMD_REREG_MR : VRDMA_CMD_REG_MR, &doc, fds, mr->nbackings, NULL, NULL,
		       "{%s\"pd\":%u,\"addr\":%llu,\"length\":%llu,\"offset\":%llu,\"access\":%u,\"segments\":%s}",
		       which, pd->handle, (unsigned long long)iova, (unsigned long long)length,
		       (unsigned long long)((uintptr_t)addr - start), access, segs);
	uint64_t h = 0, lkey = 0, rkey = 0;
	if (!rc) {
		if (vj_get_u64(&doc, 0, "handle", &h) || vj_get_u64(&doc, 0, "lkey", &lkey) ||
		    vj_get_u64(&doc, 0, "rkey", &rkey))
			rc = EPROTO;
		vrdma_doc_free(&doc);
	}
	if (rc) {
		if (rc == ENOMEM)
			vrdma_log("ibv_reg_mr of %zu bytes: %s", length, ctx->chan.err);
		backings_put(mr);
		pthread_mutex_unlock(&backings_mu);
		return rc;
	}
	pthread_mutex_unlock(&backings_mu);
	mr->handle = (uint32_t)h;
	mr->lkey = (uint32_t)lkey;
	mr->rkey = (uint32_t)rkey;
	mr->access = access;
	mr->iova = iova;
	return 0;
}

/* live_mrs: every MR the process has registered and not deregistered,
 * for ibv_advise_mr (vrdma_mr_span); backings_mu. */
static struct vrdma_mr *live_mrs;

static void live_add(struct vrdma_mr *mr)
{
	pthread_mutex_lock(&backings_mu);
	mr->live_next = live_mrs;
	live_mrs = mr;
	pthread_mutex_unlock(&backings_mu);
}

/* live_remove; backings_mu held. */
static void live_remove(struct vrdma_mr *mr)
{
	for (struct vrdma_mr **p = &live_mrs; *p; p = &(*p)->live_next)
		if (*p == mr) {
			*p = mr->live_next;
			return;
		}
}

/* vrdma_mr_span finds the MR of pd with lkey and says where the
 * length bytes at iova of it are in the process's memory (*va) and with
 * what access it was registered: 0, or ENOENT when pd has no MR with that
 * key, EINVAL when the bytes are not all inside it. */
int vrdma_mr_span(struct ibv_pd *pd, uint32_t lkey, uint64_t iova, uint32_t length, unsigned int *access, void **va)
{
	int rc = ENOENT;
	pthread_mutex_lock(&backings_mu);
	for (struct vrdma_mr *mr = live_mrs; mr; mr = mr->live_next) {
		if (mr->lkey != lkey || mr->ibmr.pd != pd)
			continue;
		rc = EINVAL;
		if (iova >= mr->iova && length <= mr->ibmr.length && iova - mr->iova <= mr->ibmr.length - length) {
			*access = mr->access;
			*va = (uint8_t *)mr->ibmr.addr + (iova - mr->iova);
			rc = 0;
		}
		break;
	}
	pthread_mutex_unlock(&backings_mu);
	return rc;
}


/* ---- implicit on-demand MRs (docs/design/odp-implicit.md) ----
 * ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND | ...) registers the
 * whole address space on a device. The daemon reaches only the memory the
 * library hands it, so an implicit MR is, at the daemon, a registration of
 * one page of the library's own (its keys are the MR's) and, in the
 * library, a set of children: explicit on-demand MRs of the same PD and
 * access over the pages the process's own work requests (or ibv_advise_mr)
 * name with the implicit MR's lkey, registered when first named, in the
 * posting thread, as a device faults pages in. A post then hands the
 * daemon the child's lkey. Bytes no child can cover (memory not mapped)
 * keep the implicit MR's lkey, whose one page does not hold them: the
 * request completes with a local protection error, as on a device. */
#define VRDMA_IMPLICIT_MAX_CHILDREN 4096

struct vrdma_implicit {
	struct vrdma_mr *mr; /* the implicit MR (its sentinel registration) */
	void *page;          /* the sentinel page, the library's own */
	pthread_mutex_t mu;  /* children */
	struct ibv_mr **children;
	int nchildren, cap;
	struct vrdma_implicit *next;
};

static pthread_mutex_t implicit_mu = PTHREAD_MUTEX_INITIALIZER; /* implicits */
static struct vrdma_implicit *implicits;

/* child_find returns the child of im covering [start, end), or NULL; im->mu held. */
static struct ibv_mr *child_find(struct vrdma_implicit *im, uintptr_t start, uintptr_t end)
{
	for (int i = 0; i < im->nchildren; i++) {
		struct ibv_mr *c = im->children[i];
		if (start >= (uintptr_t)c->addr && end <= (uintptr_t)c->addr + c->length)
			return c;
	}
	return NULL;
}

/* child_add registers the pages of [start, end) as a child of im: the
 * child, or NULL (not mapped, out of children, the daemon's refusal); im->mu held. */
static struct ibv_mr *child_add(struct vrdma_implicit *im, uintptr_t start, uintptr_t end)
{
	if (im->nchildren == VRDMA_IMPLICIT_MAX_CHILDREN)
		return NULL;
	if (im->nchildren == im->cap) {
		int cap = im->cap ? im->cap * 2 : 16;
		struct ibv_mr **c = realloc(im->children, (size_t)cap * sizeof *c);
		if (!c)
			return NULL;
		im->children = c;
		im->cap = cap;
	}
	uintptr_t ps = (uintptr_t)page_size;
	uintptr_t s0 = start & ~(ps - 1), e0 = (end + ps - 1) & ~(ps - 1);
	struct ibv_mr *c = ibv_reg_mr_iova2(im->mr->ibmr.pd, (void *)s0, e0 - s0, s0, im->mr->access);
	if (!c) {
		vrdma_debug("implicit MR 0x%x: the pages of 0x%llx..0x%llx cannot be registered (%s): requests naming "
			    "them complete with a local protection error",
			    im->mr->lkey, (unsigned long long)start, (unsigned long long)end, strerror(errno));
		return NULL;
	}
	im->children[im->nchildren++] = c;
	return c;
}

/* implicit_lkey is the resolver (vrdma_implicit_resolver, verbs_int.h). */
static uint32_t implicit_lkey(struct ibv_context *context, const struct ibv_sge *sg, int may_register)
{
	if (sg->length == 0 || sg->addr + sg->length < sg->addr)
		return sg->lkey;
	pthread_mutex_lock(&implicit_mu);
	struct vrdma_implicit *im = implicits;
	while (im && (im->mr->lkey != sg->lkey || im->mr->ibmr.context != context))
		im = im->next;
	uint32_t lkey = sg->lkey;
	if (im) {
		uintptr_t start = (uintptr_t)sg->addr, end = start + sg->length;
		pthread_mutex_lock(&im->mu);
		struct ibv_mr *c = child_find(im, start, end);
		if (!c && may_register)
			c = child_add(im, start, end);
		if (c)
			lkey = c->lkey;
		pthread_mutex_unlock(&im->mu);
	}
	pthread_mutex_unlock(&implicit_mu);
	return lkey;
}

/* reg_implicit is ibv_reg_mr(pd, NULL, SIZE_MAX, access) with
 * IBV_ACCESS_ON_DEMAND: the MR, or NULL with errno. */
static struct ibv_mr *reg_implicit(struct ibv_pd *pd, unsigned int access)
{
	struct vrdma_implicit *im = calloc(1, sizeof *im);
	if (!im) {
		errno = ENOMEM;
		return NULL;
	}
	im->page = sys_mmap(NULL, (size_t)page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *s = im->page == MAP_FAILED ? NULL
						  : ibv_reg_mr_iova2(pd, im->page, (size_t)page_size, (uintptr_t)im->page, access);
	if (!s) {
		int rc = errno;
		if (im->page != MAP_FAILED)
			sys_munmap(im->page, (size_t)page_size);
		free(im);
		errno = rc;
		return NULL;
	}
	im->mr = (struct vrdma_mr *)s;
	pthread_mutex_init(&im->mu, NULL);
	s->addr = NULL; /* as a device's implicit MR: the whole address space */
	s->length = SIZE_MAX;
	im->mr->iova = 0;
	im->mr->implicit = im;
	pthread_mutex_lock(&implicit_mu);
	im->next = implicits;
	implicits = im;
	atomic_store(&vrdma_implicit_resolver, implicit_lkey); /* before the count posts read */
	atomic_fetch_add(&vrdma_implicit_count, 1);
	pthread_mutex_unlock(&implicit_mu);
	return s;
}

/* dereg_implicit deregisters im's children and forgets im (ibv_dereg_mr
 * then deregisters the sentinel): 0, or the errno of a child the daemon
 * keeps (a window bound to it), the children left as they were. */
static int dereg_implicit(struct vrdma_implicit *im)
{
	pthread_mutex_lock(&implicit_mu);
	pthread_mutex_lock(&im->mu);
	int rc = 0;
	while (im->nchildren > 0 && !(rc = ibv_dereg_mr(im->children[im->nchildren - 1])))
		im->nchildren--;
	pthread_mutex_unlock(&im->mu);
	if (!rc) {
		for (struct vrdma_implicit **p = &implicits; *p; p = &(*p)->next)
			if (*p == im) {
				*p = im->next;
				break;
			}
		atomic_fetch_sub(&vrdma_implicit_count, 1);
	}
	pthread_mutex_unlock(&implicit_mu);
	return rc;
}

/* implicit_free frees im once its sentinel is deregistered. */
static void implicit_free(struct vrdma_implicit *im)
{
	sys_munmap(im->page, (size_t)page_size);
	pthread_mutex_destroy(&im->mu);
	free(im->children);
	free(im);
}

VRDMA_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *ibpd, void *addr, size_t length, uint64_t iova,
					     unsigned int access)
{
	struct vrdma_pd *pd = (struct vrdma_pd *)ibpd;
	struct vrdma_context *ctx = to_vctx(ibpd->context);
	vrdma_mem_init();
	/* optional: ignored where unsupported; IBV_ACCESS_HUGETLB only says
	 * the memory is on huge pages, which the library finds itself */
	access &= ~(unsigned int)(IBV_ACCESS_OPTIONAL_RANGE | IBV_ACCESS_HUGETLB);
	if (!addr && length == SIZE_MAX && iova == 0 && (access & IBV_ACCESS_ON_DEMAND) && access_valid(access))
		return reg_implicit(ibpd, access);
	if (length == 0 || !addr || (uintptr_t)addr + length < (uintptr_t)addr || !access_valid(access)) {
		errno = EINVAL;
		return NULL;
	}
	struct vrdma_mr *mr = calloc(1, sizeof *mr);
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = mr_register(ctx, pd, addr, length, iova, access, 0, mr);
	if (rc) {
		free(mr);
		errno = rc;
		return NULL;
	}
	mr->ibmr.context = ibpd->context;
	mr->ibmr.pd = ibpd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	mr->ibmr.handle = mr->handle;
	mr->ibmr.lkey = mr->lkey;
	mr->ibmr.rkey = mr->rkey;
	live_add(mr);
	vrdma_live(ctx, 1);
	return &mr->ibmr;
}

VRDMA_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

VRDMA_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

VRDMA_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct vrdma_mr *mr = (struct vrdma_mr *)ibmr;
	struct vrdma_implicit *im = mr->implicit;
	if (im) {
		int crc = dereg_implicit(im);
		if (crc)
			return crc;
	}
	int rc = vrdma_cmd_simple(to_vctx(ibmr->context), VRDMA_CMD_DEREG_MR, mr->handle);
	if (vrdma_destroy_kept(to_vctx(ibmr->context), rc))
		return rc; /* an implicit MR keeps its keys; its children are registered again when named */
	if (im)
		implicit_free(im);
	pthread_mutex_lock(&backings_mu);
	live_remove(mr);
	backings_put(mr);
	pthread_mutex_unlock(&backings_mu);
	vrdma_live(to_vctx(ibmr->context), -1);
	free(mr);
	return 0;
}

/* ibv_rereg_mr: rdma-core's checks first (IBV_REREG_MR_ERR_INPUT, errno
 * EINVAL), then the kernel's, and the change itself: the MR's new range,
 * PD or access goes to the daemon as a registration (its pages moved to
 * memfd backings as ibv_reg_mr's, docs/design/guest-memory.md) that takes
 * the old region's place under the same keys, as rdma_rxe keeps them;
 * then the old backings are let go. A failure is IBV_REREG_MR_ERR_CMD with
 * errno, the MR unchanged. Both regions are charged for a moment: a tenant
 * at its locked-memory limit may be refused a re-registration it could
 * make with a deregistration first. */
VRDMA_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *ibpd, void *addr, size_t length, int access)
{
	struct vrdma_mr *mr = (struct vrdma_mr *)ibmr;
	if (mr->implicit) {
		vrdma_debug("ibv_rereg_mr: an implicit on-demand MR cannot be re-registered: deregister it and register anew");
		errno = EOPNOTSUPP;
		return IBV_REREG_MR_ERR_INPUT;
	}
	int moves = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0;
	if ((flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) || (moves && (!length || !addr)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	struct vrdma_context *ctx = to_vctx(ibmr->context);
	struct ibv_pd *pd = (flags & IBV_REREG_MR_CHANGE_PD) ? ibpd : ibmr->pd;
	void *naddr = moves ? addr : ibmr->addr;
	size_t nlength = moves ? length : ibmr->length;
	uint64_t iova = moves ? (uintptr_t)addr : mr->iova;
	unsigned int naccess = (flags & IBV_REREG_MR_CHANGE_ACCESS)
				       ? (unsigned int)access & ~(unsigned int)(IBV_ACCESS_OPTIONAL_RANGE | IBV_ACCESS_HUGETLB)
				       : mr->access;
	int rc = 0;
	if (!flags || !pd || pd->context != ibmr->context || !access_valid(naccess) ||
	    (uintptr_t)naddr + nlength < (uintptr_t)naddr)
		rc = EINVAL; /* what the kernel refuses: no change asked, a PD of another device */
	struct vrdma_mr next = {.nbackings = 0};
	if (!rc)
		rc = mr_register(ctx, (struct vrdma_pd *)pd, naddr, nlength, iova, naccess, mr->handle, &next);
	if (rc) {
		errno = rc;
		return IBV_REREG_MR_ERR_CMD;
	}
	pthread_mutex_lock(&backings_mu);
	backings_put(mr);
	mr->handle = next.handle;
	mr->lkey = next.lkey;
	mr->rkey = next.rkey;
	mr->access = next.access;
	mr->iova = next.iova;
	mr->nbackings = next.nbackings;
	memcpy(mr->backings, next.backings, (size_t)next.nbackings * sizeof next.backings[0]);
	ibmr->pd = pd;
	ibmr->addr = naddr;
	ibmr->length = nlength;
	ibmr->handle = mr->handle;
	ibmr->lkey = mr->lkey;
	ibmr->rkey = mr->rkey;
	pthread_mutex_unlock(&backings_mu); /* vrdma_mr_span reads them under it */
	return 0;
}

/* ibv_fork_init: as rdma-core on a kernel that copies pinned pages for a
 * child (Linux 5.12 and later), where it returns 0 and does nothing:
 * registered pages are copied for children already (above) and rings are
 * not inherited, so there is nothing to turn on, whenever it is called,
 * and RDMAV_FORK_SAFE / IBV_FORK_SAFE change nothing either. */
VRDMA_EXPORT int ibv_fork_init(void)
{
	vrdma_mem_init();
	return 0;
}

/* ibv_is_fork_initialized answers what rdma-core answers on such a kernel,
 * before and after ibv_fork_init: fork needs no initialisation. */
VRDMA_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

/* On-demand paging (docs/design/odp.md). An MR registered with
 * IBV_ACCESS_ON_DEMAND has its pages moved into memfd backings as every
 * registration's are, but neither the library nor the daemon locks them
 * (backing_new, backings_get), and the daemon does not charge them to the
 * process's RLIMIT_MEMLOCK: they stay pageable, and a page the kernel
 * reclaimed is faulted in again when the daemon or a peer's operation
 * touches it. ibv_advise_mr's prefetch faults the pages of its SGEs in
 * ahead of that (MADV_POPULATE_READ / _WRITE on the library's own mapping
 * of the memfd, whose pages the daemon's mapping shares). */

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* populate faults [va, va+len)'s pages in, for writing if write; a kernel
 * without MADV_POPULATE_* (before 5.14) leaves them to fault when touched,
 * as advice may. 0 or EFAULT when the memory is no longer mapped. Direct
 * system call: memory hooks (UCX's) interpose on madvise. */
static int populate(void *va, size_t len, int write)
{
	uintptr_t ps = (uintptr_t)page_size;
	uintptr_t start = (uintptr_t)va & ~(ps - 1);
	uintptr_t end = ((uintptr_t)va + len + ps - 1) & ~(ps - 1);
	if (syscall(SYS_madvise, (void *)start, end - start, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
		return 0;
	if (errno == EINVAL)
		return 0; /* an older kernel: no populate advice */
	return errno == ENOMEM ? EFAULT : errno;
}

/* vrdma_advise_mr is ibv_advise_mr: for each SGE, its lkey must be an
 * on-demand MR of pd that holds the SGE's bytes (and grants local write
 * for a write prefetch), else ENOENT or EINVAL, as the kernel answers;
 * PREFETCH and PREFETCH_WRITE then fault the pages in, PREFETCH_NO_FAULT
 * only checks (it maps what is present, and the daemon's mapping of the
 * memfd reaches present pages already). The work is done before the call
 * returns, so IBV_ADVISE_MR_FLAG_FLUSH (wait for it) changes nothing. */
int vrdma_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg_list,
		    uint32_t num_sge)
{
	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) {
		vrdma_debug("ibv_advise_mr: advice %d: the advices are IBV_ADVISE_MR_ADVICE_PREFETCH, _PREFETCH_WRITE "
			    "and _PREFETCH_NO_FAULT",
			    (int)advice);
		return EOPNOTSUPP;
	}
	if ((flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH) || !num_sge || !sg_list) {
		vrdma_debug("ibv_advise_mr: flags 0x%x, %u SGEs: flags are 0 or IBV_ADVISE_MR_FLAG_FLUSH, and at "
			    "least one SGE is needed",
			    flags, num_sge);
		return EINVAL;
	}
	void *va[64];
	if (num_sge > sizeof va / sizeof va[0]) {
		vrdma_debug("ibv_advise_mr: %u SGEs: at most %zu per call", num_sge, sizeof va / sizeof va[0]);
		return EINVAL;
	}
	int write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
	for (uint32_t i = 0; i < num_sge; i++) {
		unsigned int access = 0;
		/* An implicit MR's bytes: its child's, registered now (a
		 * prefetch faults pages in); PREFETCH_NO_FAULT registers
		 * nothing. */
		uint32_t lkey = implicit_lkey(pd->context, &sg_list[i],
						    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT);
		int rc = vrdma_mr_span(pd, lkey, sg_list[i].addr, sg_list[i].length, &access, &va[i]);
		if (!rc && !(access & IBV_ACCESS_ON_DEMAND))
			rc = ENOENT; /* as the kernel: only on-demand MRs take advice */
		if (!rc && write && !(access & IBV_ACCESS_LOCAL_WRITE))
			rc = ENOENT;
		if (rc) {
			vrdma_debug("ibv_advise_mr: SGE %u (lkey 0x%x, 0x%llx, %u bytes): %s", i, sg_list[i].lkey,
				    (unsigned long long)sg_list[i].addr, sg_list[i].length,
				    rc == ENOENT ? "no on-demand MR of this PD with that lkey (and local write, for "
						   "a write prefetch)"
						 : "the bytes are not all inside the MR");
			return rc;
		}
	}
	if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return 0;
	for (uint32_t i = 0; i < num_sge; i++) {
		int rc = sg_list[i].length ? populate(va[i], sg_list[i].length, write) : 0;
		if (rc)
			return rc;
	}
	return 0;
}
