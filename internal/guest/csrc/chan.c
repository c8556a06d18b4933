/*
 * chan.c: the command channel to the vrdma daemon (internal/proto).
 *
 * One unix SOCK_SEQPACKET connection; a message is one datagram: a 16-byte
 * little-endian header, then a JSON body, with up to VRDMA_PROTO_MAX_FDS
 * descriptors attached (SCM_RIGHTS); a reply larger than one message comes
 * as parts (VRDMA_KIND_MORE set on all but the last, the descriptors with
 * the first), which vrdma_call puts together. Requests are synchronous:
 * vrdma_call sends one and reads until its reply, holding the mutex, and
 * queues the events it reads meanwhile. While no call is in progress, events wait in
 * the socket; vrdma_chan_event reads them.
 *
 * The daemon is trusted less than fully: a message that breaks the protocol
 * (short, bad magic, unknown kind, another version, wrong length, too large,
 * too many descriptors) ends the channel (dead), as it ends the Go client's
 * session; a reply nobody waits for is dropped with its descriptors.
 */
#include "vrdma.h"
#include "vrdma_abi.h"
#include "vrdma_private.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The kind of a message, without the VRDMA_KIND_MORE bit. */
#define KIND_OF(b) ((uint8_t)((b) & ~VRDMA_KIND_MORE))

/* Messages read per vrdma_chan_event before it gives the caller a turn. */
#define PUMP_BATCH 64

static const char lost_msg[] =
	"the vrdma daemon went away: the device is lost and its queues are dead; "
	"start the daemon again (vrdma daemon) and reopen the device";

/* One received message; body points into the receive buffer. */
struct msg {
	uint8_t kind;
	uint8_t more; /* a part of a reply, more to follow (VRDMA_KIND_MORE) */
	uint16_t op, code;
	uint32_t id;
	const char *body;
	size_t len;
	int fds[VRDMA_PROTO_MAX_FDS];
	int nfds;
};

/* What handle() made of a message. */
enum handled { IGNORED, MATCHED, REFUSED };

static const char *const code_names[] = {
	"ok", "invalid argument", "not found", "limit reached", "in use", "invalid state transition",
	"cannot lock memory", "permission denied", "version mismatch", "internal error", "invalid attribute",
};

int vrdma_code_errno(uint16_t code)
{
	switch (code) {
	case VRDMA_CODE_OK:
		return 0;
	case VRDMA_CODE_INVALID:
	case VRDMA_CODE_ATTR:
	case VRDMA_CODE_STATE:
		return EINVAL;
	case VRDMA_CODE_NOT_FOUND:
		return ENOENT;
	case VRDMA_CODE_LIMIT:
	case VRDMA_CODE_MEMLOCK:
		return ENOMEM;
	case VRDMA_CODE_BUSY:
		return EBUSY;
	case VRDMA_CODE_PERMISSION:
		return EACCES;
	case VRDMA_CODE_VERSION:
		return EPROTO;
	default:
		return EIO;
	}
}

static void set_err(struct vrdma_chan *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_err(struct vrdma_chan *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof c->err, fmt, ap);
	va_end(ap);
}

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
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

/* Wakes whoever polls the channel: an event is queued, or the channel died. */
static void signal_event(struct vrdma_chan *c)
{
	uint64_t one = 1;

	while (write(c->evfd, &one, sizeof one) < 0 && errno == EINTR)
		;
}

/* Marks the channel dead with a message (unless a refusal already said why)
 * and returns the errno calls fail with from now on, negated. The socket is
 * shut down too: on a protocol fault the daemon is still there, and must
 * end the session (and stop running its queues) as the library flushes
 * them. */
static int lose(struct vrdma_chan *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int lose(struct vrdma_chan *c, const char *fmt, ...)
{
	if (!c->dead) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->err, sizeof c->err, fmt, ap);
		va_end(ap);
		c->deaderr = EIO;
		(void)shutdown(c->fd, SHUT_RDWR);
		__atomic_store_n(&c->dead, 1, __ATOMIC_RELEASE); /* read without mu (lost.c) */
		vrdma_debug("channel to the daemon lost: %s", c->err);
		signal_event(c); /* pollers learn of it from vrdma_chan_event */
	}
	return -c->deaderr;
}

/* Copies the message of an error body ({"error":"..."}) into c->err, cut
 * to fit, or names the code when there is none. */
static void error_message(struct vrdma_chan *c, uint16_t op, uint16_t code, const char *body, size_t len)
{
	struct vj_doc d;

	c->err[0] = '\0';
	if (vj_parse(&d, body, len) == 0) {
		int tok = vj_get(&d, 0, "error");
		if (vj_str(&d, tok, c->err, sizeof c->err) == -ENOSPC) {
			char *all = malloc(len + 1); /* unescaping never lengthens */
			if (all != NULL && vj_str(&d, tok, all, len + 1) == 0)
				set_err(c, "%s", all);
			free(all);
		}
		vj_free(&d);
	}
	if (c->err[0] == '\0') {
		if (code < sizeof code_names / sizeof code_names[0])
			set_err(c, "the daemon failed command %u: %s", op, code_names[code]);
		else
			set_err(c, "the daemon failed command %u with code %u", op, code);
	}
}

/* Collects the descriptors of the SCM_RIGHTS messages in mh into m->fds;
 * any beyond its room are closed. */
static void take_fds(struct msghdr *mh, struct msg *m)
{
	m->nfds = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		const unsigned char *data = CMSG_DATA(cm);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, data + i * sizeof fd, sizeof fd);
			if (m->nfds < (int)VRDMA_PROTO_MAX_FDS)
				m->fds[m->nfds++] = fd;
			else
				close(fd);
		}
	}
}

/*
 * Reads one message into buf (VRDMA_PROTO_MAX_MESSAGE + 1 bytes) and checks
 * its header. 1: a message in m; 0: none waiting (dontwait); < 0: the
 * channel is dead (-errno).
 */
static int recv_msg(struct vrdma_chan *c, uint8_t *buf, struct msg *m, int dontwait)
{
	int reset = 0;

	for (;;) {
		union {
			struct cmsghdr align;
			char buf[CMSG_SPACE(sizeof(int) * VRDMA_PROTO_MAX_FDS)];
		} control;
		struct iovec iov = { .iov_base = buf, .iov_len = VRDMA_PROTO_MAX_MESSAGE + 1 };
		struct msghdr mh = {
			.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = control.buf,
			.msg_controllen = sizeof control.buf,
		};
		ssize_t n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC | (dontwait ? MSG_DONTWAIT : 0));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			/* A daemon that refuses the session says why and closes it;
			 * if our request was still unread then, the kernel reports a
			 * reset first, with the reason queued behind it. */
			if (errno == ECONNRESET && !reset) {
				reset = 1;
				continue;
			}
			return lose(c, "%s (reading from it failed: %s)", lost_msg, strerror(errno));
		}
		take_fds(&mh, m);
		if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
			close_fds(m->fds, m->nfds);
			return lose(c, "the vrdma daemon sent a message larger than %u bytes or with more than %u "
				       "descriptors: run a vrdma library and daemon of the same release",
				    VRDMA_PROTO_MAX_MESSAGE, VRDMA_PROTO_MAX_FDS);
		}
		if (n == 0) {
			close_fds(m->fds, m->nfds);
			return lose(c, "%s", lost_msg);
		}
		const char *bad = NULL;
		if (n > VRDMA_PROTO_MAX_MESSAGE) {
			close_fds(m->fds, m->nfds);
			return lose(c, "the vrdma daemon sent a message larger than %u bytes: run a vrdma library "
				       "and daemon of the same release",
				    VRDMA_PROTO_MAX_MESSAGE);
		}
		if (n < VRDMA_PROTO_HEADER_SIZE)
			bad = "a message shorter than its header";
		else if (get16(buf) != VRDMA_PROTO_MAGIC)
			bad = "a message with a bad magic number";
		else if (KIND_OF(buf[3]) < VRDMA_KIND_REQUEST || KIND_OF(buf[3]) > VRDMA_KIND_EVENT ||
			 ((buf[3] & VRDMA_KIND_MORE) && KIND_OF(buf[3]) != VRDMA_KIND_REPLY))
			bad = "a message of an unknown kind";
		else if (buf[2] != VRDMA_PROTO_VERSION) {
			close_fds(m->fds, m->nfds);
			return lose(c, "the vrdma daemon speaks protocol version %u, this library speaks %u: run a "
				       "vrdma library and daemon of the same release",
				    buf[2], VRDMA_PROTO_VERSION);
		} else if (get32(buf + 12) != (uint32_t)(n - VRDMA_PROTO_HEADER_SIZE))
			bad = "a message whose body length does not match its header";
		if (bad != NULL) {
			close_fds(m->fds, m->nfds);
			return lose(c, "the vrdma daemon sent %s: it is not a vrdma daemon, or not of this release; "
				       "the device is lost",
				    bad);
		}
		m->kind = KIND_OF(buf[3]);
		m->more = (buf[3] & VRDMA_KIND_MORE) != 0;
		m->op = get16(buf + 4);
		m->code = get16(buf + 6);
		m->id = get32(buf + 8);
		m->body = (const char *)buf + VRDMA_PROTO_HEADER_SIZE;
		m->len = (size_t)n - VRDMA_PROTO_HEADER_SIZE;
		return 1;
	}
}

/* Queues the event in body ({"type":N,"handle":H,"qpn":Q,"reason":"..."}). */
static void queue_event(struct vrdma_chan *c, const char *body, size_t len)
{
	struct vj_doc d;
	uint64_t type, handle, qpn = 0;
	char reason[128] = "";

	if (vj_parse(&d, body, len) < 0) {
		vrdma_debug("dropped an event whose body is not JSON");
		return;
	}
	int q = vj_get(&d, 0, "qpn");
	int ok = vj_get_u64(&d, 0, "type", &type) == 0 && type <= UINT8_MAX &&
		 vj_get_u64(&d, 0, "handle", &handle) == 0 && handle <= UINT32_MAX &&
		 (q < 0 || (vj_u64(&d, q, &qpn) == 0 && qpn <= UINT32_MAX));
	if (vrdma_debug_enabled())
		(void)vj_get_str(&d, 0, "reason", reason, sizeof reason);
	vj_free(&d);
	if (!ok) {
		vrdma_debug("dropped an event without a valid type, handle or qpn");
		return;
	}
	if (c->evcount == VRDMA_EVQ_LEN) {
		const struct vrdma_event *old = &c->evq[c->evhead];
		vrdma_debug("event queue full (%d): dropped the oldest event, type %u handle %u", VRDMA_EVQ_LEN,
			    old->type, old->handle);
		c->evhead = (c->evhead + 1) % VRDMA_EVQ_LEN;
		c->evcount--;
	}
	struct vrdma_event *ev = &c->evq[(c->evhead + c->evcount) % VRDMA_EVQ_LEN];
	ev->type = (uint8_t)type;
	ev->handle = (uint32_t)handle;
	ev->qpn = (uint32_t)qpn;
	c->evcount++;
	vrdma_debug("event type %u handle %u qpn %u%s%s", ev->type, ev->handle, ev->qpn, reason[0] ? ": " : "",
		    reason);
	signal_event(c);
}

/* Hands a connection manager event to whoever listens (librdmacm); one
 * that does not decode is dropped, as a broken verbs event is. */
static void pass_cm_event(struct vrdma_chan *c, const char *body, size_t len)
{
	struct vrdma_cm_ev ev;

	if (c->cm_fn == NULL) {
		vrdma_debug("dropped a connection manager event: no rdma_cm user on this channel");
		return;
	}
	if (vrdma_cm_event_parse(body, len, &ev) < 0) {
		vrdma_debug("dropped a connection manager event that does not decode (%zu bytes)", len);
		return;
	}
	c->cm_fn(c->cm_arg, &ev);
}

/* Deals with a message that is not the reply to request id (0: none). */
static enum handled handle(struct vrdma_chan *c, struct msg *m, uint32_t id)
{
	switch (m->kind) {
	case VRDMA_KIND_REPLY:
		if (m->id == 0 && m->code != VRDMA_CODE_OK) {
			/* A reply to no request: the daemon refused the session
			 * (a limit) and closes it. */
			close_fds(m->fds, m->nfds);
			error_message(c, m->op, m->code, m->body, m->len);
			vrdma_debug("the daemon refused the session: %s", c->err);
			c->deaderr = vrdma_code_errno(m->code);
			__atomic_store_n(&c->dead, 1, __ATOMIC_RELEASE);
			signal_event(c);
			return REFUSED;
		}
		if (id != 0 && m->id == id)
			return MATCHED;
		vrdma_debug("dropped a reply to no request in progress (id %u, op %u)", m->id, m->op);
		break;
	case VRDMA_KIND_EVENT:
		if (m->op == VRDMA_CMD_EVENT)
			queue_event(c, m->body, m->len);
		else if (m->op == VRDMA_CMD_CM_EVENT)
			pass_cm_event(c, m->body, m->len);
		else
			vrdma_debug("dropped an event of op %u", m->op);
		break;
	default:
		vrdma_debug("dropped a request from the daemon (op %u)", m->op);
		break;
	}
	close_fds(m->fds, m->nfds);
	return IGNORED;
}

/* Sends request op on fd (c's socket, or another: vrdma_call_via); 0 or
 * -errno of sendmsg. */
static int send_request(int fd, uint16_t op, uint32_t id, const char *body, size_t len, const int *fds, int nfds)
{
	uint8_t h[VRDMA_PROTO_HEADER_SIZE];
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * VRDMA_PROTO_MAX_FDS)];
	} control;
	struct iovec iov[2] = {
		{ .iov_base = h, .iov_len = sizeof h },
		{ .iov_base = (void *)body, .iov_len = len },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len > 0 ? 2 : 1 };

	put16(h, VRDMA_PROTO_MAGIC);
	h[2] = VRDMA_PROTO_VERSION;
	h[3] = VRDMA_KIND_REQUEST;
	put16(h + 4, op);
	put16(h + 6, VRDMA_CODE_OK);
	put32(h + 8, id);
	put32(h + 12, (uint32_t)len);
	if (nfds > 0) {
		memset(&control, 0, sizeof control);
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	for (;;) {
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (n >= 0)
			return (size_t)n == sizeof h + len ? 0 : -EIO; /* a datagram goes whole */
		if (errno != EINTR)
			return -errno;
	}
}

/* A reply larger than one message, being put together from its parts. */
struct whole {
	char *body;
	size_t len;
	uint16_t code;
	int fds[VRDMA_PROTO_MAX_FDS]; /* the first part's */
	int nfds;
};

/* Appends part m of a reply to w; the first part's descriptors are kept,
 * any later ones closed. 0, or -errno with the channel lost: parts that
 * disagree or pass VRDMA_PROTO_MAX_REPLY break the protocol. */
static int add_part(struct vrdma_chan *c, struct whole *w, struct msg *m)
{
	if (w->body == NULL) {
		w->code = m->code;
		memcpy(w->fds, m->fds, sizeof m->fds);
		w->nfds = m->nfds;
		m->nfds = 0;
	}
	close_fds(m->fds, m->nfds);
	if (m->code != w->code || m->len > VRDMA_PROTO_MAX_REPLY - w->len)
		return lose(c, "the vrdma daemon sent a reply in parts that %s: run a vrdma library and daemon of the "
			       "same release",
			    m->code != w->code ? "disagree" : "pass the most a reply may have");
	char *b = realloc(w->body, w->len + m->len + 1);
	if (b == NULL)
		return lose(c, "no memory for the vrdma daemon's reply of more than %zu bytes", w->len);
	memcpy(b + w->len, m->body, m->len);
	w->body = b;
	w->len += m->len;
	return 0;
}

/* The milliseconds since an arbitrary start (CLOCK_MONOTONIC). */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until the socket has something to read or the deadline (now_ms)
 * passes: 1, or 0 when it passed. A daemon that is alive but stuck must not
 * hang every verbs call for ever. */
static int wait_readable(struct vrdma_chan *c, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return 0;
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		int n = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (n > 0 || (n < 0 && errno != EINTR))
			return 1; /* recvmsg says what happened */
	}
}

/* The reply timeout in VRDMA_TIMEOUT (seconds, a fraction allowed), or the
 * default; a value that is not a positive number is said and ignored. */
static int timeout_ms(void)
{
	const char *v = getenv("VRDMA_TIMEOUT");

	if (v == NULL || *v == '\0')
		return VRDMA_DEFAULT_TIMEOUT_MS;
	char *end;
	errno = 0;
	double s = strtod(v, &end);
	if (errno != 0 || *end != '\0' || !(s > 0) || s > INT32_MAX / 1000.0) {
		vrdma_log("VRDMA_TIMEOUT=%s is not a number of seconds (like 30 or 0.5): waiting %d s for the "
			  "daemon's replies",
			  v, VRDMA_DEFAULT_TIMEOUT_MS / 1000);
		return VRDMA_DEFAULT_TIMEOUT_MS;
	}
	int ms = (int)(s * 1000);
	return ms > 0 ? ms : 1;
}

int vrdma_call(struct vrdma_chan *c, uint16_t op, const char *body, size_t len, const int *fds, int nfds,
	       char *reply, size_t replycap, size_t *replylen, int *rfds, int *nrfds)
{
	return vrdma_call_via(c, -1, op, body, len, fds, nfds, reply, replycap, replylen, rfds, nrfds);
}

int vrdma_call_via(struct vrdma_chan *c, int via, uint16_t op, const char *body, size_t len, const int *fds,
		   int nfds, char *reply, size_t replycap, size_t *replylen, int *rfds, int *nrfds)
{
	struct whole whole = { .body = NULL };
	int room = rfds != NULL && nrfds != NULL ? *nrfds : 0;
	struct msg m;
	int r;

	if (replylen != NULL)
		*replylen = 0;
	if (nrfds != NULL)
		*nrfds = 0;
	if (c == NULL || (len > 0 && body == NULL) || nfds < 0 || nfds > (int)VRDMA_PROTO_MAX_FDS ||
	    (nfds > 0 && fds == NULL) || room < 0)
		return -EINVAL;
	if (len > VRDMA_PROTO_MAX_MESSAGE - VRDMA_PROTO_HEADER_SIZE) {
		set_err(c, "command %u: a request body of %zu bytes is larger than the protocol allows (%u)", op, len,
			VRDMA_PROTO_MAX_MESSAGE - VRDMA_PROTO_HEADER_SIZE);
		return -EMSGSIZE;
	}
	uint8_t *buf = malloc(VRDMA_PROTO_MAX_MESSAGE + 1);
	if (buf == NULL)
		return -ENOMEM;

	pthread_mutex_lock(&c->mu);
	if (c->fd < 0) {
		r = -EBADF;
		goto out;
	}
	if (c->dead) {
		r = -c->deaderr;
		goto out;
	}
	c->err[0] = '\0';
	uint32_t id = ++c->next_id;
	if (id == 0) /* id 0 marks the daemon's refusal of the session */
		id = ++c->next_id;

	r = send_request(via >= 0 ? via : c->fd, op, id, body, len, fds, nfds);
	if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN) {
		/* The daemon closed the session; it may have said why. */
		int e = -r;
		while (!c->dead && recv_msg(c, buf, &m, 1) > 0)
			(void)handle(c, &m, 0);
		r = lose(c, "%s (sending to it failed: %s)", lost_msg, strerror(e));
		goto out;
	}
	if (r < 0) {
		set_err(c, "command %u: sending it to the vrdma daemon failed: %s", op, strerror(-r));
		goto out;
	}
	int64_t deadline = now_ms() + (c->timeout_ms > 0 ? c->timeout_ms : VRDMA_DEFAULT_TIMEOUT_MS);
	for (;;) {
		if (!wait_readable(c, deadline)) {
			set_err(c, "command %u: the vrdma daemon did not answer within %.3g s: it may be stuck or "
				   "overloaded; look at its log, or raise VRDMA_TIMEOUT (seconds)",
				op, c->timeout_ms / 1000.0);
			r = -ETIMEDOUT;
			goto out;
		}
		r = recv_msg(c, buf, &m, 0);
		if (r < 0)
			goto out;
		enum handled h = handle(c, &m, id);
		if (h == REFUSED) {
			r = -c->deaderr;
			goto out;
		}
		if (h != MATCHED)
			continue;
		if (!m.more && whole.body == NULL)
			break; /* a reply in one message */
		if ((r = add_part(c, &whole, &m)) < 0)
			goto out;
		if (!m.more) {
			m.body = whole.body;
			m.len = whole.len;
			memcpy(m.fds, whole.fds, sizeof m.fds);
			m.nfds = whole.nfds;
			whole.nfds = 0;
			break;
		}
	}
	if (m.code != VRDMA_CODE_OK) {
		close_fds(m.fds, m.nfds);
		error_message(c, op, m.code, m.body, m.len);
		r = -vrdma_code_errno(m.code);
		goto out;
	}
	if (reply != NULL || replycap > 0) {
		if (reply == NULL || m.len >= replycap) {
			close_fds(m.fds, m.nfds);
			set_err(c, "command %u: the daemon's reply of %zu bytes does not fit the library's %zu-byte buffer",
				op, m.len, replycap);
			r = -EMSGSIZE;
			goto out;
		}
		memcpy(reply, m.body, m.len);
		reply[m.len] = '\0';
	}
	if (replylen != NULL)
		*replylen = m.len;
	for (int i = 0; i < m.nfds; i++) {
		if (i < room)
			rfds[i] = m.fds[i];
		else
			close(m.fds[i]);
	}
	if (nrfds != NULL)
		*nrfds = m.nfds < room ? m.nfds : room;
	r = 0;
out:
	pthread_mutex_unlock(&c->mu);
	close_fds(whole.fds, whole.nfds);
	free(whole.body);
	free(buf);
	return r;
}

void vrdma_chan_end(struct vrdma_chan *c)
{
	int fd = __atomic_load_n(&c->fd, __ATOMIC_RELAXED);
	if (fd >= 0)
		(void)shutdown(fd, SHUT_RDWR);
}

/* Pops the oldest queued event; the eventfd is cleared with the queue. */
static void pop_event(struct vrdma_chan *c, struct vrdma_event *ev)
{
	*ev = c->evq[c->evhead];
	c->evhead = (c->evhead + 1) % VRDMA_EVQ_LEN;
	if (--c->evcount == 0 && !c->dead) {
		uint64_t v;
		while (read(c->evfd, &v, sizeof v) < 0 && errno == EINTR)
			;
	}
}

/* Reads what the socket holds, without waiting, until an event is queued;
 * called with the mutex held. 0, or -errno when the channel is dead. */
static int pump(struct vrdma_chan *c)
{
	uint8_t *buf = malloc(VRDMA_PROTO_MAX_MESSAGE + 1);
	struct msg m;
	int r = 0;

	if (buf == NULL)
		return -ENOMEM;
	for (int i = 0; i < PUMP_BATCH && c->evcount == 0 && !c->dead; i++) {
		r = recv_msg(c, buf, &m, 1);
		if (r <= 0)
			break;
		(void)handle(c, &m, 0);
		r = 0;
	}
	free(buf);
	return c->dead ? -c->deaderr : r < 0 ? r : 0;
}

/* Messages vrdma_chan_drain reads at most before it returns. */
#define DRAIN_BATCH 512

int vrdma_chan_drain(struct vrdma_chan *c)
{
	if (c == NULL)
		return -EINVAL;
	uint8_t *buf = malloc(VRDMA_PROTO_MAX_MESSAGE + 1);
	struct msg m;
	int r = 0;

	if (buf == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&c->mu);
	if (c->fd < 0)
		r = -EBADF;
	for (int i = 0; r == 0 && i < DRAIN_BATCH && !c->dead; i++) {
		int got = recv_msg(c, buf, &m, 1);
		if (got <= 0) {
			r = got;
			break;
		}
		(void)handle(c, &m, 0);
	}
	if (c->dead)
		r = -c->deaderr;
	pthread_mutex_unlock(&c->mu);
	free(buf);
	return r;
}

int vrdma_chan_event(struct vrdma_chan *c, struct vrdma_event *ev, int block)
{
	if (c == NULL || ev == NULL)
		return -EINVAL;
	for (;;) {
		pthread_mutex_lock(&c->mu);
		if (c->fd < 0) {
			pthread_mutex_unlock(&c->mu);
			return -EBADF;
		}
		int r = c->evcount > 0 ? 0 : pump(c);
		if (c->evcount > 0) {
			pop_event(c, ev); /* events that came before the end still count */
			pthread_mutex_unlock(&c->mu);
			return 1;
		}
		pthread_mutex_unlock(&c->mu);
		if (r < 0)
			return r;
		if (!block)
			return 0;
		struct pollfd p = { .fd = c->pollfd, .events = POLLIN };
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -errno;
	}
}

int vrdma_chan_adopt(struct vrdma_chan *c, int fd)
{
	int type = 0;
	socklen_t tlen = sizeof type;
	int r;

	memset(c, 0, sizeof *c);
	c->fd = fd;
	c->evfd = -1;
	c->pollfd = -1;
	c->timeout_ms = timeout_ms();
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 || type != SOCK_SEQPACKET) {
		r = -EINVAL;
		set_err(c, "the command channel needs a connected SOCK_SEQPACKET unix socket");
		goto fail;
	}
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		r = -errno;
		goto fail;
	}
	c->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->pollfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->evfd < 0 || c->pollfd < 0) {
		r = -errno;
		set_err(c, "cannot create the channel's event descriptors: %s", strerror(errno));
		goto fail;
	}
	struct epoll_event e = { .events = EPOLLIN };
	e.data.fd = fd;
	if (epoll_ctl(c->pollfd, EPOLL_CTL_ADD, fd, &e) < 0) {
		r = -errno;
		goto fail;
	}
	e.data.fd = c->evfd;
	if (epoll_ctl(c->pollfd, EPOLL_CTL_ADD, c->evfd, &e) < 0) {
		r = -errno;
		goto fail;
	}
	if ((r = pthread_mutex_init(&c->mu, NULL)) != 0) {
		r = -r;
		goto fail;
	}
	return 0;
fail:
	if (c->err[0] == '\0')
		set_err(c, "cannot set up the command channel: %s", strerror(-r));
	close(fd);
	if (c->evfd >= 0)
		close(c->evfd);
	if (c->pollfd >= 0)
		close(c->pollfd);
	c->fd = c->evfd = c->pollfd = -1;
	return r;
}

int vrdma_chan_open(struct vrdma_chan *c, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = path != NULL ? strlen(path) : 0;

	memset(c, 0, sizeof *c);
	c->fd = c->evfd = c->pollfd = -1;
	if (n == 0) {
		set_err(c, "no vrdma daemon socket given: set VRDMA_SOCKET to its path");
		return -EINVAL;
	}
	if (n >= sizeof sa.sun_path) {
		set_err(c, "the vrdma daemon socket path %s is longer than a unix socket address allows (%zu bytes)",
			path, sizeof sa.sun_path - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* the abstract namespace, as Go names it */
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int e = errno;
		set_err(c, "cannot create a unix socket: %s", strerror(e));
		return -e;
	}
	int r;
	while ((r = connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n))) < 0 &&
	       errno == EINTR)
		;
	if (r < 0 && errno != EISCONN) {
		int e = errno;
		close(fd);
		if (e == EACCES || e == EPERM)
			set_err(c, "not allowed to use the vrdma daemon at %s: the socket's permissions decide who may "
				   "use the devices; ask for membership of its group (`ls -l %s`)",
				path, path);
		else
			set_err(c, "cannot reach the vrdma daemon at %s (%s): start it with `vrdma daemon`, or point "
				   "VRDMA_SOCKET at its socket",
				path, strerror(e));
		return -e;
	}
	return vrdma_chan_adopt(c, fd);
}

void vrdma_chan_close(struct vrdma_chan *c)
{
	if (c == NULL || (c->fd < 0 && c->evfd < 0 && c->pollfd < 0))
		return;
	if (c->fd >= 0)
		close(c->fd);
	if (c->evfd >= 0)
		close(c->evfd);
	if (c->pollfd >= 0)
		close(c->pollfd);
	c->fd = c->evfd = c->pollfd = -1;
	c->evcount = 0;
	pthread_mutex_destroy(&c->mu);
}
