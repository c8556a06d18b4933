/*
 * import_test.c: ibv_import_device, ibv_import_pd and ibv_import_mr
 * between two processes, as rdma-core v44 has them. Process A opens the
 * device, allocates a PD and registers a buffer; it passes its context's
 * cmd_fd, the PD's and the MR's handles and the buffer's address to
 * process B (this program again, exec'd) over a unix socket (SCM_RIGHTS).
 * B imports the context, the PD and the MR, makes a CQ and two connected
 * RC QPs on the imported PD, and RDMA WRITEs from A's region into A's
 * region under the imported keys: A sees the bytes. A handle of no object
 * of the session is refused (ENOENT), and a process of another user given
 * the same descriptor imports nothing (EACCES).
 *
 * needs: daemon
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "loopback.h"

/* What A tells B, with the descriptor. */
struct handoff {
	uint32_t pd_handle, mr_handle, lkey, rkey;
	uint64_t addr;
	int other_user; /* B drops to another uid first and expects refusal */
};

#define COPY_LEN 4096
#define COPY_DST (LB_BUF_SIZE / 2)

static int send_fd(int sock, int fd, const struct handoff *h)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} control;
	memset(&control, 0, sizeof control);
	struct iovec iov = {.iov_base = (void *)h, .iov_len = sizeof *h};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			    .msg_controllen = sizeof control.buf};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	return sendmsg(sock, &mh, 0) == (ssize_t)sizeof *h ? 0 : -1;
}

static int recv_fd(int sock, struct handoff *h)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} control;
	struct iovec iov = {.iov_base = h, .iov_len = sizeof *h};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			    .msg_controllen = sizeof control.buf};
	if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof *h)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(cm), sizeof fd);
	return fd;
}

/* process_b is the importer: its exit status is its failures. */
static int process_b(int sock)
{
	struct handoff h;
	int cmd_fd = recv_fd(sock, &h);
	if (cmd_fd < 0) {
		fprintf(stderr, "B: no descriptor from A\n");
		return 1;
	}
	if (h.other_user) {
		if (setgid(65534) || setuid(65534)) {
			fprintf(stderr, "B: cannot become nobody: %s\n", strerror(errno));
			return 1;
		}
		errno = 0;
		struct ibv_context *c = ibv_import_device(cmd_fd);
		CHECK(c == NULL && errno == EACCES, "another user imported the context: %p, errno %d", (void *)c, errno);
		if (c)
			ibv_close_device(c);
		return failures;
	}
	ctx = ibv_import_device(cmd_fd);
	CHECK(ctx != NULL, "ibv_import_device: %s", strerror(errno));
	if (!ctx)
		return failures;
	CHECK(ctx->cmd_fd == cmd_fd, "the imported context's cmd_fd is %d, not the one given (%d)", ctx->cmd_fd, cmd_fd);
	errno = 0;
	CHECK(ibv_import_pd(ctx, h.pd_handle + 1000) == NULL && errno == ENOENT, "importing no PD: errno %d", errno);
	pd = ibv_import_pd(ctx, h.pd_handle);
	CHECK(pd != NULL && pd->handle == h.pd_handle, "ibv_import_pd: %s", strerror(errno));
	struct ibv_mr *mr = pd ? ibv_import_mr(pd, h.mr_handle) : NULL;
	CHECK(mr != NULL, "ibv_import_mr: %s", strerror(errno));
	if (pd) {
		errno = 0;
		CHECK(ibv_import_mr(pd, h.mr_handle + 1000) == NULL && errno == ENOENT, "importing no MR: errno %d",
		      errno);
	}
	if (mr) {
		CHECK(mr->lkey == h.lkey && mr->rkey == h.rkey && mr->length == LB_BUF_SIZE && mr->addr == NULL &&
			      mr->handle == h.mr_handle && mr->pd == pd,
		      "the imported MR: lkey %#x rkey %#x length %zu addr %p", mr->lkey, mr->rkey, mr->length, mr->addr);
		struct ibv_port_attr pa;
		CHECK(ibv_query_gid(ctx, 1, 0, &gid0) == 0 && ibv_query_port(ctx, 1, &pa) == 0, "queries");
		mtu = pa.active_mtu;
		/* Work on the imported PD, from and to A's region. */
		struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
		struct ibv_qp *a = NULL, *b = NULL;
		if (cq && !lb_pair(cq, cq, 4, &a, &b)) {
			struct ibv_sge sg = {.addr = h.addr, .length = COPY_LEN, .lkey = mr->lkey};
			struct ibv_send_wr wr = {.wr_id = 7, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
						 .send_flags = IBV_SEND_SIGNALED},
					   *bad;
			wr.wr.rdma.remote_addr = h.addr + COPY_DST;
			wr.wr.rdma.rkey = mr->rkey;
			CHECK(ibv_post_send(a, &wr, &bad) == 0, "ibv_post_send: %s", strerror(errno));
			struct ibv_wc wc;
			double t0 = lb_now();
			int n;
			while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && lb_now() - t0 < HANG_GUARD_SECONDS)
				;
			CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7, "the WRITE: %d, %s", n,
			      n == 1 ? ibv_wc_status_str(wc.status) : "none");
		}
		lb_unpair(a, b);
		if (cq)
			CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
		ibv_unimport_mr(mr);
	}
	if (pd)
		ibv_unimport_pd(pd);
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	return failures;
}

/* run_b execs this program as B with one end of a socketpair, hands it
 * h and cmd_fd, and returns its exit status. */
static int run_b(const struct handoff *h)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(sp[0]);
		char arg[16];
		snprintf(arg, sizeof arg, "%d", sp[1]);
		execl("/proc/self/exe", "import_test", "B", arg, (char *)NULL);
		_exit(127);
	}
	close(sp[1]);
	int status = -1;
	if (pid > 0 && send_fd(sp[0], ctx->cmd_fd, h) == 0 && waitpid(pid, &status, 0) == pid)
		status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	close(sp[0]);
	return status;
}

static void test_import_across_processes(void)
{
	for (int i = 0; i < COPY_LEN; i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	memset(buf + COPY_DST, 0, COPY_LEN);
	struct handoff h = {.pd_handle = pd->handle, .mr_handle = buf_mr->handle, .lkey = buf_mr->lkey,
			    .rkey = buf_mr->rkey, .addr = (uintptr_t)buf};
	int st = run_b(&h);
	CHECK(st == 0, "process B: status %d", st);
	CHECK(memcmp(buf + COPY_DST, buf, COPY_LEN) == 0, "A's region does not hold what B wrote through the import");
}

static void test_import_other_user(void)
{
	if (geteuid() != 0) {
		printf("skip import_other_user: needs root to become another user\n");
		return;
	}
	struct handoff h = {.pd_handle = pd->handle, .mr_handle = buf_mr->handle, .other_user = 1};
	int st = run_b(&h);
	CHECK(st == 0, "process B as another user: status %d", st);
	/* A's context still works. */
	struct ibv_pd *p2 = ibv_alloc_pd(ctx);
	CHECK(p2 != NULL, "A's context after a refused import: %s", strerror(errno));
	if (p2)
		CHECK(ibv_dealloc_pd(p2) == 0, "ibv_dealloc_pd");
}

/* In one process, as pyverbs does: a dup of cmd_fd imports the context;
 * the PD allocated through the imported context is the session's, and
 * the exporter imports it back by handle. */
static void test_import_same_process(void)
{
	int fd = dup(ctx->cmd_fd);
	struct ibv_context *c2 = fd >= 0 ? ibv_import_device(fd) : NULL;
	CHECK(c2 != NULL, "ibv_import_device of a dup: %s", strerror(errno));
	if (!c2)
		return;
	struct ibv_pd *p2 = ibv_alloc_pd(c2);
	CHECK(p2 != NULL, "ibv_alloc_pd on the imported context: %s", strerror(errno));
	if (p2) {
		struct ibv_pd *back = ibv_import_pd(ctx, p2->handle);
		CHECK(back != NULL, "the exporter imports the importer's PD: %s", strerror(errno));
		if (back)
			ibv_unimport_pd(back);
		CHECK(ibv_dealloc_pd(p2) == 0, "ibv_dealloc_pd");
	}
	struct ibv_pd *ip = ibv_import_pd(c2, pd->handle);
	CHECK(ip != NULL, "ibv_import_pd in one process: %s", strerror(errno));
	struct ibv_mr *m2 = ip ? ibv_import_mr(ip, buf_mr->handle) : NULL;
	CHECK(m2 != NULL && m2->lkey == buf_mr->lkey, "ibv_import_mr in one process: %s", strerror(errno));
	if (m2)
		ibv_unimport_mr(m2);
	if (ip)
		ibv_unimport_pd(ip);
	CHECK(ibv_close_device(c2) == 0, "ibv_close_device");
	/* Closing the imported context closed its descriptor, not A's. */
	struct ibv_pd *p3 = ibv_alloc_pd(ctx);
	CHECK(p3 != NULL, "A's context after the import closed: %s", strerror(errno));
	if (p3)
		CHECK(ibv_dealloc_pd(p3) == 0, "ibv_dealloc_pd");
}

/* What is not a vrdma context's descriptor is refused before anything is
 * sent on it. */
static void test_import_bad_descriptor(void)
{
	int p[2];
	CHECK(pipe(p) == 0, "pipe");
	errno = 0;
	CHECK(ibv_import_device(p[0]) == NULL && errno == EINVAL, "a pipe imported: errno %d", errno);
	errno = 0;
	CHECK(ibv_import_device(-1) == NULL && errno == EBADF, "-1 imported: errno %d", errno);
	close(p[0]);
	close(p[1]);
}

static const struct test_case cases[] = {
	{"import_across_processes", test_import_across_processes},
	{"import_other_user", test_import_other_user},
	{"import_same_process", test_import_same_process},
	{"import_bad_descriptor", test_import_bad_descriptor},
};

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "B") == 0)
		return process_b(atoi(argv[2])) ? 1 : 0;
	if (lb_open())
		return 1;
	RUN_CASES(cases);
	lb_close();
	return failures ? 1 : 0;
}
