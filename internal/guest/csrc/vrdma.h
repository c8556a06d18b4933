/*
 * vrdma.h: the guest library's internal interfaces. The library is a
 * drop-in libibverbs.so.1: applications see rdma-core's <infiniband/verbs.h>;
 * underneath, every verb is a command to the vrdma daemon (chan.c) or a
 * store into the rings the daemon shares with us (vrdma_abi.h).
 *
 * Nothing here is exported: the version script exports the verbs only.
 */
#ifndef VRDMA_H
#define VRDMA_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "own.h"

#define VRDMA_EXPORT __attribute__((visibility("default")))

/* ---- logging (log.c) ----
 * vrdma_log prints "vrdma: <message>\n" to stderr. vrdma_debug does the same
 * only when VRDMA_DEBUG is set in the environment. */
void vrdma_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vrdma_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether VRDMA_DEBUG is on (set, non-empty and not "0"; read once). */
int vrdma_debug_enabled(void);

/* ---- JSON reader (json.c) ----
 * vj_parse tokenizes one JSON document into doc->tok (allocated; free with
 * vj_free). A token is an object, array, string, number or literal; objects
 * and arrays know how many tokens they span so lookups can skip them.
 * Token 0 is the root. Functions taking a token index return -1 / error
 * when the index is -1, so lookups chain without checks in between. */
/* Objects and arrays nest at most this deep; deeper documents are -EINVAL. */
#define VJ_MAX_DEPTH 64

enum vj_type { VJ_OBJECT = 1, VJ_ARRAY, VJ_STRING, VJ_NUMBER, VJ_TRUE, VJ_FALSE, VJ_NULL };

struct vj_tok {
	enum vj_type type;
	int start, end; /* byte range in the text; for strings without the quotes */
	int size;       /* objects: number of keys; arrays: number of elements */
	int span;       /* tokens this one covers, itself included */
};

struct vj_doc {
	const char *text;
	struct vj_tok *tok;
	int ntok;
};

/* 0 on success, -EINVAL on malformed or truncated JSON (or len > INT_MAX),
 * -ENOMEM. On failure doc holds nothing (vj_free is harmless). */
int vj_parse(struct vj_doc *doc, const char *text, size_t len);
void vj_free(struct vj_doc *doc);
/* The value of key in the object at token obj, or -1. Keys compare after
 * unescaping, exactly (case matters); of duplicate keys the first wins. */
int vj_get(const struct vj_doc *doc, int obj, const char *key);
/* Element i of the array at token arr, or -1. */
int vj_at(const struct vj_doc *doc, int arr, int i);
/* Number of elements of an array (or keys of an object); -1 otherwise. */
int vj_len(const struct vj_doc *doc, int tok);
/* Scalars: 0 on success, -EINVAL when tok is -1, of another type or out of range.
 * Integers are plain JSON integers (no fraction, no exponent), as Go writes them. */
int vj_u64(const struct vj_doc *doc, int tok, uint64_t *v);
int vj_i64(const struct vj_doc *doc, int tok, int64_t *v);
int vj_bool(const struct vj_doc *doc, int tok, int *v);
/* A string, unescaped, NUL-terminated; -ENOSPC when it does not fit cap;
 * -EINVAL when it is not a string or holds a NUL (\u0000), which a C string
 * cannot carry. \uXXXX becomes UTF-8; unpaired surrogates become U+FFFD. */
int vj_str(const struct vj_doc *doc, int tok, char *buf, size_t cap);
/* A base64 string (how Go encodes []byte: standard alphabet, padded)
 * decoded into buf; *n = bytes. JSON null (a nil []byte) is 0 bytes.
 * -ENOSPC when the bytes do not fit cap, -EINVAL when it is not base64. */
int vj_b64(const struct vj_doc *doc, int tok, uint8_t *buf, size_t cap, size_t *n);
/* Convenience: vj_u64(doc, vj_get(doc, obj, key), v), and so on. */
int vj_get_u64(const struct vj_doc *doc, int obj, const char *key, uint64_t *v);
int vj_get_i64(const struct vj_doc *doc, int obj, const char *key, int64_t *v);
int vj_get_str(const struct vj_doc *doc, int obj, const char *key, char *buf, size_t cap);
/* Writes s as a quoted JSON string into dst (NUL-terminated); returns the
 * length written, or -ENOSPC. */
int vj_escape(char *dst, size_t cap, const char *s);

/* ---- command channel (chan.c) ----
 * One SOCK_SEQPACKET connection to the daemon. Requests are synchronous and
 * serialized by mu; events the daemon sends meanwhile are queued. The
 * channel's pollable descriptor (pollfd) becomes readable when an event may
 * be waiting: it is an epoll set of the socket and an eventfd the channel
 * signals when it queues an event. */
struct vrdma_cm_ev; /* vrdma_private.h */

struct vrdma_event {
	uint8_t type;    /* enum ibv_event_type value */
	uint32_t handle; /* the QP, CQ or SRQ handle of this connection; 0 for port/device */
	uint32_t qpn;
};

#define VRDMA_EVQ_LEN 256
#define VRDMA_ERRMSG_LEN 512

struct vrdma_chan {
	int fd;      /* the socket, -1 when closed */
	int evfd;    /* eventfd signalled when an event is queued */
	int pollfd;  /* epoll of fd and evfd: the async_fd */
	int dead;    /* the daemon closed the connection or spoke garbage */
	uint32_t next_id;
	pthread_mutex_t mu;
	struct vrdma_event evq[VRDMA_EVQ_LEN];
	unsigned evhead, evcount;
	char err[VRDMA_ERRMSG_LEN]; /* the daemon's message for the last failed call */
	int deaderr; /* when dead: the errno calls fail with (EIO, or what the
		      * code of the daemon's refusal of the session maps to) */
	/* Where connection manager events go (librdmacm, through the private
	 * interface): called with mu held; NULL drops them. */
	void (*cm_fn)(void *arg, const struct vrdma_cm_ev *ev);
	void *cm_arg;
	/* How long a call waits for its reply (VRDMA_TIMEOUT, seconds, or
	 * VRDMA_DEFAULT_TIMEOUT_MS), in milliseconds. */
	int timeout_ms;
};

/* How long a call waits for the daemon's reply when VRDMA_TIMEOUT does
 * not say: as the Go client's DefaultTimeout, longer than the daemon's
 * slowest command. */
#define VRDMA_DEFAULT_TIMEOUT_MS 30000

/* Connects to the daemon's socket (a path starting with '@' names the
 * abstract namespace, as in Go). 0 or -errno (ENOENT/ECONNREFUSED: no
 * daemon; EACCES: not allowed), with a message for the user in c->err. */
int vrdma_chan_open(struct vrdma_chan *c, const char *path);
/* Makes c a channel on fd, an already connected SOCK_SEQPACKET socket that
 * it then owns (closed on failure too): what vrdma_chan_open does after
 * connecting; tests hand it one end of a socketpair. 0 or -errno. */
int vrdma_chan_adopt(struct vrdma_chan *c, int fd);
/* Closes the socket and the channel's descriptors. No call may be in
 * progress. Harmless after a failed open and when called twice. */
void vrdma_chan_close(struct vrdma_chan *c);
/* Sends request op with body (JSON, len bytes) and nfds descriptors (not
 * closed), waits for its reply. On success returns 0, copies the reply body
 * into reply (NUL-terminated; -EMSGSIZE if it does not fit replycap), sets
 * *replylen, and stores up to *nrfds received descriptors into rfds, setting
 * *nrfds to the number received (extra ones are closed). On a daemon error
 * returns the errno that the code maps to (vrdma_code_errno) and keeps the
 * daemon's message in c->err. A lost daemon is -EIO (and c->dead is set).
 * A daemon that does not answer within c->timeout_ms is -ETIMEDOUT; the
 * channel stays up, and the late reply is dropped when it comes.
 * rfds/nrfds may be NULL when no descriptors are expected (any are closed). */
int vrdma_call(struct vrdma_chan *c, uint16_t op, const char *body, size_t len, const int *fds, int nfds,
	       char *reply, size_t replycap, size_t *replylen, int *rfds, int *nrfds);
/* vrdma_call, but the request goes out on the socket via (another
 * session's: ibv_import_device sends its own socket on the exporter's) and
 * the reply is awaited on c. via < 0: c's own socket, as vrdma_call. */
int vrdma_call_via(struct vrdma_chan *c, int via, uint16_t op, const char *body, size_t len, const int *fds,
		   int nfds, char *reply, size_t replycap, size_t *replylen, int *rfds, int *nrfds);
/* The next queued event: 1 and *ev filled, 0 when none (block == 0), or
 * -errno (-EIO: the daemon is gone). With block != 0, waits for one. */
int vrdma_chan_event(struct vrdma_chan *c, struct vrdma_event *ev, int block);
/* Reads what the socket holds, without waiting (at most a few hundred
 * messages): events are queued, CM events handed to cm_fn. 0, or -errno
 * when the channel is dead. */
int vrdma_chan_drain(struct vrdma_chan *c);
/* Ends the session when the library learned elsewhere that the daemon is
 * gone (a doorbell pipe that closed: lost.c). Any thread, any lock held,
 * one system call, no lock taken: it shuts the socket down, so the socket
 * and pollfd are readable at once, a daemon that still runs sees the end,
 * and whoever reads the socket next reads what the daemon sent before,
 * then the end, and marks the channel dead (-EIO from then on). */
void vrdma_chan_end(struct vrdma_chan *c);
/* errno for a daemon error code: INVALID/ATTR -> EINVAL, NOT_FOUND -> ENOENT,
 * LIMIT -> ENOMEM, BUSY -> EBUSY, STATE -> EINVAL, MEMLOCK -> ENOMEM,
 * PERMISSION -> EACCES, VERSION -> EPROTO, INTERNAL and unknown -> EIO. */
int vrdma_code_errno(uint16_t code);

#endif
