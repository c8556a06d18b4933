/*
 * log_test.c: the library's messages (log.c): the "vrdma: " prefix and the
 * newline, one line per message even when cut, errno untouched, and
 * VRDMA_DEBUG read once.
 */
#include "vrdma.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_STREAM stdout /* stderr is what the test reads */
#include "check.h"

static int pipefd[2], saved_stderr;

/* Sends stderr into a pipe. */
static void capture(void)
{
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0 || (saved_stderr = dup(2)) < 0 || dup2(pipefd[1], 2) < 0) {
		perror("capture");
		exit(2);
	}
}

/* Restores stderr and returns what was written to it (static buffer). */
static const char *captured(void)
{
	static char buf[8192];
	ssize_t n = read(pipefd[0], buf, sizeof buf - 1);

	buf[n > 0 ? n : 0] = '\0';
	dup2(saved_stderr, 2);
	close(saved_stderr);
	close(pipefd[0]);
	close(pipefd[1]);
	return buf;
}

/* Whether debugging is on in a new process with VRDMA_DEBUG=value (NULL:
 * unset): this program run as "log_test child" answers in its exit status. */
static int debug_in_child(const char *value)
{
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0) {
		if (value != NULL)
			setenv("VRDMA_DEBUG", value, 1);
		else
			unsetenv("VRDMA_DEBUG");
		execl("/proc/self/exe", "log_test", "child", (char *)NULL);
		_exit(3);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "child") == 0)
		return vrdma_debug_enabled() ? 1 : 0;

	CHECK(debug_in_child(NULL) == 0, "debugging on without VRDMA_DEBUG");
	CHECK(debug_in_child("") == 0, "debugging on with VRDMA_DEBUG empty");
	CHECK(debug_in_child("0") == 0, "debugging on with VRDMA_DEBUG=0");
	CHECK(debug_in_child("1") == 1, "debugging off with VRDMA_DEBUG=1");
	CHECK(debug_in_child("yes") == 1, "debugging off with VRDMA_DEBUG=yes");

	/* Set before the first vrdma_debug: read once, so it stays on. */
	setenv("VRDMA_DEBUG", "1", 1);

	capture();
	errno = EAGAIN;
	vrdma_log("device %s: %d", "vrdma0", 7);
	CHECK(errno == EAGAIN, "vrdma_log changed errno to %d", errno);
	const char *out = captured();
	CHECK(strcmp(out, "vrdma: device vrdma0: 7\n") == 0, "vrdma_log wrote \"%s\"", out);

	capture();
	errno = EBUSY;
	vrdma_debug("debug %u", 3u);
	CHECK(errno == EBUSY, "vrdma_debug changed errno to %d", errno);
	out = captured();
	CHECK(strcmp(out, "vrdma: debug 3\n") == 0, "vrdma_debug with VRDMA_DEBUG=1 wrote \"%s\"", out);
	CHECK(vrdma_debug_enabled(), "debugging off with VRDMA_DEBUG=1");

	unsetenv("VRDMA_DEBUG");
	CHECK(vrdma_debug_enabled(), "VRDMA_DEBUG was read again");

	/* A message too long for one line is cut, and still ends the line. */
	char *big = malloc(5000);
	if (big == NULL)
		return 2;
	memset(big, 'x', 4999);
	big[4999] = '\0';
	capture();
	vrdma_log("%s", big);
	out = captured();
	size_t n = strlen(out);
	CHECK(n > 100 && n < 2048 && strncmp(out, "vrdma: xxx", 10) == 0 && out[n - 1] == '\n' &&
		      strchr(out, '\n') == out + n - 1,
	      "a long message came out as %zu bytes", n);
	free(big);

	if (failures) {
		printf("log_test: %d failures\n", failures);
		return 1;
	}
	printf("log_test: ok\n");
	return 0;
}
