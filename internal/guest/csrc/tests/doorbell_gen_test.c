/*
 * doorbell_gen_test.c: one doorbell per arming of the send ring.
 *
 * A daemon that says notify_gen in its create reply arms the send ring's
 * notify word with a new non-zero value each time its worker (or the async
 * poller) goes to sleep (internal/engine/worker.go, armValue). The library
 * then rings once per value: a second post that finds the same value skips
 * the system call, because the daemon's wait after that arming takes the
 * first byte (docs/design/rings.md, "Doorbell generations").
 *
 *   - rings: which posts ring, value by value, and that without
 *     notify_gen (an older daemon, which arms with 1 every time) every
 *     post that finds the word set still rings;
 *   - a race against a thread that plays the daemon's worker with
 *     sequentially consistent atomics and a blocking wait on the pipe:
 *     every request posted is taken, and the worker never waits for a
 *     doorbell nobody rings (a hang guard ends such a wait and fails).
 */
#include "verbs_int.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "no_daemon.h"

#define RING_ENTRIES 64
#define SQ_STRIDE (VRDMA_SEND_WQE_HEADER + VRDMA_SGE_SIZE)
#define QP_MEM (((VRDMA_RING_HEADER_SIZE + RING_ENTRIES * SQ_STRIDE) + 63) / 64 * 64)
/* Requests the race posts, and how long the worker waits for a doorbell
 * before it calls the wake-up lost (a hang guard, not a timing check). */
#define RACE_REQUESTS 200000
#define WAIT_GUARD_MS 20000

#include "check.h"

static struct vrdma_context fake_ctx = {.chan = {.fd = -1}};
static struct vrdma_qp qp;
static int bell[2]; /* [0] the daemon's end */
static uint8_t buf[8];

static uint32_t d_load(size_t off)
{
	return atomic_load_explicit((_Atomic uint32_t *)(void *)(qp.mem + off), memory_order_seq_cst);
}

static void d_store(size_t off, uint32_t v)
{
	atomic_store_explicit((_Atomic uint32_t *)(void *)(qp.mem + off), v, memory_order_seq_cst);
}

static void setup(int notify_gen)
{
	memset(&qp, 0, sizeof qp);
	qp.qpx.qp_base.context = &fake_ctx.vctx.context;
	qp.qpx.qp_base.qp_type = IBV_QPT_RC;
	qp.mem = aligned_alloc(64, QP_MEM);
	if (!qp.mem || pipe2(bell, O_NONBLOCK | O_CLOEXEC) < 0) {
		perror("setup");
		exit(2);
	}
	memset(qp.mem, 0, QP_MEM);
	qp.sq = (struct vrdma_ring){.off = 0, .entries = RING_ENTRIES, .stride = SQ_STRIDE};
	qp.bell = bell[1];
	qp.cap.max_send_sge = 1;
	qp.notify_gen = notify_gen;
	pthread_spin_init(&qp.slock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp.rlock, PTHREAD_PROCESS_PRIVATE);
	d_store(VRDMA_QP_STATE_OFF, IBV_QPS_RTS);
}

static void teardown(void)
{
	pthread_spin_destroy(&qp.slock);
	pthread_spin_destroy(&qp.rlock);
	close(bell[0]);
	close(bell[1]);
	free(qp.mem);
}

/* post posts one SEND and lets the ring's consumer follow at once (the
 * daemon took it), so the ring never fills. */
static void post(void)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = sizeof buf, .lkey = 1};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND}, *bad = NULL;
	int rc = vrdma_post_send(&qp.qpx.qp_base, &wr, &bad);
	if (rc) {
		fprintf(stderr, "post_send: %d\n", rc);
		exit(1);
	}
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

static void test_rings(void)
{
	static const struct {
		const char *what;
		int notify_gen;
		uint32_t armed; /* the notify word before the posts */
		int posts, want;
	} steps[] = {
		{"daemon awake", 1, 0, 3, 0},
		{"first arming: the first post rings", 1, 7, 3, 1},
		{"the same arming: no more", 1, 7, 2, 0},
		{"the next arming rings again", 1, 8, 2, 1},
		{"awake again", 1, 0, 1, 0},
		{"an arming whose value came round rings (a cleared word forgets it)", 1, 8, 1, 1},
		{"an older daemon (no notify_gen): every post rings", 0, 1, 3, 3},
		{"older daemon, awake", 0, 0, 2, 0},
	};
	int gen = -1;
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		if (steps[i].notify_gen != gen) {
			if (gen >= 0)
				teardown();
			gen = steps[i].notify_gen;
			setup(gen);
		}
		d_store(VRDMA_RING_NOTIFY_OFF, steps[i].armed);
		for (int k = 0; k < steps[i].posts; k++) {
			post();
			d_store(VRDMA_RING_CONS_OFF, qp.sq_prod);
		}
		int got = rings();
		CHECK(got == steps[i].want, "%s: %d posts rang %d times, want %d", steps[i].what, steps[i].posts, got,
		      steps[i].want);
	}
	teardown();
}

/* ---- the race ---- */

static atomic_uint lost;
static atomic_uint stop;

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* worker is the daemon's worker (worker.go run): take what is posted;
 * with nothing posted, arm with the next value, look once more, and wait
 * on the doorbell; after the wait, clear the word. */
static void *worker(void *arg)
{
	(void)arg;
	uint32_t cons = 0, armed = 0;
	while (!atomic_load(&stop)) {
		uint32_t prod = d_load(VRDMA_RING_PROD_OFF);
		if (prod != cons) {
			cons = prod;
			d_store(VRDMA_RING_CONS_OFF, cons);
			continue;
		}
		if (++armed == 0)
			armed = 1;
		d_store(VRDMA_RING_NOTIFY_OFF, armed);
		if (d_load(VRDMA_RING_PROD_OFF) != cons || atomic_load(&stop)) {
			d_store(VRDMA_RING_NOTIFY_OFF, 0);
			continue;
		}
		struct pollfd p = {.fd = bell[0], .events = POLLIN};
		uint64_t start = ms_now();
		int n;
		while ((n = poll(&p, 1, 100)) == 0 && !atomic_load(&stop) && ms_now() - start < WAIT_GUARD_MS)
			;
		if (n == 0 && !atomic_load(&stop)) {
			atomic_store(&lost, 1); /* asleep with a request posted, or nothing to wake it */
			atomic_store(&stop, 1);
		}
		char b[64];
		while (read(bell[0], b, sizeof b) > 0)
			;
		d_store(VRDMA_RING_NOTIFY_OFF, 0);
	}
	return NULL;
}

static void test_race(void)
{
	setup(1);
	pthread_t th;
	if (pthread_create(&th, NULL, worker, NULL) != 0) {
		perror("pthread_create");
		exit(2);
	}
	unsigned seed = 1;
	for (unsigned i = 0; i < RACE_REQUESTS && !atomic_load(&lost); i++) {
		while (qp.sq_prod - d_load(VRDMA_RING_CONS_OFF) >= RING_ENTRIES - 1)
			if (atomic_load(&lost))
				break;
		post();
		/* Bursts and gaps, so that the worker sleeps between some
		 * posts and not others. */
		seed = seed * 1103515245u + 12345u;
		if ((seed >> 16) % 8 == 0)
			for (volatile unsigned k = 0; k < (seed >> 8) % 20000; k++)
				;
	}
	/* The last request must be taken too. */
	uint64_t start = ms_now();
	while (d_load(VRDMA_RING_CONS_OFF) != qp.sq_prod && !atomic_load(&lost) && ms_now() - start < WAIT_GUARD_MS)
		sched_yield();
	CHECK(!atomic_load(&lost), "the worker waited %d ms for a doorbell: a wake-up was lost", WAIT_GUARD_MS);
	CHECK(d_load(VRDMA_RING_CONS_OFF) == qp.sq_prod, "the worker took %u of %u requests",
	      d_load(VRDMA_RING_CONS_OFF), qp.sq_prod);
	atomic_store(&stop, 1);
	if (write(bell[1], "x", 1) < 0)
		perror("waking the worker");
	pthread_join(th, NULL);
	teardown();
}

int main(void)
{
	test_rings();
	test_race();
	if (failures)
		return 1;
	printf("doorbell_gen_test: ok\n");
	return 0;
}
