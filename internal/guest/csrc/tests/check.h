/*
 * check.h: the C unit tests' CHECK. A condition that does not hold is
 * counted in failures and printed with its file, line and text, followed
 * by the printf-style reason; the test goes on. A test that prints its
 * checks elsewhere defines CHECK_STREAM first (log_test.c captures stderr).
 */
#ifndef VRDMA_TESTS_CHECK_H
#define VRDMA_TESTS_CHECK_H

#include <stdio.h>

#ifndef CHECK_STREAM
#define CHECK_STREAM stderr
#endif

static int failures;

#define CHECK(cond, ...)                                                                 \
	do {                                                                             \
		if (!(cond)) {                                                           \
			failures++;                                                      \
			fprintf(CHECK_STREAM, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(CHECK_STREAM, __VA_ARGS__);                              \
			fputc('\n', CHECK_STREAM);                                       \
		}                                                                        \
	} while (0)

#endif
