/*
 * srq_bell_test.c: ibv_post_srq_recv rings an SRQ's doorbell only when the
 * daemon gave it one and its ring's notify word is set.
 *
 * An SRQ on a device (a bound adapter's, internal/engine device_srq.go)
 * comes with a doorbell and a ring whose notify word the daemon sets: its
 * runner hands the receives to the device SRQ before a message needs them,
 * so every post that adds requests rings. An SRQ of the software path has
 * no doorbell (bell -1) and its posts make no system call, as before; one
 * whose word is clear does not ring either. A post that adds nothing (a
 * request over max_sge, refused) does not ring.
 */
#include "verbs_int.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "no_daemon.h"

#define RING_ENTRIES 16
#define RQ_STRIDE (VRDMA_RECV_WQE_HEADER + VRDMA_SGE_SIZE)
#define SRQ_MEM (VRDMA_RING_HEADER_SIZE + RING_ENTRIES * RQ_STRIDE)

#include "check.h"

static struct vrdma_context fake_ctx = {.chan = {.fd = -1}};
static struct vrdma_srq srq;
static int bell[2]; /* [0] the daemon's end */
static uint8_t buf[64];

static void setup(int with_bell, uint32_t notify)
{
	memset(&srq, 0, sizeof srq);
	srq.ibsrq.context = &fake_ctx.vctx.context;
	srq.mem = aligned_alloc(64, SRQ_MEM);
	if (!srq.mem || pipe2(bell, O_NONBLOCK | O_CLOEXEC) < 0) {
		perror("setup");
		exit(2);
	}
	memset(srq.mem, 0, SRQ_MEM);
	srq.ring = (struct vrdma_ring){.off = 0, .entries = RING_ENTRIES, .stride = RQ_STRIDE};
	srq.max_sge = 1;
	srq.max_wr = RING_ENTRIES;
	srq.bell = with_bell ? bell[1] : -1;
	pthread_spin_init(&srq.lock, PTHREAD_PROCESS_PRIVATE);
	atomic_store((_Atomic uint32_t *)(void *)(srq.mem + VRDMA_RING_NOTIFY_OFF), notify);
}

static void teardown(void)
{
	pthread_spin_destroy(&srq.lock);
	close(bell[0]);
	close(bell[1]);
	free(srq.mem);
}

/* rings reports how many bytes the doorbell got since the last call. */
static int rings(void)
{
	char b[64];
	int n = 0;
	ssize_t r;
	while ((r = read(bell[0], b, sizeof b)) > 0)
		n += (int)r;
	return n;
}

/* post posts n receives in one call (num_sge sges each); returns its rc. */
static int post(int n, int num_sge)
{
	struct ibv_sge sge[2] = {{.addr = (uintptr_t)buf, .length = 32, .lkey = 1},
				 {.addr = (uintptr_t)buf + 32, .length = 32, .lkey = 1}};
	struct ibv_recv_wr wr[4], *bad = NULL;
	for (int i = 0; i < n; i++)
		wr[i] = (struct ibv_recv_wr){.wr_id = (uint64_t)i, .sg_list = sge, .num_sge = num_sge,
					     .next = i + 1 < n ? &wr[i + 1] : NULL};
	return vrdma_post_srq_recv(&srq.ibsrq, wr, &bad);
}

static void test_rings(void)
{
	static const struct {
		const char *what;
		int bell;
		uint32_t notify;
		int calls, per_call, num_sge;
		int rc, want; /* each call's rc; the bytes rung over all calls */
	} cases[] = {
		{"software SRQ: no doorbell, no system call", 0, 0, 3, 2, 1, 0, 0},
		{"software SRQ whose word is set (a hostile daemon): no doorbell to ring", 0, 1, 2, 1, 1, 0, 0},
		{"bound SRQ: each post that adds requests rings once", 1, 1, 3, 4, 1, 0, 3},
		{"bound SRQ, word clear: no ring", 1, 0, 2, 1, 1, 0, 0},
		{"bound SRQ, a refused request adds nothing: no ring", 1, 1, 2, 1, 2, EINVAL, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		setup(cases[i].bell, cases[i].notify);
		for (int k = 0; k < cases[i].calls; k++) {
			int rc = post(cases[i].per_call, cases[i].num_sge);
			CHECK(rc == cases[i].rc, "%s: post %d returned %d, want %d", cases[i].what, k, rc, cases[i].rc);
		}
		int got = rings();
		CHECK(got == cases[i].want, "%s: %d doorbell bytes, want %d", cases[i].what, got, cases[i].want);
		uint32_t prod = atomic_load((_Atomic uint32_t *)(void *)(srq.mem + VRDMA_RING_PROD_OFF));
		uint32_t want_prod = cases[i].rc ? 0 : (uint32_t)(cases[i].calls * cases[i].per_call);
		CHECK(prod == want_prod, "%s: producer index %u, want %u", cases[i].what, prod, want_prod);
		teardown();
	}
}

int main(void)
{
	test_rings();
	if (failures)
		return 1;
	printf("srq_bell_test: ok\n");
	return 0;
}
