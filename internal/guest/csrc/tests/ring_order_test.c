/*
 * ring_order_test.c: the doorbell handshake with the daemon is Dekker's.
 *
 * The library publishes an index (a send or receive queue's producer) and
 * then reads the ring's notify word to know whether to ring the doorbell;
 * the daemon's worker stores the notify word before it sleeps and then reads
 * the index once more (internal/engine/worker.go). A CQ is the same turned
 * round: ibv_req_notify_cq stores the notify word and the application then
 * polls the producer index, while the daemon publishes a completion and then
 * reads the notify word (internal/engine/cq.go). In each pair one side must
 * see the other's store, or a request waits for a doorbell nobody rings (a
 * perftest ib_read_lat that polls for ever) or a completion for an event
 * that never comes. A release store followed by an acquire load does not
 * give that: x86 lets the load pass the store (store buffering).
 *
 * Each case races the library's own code against a thread that plays the
 * daemon with sequentially consistent atomics, as Go's are, round after
 * round, and fails on a round where neither saw the other. On one CPU it
 * proves nothing and says so; on two, the unfenced send and receive paths
 * fail within a second. (On x86 poll_cq's spin lock happens to fence the CQ
 * case; it stays for other processors and for a poll without a lock.)
 */
#include "verbs_int.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "no_daemon.h"

/* Rounds per case, and the time a case may take at most. */
#define ROUNDS 60000
#define CASE_SECONDS 1

#define RING_ENTRIES 4
#define SQ_STRIDE (VRDMA_SEND_WQE_HEADER + VRDMA_SGE_SIZE)
#define RQ_STRIDE (VRDMA_RECV_WQE_HEADER + VRDMA_SGE_SIZE)
#define SQ_OFF 0
#define RQ_OFF (VRDMA_RING_HEADER_SIZE + RING_ENTRIES * SQ_STRIDE)
#define ROUND64(n) (((n) + 63) / 64 * 64) /* aligned_alloc takes whole alignments */
#define QP_MEM ROUND64(RQ_OFF + VRDMA_RING_HEADER_SIZE + RING_ENTRIES * RQ_STRIDE)
#define CQ_MEM ROUND64(VRDMA_RING_HEADER_SIZE + RING_ENTRIES * VRDMA_CQE_SIZE)

/* The daemon's side of the shared words: Go's atomics are sequentially
 * consistent. */
static uint32_t d_load(uint8_t *mem, size_t off)
{
	return atomic_load_explicit((_Atomic uint32_t *)(void *)(mem + off), memory_order_seq_cst);
}
static void d_store(uint8_t *mem, size_t off, uint32_t v)
{
	atomic_store_explicit((_Atomic uint32_t *)(void *)(mem + off), v, memory_order_seq_cst);
}

enum which { SEND, RECV_IN_ERR, CQ_ARM };

/* One race: what the two threads share. */
static struct {
	enum which which;
	struct vrdma_qp qp;
	struct vrdma_cq cq;
	uint8_t buf[8];
	int bell[2]; /* the QP's doorbell: [0] the daemon's end */
	atomic_uint arrived;  /* rendezvous: both threads add one per round */
	atomic_uint stop;     /* the daemon thread ends */
	atomic_uint d_round;  /* the last round the daemon finished */
	uint32_t d_saw;       /* what the daemon read in that round */
	unsigned seed;
} r;

/* rendezvous waits until both threads reached round n. */
static void rendezvous(unsigned n)
{
	atomic_fetch_add(&r.arrived, 1);
	for (unsigned spins = 0; atomic_load(&r.arrived) < 2 * n; spins++)
		if (spins > 1000)
			sched_yield(); /* the other thread may not be running */
}

/* jitter delays one side by up to span loop turns, so that the rounds
 * sweep the two stores' relative timing (the library does more before its
 * store than the daemon does). */
static void jitter(unsigned seed, unsigned span)
{
	for (volatile unsigned i = 0; i < (seed >> 16) % span; i++)
		;
}

static void *daemon_side(void *arg)
{
	(void)arg;
	for (unsigned n = 1;; n++) {
		rendezvous(n);
		if (atomic_load(&r.stop))
			return NULL;
		jitter(n * 2654435761u, 96);
		switch (r.which) {
		case SEND: /* the worker before it sleeps (worker.go) */
			d_store(r.qp.mem, SQ_OFF + VRDMA_RING_NOTIFY_OFF, 1);
			r.d_saw = d_load(r.qp.mem, SQ_OFF + VRDMA_RING_PROD_OFF);
			break;
		case RECV_IN_ERR: /* enterError, then the flush (qp.go, sendqueue.go) */
			d_store(r.qp.mem, RQ_OFF + VRDMA_RING_NOTIFY_OFF, 1);
			r.d_saw = d_load(r.qp.mem, RQ_OFF + VRDMA_RING_PROD_OFF);
			break;
		case CQ_ARM: { /* a completion, then the notify word (cq.go) */
			uint32_t prod = d_load(r.cq.mem, VRDMA_RING_PROD_OFF);
			uint8_t *e = vrdma_slot(r.cq.mem, &r.cq.ring, prod);
			memset(e, 0, VRDMA_CQE_SIZE);
			put_le64(e + VRDMA_CQE_WR_ID, n);
			d_store(r.cq.mem, VRDMA_RING_PROD_OFF, prod + 1);
			r.d_saw = d_load(r.cq.mem, VRDMA_RING_NOTIFY_OFF);
			break;
		}
		}
		atomic_store(&r.d_round, n);
	}
}

/* rang reports whether the doorbell was written since the last call. */
static int rang(void)
{
	char b[64];
	int any = 0;
	while (read(r.bell[0], b, sizeof b) > 0)
		any = 1;
	return any;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The context the QP and CQ belong to: a daemon that is there (no socket
 * to look at, never lost). */
static struct vrdma_context fake_ctx = { .chan = { .fd = -1 } };

static void setup(void)
{
	memset(&r.qp, 0, sizeof r.qp);
	memset(&r.cq, 0, sizeof r.cq);
	r.qp.qpx.qp_base.context = &fake_ctx.vctx.context;
	r.cq.ibcq.context = &fake_ctx.vctx.context;
	r.qp.mem = aligned_alloc(64, QP_MEM);
	r.cq.mem = aligned_alloc(64, CQ_MEM);
	if (!r.qp.mem || !r.cq.mem || pipe2(r.bell, O_NONBLOCK | O_CLOEXEC) < 0) {
		perror("setup");
		exit(2);
	}
	memset(r.qp.mem, 0, QP_MEM);
	memset(r.cq.mem, 0, CQ_MEM);
	r.qp.qpx.qp_base.qp_type = IBV_QPT_RC;
	r.qp.sq = (struct vrdma_ring){ .off = SQ_OFF, .entries = RING_ENTRIES, .stride = SQ_STRIDE };
	r.qp.rq = (struct vrdma_ring){ .off = RQ_OFF, .entries = RING_ENTRIES, .stride = RQ_STRIDE };
	r.qp.bell = r.bell[1];
	r.qp.cap.max_send_sge = 1;
	r.qp.cap.max_recv_sge = 1;
	pthread_spin_init(&r.qp.slock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&r.qp.rlock, PTHREAD_PROCESS_PRIVATE);
	r.cq.ring = (struct vrdma_ring){ .off = 0, .entries = RING_ENTRIES, .stride = VRDMA_CQE_SIZE };
	pthread_spin_init(&r.cq.lock, PTHREAD_PROCESS_PRIVATE);
}

static void teardown(void)
{
	pthread_spin_destroy(&r.qp.slock);
	pthread_spin_destroy(&r.qp.rlock);
	pthread_spin_destroy(&r.cq.lock);
	close(r.bell[0]);
	close(r.bell[1]);
	free(r.qp.mem);
	free(r.cq.mem);
}

/* race runs rounds of one case; it returns how many rounds lost a wake-up
 * and sets *ran to how many rounds ran. */
static unsigned race(enum which which, const char *name, unsigned *ran)
{
	setup();
	r.which = which;
	atomic_store(&r.arrived, 0);
	atomic_store(&r.stop, 0);
	atomic_store(&r.d_round, 0);
	uint32_t state = which == RECV_IN_ERR ? IBV_QPS_ERR : IBV_QPS_RTS;
	d_store(r.qp.mem, VRDMA_QP_STATE_OFF, state);

	pthread_t th;
	if (pthread_create(&th, NULL, daemon_side, NULL) != 0) {
		perror("pthread_create");
		exit(2);
	}
	struct ibv_sge sge = { .addr = (uintptr_t)r.buf, .length = sizeof r.buf, .lkey = 1 };
	struct ibv_send_wr swr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND };
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 };
	struct ibv_wc wc;
	unsigned lost = 0, n;
	double deadline = now() + CASE_SECONDS;
	for (n = 1; n <= ROUNDS && !lost && (n % 1024 || now() < deadline); n++) {
		/* Between rounds: the daemon has taken what was posted and
		 * sleeps no more; the doorbell is quiet. */
		uint32_t sq = r.qp.sq_prod, rq = r.qp.rq_prod;
		d_store(r.qp.mem, SQ_OFF + VRDMA_RING_CONS_OFF, sq);
		d_store(r.qp.mem, RQ_OFF + VRDMA_RING_CONS_OFF, rq);
		d_store(r.qp.mem, SQ_OFF + VRDMA_RING_NOTIFY_OFF, 0);
		d_store(r.qp.mem, RQ_OFF + VRDMA_RING_NOTIFY_OFF, 0);
		d_store(r.cq.mem, VRDMA_RING_NOTIFY_OFF, 0);
		(void)rang();

		rendezvous(n);
		jitter(n * 40503u, 16);
		struct ibv_send_wr *sbad = NULL;
		struct ibv_recv_wr *rbad = NULL;
		int got = 0, rc = 0;
		switch (which) {
		case SEND:
			rc = vrdma_post_send(&r.qp.qpx.qp_base, &swr, &sbad);
			break;
		case RECV_IN_ERR:
			rc = vrdma_post_recv(&r.qp.qpx.qp_base, &rwr, &rbad);
			break;
		case CQ_ARM:
			rc = vrdma_req_notify_cq(&r.cq.ibcq, 0);
			got = vrdma_poll_cq(&r.cq.ibcq, 1, &wc);
			break;
		}
		while (atomic_load(&r.d_round) != n)
			sched_yield();
		if (rc != 0 || got < 0) {
			printf("%s: round %u: the library failed (%d, %d)\n", name, n, rc, got);
			exit(1);
		}
		switch (which) {
		case SEND:
			if (r.d_saw == sq && !rang())
				lost++; /* the daemon sleeps with a request posted */
			break;
		case RECV_IN_ERR:
			if (r.d_saw == rq && !rang())
				lost++; /* the receive is never flushed */
			break;
		case CQ_ARM:
			if (got == 0 && r.d_saw == 0)
				lost++; /* armed, empty, and no event will come */
			if (got == 0 && vrdma_poll_cq(&r.cq.ibcq, 1, &wc) != 1) {
				printf("%s: round %u: the completion is not in the CQ\n", name, n);
				exit(1);
			}
			break;
		}
	}
	*ran = n - 1;
	atomic_store(&r.stop, 1);
	rendezvous(n);
	pthread_join(th, NULL);
	teardown();
	return lost;
}

int main(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 2) {
		printf("ring_order_test: one CPU: the two sides never run at once; nothing to race\n");
		return 0;
	}
	static const struct {
		enum which which;
		const char *name;
	} cases[] = {
		{ SEND, "post_send, then the notify word" },
		{ RECV_IN_ERR, "post_recv on a QP in ERR, then the notify word" },
		{ CQ_ARM, "req_notify_cq, then poll_cq" },
	};
	int failures = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		unsigned ran = 0;
		unsigned lost = race(cases[i].which, cases[i].name, &ran);
		if (lost) {
			printf("%s: round %u: neither side saw the other's store: a wake-up is lost\n", cases[i].name, ran);
			failures++;
		} else {
			printf("%s: %u rounds, no wake-up lost\n", cases[i].name, ran);
		}
	}
	return failures != 0;
}
