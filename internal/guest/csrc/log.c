/*
 * log.c: the library's messages to the user, on stderr.
 *
 * A message is formatted into one buffer and written with one write(2), so
 * lines of different threads do not interleave. Logging never changes errno:
 * the verbs report their errors through it.
 */
#include "vrdma.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Longer messages are cut at this many bytes. */
#define LOG_LINE_MAX 1024

static pthread_once_t debug_once = PTHREAD_ONCE_INIT;
static int debug_on;

/* VRDMA_DEBUG is read once: set, non-empty and not "0" turns debugging on. */
static void read_debug_env(void)
{
	const char *v = getenv("VRDMA_DEBUG");

	debug_on = v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

static void vlog(const char *fmt, va_list ap)
{
	static const char prefix[] = "vrdma: ";
	char line[LOG_LINE_MAX];
	size_t n = sizeof prefix - 1;
	int saved = errno;

	memcpy(line, prefix, n);
	int m = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	if ((size_t)m > sizeof line - n - 2)
		m = (int)(sizeof line - n - 2); /* cut: vsnprintf wrote what fits */
	n += (size_t)m;
	line[n++] = '\n';
	for (size_t off = 0; off < n;) {
		ssize_t w = write(STDERR_FILENO, line + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	errno = saved;
}

void vrdma_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

int vrdma_debug_enabled(void)
{
	int saved = errno;

	pthread_once(&debug_once, read_debug_env);
	errno = saved;
	return debug_on;
}

void vrdma_debug(const char *fmt, ...)
{
	va_list ap;

	if (!vrdma_debug_enabled())
		return;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}
