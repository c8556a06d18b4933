/*
 * cq_event_test.c: ibv_get_cq_event and signals. rdma-core's waits in a
 * read() of the kernel's completion channel, so a caught signal ends the
 * wait with EINTR unless its handler was installed with SA_RESTART, and the
 * read goes on otherwise. Programs rely on the first: qperf's SIGALRM (no
 * SA_RESTART) ends a timed test whose side waits for a completion that will
 * not come; a wait that went on hung its server for ever. And on the
 * second: perftest's signal() handlers restart.
 *
 * The CQ is a fake with the library's doorbell pipe, added to the channel
 * as ibv_create_cq adds a real one.
 */
#include "verbs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/time.h>
#include <unistd.h>

#include "no_daemon.h"

#define CHECK_STREAM stdout
#include "check.h"

/* The timer fires every TICK_US; a wait still going after HANG_TICKS ends
 * the program: ibv_get_cq_event did not return. */
#define TICK_US 5000
#define HANG_TICKS 400

static volatile sig_atomic_t ticks;
static volatile sig_atomic_t ring_at; /* the tick that rings the doorbell; 0: none */
static int doorbell = -1;              /* the fake CQ's write end */

static void on_alarm(int sig)
{
	(void)sig;
	ticks++;
	if (ring_at && ticks == ring_at) {
		char b = 1;
		ssize_t n = write(doorbell, &b, 1);
		(void)n;
	}
	if (ticks >= HANG_TICKS) {
		static const char msg[] = "ibv_get_cq_event went on waiting through the timer's signals\n";
		ssize_t n = write(1, msg, sizeof msg - 1);
		(void)n;
		_exit(1);
	}
}

static void handle_alarm(int flags)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = flags };
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) < 0) {
		perror("sigaction");
		exit(2);
	}
}

static void timer(int on)
{
	struct itimerval it = { 0 };
	if (on)
		it.it_value.tv_usec = it.it_interval.tv_usec = TICK_US;
	setitimer(ITIMER_REAL, &it, NULL);
}

int main(void)
{
	static struct vrdma_context fake; /* a context: the channel counts as one of its objects */
	pthread_mutex_init(&fake.vctx.context.mutex, NULL);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(&fake.vctx.context);
	if (!ch) {
		perror("ibv_create_comp_channel");
		return 2;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		perror("pipe2");
		return 2;
	}
	static int marker;
	struct vrdma_cq cq;
	memset(&cq, 0, sizeof cq);
	cq.rfd = p[0];
	doorbell = p[1]; /* the daemon's end of the CQ's doorbell */
	fcntl(cq.rfd, F_SETFL, O_NONBLOCK);
	cq.ibcq.channel = ch;
	cq.ibcq.cq_context = &marker;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &cq };
	if (epoll_ctl(ch->fd, EPOLL_CTL_ADD, cq.rfd, &ev) < 0) {
		perror("epoll_ctl");
		return 2;
	}
	struct ibv_cq *got;
	void *ctx;

	/* A handler without SA_RESTART ends the wait. */
	handle_alarm(0);
	ticks = 0;
	ring_at = 0;
	timer(1);
	errno = 0;
	int rc = ibv_get_cq_event(ch, &got, &ctx);
	int err = errno;
	timer(0);
	CHECK(rc == -1 && err == EINTR, "a signal without SA_RESTART: got %d (%s), want -1 (EINTR)", rc,
	      strerror(err));
	CHECK(ticks == 1, "the wait ended after %d signals, want 1", (int)ticks);

	/* One with SA_RESTART does not: the completion that comes later ends it. */
	handle_alarm(SA_RESTART);
	ticks = 0;
	ring_at = 5;
	timer(1);
	got = NULL;
	ctx = NULL;
	rc = ibv_get_cq_event(ch, &got, &ctx);
	err = errno;
	timer(0);
	CHECK(rc == 0, "a signal with SA_RESTART: got %d (%s), want the event", rc, strerror(err));
	CHECK(got == &cq.ibcq && ctx == &marker, "the event is for %p (%p), want %p (%p)", (void *)got, ctx,
	      (void *)&cq.ibcq, (void *)&marker);
	CHECK(ticks >= 5, "the wait ended after %d signals, before the doorbell rang at 5", (int)ticks);

	/* A non-blocking channel with nothing to report. */
	fcntl(ch->fd, F_SETFL, O_NONBLOCK);
	errno = 0;
	rc = ibv_get_cq_event(ch, &got, &ctx);
	err = errno;
	CHECK(rc == -1 && err == EAGAIN, "non-blocking and empty: got %d (%s), want -1 (EAGAIN)", rc, strerror(err));

	close(p[0]);
	close(p[1]);
	close(ch->fd);
	free(ch);
	if (failures)
		return 1;
	printf("cq_event_test: ok\n");
	return 0;
}
