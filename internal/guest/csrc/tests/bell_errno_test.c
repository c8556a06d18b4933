/*
 * bell_errno_test.c: a doorbell rings whatever pwritev2 answers.
 *
 * post.c rings with pwritev2(RWF_NOSIGNAL) and falls back to a write with
 * SIGPIPE blocked where the kernel lacks the flag. A process may also run
 * under a seccomp filter that refuses pwritev2 with an errno of its
 * choice (EPERM is the usual default of container profiles for a system
 * call they do not list): the doorbell must still ring through write, or
 * the daemon sleeps on a request nobody rang for and the application
 * hangs. Each case runs in a child of its own (a filter cannot be taken
 * off): it refuses pwritev2 with the case's errno, arms the send ring,
 * posts one SEND, and looks whether a byte reached the doorbell; with the
 * doorbell's read end closed, the child must not die of SIGPIPE and the
 * context must note the daemon lost.
 */
#include "verbs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "no_daemon.h"

#define RING_ENTRIES 8
#define SQ_STRIDE (VRDMA_SEND_WQE_HEADER + VRDMA_SGE_SIZE)
#define QP_MEM (((VRDMA_RING_HEADER_SIZE + RING_ENTRIES * SQ_STRIDE) + 63) / 64 * 64)

#if defined(__x86_64__)
#define THIS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_ARCH AUDIT_ARCH_AARCH64
#endif

static struct vrdma_device fake_dev = {.dev = {.name = "vrdma0"}};
static struct vrdma_context fake_ctx = {.chan = {.fd = -1}, .dev = &fake_dev};
static struct vrdma_qp qp;
static uint8_t buf[8];

/* Exit codes of a case's child. */
enum { OK = 0, NO_FILTER = 2, POST_FAILED = 3, NOT_RUNG = 4, NOT_LOST = 5, SKIPPED = 6 };

/* refuse_pwritev2 makes pwritev2 fail with err in this process from now
 * on; every other system call is allowed. */
static int refuse_pwritev2(int err)
{
#ifdef THIS_ARCH
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pwritev2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((uint32_t)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
		perror("seccomp");
		return -1;
	}
	return 0;
#else
	(void)err;
	_exit(SKIPPED); /* no filter written for this architecture */
#endif
}

/* run_case is the child: it never returns. */
static void run_case(int err, int reader_closed)
{
	int bell[2];
	if (pipe2(bell, O_NONBLOCK | O_CLOEXEC) < 0)
		_exit(NO_FILTER);
	qp.qpx.qp_base.context = &fake_ctx.vctx.context;
	qp.qpx.qp_base.qp_type = IBV_QPT_RC;
	qp.mem = aligned_alloc(64, QP_MEM);
	if (!qp.mem)
		_exit(NO_FILTER);
	memset(qp.mem, 0, QP_MEM);
	qp.sq = (struct vrdma_ring){.off = 0, .entries = RING_ENTRIES, .stride = SQ_STRIDE};
	qp.bell = bell[1];
	qp.cap.max_send_sge = 1;
	qp.notify_gen = 1;
	pthread_spin_init(&qp.slock, PTHREAD_PROCESS_PRIVATE);
	vrdma_store32(qp.mem, VRDMA_QP_STATE_OFF, IBV_QPS_RTS);
	vrdma_store32(qp.mem, VRDMA_RING_NOTIFY_OFF, 5); /* the daemon sleeps */
	if (reader_closed)
		close(bell[0]);
	vrdma_bell_nosignal = 0; /* the first doorbell finds out */
	if (err && refuse_pwritev2(err) < 0)
		_exit(NO_FILTER);
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = sizeof buf, .lkey = 1};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND}, *bad = NULL;
	if (vrdma_post_send(&qp.qpx.qp_base, &wr, &bad) != 0)
		_exit(POST_FAILED);
	if (reader_closed)
		_exit(vrdma_is_lost(&fake_ctx) ? OK : NOT_LOST);
	char b;
	_exit(read(bell[0], &b, 1) == 1 ? OK : NOT_RUNG);
}

int main(void)
{
	static const struct {
		const char *what;
		int err; /* pwritev2's errno under the filter; 0: no filter */
		int reader_closed;
	} cases[] = {
		{"pwritev2 allowed", 0, 0},
		{"pwritev2 refused with EPERM", EPERM, 0},
		{"pwritev2 refused with EACCES", EACCES, 0},
		{"pwritev2 refused with ENOSYS", ENOSYS, 0},
		{"pwritev2 refused with EOPNOTSUPP", EOPNOTSUPP, 0},
		{"pwritev2 allowed, the daemon gone", 0, 1},
		{"pwritev2 refused with EPERM, the daemon gone", EPERM, 1},
	};
	static const char *const why[] = {
		[NO_FILTER] = "the case could not be set up",
		[POST_FAILED] = "post_send failed",
		[NOT_RUNG] = "no byte reached the doorbell: the daemon would sleep on the request",
		[NOT_LOST] = "the closed doorbell was not noted as a lost daemon",
	};
	int failures = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (pid == 0)
			run_case(cases[i].err, cases[i].reader_closed);
		int st = 0;
		if (waitpid(pid, &st, 0) < 0) {
			perror("waitpid");
			return 2;
		}
		if (WIFSIGNALED(st)) {
			fprintf(stderr, "%s: the program died of signal %d (%s)\n", cases[i].what, WTERMSIG(st),
				strsignal(WTERMSIG(st)));
			failures++;
		} else if (WEXITSTATUS(st) == SKIPPED) {
			printf("%s: skipped (no seccomp filter for this architecture)\n", cases[i].what);
		} else if (WEXITSTATUS(st) != OK) {
			int c = WEXITSTATUS(st);
			fprintf(stderr, "%s: %s\n", cases[i].what,
				c < (int)(sizeof why / sizeof why[0]) && why[c] ? why[c] : "exit status unknown");
			failures++;
		}
	}
	if (failures)
		return 1;
	printf("bell_errno_test: ok\n");
	return 0;
}
