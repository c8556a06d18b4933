/*
 * rsocket_table.c: the map from descriptor numbers to rsockets. Two levels
 * of atomic pointers, pages of RS_PAGE entries allocated on first use and
 * kept for the process's life, so that a lookup (on every rpoll, rselect
 * and socket call) takes no lock and a page never moves under a reader.
 * Writers take rs_table_mu.
 */
#include "rsocket.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define RS_PAGE 1024
#define RS_PAGES (RS_MAX_FD / RS_PAGE)

struct rs_page {
	_Atomic(struct rsocket *) slot[RS_PAGE];
};

static _Atomic(struct rs_page *) rs_pages[RS_PAGES];
static atomic_int rs_live;
static pthread_mutex_t rs_table_mu = PTHREAD_MUTEX_INITIALIZER;

struct rsocket *rs_lookup(int fd)
{
	if (fd < 0 || fd >= RS_MAX_FD || atomic_load_explicit(&rs_live, memory_order_acquire) == 0)
		return NULL;
	struct rs_page *p = atomic_load_explicit(&rs_pages[fd / RS_PAGE], memory_order_acquire);
	return p ? atomic_load_explicit(&p->slot[fd % RS_PAGE], memory_order_acquire) : NULL;
}

int rs_insert(struct rsocket *rs)
{
	int fd = rs->fd, ret = 0;

	if (fd < 0 || fd >= RS_MAX_FD)
		return EBADF;
	pthread_mutex_lock(&rs_table_mu);
	struct rs_page *p = atomic_load_explicit(&rs_pages[fd / RS_PAGE], memory_order_relaxed);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p) {
			ret = ENOMEM;
			goto out;
		}
		atomic_store_explicit(&rs_pages[fd / RS_PAGE], p, memory_order_release);
	}
	if (atomic_load_explicit(&p->slot[fd % RS_PAGE], memory_order_relaxed)) {
		ret = EEXIST;
		goto out;
	}
	atomic_store_explicit(&p->slot[fd % RS_PAGE], rs, memory_order_release);
	atomic_fetch_add_explicit(&rs_live, 1, memory_order_acq_rel);
out:
	pthread_mutex_unlock(&rs_table_mu);
	return ret;
}

void rs_remove(struct rsocket *rs)
{
	int fd = rs->fd;

	if (fd < 0 || fd >= RS_MAX_FD)
		return;
	pthread_mutex_lock(&rs_table_mu);
	struct rs_page *p = atomic_load_explicit(&rs_pages[fd / RS_PAGE], memory_order_relaxed);
	if (p && atomic_load_explicit(&p->slot[fd % RS_PAGE], memory_order_relaxed) == rs) {
		atomic_store_explicit(&p->slot[fd % RS_PAGE], NULL, memory_order_release);
		atomic_fetch_sub_explicit(&rs_live, 1, memory_order_acq_rel);
	}
	pthread_mutex_unlock(&rs_table_mu);
}

int rs_count(void)
{
	return atomic_load_explicit(&rs_live, memory_order_acquire);
}
