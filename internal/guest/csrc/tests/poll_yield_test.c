/*
 * poll_yield_test.c: an empty ibv_poll_cq that yields the CPU reads the
 * ring again before it returns.
 *
 * Every VRDMA_POLL_YIELD_EVERY empty polls in a row, poll_cq calls
 * sched_yield so that the daemon gets a core (cq.c). On a busy machine the
 * yield lasts a scheduler slice, milliseconds, during which the peer and
 * the daemon run. A poll that returned the "empty" it read before the yield
 * told the program about a CQ as it was milliseconds earlier: libfabric's
 * ofi_rxm, having found its CQ empty, read its rdma_cm events and saw the
 * peer's disconnection before a receive that had completed ahead of it,
 * then reposted that receive on the endpoint it had just closed (SIGSEGV in
 * fi_pingpong -e rdm's teardown, one run in six; tools_libfabric_test.go).
 *
 * This program defines sched_yield itself, as the daemon's stand-in: the
 * call that the test names pushes a completion into the ring, as the
 * daemon would while the poller is off the CPU. Each case asserts that the
 * poll that yielded returns it, and that polls that do not yield, and
 * yields during which nothing arrives, still return 0. The lost-daemon
 * check (every VRDMA_LOST_CHECK_EVERY empty polls) comes before the yield;
 * the context here has no socket and is never lost.
 *
 */
#include "verbs_int.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "no_daemon.h"

#define RING_ENTRIES 8
#define CQ_MEM (VRDMA_RING_HEADER_SIZE + RING_ENTRIES * VRDMA_CQE_SIZE)

/* The daemon's stand-in: what the next sched_yield calls do. */
static struct {
	struct vrdma_cq *cq;
	unsigned yields;  /* sched_yield calls so far */
	unsigned push_at; /* the call (1-based) that pushes a completion; 0: none */
	uint64_t wr_id;   /* the completion's work request id */
} stand_in;

/* push writes a successful receive completion at the ring's producer index
 * and publishes the index, as the daemon's CQ push does (engine/cq.go). */
static void push(struct vrdma_cq *cq, uint64_t wr_id)
{
	uint32_t prod = vrdma_load32(cq->mem, VRDMA_RING_PROD_OFF);
	uint8_t *e = vrdma_slot(cq->mem, &cq->ring, prod);
	memset(e, 0, VRDMA_CQE_SIZE);
	put_le64(e + VRDMA_CQE_WR_ID, wr_id);
	put_le32(e + VRDMA_CQE_QP_NUM, 7);
	put_le32(e + VRDMA_CQE_BYTE_LEN, 68);
	e[VRDMA_CQE_OPCODE] = IBV_WC_RECV;
	e[VRDMA_CQE_STATUS] = IBV_WC_SUCCESS;
	vrdma_store32(cq->mem, VRDMA_RING_PROD_OFF, prod + 1);
}

/* sched_yield stands in for libc's (the program's definition is the one
 * the library's poll_cq calls): the yield the test names is when the
 * daemon completes something. */
int sched_yield(void)
{
	stand_in.yields++;
	if (stand_in.push_at != 0 && stand_in.yields == stand_in.push_at)
		push(stand_in.cq, stand_in.wr_id);
	return 0;
}

/* The context of the CQ: a daemon that is there (no socket to look at,
 * never lost). */
static struct vrdma_context fake_ctx = { .chan = { .fd = -1 } };

static void cq_init(struct vrdma_cq *cq)
{
	memset(cq, 0, sizeof *cq);
	cq->ibcq.context = &fake_ctx.vctx.context;
	cq->mem = aligned_alloc(64, CQ_MEM);
	if (cq->mem == NULL) {
		perror("aligned_alloc");
		exit(2);
	}
	memset(cq->mem, 0, CQ_MEM);
	cq->ring = (struct vrdma_ring){ .off = 0, .entries = RING_ENTRIES, .stride = VRDMA_CQE_SIZE };
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
}

static void cq_fini(struct vrdma_cq *cq)
{
	pthread_spin_destroy(&cq->lock);
	free(cq->mem);
}

/* The cases: the yield (1-based, of the run of empty polls) during which
 * the daemon completes a receive. The 64th yield is the 1024th empty poll,
 * the one that first looks whether the daemon is still there. */
static const struct {
	const char *name;
	unsigned push_at;
} cases[] = {
	{ "a completion during the first yield", 1 },
	{ "a completion during the third yield", 3 },
	{ "a completion during the yield after the lost-daemon check",
	  VRDMA_LOST_CHECK_EVERY / VRDMA_POLL_YIELD_EVERY },
};

/* run polls an empty CQ until the daemon's stand-in has completed at its
 * push_at-th yield: every poll before the one that yielded then must find
 * nothing, and that one must return the completion. */
static void run(const char *name, unsigned push_at)
{
	struct vrdma_cq cq;
	cq_init(&cq);
	stand_in.cq = &cq;
	stand_in.yields = 0;
	stand_in.push_at = push_at;
	stand_in.wr_id = 0xf1f0 + push_at;

	unsigned polls = push_at * VRDMA_POLL_YIELD_EVERY; /* the poll whose yield pushes */
	for (unsigned i = 1; i <= polls; i++) {
		struct ibv_wc wc[2];
		memset(wc, 0xa5, sizeof wc);
		int n = vrdma_poll_cq(&cq.ibcq, 2, wc);
		if (i < polls) {
			if (n != 0) {
				CHECK(0, "%s: poll %u (before the yield that completes) returned %d, want 0", name, i, n);
				break;
			}
			continue;
		}
		CHECK(stand_in.yields == push_at, "%s: %u yields by poll %u, want %u", name, stand_in.yields, i, push_at);
		CHECK(n == 1, "%s: the poll that yielded while the daemon completed a receive returned %d, want 1: "
			      "it answered with what the ring held before the yield",
		      name, n);
		if (n == 1)
			CHECK(wc[0].wr_id == stand_in.wr_id && wc[0].status == IBV_WC_SUCCESS &&
				      wc[0].opcode == IBV_WC_RECV && wc[0].byte_len == 68 && wc[0].qp_num == 7,
			      "%s: completion wr_id 0x%llx status %d opcode %d byte_len %u qp %u", name,
			      (unsigned long long)wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].byte_len, wc[0].qp_num);
	}
	/* Nothing more: the next polls find the ring empty, and a yield with
	 * nothing arriving still answers 0. */
	for (unsigned i = 0; i < VRDMA_POLL_YIELD_EVERY; i++) {
		struct ibv_wc wc;
		int n = vrdma_poll_cq(&cq.ibcq, 1, &wc);
		if (n != 0) {
			CHECK(0, "%s: poll %u after the completion returned %d, want 0", name, i + 1, n);
			break;
		}
	}
	CHECK(stand_in.yields == push_at + 1, "%s: %u yields after %u more empty polls, want %u", name, stand_in.yields,
	      VRDMA_POLL_YIELD_EVERY, push_at + 1);
	stand_in.cq = NULL;
	cq_fini(&cq);
}

int main(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int before = failures;
		run(cases[i].name, cases[i].push_at);
		printf("%s %s\n", failures == before ? "ok  " : "FAIL", cases[i].name);
	}
	return failures != 0;
}
