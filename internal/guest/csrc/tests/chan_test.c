/*
 * chan_test.c: the command channel (chan.c) against a fake daemon: a thread
 * holding the other end of a SOCK_SEQPACKET socketpair (or of a listening
 * socket, for vrdma_chan_open) that plays a script per test: answers
 * requests, sends events before replies, passes descriptors, fails
 * commands, refuses the session, speaks garbage, closes.
 *
 * Connection manager events (cm_event) go to the function librdmacm
 * attaches, decoded; vrdma_chan_drain reads them while no call is made.
 *
 * Every test also checks that no descriptor leaked.
 */
#include "vrdma.h"
#include "vrdma_abi.h"
#include "vrdma_private.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static atomic_int failures;

#define CHECK(cond, ...)                                                          \
	do {                                                                      \
		if (!(cond)) {                                                    \
			failures++;                                               \
			fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                             \
			fputc('\n', stderr);                                      \
		}                                                                 \
	} while (0)

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (d == NULL)
		die("opendir /proc/self/fd");
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

static int cloexec(int fd)
{
	int f = fcntl(fd, F_GETFD);
	return f >= 0 && (f & FD_CLOEXEC);
}

static int readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1;
}

/* ---- the fake daemon's side of the protocol ---- */

struct dmsg {
	uint8_t version, kind;
	uint16_t op, code;
	uint32_t id, bodylen;
	size_t n; /* bytes received, header included */
	char body[VRDMA_PROTO_MAX_MESSAGE];
	int fds[16];
	int nfds;
};

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

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Receives one message; returns the bytes received (0 at the end). */
static ssize_t d_recv(int fd, struct dmsg *m)
{
	static __thread uint8_t buf[VRDMA_PROTO_MAX_MESSAGE + 16];
	char control[CMSG_SPACE(sizeof(int) * (VRDMA_PROTO_MAX_FDS + 1))];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control };
	ssize_t n;

	while ((n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n < 0)
		die("fake daemon: recvmsg");
	memset(m, 0, offsetof(struct dmsg, body));
	m->nfds = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(m->fds + m->nfds, CMSG_DATA(cm), sizeof(int) * (size_t)k);
			m->nfds += k;
		}
	}
	m->n = (size_t)n;
	if (n >= 16) {
		CHECK(buf[0] == 0x52 && buf[1] == 0x76, "request magic %02x%02x", buf[0], buf[1]);
		m->version = buf[2];
		m->kind = buf[3];
		m->op = (uint16_t)(buf[4] | buf[5] << 8);
		m->code = (uint16_t)(buf[6] | buf[7] << 8);
		m->id = get32(buf + 8);
		m->bodylen = get32(buf + 12);
		memcpy(m->body, buf + 16, (size_t)n - 16);
	}
	return n;
}

/* Sends raw bytes with descriptors as one message. */
static void d_send_raw(int fd, const void *buf, size_t len, const int *fds, int nfds)
{
	char control[CMSG_SPACE(sizeof(int) * (VRDMA_PROTO_MAX_FDS + 1))];
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds > 0) {
		memset(control, 0, sizeof control);
		mh.msg_control = control;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	ssize_t n;
	while ((n = sendmsg(fd, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)len)
		die("fake daemon: sendmsg");
}

static void d_send(int fd, uint8_t kind, uint16_t op, uint16_t code, uint32_t id, const char *body, const int *fds,
		   int nfds)
{
	static __thread uint8_t buf[VRDMA_PROTO_MAX_MESSAGE + 16];
	size_t len = body != NULL ? strlen(body) : 0;

	if (len > sizeof buf - 16)
		die("fake daemon: body too large");
	put16(buf, VRDMA_PROTO_MAGIC);
	buf[2] = VRDMA_PROTO_VERSION;
	buf[3] = kind;
	put16(buf + 4, op);
	put16(buf + 6, code);
	put32(buf + 8, id);
	put32(buf + 12, (uint32_t)len);
	memcpy(buf + 16, body, len);
	d_send_raw(fd, buf, 16 + len, fds, nfds);
}

static void d_reply(int fd, const struct dmsg *req, const char *body)
{
	d_send(fd, VRDMA_KIND_REPLY, req->op, VRDMA_CODE_OK, req->id, body, NULL, 0);
}

static void d_event(int fd, const char *body)
{
	d_send(fd, VRDMA_KIND_EVENT, VRDMA_CMD_EVENT, 0, 0, body, NULL, 0);
}

/* ---- running a script against a channel ---- */

struct daemon {
	int fd;           /* the daemon's end */
	pthread_t thread; /* runs script */
	pthread_t client; /* the test's main thread, for signals */
	void (*script)(struct daemon *);
	struct dmsg *m;
	int arg;
};

static void *run_script(void *p)
{
	struct daemon *d = p;
	d->script(d);
	return NULL;
}

/* Connects c to a fake daemon playing script. */
static void start(struct vrdma_chan *c, struct daemon *d, void (*script)(struct daemon *), int arg)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		die("socketpair");
	d->fd = sv[1];
	d->script = script;
	d->client = pthread_self();
	d->arg = arg;
	d->m = malloc(sizeof *d->m);
	if (d->m == NULL)
		die("malloc");
	int r = vrdma_chan_adopt(c, sv[0]);
	CHECK(r == 0, "vrdma_chan_adopt = %d (%s)", r, c->err);
	if (pthread_create(&d->thread, NULL, run_script, d) != 0)
		die("pthread_create");
}

/* Waits for the script to end and closes the daemon's end. */
static void finish(struct daemon *d)
{
	pthread_join(d->thread, NULL);
	if (d->fd >= 0)
		close(d->fd);
	free(d->m);
}

static void d_close(struct daemon *d)
{
	close(d->fd);
	d->fd = -1;
}

/* ---- tests ---- */

static void script_call(struct daemon *d)
{
	struct dmsg *m = d->m;

	CHECK(d_recv(d->fd, m) == 16 + 7, "request of %zu bytes", m->n);
	CHECK(m->version == VRDMA_PROTO_VERSION && m->kind == VRDMA_KIND_REQUEST, "version %u kind %u", m->version,
	      m->kind);
	CHECK(m->op == VRDMA_CMD_QUERY_DEVICE && m->code == 0, "op %u code %u", m->op, m->code);
	CHECK(m->id != 0 && m->bodylen == 7 && memcmp(m->body, "{\"x\":1}", 7) == 0, "id %u body %.*s", m->id,
	      (int)m->bodylen, m->body);
	CHECK(m->nfds == 0, "%d descriptors with a request that has none", m->nfds);
	uint32_t first = m->id;
	d_reply(d->fd, m, "{\"ok\":true}");

	/* The next request: no body, the next id. */
	CHECK(d_recv(d->fd, m) == 16, "empty request of %zu bytes", m->n);
	CHECK(m->id == first + 1 && m->op == VRDMA_CMD_ALLOC_PD && m->bodylen == 0, "id %u (first %u) op %u len %u",
	      m->id, first, m->op, m->bodylen);
	d_reply(d->fd, m, "");

	/* A reply the caller does not want to see, to a request whose id
	 * wrapped around: 0 is never used. */
	d_recv(d->fd, m);
	CHECK(m->id == 1, "the id after UINT32_MAX is %u, want 1", m->id);
	d_reply(d->fd, m, "{\"ignored\":1}");
}

static void test_call(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	char reply[64];
	size_t n = 99;

	start(&c, &d, script_call, 0);
	CHECK(cloexec(c.fd) && cloexec(c.evfd) && cloexec(c.pollfd), "channel descriptors without FD_CLOEXEC");
	int r = vrdma_call(&c, VRDMA_CMD_QUERY_DEVICE, "{\"x\":1}", 7, NULL, 0, reply, sizeof reply, &n, NULL, NULL);
	CHECK(r == 0 && n == 11 && strcmp(reply, "{\"ok\":true}") == 0, "call = %d, %zu bytes: %s (%s)", r, n, reply,
	      c.err);
	r = vrdma_call(&c, VRDMA_CMD_ALLOC_PD, NULL, 0, NULL, 0, reply, sizeof reply, &n, NULL, NULL);
	CHECK(r == 0 && n == 0 && reply[0] == '\0', "empty call = %d, %zu bytes", r, n);
	c.next_id = UINT32_MAX;
	r = vrdma_call(&c, VRDMA_CMD_ALLOC_PD, NULL, 0, NULL, 0, NULL, 0, NULL, NULL, NULL);
	CHECK(r == 0, "call without a reply buffer = %d", r);
	CHECK(!c.dead && c.err[0] == '\0', "dead %d err %s", c.dead, c.err);
	finish(&d);
	vrdma_chan_close(&c);
	vrdma_chan_close(&c); /* harmless twice */
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

static void script_event_before_reply(struct daemon *d)
{
	struct dmsg *m = d->m;
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe2");
	d_recv(d->fd, m);
	d_event(d->fd, "{\"type\":1,\"handle\":7,\"qpn\":33,\"reason\":\"local work queue error\"}");
	d_send(d->fd, VRDMA_KIND_EVENT, VRDMA_CMD_CM_EVENT, 0, 0, "{\"type\":4}", p, 2); /* dropped, fds closed */
	d_event(d->fd, "{");                                                             /* not JSON: dropped */
	d_event(d->fd, "{\"type\":300,\"handle\":1}");                                   /* type out of range */
	d_event(d->fd, "{\"type\":1,\"handle\":4294967296}");                            /* handle out of range */
	d_event(d->fd, "{\"type\":1,\"handle\":1,\"qpn\":\"x\"}");                       /* qpn not a number */
	d_event(d->fd, "{\"handle\":1}");                                                /* no type */
	d_send(d->fd, VRDMA_KIND_EVENT, VRDMA_CMD_EVENT, 0, 0, "{\"type\":3,\"handle\":8}", p, 1);
	d_reply(d->fd, m, "{}");
	close(p[0]);
	close(p[1]);
}

static void test_event_before_reply(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	struct vrdma_event ev = { 0 };
	char reply[8];

	start(&c, &d, script_event_before_reply, 0);
	CHECK(!readable(c.pollfd), "pollfd readable before any event");
	int r = vrdma_call(&c, VRDMA_CMD_MODIFY_QP, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == 0 && strcmp(reply, "{}") == 0, "call = %d (%s)", r, c.err);
	CHECK(c.evcount == 2, "%u events queued, want 2", c.evcount);
	CHECK(readable(c.pollfd), "pollfd not readable with events queued");
	r = vrdma_chan_event(&c, &ev, 0);
	CHECK(r == 1 && ev.type == 1 && ev.handle == 7 && ev.qpn == 33, "first event = %d: type %u handle %u qpn %u", r,
	      ev.type, ev.handle, ev.qpn);
	CHECK(readable(c.pollfd), "pollfd not readable with an event left");
	r = vrdma_chan_event(&c, &ev, 0);
	CHECK(r == 1 && ev.type == 3 && ev.handle == 8 && ev.qpn == 0, "second event = %d: type %u handle %u qpn %u",
	      r, ev.type, ev.handle, ev.qpn);
	r = vrdma_chan_event(&c, &ev, 0);
	CHECK(r == 0, "third event = %d, want 0", r);
	CHECK(!readable(c.pollfd), "pollfd readable with no event left");
	finish(&d);
	vrdma_chan_close(&c);
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

static void script_fds(struct daemon *d)
{
	struct dmsg *m = d->m;
	int q[2];

	d_recv(d->fd, m);
	CHECK(m->nfds == 2, "request came with %d descriptors, want 2", m->nfds);
	if (m->nfds == 2) {
		CHECK(write(m->fds[1], "hi", 2) == 2, "write to the passed pipe");
		close(m->fds[0]);
		close(m->fds[1]);
	}
	if (pipe2(q, O_CLOEXEC) < 0)
		die("pipe2");
	int efd = eventfd(0, EFD_CLOEXEC);
	int three[3] = { q[0], q[1], efd };
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, 0, m->id, "{\"fds\":3}", three, 3);
	close(q[0]);
	close(q[1]);
	close(efd);

	/* A reply with a descriptor the caller has no room for. */
	d_recv(d->fd, m);
	if (pipe2(q, O_CLOEXEC) < 0)
		die("pipe2");
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, 0, m->id, "{}", q, 2);
	close(q[0]);
	close(q[1]);
}

static void test_fds(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	char reply[32], buf[4] = "";
	int p[2], rfds[2] = { -1, -1 }, nrfds = 2;

	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe2");
	start(&c, &d, script_fds, 0);
	int r = vrdma_call(&c, VRDMA_CMD_CREATE_CQ, "{}", 2, p, 2, reply, sizeof reply, NULL, rfds, &nrfds);
	CHECK(r == 0 && nrfds == 2, "call = %d with %d descriptors (%s)", r, nrfds, c.err);
	CHECK(fcntl(p[0], F_GETFD) >= 0 && fcntl(p[1], F_GETFD) >= 0, "the call closed the caller's descriptors");
	CHECK(read(p[0], buf, 2) == 2 && memcmp(buf, "hi", 2) == 0, "the daemon's write did not reach our pipe");
	if (r == 0 && nrfds == 2) {
		CHECK(cloexec(rfds[0]) && cloexec(rfds[1]), "received descriptors without FD_CLOEXEC");
		CHECK(write(rfds[1], "ok", 2) == 2 && read(rfds[0], buf, 2) == 2 && memcmp(buf, "ok", 2) == 0,
		      "the received pipe does not work");
		close(rfds[0]);
		close(rfds[1]);
	}
	r = vrdma_call(&c, VRDMA_CMD_CREATE_CQ, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == 0, "call without room for descriptors = %d", r);
	finish(&d);
	vrdma_chan_close(&c);
	close(p[0]);
	close(p[1]);
	CHECK(count_fds() == fds0, "%d descriptors leaked (the third, unwanted one?)", count_fds() - fds0);
}

static void script_errors(struct daemon *d)
{
	struct dmsg *m = d->m;
	int p[2];

	d_recv(d->fd, m);
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe2");
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, VRDMA_CODE_NOT_FOUND, m->id, "{\"error\":\"no PD with handle 3\"}", p, 2);
	close(p[0]);
	close(p[1]);
	d_recv(d->fd, m);
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, VRDMA_CODE_LIMIT, m->id, "", NULL, 0);
	d_recv(d->fd, m);
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, 77, m->id, "{\"error\":\"\\u00e9\\n\"}", NULL, 0);
	d_recv(d->fd, m);
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, VRDMA_CODE_MEMLOCK, m->id, "garbage", NULL, 0);
	d_recv(d->fd, m);
	char body[2000];
	int n = snprintf(body, sizeof body, "{\"error\":\"");
	memset(body + n, 'x', 1000);
	snprintf(body + n + 1000, sizeof body - (size_t)n - 1000, "\"}");
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, VRDMA_CODE_INVALID, m->id, body, NULL, 0);
	d_recv(d->fd, m);
	d_reply(d->fd, m, "{}");
}

static void test_errors(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	char reply[32];
	int rfds[4], nrfds = 4;

	start(&c, &d, script_errors, 0);
	int r = vrdma_call(&c, VRDMA_CMD_DEALLOC_PD, "{}", 2, NULL, 0, reply, sizeof reply, NULL, rfds, &nrfds);
	CHECK(r == -ENOENT && strcmp(c.err, "no PD with handle 3") == 0 && nrfds == 0, "not found = %d (%s), %d fds", r,
	      c.err, nrfds);
	r = vrdma_call(&c, VRDMA_CMD_ALLOC_PD, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -ENOMEM && strstr(c.err, "limit reached") != NULL, "limit = %d (%s)", r, c.err);
	r = vrdma_call(&c, VRDMA_CMD_ALLOC_PD, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -EIO && strcmp(c.err, "\xc3\xa9\n") == 0, "unknown code = %d (%s)", r, c.err);
	r = vrdma_call(&c, VRDMA_CMD_REG_MR, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -ENOMEM && strstr(c.err, "cannot lock memory") != NULL, "memlock = %d (%s)", r, c.err);
	r = vrdma_call(&c, VRDMA_CMD_REG_MR, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -EINVAL && strlen(c.err) == VRDMA_ERRMSG_LEN - 1 && strspn(c.err, "x") == VRDMA_ERRMSG_LEN - 1,
	      "a long message = %d, %zu bytes kept", r, strlen(c.err));
	CHECK(!c.dead, "a failed command killed the channel");
	r = vrdma_call(&c, VRDMA_CMD_ALLOC_PD, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == 0 && c.err[0] == '\0', "call after errors = %d, err still %s", r, c.err);
	finish(&d);
	vrdma_chan_close(&c);
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

static void test_code_errno(void)
{
	static const struct {
		uint16_t code;
		int want;
	} cases[] = {
		{ VRDMA_CODE_OK, 0 },           { VRDMA_CODE_INVALID, EINVAL },  { VRDMA_CODE_NOT_FOUND, ENOENT },
		{ VRDMA_CODE_LIMIT, ENOMEM },   { VRDMA_CODE_BUSY, EBUSY },      { VRDMA_CODE_STATE, EINVAL },
		{ VRDMA_CODE_MEMLOCK, ENOMEM }, { VRDMA_CODE_PERMISSION, EACCES }, { VRDMA_CODE_VERSION, EPROTO },
		{ VRDMA_CODE_INTERNAL, EIO },   { VRDMA_CODE_ATTR, EINVAL },     { 11, EIO },
		{ 0xffff, EIO },
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
		CHECK(vrdma_code_errno(cases[k].code) == cases[k].want, "code %u -> %d, want %d", cases[k].code,
		      vrdma_code_errno(cases[k].code), cases[k].want);
}

static void script_unexpected(struct daemon *d)
{
	struct dmsg *m = d->m;
	int p[2];

	d_recv(d->fd, m);
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe2");
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, 0, m->id + 100, "\"stale\"", p, 2);
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, VRDMA_CODE_NOT_FOUND, m->id + 50, "{\"error\":\"old\"}", p, 1);
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, 0, 0, "{}", p, 1);
	d_send(d->fd, VRDMA_KIND_REQUEST, VRDMA_CMD_HELLO, 0, 5, "{}", p, 2);
	close(p[0]);
	close(p[1]);
	d_reply(d->fd, m, "\"fresh\"");
}

static void test_unexpected_id(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	char reply[32];

	start(&c, &d, script_unexpected, 0);
	int r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == 0 && strcmp(reply, "\"fresh\"") == 0, "call = %d: %s (%s)", r, reply, c.err);
	CHECK(!c.dead, "dead after replies to no request");
	finish(&d);
	vrdma_chan_close(&c);
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

/* Garbage the daemon may send; each ends the channel. */
enum garbage { G_SHORT, G_MAGIC, G_KIND0, G_KIND4, G_VERSION, G_LONGER, G_SHORTER, G_HUGE, G_TRUNC, G_FDS, G_EMPTYDGRAM, G_MAX };

static const char *const garbage_names[] = { "short",  "magic",          "kind 0",         "kind 4",
					     "version", "length too long", "length too short", "huge",
					     "truncated",
					     "too many descriptors", "empty datagram" };

static const char *const garbage_words[] = { "shorter than its header", "magic", "unknown kind", "unknown kind",
					     "protocol version 2", "body length", "body length", "larger than", "larger than",
					     "descriptors", "went away" };

static void script_garbage(struct daemon *d)
{
	struct dmsg *m = d->m;
	static __thread uint8_t buf[VRDMA_PROTO_MAX_MESSAGE + 100];
	size_t len = 16 + 2;
	int fds[VRDMA_PROTO_MAX_FDS + 1], nfds = 0; /* one more than a message may carry */

	d_recv(d->fd, m);
	put16(buf, VRDMA_PROTO_MAGIC);
	buf[2] = VRDMA_PROTO_VERSION;
	buf[3] = VRDMA_KIND_REPLY;
	put16(buf + 4, m->op);
	put16(buf + 6, 0);
	put32(buf + 8, m->id);
	put32(buf + 12, 2);
	memcpy(buf + 16, "{}", 2);
	switch (d->arg) {
	case G_SHORT: len = 8; break;
	case G_MAGIC: buf[0] = 'x'; break;
	case G_KIND0: buf[3] = 0; break;
	case G_KIND4: buf[3] = 4; break;
	case G_VERSION: buf[2] = 2; break;
	case G_LONGER: put32(buf + 12, 3); break;
	case G_SHORTER: put32(buf + 12, 1); break;
	case G_HUGE: /* one byte more than a message may have */
		len = VRDMA_PROTO_MAX_MESSAGE + 1;
		put32(buf + 12, (uint32_t)len - 16);
		memset(buf + 16, ' ', len - 16);
		break;
	case G_TRUNC: /* more than the receive buffer holds */
		len = sizeof buf;
		put32(buf + 12, (uint32_t)len - 16);
		memset(buf + 16, ' ', len - 16);
		break;
	case G_FDS:
		for (nfds = 0; nfds < (int)VRDMA_PROTO_MAX_FDS + 1; nfds++)
			if ((fds[nfds] = eventfd(0, EFD_CLOEXEC)) < 0)
				die("eventfd");
		break;
	case G_EMPTYDGRAM: len = 0; break;
	}
	d_send_raw(d->fd, buf, len, fds, nfds);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}

static void test_garbage(void)
{
	for (int g = 0; g < G_MAX; g++) {
		int fds0 = count_fds();
		struct vrdma_chan c;
		struct daemon d;
		struct vrdma_event ev = { 0 };
		char reply[32];

		start(&c, &d, script_garbage, g);
		int r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
		CHECK(r == -EIO && c.dead, "%s: call = %d, dead %d", garbage_names[g], r, c.dead);
		CHECK(strstr(c.err, garbage_words[g]) != NULL, "%s: err = %s", garbage_names[g], c.err);
		/* The daemon's end is still open: the eventfd says the channel died. */
		CHECK(readable(c.pollfd), "%s: pollfd not readable on a dead channel", garbage_names[g]);
		finish(&d);
		/* Dead: fails at once, without sending. */
		r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
		CHECK(r == -EIO, "%s: a call on a dead channel = %d", garbage_names[g], r);
		r = vrdma_chan_event(&c, &ev, 1);
		CHECK(r == -EIO, "%s: vrdma_chan_event on a dead channel = %d", garbage_names[g], r);
		vrdma_chan_close(&c);
		CHECK(count_fds() == fds0, "%s: %d descriptors leaked", garbage_names[g], count_fds() - fds0);
	}
}

/* The empty datagram above is how the Go side sees an end, too; a real end: */
static void script_close_after_request(struct daemon *d)
{
	d_recv(d->fd, d->m);
	d_close(d);
}

static void script_close_at_once(struct daemon *d)
{
	d_close(d);
}

static void test_close(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	struct vrdma_event ev = { 0 };
	char reply[32];

	start(&c, &d, script_close_after_request, 0);
	int r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -EIO && c.dead && strstr(c.err, "went away") != NULL, "call = %d, dead %d (%s)", r, c.dead, c.err);
	finish(&d);
	vrdma_chan_close(&c);

	/* Closed before the request: sending fails (EPIPE; no SIGPIPE, which
	 * would end the test). */
	start(&c, &d, script_close_at_once, 0);
	finish(&d);
	r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -EIO && c.dead && strstr(c.err, "went away") != NULL, "call after the end = %d, dead %d (%s)", r,
	      c.dead, c.err);
	vrdma_chan_close(&c);

	/* Waiting for an event when the daemon goes. */
	start(&c, &d, script_close_at_once, 0);
	r = vrdma_chan_event(&c, &ev, 1);
	CHECK(r == -EIO && c.dead, "event wait at the end = %d, dead %d", r, c.dead);
	finish(&d);
	vrdma_chan_close(&c);
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

static const char refusal[] = "{\"error\":\"too many sessions for uid 1000 (limit 4)\"}";

static void script_refuse_at_once(struct daemon *d)
{
	d_send(d->fd, VRDMA_KIND_REPLY, VRDMA_CMD_HELLO, VRDMA_CODE_LIMIT, 0, refusal, NULL, 0);
	d_close(d);
}

static void script_refuse_unread(struct daemon *d)
{
	struct pollfd p = { .fd = d->fd, .events = POLLIN };

	/* The request is there, unread, when the daemon refuses and closes:
	 * the client's next read reports a reset before the refusal. */
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	d_send(d->fd, VRDMA_KIND_REPLY, VRDMA_CMD_HELLO, VRDMA_CODE_LIMIT, 0, refusal, NULL, 0);
	d_close(d);
}

static void test_refused(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	struct vrdma_event ev = { 0 };
	char reply[32];
	const char *want = "too many sessions for uid 1000 (limit 4)";

	/* Refused and closed before our first request. */
	start(&c, &d, script_refuse_at_once, 0);
	finish(&d);
	int r = vrdma_call(&c, VRDMA_CMD_HELLO, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -ENOMEM && c.dead && strcmp(c.err, want) == 0, "call = %d, dead %d (%s)", r, c.dead, c.err);
	r = vrdma_call(&c, VRDMA_CMD_HELLO, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -ENOMEM && strcmp(c.err, want) == 0, "second call = %d (%s)", r, c.err);
	r = vrdma_chan_event(&c, &ev, 0);
	CHECK(r == -ENOMEM, "event = %d", r);
	vrdma_chan_close(&c);

	/* Refused with our request unread. */
	start(&c, &d, script_refuse_unread, 0);
	r = vrdma_call(&c, VRDMA_CMD_HELLO, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -ENOMEM && c.dead && strcmp(c.err, want) == 0, "call with the request unread = %d, dead %d (%s)", r,
	      c.dead, c.err);
	finish(&d);
	vrdma_chan_close(&c);

	/* Refused and closed with a message of ours unread, while idle: the
	 * kernel reports a reset before the refusal, to a read ... */
	start(&c, &d, script_refuse_unread, 0);
	if (send(c.fd, "unread", 6, MSG_NOSIGNAL) != 6)
		die("send");
	finish(&d);
	r = vrdma_chan_event(&c, &ev, 0);
	CHECK(r == -ENOMEM && c.dead && strcmp(c.err, want) == 0, "event after a reset = %d, dead %d (%s)", r, c.dead,
	      c.err);
	vrdma_chan_close(&c);
	/* ... or to the next send. */
	start(&c, &d, script_refuse_unread, 0);
	if (send(c.fd, "unread", 6, MSG_NOSIGNAL) != 6)
		die("send");
	finish(&d);
	r = vrdma_call(&c, VRDMA_CMD_HELLO, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -ENOMEM && c.dead && strcmp(c.err, want) == 0, "call after a reset = %d, dead %d (%s)", r, c.dead,
	      c.err);
	vrdma_chan_close(&c);

	/* Refused while idle: the event reader learns it. */
	start(&c, &d, script_refuse_at_once, 0);
	r = vrdma_chan_event(&c, &ev, 1);
	CHECK(r == -ENOMEM && c.dead && strcmp(c.err, want) == 0, "event wait = %d, dead %d (%s)", r, c.dead, c.err);
	finish(&d);
	vrdma_chan_close(&c);
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

static int go_pipe[2];

static void script_idle_events(struct daemon *d)
{
	int p[2];
	char b;

	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe2");
	d_event(d->fd, "{\"type\":9,\"handle\":0}");
	d_send(d->fd, VRDMA_KIND_REPLY, VRDMA_CMD_HELLO, 0, 999, "{}", p, 2); /* a reply to nothing, while idle */
	d_event(d->fd, "{\"type\":10,\"handle\":0}");
	close(p[0]);
	close(p[1]);
	/* Then one event after the client started waiting, most likely. */
	if (read(go_pipe[0], &b, 1) != 1)
		die("read");
	usleep(20000);
	d_event(d->fd, "{\"type\":11,\"handle\":2,\"qpn\":5}");
}

static void test_idle_events(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	struct vrdma_event ev = { 0 };

	if (pipe2(go_pipe, O_CLOEXEC) < 0)
		die("pipe2");
	start(&c, &d, script_idle_events, 0);
	struct pollfd p = { .fd = c.pollfd, .events = POLLIN };
	CHECK(poll(&p, 1, -1) == 1, "poll on pollfd");
	int r = vrdma_chan_event(&c, &ev, 0);
	CHECK(r == 1 && ev.type == 9, "first idle event = %d, type %u", r, ev.type);
	r = vrdma_chan_event(&c, &ev, 1);
	CHECK(r == 1 && ev.type == 10, "second idle event = %d, type %u", r, ev.type);
	r = vrdma_chan_event(&c, &ev, 0);
	CHECK(r == 0, "no third event yet = %d", r);
	CHECK(!readable(c.pollfd), "pollfd readable with nothing waiting");
	if (write(go_pipe[1], "g", 1) != 1)
		die("write");
	r = vrdma_chan_event(&c, &ev, 1);
	CHECK(r == 1 && ev.type == 11 && ev.handle == 2 && ev.qpn == 5, "waited event = %d, type %u", r, ev.type);
	finish(&d);
	vrdma_chan_close(&c);
	close(go_pipe[0]);
	close(go_pipe[1]);
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

static void script_overflow(struct daemon *d)
{
	char body[64];

	d_recv(d->fd, d->m);
	for (int i = 1; i <= VRDMA_EVQ_LEN + 5; i++) {
		snprintf(body, sizeof body, "{\"type\":1,\"handle\":%d}", i);
		d_event(d->fd, body);
	}
	d_reply(d->fd, d->m, "{}");
}

static void test_overflow(void)
{
	struct vrdma_chan c;
	struct daemon d;
	struct vrdma_event ev = { 0 };

	start(&c, &d, script_overflow, 0);
	int r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, NULL, 0, NULL, NULL, NULL);
	CHECK(r == 0, "call = %d (%s)", r, c.err);
	CHECK(c.evcount == VRDMA_EVQ_LEN, "%u events queued", c.evcount);
	/* The oldest five were dropped; the rest come in order. */
	for (uint32_t want = 6; want <= VRDMA_EVQ_LEN + 5; want++) {
		r = vrdma_chan_event(&c, &ev, 0);
		if (r != 1 || ev.handle != want) {
			CHECK(0, "event = %d, handle %u, want %u", r, ev.handle, want);
			break;
		}
	}
	CHECK(vrdma_chan_event(&c, &ev, 0) == 0, "more events than the queue holds");
	finish(&d);
	vrdma_chan_close(&c);
}

static atomic_int signals;

static void on_signal(int sig)
{
	(void)sig;
	signals++;
}

static void script_signals(struct daemon *d)
{
	d_recv(d->fd, d->m);
	for (int i = 0; i < 20; i++) {
		pthread_kill(d->client, SIGUSR1);
		usleep(1000);
	}
	d_reply(d->fd, d->m, "\"after signals\"");
	for (int i = 0; i < 20; i++) {
		pthread_kill(d->client, SIGUSR1);
		usleep(1000);
	}
	d_event(d->fd, "{\"type\":2,\"handle\":1}");
}

static void test_eintr(void)
{
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: calls fail with EINTR */
	struct vrdma_chan c;
	struct daemon d;
	struct vrdma_event ev = { 0 };
	char reply[32];

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	start(&c, &d, script_signals, 0);
	int r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == 0 && strcmp(reply, "\"after signals\"") == 0, "call under signals = %d (%s)", r, c.err);
	r = vrdma_chan_event(&c, &ev, 1);
	CHECK(r == 1 && ev.type == 2, "event wait under signals = %d", r);
	finish(&d);
	vrdma_chan_close(&c);
	CHECK(signals > 0, "no signal arrived");
	signal(SIGUSR1, SIG_DFL);
}

static void script_limits(struct daemon *d)
{
	struct dmsg *m = d->m;
	static __thread char body[VRDMA_PROTO_MAX_MESSAGE - 16 + 1];
	int p[2];

	/* The largest request, then the largest reply. */
	d_recv(d->fd, m);
	CHECK(m->n == VRDMA_PROTO_MAX_MESSAGE && m->bodylen == VRDMA_PROTO_MAX_MESSAGE - 16, "largest request: %zu bytes",
	      m->n);
	memset(body, 'a', sizeof body - 1);
	body[0] = '"';
	body[sizeof body - 2] = '"';
	body[sizeof body - 1] = '\0';
	d_reply(d->fd, m, body);

	/* A reply larger than the caller's buffer, with a descriptor. */
	d_recv(d->fd, m);
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe2");
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, 0, m->id, "{\"a long reply\":1}", p, 2);
	close(p[0]);
	close(p[1]);

	d_recv(d->fd, m);
	d_reply(d->fd, m, "{}");
}

static void test_limits(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	size_t max = VRDMA_PROTO_MAX_MESSAGE - VRDMA_PROTO_HEADER_SIZE;
	char *big = malloc(max + 1);
	char small[8];
	size_t n;
	int fds[VRDMA_PROTO_MAX_FDS + 1], rfds[2], nrfds = 2; /* one more than a message may carry */
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		fds[i] = (int)(i % 3);

	if (big == NULL)
		die("malloc");
	memset(big, ' ', max + 1);
	start(&c, &d, script_limits, 0);
	int r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, big, max + 1, NULL, 0, NULL, 0, NULL, NULL, NULL);
	CHECK(r == -EMSGSIZE, "a request too large = %d", r);
	r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, fds, (int)VRDMA_PROTO_MAX_FDS + 1, NULL, 0, NULL, NULL, NULL);
	CHECK(r == -EINVAL, "too many descriptors = %d", r);
	r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, NULL, 2, NULL, 0, NULL, 0, NULL, NULL, NULL);
	CHECK(r == -EINVAL, "a length without a body = %d", r);

	r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, big, max, NULL, 0, big, max + 1, &n, NULL, NULL);
	CHECK(r == 0 && n == max && big[0] == '"' && big[max] == '\0', "largest request and reply = %d, %zu bytes (%s)",
	      r, n, c.err);
	r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, small, sizeof small, &n, rfds, &nrfds);
	CHECK(r == -EMSGSIZE && n == 0 && nrfds == 0, "a reply too large = %d, %zu bytes, %d fds", r, n, nrfds);
	CHECK(!c.dead, "a reply too large killed the channel");
	r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, small, sizeof small, &n, NULL, NULL);
	CHECK(r == 0 && strcmp(small, "{}") == 0, "call after = %d", r);
	finish(&d);
	vrdma_chan_close(&c);
	free(big);
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

static void script_waiter(struct daemon *d)
{
	d_recv(d->fd, d->m);
	d_event(d->fd, "{\"type\":6,\"handle\":12}");
	d_reply(d->fd, d->m, "{}");
}

static void *wait_event(void *p)
{
	struct vrdma_chan *c = p;
	static struct vrdma_event ev;
	int r = vrdma_chan_event(c, &ev, 1);

	CHECK(r == 1 && ev.type == 6 && ev.handle == 12, "waiter got %d, type %u", r, ev.type);
	return NULL;
}

/* An event a call reads wakes a thread waiting on the channel. */
static void test_waiter(void)
{
	struct vrdma_chan c;
	struct daemon d;
	pthread_t w;

	start(&c, &d, script_waiter, 0);
	if (pthread_create(&w, NULL, wait_event, &c) != 0)
		die("pthread_create");
	int r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, NULL, 0, NULL, NULL, NULL);
	CHECK(r == 0, "call = %d", r);
	pthread_join(w, NULL);
	finish(&d);
	vrdma_chan_close(&c);
}

struct listener {
	int fd;
	pthread_t thread;
};

static void *serve_one(void *p)
{
	struct listener *l = p;
	struct dmsg *m = malloc(sizeof *m);
	int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0 || m == NULL)
		die("accept4");
	if (d_recv(fd, m) > 0)
		d_reply(fd, m, "{\"hello\":1}");
	close(fd);
	free(m);
	return NULL;
}

static void listen_at(struct listener *l, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(path);

	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	l->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0 ||
	    listen(l->fd, 4) < 0)
		die("listen");
	if (pthread_create(&l->thread, NULL, serve_one, l) != 0)
		die("pthread_create");
}

static void open_and_call(const char *path)
{
	struct vrdma_chan c;
	char reply[32];

	int r = vrdma_chan_open(&c, path);
	CHECK(r == 0, "open(%s) = %d (%s)", path, r, c.err);
	if (r != 0)
		return;
	CHECK(cloexec(c.fd) && cloexec(c.evfd) && cloexec(c.pollfd), "open(%s): descriptors without FD_CLOEXEC", path);
	r = vrdma_call(&c, VRDMA_CMD_HELLO, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == 0 && strcmp(reply, "{\"hello\":1}") == 0, "call through open(%s) = %d (%s)", path, r, c.err);
	vrdma_chan_close(&c);
}

static void test_open(void)
{
	int fds0 = count_fds();
	char dir[] = "/tmp/vrdma-chan-test-XXXXXX", path[128], abstract[64];
	struct vrdma_chan c;
	struct listener l;

	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	snprintf(path, sizeof path, "%s/missing.sock", dir);
	int r = vrdma_chan_open(&c, path);
	CHECK(r == -ENOENT && strstr(c.err, path) != NULL && strstr(c.err, "vrdma daemon") != NULL,
	      "open of no socket = %d (%s)", r, c.err);
	vrdma_chan_close(&c); /* harmless after a failed open */

	char longpath[200];
	memset(longpath, 'x', sizeof longpath - 1);
	longpath[0] = '/';
	longpath[sizeof longpath - 1] = '\0';
	r = vrdma_chan_open(&c, longpath);
	CHECK(r == -ENAMETOOLONG, "open of a too long path = %d", r);
	r = vrdma_chan_open(&c, "");
	CHECK(r == -EINVAL && c.err[0] != '\0', "open of no path = %d", r);

	/* A socket nobody listens on. */
	snprintf(path, sizeof path, "%s/dead.sock", dir);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, path, strlen(path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) < 0)
		die("bind");
	close(s);
	r = vrdma_chan_open(&c, path);
	CHECK(r == -ECONNREFUSED && strstr(c.err, "start it") != NULL, "open of a dead socket = %d (%s)", r, c.err);
	unlink(path);

	snprintf(path, sizeof path, "%s/vrdma.sock", dir);
	listen_at(&l, path);
	open_and_call(path);
	pthread_join(l.thread, NULL);
	close(l.fd);
	unlink(path);

	snprintf(abstract, sizeof abstract, "@vrdma-chan-test-%d", (int)getpid());
	listen_at(&l, abstract);
	open_and_call(abstract);
	pthread_join(l.thread, NULL);
	close(l.fd);

	/* adopt wants a seqpacket socket, and owns what it is given. */
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe2");
	r = vrdma_chan_adopt(&c, p[0]);
	CHECK(r == -EINVAL && fcntl(p[0], F_GETFD) < 0, "adopt of a pipe = %d, closed %d", r, fcntl(p[0], F_GETFD) < 0);
	close(p[1]);
	int st[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, st) < 0)
		die("socketpair");
	r = vrdma_chan_adopt(&c, st[0]);
	CHECK(r == -EINVAL, "adopt of a stream socket = %d", r);
	close(st[1]);
	rmdir(dir);
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

/* ---- connection manager events ---- */

struct cm_seen {
	int n;
	struct vrdma_cm_ev ev[8];
};

static void record_cm(void *arg, const struct vrdma_cm_ev *ev)
{
	struct cm_seen *s = arg;
	if (s->n < 8)
		s->ev[s->n] = *ev;
	s->n++;
}

static void d_cm_event(int fd, const char *body)
{
	d_send(fd, VRDMA_KIND_EVENT, VRDMA_CMD_CM_EVENT, 0, 0, body, NULL, 0);
}

static void script_cm_events(struct daemon *d)
{
	struct dmsg *m = d->m;

	d_recv(d->fd, m);
	/* While a call waits for its reply: a request, a broken one, a verbs event. */
	d_cm_event(d->fd, "{\"type\":1,\"id\":2147483649,\"listener\":3,\"qp_type\":2,\"qpn\":17,\"psn\":5,"
			  "\"mtu\":3,\"rd_atomic\":16,\"gid\":\"AAAAAAAAAAAAAP//CgAAAQ==\",\"local_port\":7471,"
			  "\"private_data\":\"aGVsbG8=\"}");
	d_cm_event(d->fd, "{\"type\":9,\"id\":1}"); /* no such type: dropped */
	d_event(d->fd, "{\"type\":1,\"handle\":7}");
	d_reply(d->fd, m, "{}");
	/* While nobody calls: read by vrdma_chan_drain. */
	d_cm_event(d->fd, "{\"type\":4,\"id\":1,\"reason\":28,\"text\":\"no\"}");
	d_cm_event(d->fd, "{\"type\":7,\"id\":2}");
	d_recv(d->fd, m); /* the test's next call: the events are read by then */
	d_reply(d->fd, m, "{}");
	d_close(d);
}

static void test_cm_events(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	struct cm_seen seen = { 0 };
	struct vrdma_event ev;
	char reply[8];

	start(&c, &d, script_cm_events, 0);
	c.cm_fn = record_cm;
	c.cm_arg = &seen;
	int r = vrdma_call(&c, VRDMA_CMD_CM_LISTEN, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == 0, "call = %d (%s)", r, c.err);
	CHECK(seen.n == 1, "%d CM events passed on during the call, want 1 (the broken one dropped)", seen.n);
	if (seen.n >= 1) {
		const struct vrdma_cm_ev *e = &seen.ev[0];
		static const uint8_t gid[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1 };
		CHECK(e->type == VRDMA_CM_EV_REQUEST && e->id == 2147483649u && e->listener == 3 && e->qp_type == 2 &&
			      e->qpn == 17 && e->psn == 5 && e->mtu == 3 && e->rd_atomic == 16 && e->local_port == 7471,
		      "request: type %u id %u listener %u qp_type %u qpn %u psn %u mtu %u rd %u port %u", e->type, e->id,
		      e->listener, e->qp_type, e->qpn, e->psn, e->mtu, e->rd_atomic, e->local_port);
		CHECK(memcmp(e->gid, gid, 16) == 0, "the request's GID did not decode");
		CHECK(e->private_len == 5 && memcmp(e->private_data, "hello", 5) == 0, "private data of %zu bytes",
		      e->private_len);
	}
	CHECK(vrdma_chan_event(&c, &ev, 0) == 1 && ev.type == 1 && ev.handle == 7, "the verbs event was not queued");
	/* Idle: drain reads what waits, and no more. */
	struct pollfd p = { .fd = c.fd, .events = POLLIN };
	CHECK(poll(&p, 1, 5000) == 1, "the idle events never came");
	while (seen.n < 3) {
		r = vrdma_chan_drain(&c);
		CHECK(r == 0, "drain = %d", r);
		if (r != 0)
			break;
		if (seen.n < 3)
			(void)poll(&p, 1, 5000);
	}
	CHECK(seen.n == 3 && seen.ev[1].type == VRDMA_CM_EV_REJECTED && seen.ev[1].reason == 28 &&
		      strcmp(seen.ev[1].text, "no") == 0 && seen.ev[2].type == VRDMA_CM_EV_DISCONNECTED &&
		      seen.ev[2].id == 2,
	      "after drain: %d events", seen.n);
	r = vrdma_call(&c, VRDMA_CMD_CM_LISTEN, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == 0, "second call = %d (%s)", r, c.err);
	finish(&d);
	CHECK(vrdma_chan_drain(&c) == -EIO, "drain after the daemon closed: want -EIO");
	vrdma_chan_close(&c);
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

/* ---- a reply in parts (VRDMA_KIND_MORE) ---- */

#define PART_LEN 60000

static void script_parts(struct daemon *d)
{
	struct dmsg *m = d->m;
	char *part = malloc(PART_LEN + 1);
	int p[2];

	if (part == NULL || pipe2(p, O_CLOEXEC) < 0)
		die("script_parts");
	d_recv(d->fd, m);
	/* Three parts, the descriptor with the first, an event between. */
	memset(part, 'a', PART_LEN);
	memcpy(part, "{\"s\":\"", 6);
	part[PART_LEN] = '\0';
	d_send(d->fd, VRDMA_KIND_REPLY | VRDMA_KIND_MORE, m->op, VRDMA_CODE_OK, m->id, part, &p[0], 1);
	d_event(d->fd, "{\"type\":1,\"handle\":7}");
	memset(part, 'b', PART_LEN);
	d_send(d->fd, VRDMA_KIND_REPLY | VRDMA_KIND_MORE, m->op, VRDMA_CODE_OK, m->id, part, NULL, 0);
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, VRDMA_CODE_OK, m->id, "\"}", NULL, 0);
	close(p[0]);
	close(p[1]);

	/* An error in two parts. */
	d_recv(d->fd, m);
	d_send(d->fd, VRDMA_KIND_REPLY | VRDMA_KIND_MORE, m->op, VRDMA_CODE_NOT_FOUND, m->id, "{\"error\":\"no su", NULL, 0);
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, VRDMA_CODE_NOT_FOUND, m->id, "ch thing\"}", NULL, 0);

	/* Parts that disagree: the channel is lost. */
	d_recv(d->fd, m);
	d_send(d->fd, VRDMA_KIND_REPLY | VRDMA_KIND_MORE, m->op, VRDMA_CODE_OK, m->id, "{", NULL, 0);
	d_send(d->fd, VRDMA_KIND_REPLY, m->op, VRDMA_CODE_INTERNAL, m->id, "}", NULL, 0);
	free(part);
}

static void test_parts(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	size_t cap = 3 * PART_LEN, n = 0;
	char *reply = malloc(cap);
	int rfds[VRDMA_PROTO_MAX_FDS], nrfds = VRDMA_PROTO_MAX_FDS;
	struct vrdma_event ev;

	if (reply == NULL)
		die("malloc");
	start(&c, &d, script_parts, 0);
	int r = vrdma_call(&c, VRDMA_CMD_LIST_INSTANCES, NULL, 0, NULL, 0, reply, cap, &n, rfds, &nrfds);
	CHECK(r == 0 && n == 2 * PART_LEN + 2, "a reply in three parts = %d, %zu bytes (%s)", r, n, c.err);
	CHECK(r != 0 || (reply[6] == 'a' && reply[PART_LEN] == 'b' && strcmp(reply + 2 * PART_LEN, "\"}") == 0),
	      "the parts are not in order");
	CHECK(nrfds == 1, "%d descriptors with a reply in parts that carried 1", nrfds);
	for (int i = 0; i < nrfds; i++)
		close(rfds[i]);
	CHECK(vrdma_chan_event(&c, &ev, 0) == 1 && ev.handle == 7, "the event between the parts is lost");
	r = vrdma_call(&c, VRDMA_CMD_HELLO, NULL, 0, NULL, 0, reply, cap, &n, NULL, NULL);
	CHECK(r == -ENOENT && strcmp(c.err, "no such thing") == 0, "an error in two parts = %d: %s", r, c.err);
	r = vrdma_call(&c, VRDMA_CMD_HELLO, NULL, 0, NULL, 0, reply, cap, &n, NULL, NULL);
	CHECK(r == -EIO && c.dead && strstr(c.err, "disagree") != NULL, "parts that disagree = %d: %s", r, c.err);
	/* The daemon, still there, sees the session end: it must stop running
	 * the queues the library now flushes. */
	char b;
	CHECK(recv(d.fd, &b, 1, MSG_DONTWAIT) == 0, "the daemon's end is not told the session ended after a "
						    "protocol fault (recv: %s)", strerror(errno));
	finish(&d);
	vrdma_chan_close(&c);
	free(reply);
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

/* ---- a daemon that is there but does not answer ---- */

static int mute_pipe[2]; /* the test writes a byte when the call gave up */

static void script_mute(struct daemon *d)
{
	struct dmsg *m = d->m;
	char b;

	d_recv(d->fd, m);
	uint32_t late = m->id;
	while (read(mute_pipe[0], &b, 1) < 0 && errno == EINTR)
		;
	d_reply(d->fd, m, "{\"late\":1}"); /* to a call that gave up: dropped */
	d_recv(d->fd, m);
	CHECK(m->id != late, "the call after a timeout reused id %u", late);
	d_reply(d->fd, m, "{\"second\":1}");
}

static void test_timeout(void)
{
	int fds0 = count_fds();
	struct vrdma_chan c;
	struct daemon d;
	char reply[32];

	if (pipe2(mute_pipe, O_CLOEXEC) < 0)
		die("pipe2");
	setenv("VRDMA_TIMEOUT", "0.2", 1);
	start(&c, &d, script_mute, 0);
	int r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == -ETIMEDOUT && !c.dead && strstr(c.err, "did not answer") != NULL &&
		      strstr(c.err, "VRDMA_TIMEOUT") != NULL,
	      "a call the daemon does not answer = %d, dead %d: %s; want -ETIMEDOUT, naming VRDMA_TIMEOUT", r, c.dead,
	      c.err);
	CHECK(write(mute_pipe[1], "x", 1) == 1, "write: %s", strerror(errno));
	/* The channel is still up: the late reply is dropped, the next call
	 * gets its own. */
	r = vrdma_call(&c, VRDMA_CMD_QUERY_PORT, "{}", 2, NULL, 0, reply, sizeof reply, NULL, NULL, NULL);
	CHECK(r == 0 && strcmp(reply, "{\"second\":1}") == 0, "the call after a timeout = %d: %s (%s)", r,
	      r == 0 ? reply : "", c.err);
	finish(&d);
	vrdma_chan_close(&c);
	close(mute_pipe[0]);
	close(mute_pipe[1]);

	/* Not a number of seconds: the default. */
	for (const char *const *v = (const char *const[]){ "abc", "-1", "0", "5s", NULL }; *v != NULL; v++) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
			die("socketpair");
		setenv("VRDMA_TIMEOUT", *v, 1);
		CHECK(vrdma_chan_adopt(&c, sv[0]) == 0, "adopt: %s", c.err);
		CHECK(c.timeout_ms == VRDMA_DEFAULT_TIMEOUT_MS, "VRDMA_TIMEOUT=%s: %d ms", *v, c.timeout_ms);
		vrdma_chan_close(&c);
		close(sv[1]);
	}
	unsetenv("VRDMA_TIMEOUT");
	CHECK(count_fds() == fds0, "%d descriptors leaked", count_fds() - fds0);
}

int main(void)
{
	alarm(120); /* a hang guard: a hung test dies of SIGALRM */
	signal(SIGPIPE, SIG_DFL); /* a send without MSG_NOSIGNAL would kill the test */
	test_call();
	test_event_before_reply();
	test_fds();
	test_errors();
	test_code_errno();
	test_unexpected_id();
	test_garbage();
	test_close();
	test_refused();
	test_idle_events();
	test_overflow();
	test_eintr();
	test_limits();
	test_waiter();
	test_open();
	test_cm_events();
	test_parts();
	test_timeout();
	if (failures) {
		fprintf(stderr, "chan_test: %d failures\n", (int)failures);
		return 1;
	}
	printf("chan_test: ok\n");
	return 0;
}
