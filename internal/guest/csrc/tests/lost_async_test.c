/*
 * lost_async_test.c: the async fd once the library has recorded a lost
 * daemon (lost.c, docs/design/lost-daemon.md). A dying daemon's
 * descriptors close one by one: a CQ's doorbell pipe may end before the
 * command socket does. Whichever call noticed the loss, the async fd (the
 * channel's pollfd) is readable at once, the events the daemon sent before
 * are still delivered, then the channel reports EIO (ibv_get_async_event's
 * DEVICE_FATAL), and a daemon still holding its end sees the session end.
 * Before vrdma_note_lost shut the socket down, the async fd stayed silent
 * until the socket's own end came (TestVerbsWhenTheDaemonDies failed so on
 * a loaded machine).
 *
 * The context is a fake: its channel is one end of a socketpair, the test
 * holds the daemon's end; its CQ is a fake with the library's doorbell
 * pipe, on a completion channel as ibv_create_cq puts a real one.
 */
#include "verbs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "no_daemon.h"

#include "check.h"

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static int readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The daemon sends an asynchronous event (a QP's, type 1) on its end. */
static void send_event(int fd)
{
	static const char body[] = "{\"type\":1,\"handle\":7,\"qpn\":33,\"reason\":\"local work queue error\"}";
	uint8_t buf[VRDMA_PROTO_HEADER_SIZE + sizeof body];
	put16(buf, VRDMA_PROTO_MAGIC);
	buf[2] = VRDMA_PROTO_VERSION;
	buf[3] = VRDMA_KIND_EVENT;
	put16(buf + 4, VRDMA_CMD_EVENT);
	put16(buf + 6, 0);
	put32(buf + 8, 0);
	put32(buf + 12, sizeof body - 1);
	memcpy(buf + VRDMA_PROTO_HEADER_SIZE, body, sizeof body - 1);
	if (send(fd, buf, VRDMA_PROTO_HEADER_SIZE + sizeof body - 1, MSG_NOSIGNAL) < 0)
		die("send");
}

/* How a case lets the library learn of the loss. */
enum notice {
	DOORBELL_ENDED, /* the CQ's doorbell pipe closes; ibv_get_cq_event finds it */
	NOTED,          /* any other place: vrdma_note_lost itself */
};

static const struct {
	const char *name;
	enum notice how;
	int event_before; /* the daemon sent an event before it died */
} cases[] = {
	{ "a doorbell ended, no event waiting", DOORBELL_ENDED, 0 },
	{ "a doorbell ended, an event waiting", DOORBELL_ENDED, 1 },
	{ "noted elsewhere, no event waiting", NOTED, 0 },
	{ "noted elsewhere, an event waiting", NOTED, 1 },
};

static void run(int i)
{
	const char *name = cases[i].name;
	static struct vrdma_device dev = { .dev = { .name = "vrdma0" } };
	static struct vrdma_context ctx;
	memset(&ctx, 0, sizeof ctx);
	ctx.dev = &dev;
	pthread_mutex_init(&ctx.objs_mu, NULL);
	pthread_mutex_init(&ctx.vctx.context.mutex, NULL);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		die("socketpair");
	if (vrdma_chan_adopt(&ctx.chan, sv[0]) < 0)
		die("vrdma_chan_adopt");
	int daemon = sv[1]; /* the daemon's end: open until the case ends */

	struct ibv_comp_channel *ch = ibv_create_comp_channel(&ctx.vctx.context);
	int p[2];
	if (ch == NULL || pipe2(p, O_CLOEXEC) < 0)
		die("ibv_create_comp_channel");
	struct vrdma_cq cq;
	memset(&cq, 0, sizeof cq);
	cq.rfd = p[0];
	fcntl(cq.rfd, F_SETFL, O_NONBLOCK);
	cq.ibcq.channel = ch;
	cq.ibcq.context = &ctx.vctx.context;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &cq };
	if (epoll_ctl(ch->fd, EPOLL_CTL_ADD, cq.rfd, &ev) < 0)
		die("epoll_ctl");

	if (cases[i].event_before)
		send_event(daemon);
	CHECK(readable(ctx.chan.pollfd) == cases[i].event_before, "%s: the async fd's readability before the loss",
	      name);

	if (cases[i].how == DOORBELL_ENDED) {
		close(p[1]); /* the first of the dying daemon's descriptors to close */
		struct ibv_cq *got;
		void *cqctx;
		errno = 0;
		int rc = ibv_get_cq_event(ch, &got, &cqctx);
		CHECK(rc == -1 && errno == EIO, "%s: ibv_get_cq_event = %d (%s), want -1 (EIO)", name, rc,
		      strerror(errno));
	} else {
		close(p[1]);
		vrdma_note_lost(&ctx);
		vrdma_note_lost(&ctx); /* a second notice changes nothing */
	}
	CHECK(vrdma_is_lost(&ctx), "%s: the loss is not recorded", name);
	CHECK(readable(ctx.chan.pollfd), "%s: the async fd is not readable once the loss is recorded", name);

	struct vrdma_event e = { 0 };
	int r;
	if (cases[i].event_before) {
		r = vrdma_chan_event(&ctx.chan, &e, 0);
		CHECK(r == 1 && e.type == 1 && e.handle == 7 && e.qpn == 33,
		      "%s: the event sent before the loss = %d: type %u handle %u qpn %u", name, r, e.type, e.handle,
		      e.qpn);
		CHECK(readable(ctx.chan.pollfd), "%s: the async fd is not readable after the event before the loss",
		      name);
	}
	r = vrdma_chan_event(&ctx.chan, &e, 0);
	CHECK(r == -EIO && ctx.chan.dead, "%s: vrdma_chan_event after the loss = %d (dead %d), want -EIO", name, r,
	      ctx.chan.dead);
	r = vrdma_chan_event(&ctx.chan, &e, 1);
	CHECK(r == -EIO, "%s: a blocking vrdma_chan_event after the loss = %d, want -EIO", name, r);
	CHECK(readable(ctx.chan.pollfd), "%s: the async fd is not readable after the loss was reported", name);

	char b;
	ssize_t n = recv(daemon, &b, 1, MSG_DONTWAIT);
	CHECK(n == 0, "%s: the daemon's end reads %zd (%s), want the session's end", name, n,
	      n < 0 ? strerror(errno) : "data");

	close(daemon);
	close(cq.rfd);
	ibv_destroy_comp_channel(ch);
	vrdma_chan_close(&ctx.chan);
	pthread_mutex_destroy(&ctx.vctx.context.mutex);
	pthread_mutex_destroy(&ctx.objs_mu);
}

int main(void)
{
	alarm(30); /* a hang guard: the blocking waits below must end on their own */
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		run((int)i);
	if (failures) {
		fprintf(stderr, "lost_async_test: %d failures\n", failures);
		return 1;
	}
	printf("lost_async_test: ok\n");
	return 0;
}
