/*
 * check.h: the C unit tests' CHECK. A condition that does not hold is
 * counted in failures and printed with its file, line and text, followed
 * by the printf-style reason; the test goes on. A test that prints its
 * checks elsewhere defines CHECK_STREAM first (log_test.c captures stderr).
 * A program of named cases runs them with RUN_CASES.
 */
#ifndef VRDMA_TESTS_CHECK_H
#define VRDMA_TESTS_CHECK_H

#include <stddef.h>
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

/* A named case of a test program, run by run_cases. */
struct test_case {
	const char *name;
	void (*fn)(void);
};

/* run_cases runs the n cases in order, saying "ok" or "FAIL" of each on
 * stdout as it ends. */
static inline void run_cases(const struct test_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int before = failures;
		cases[i].fn();
		printf("%s %s\n", failures == before ? "ok  " : "FAIL", cases[i].name);
		fflush(stdout);
	}
}

#define RUN_CASES(cases) run_cases(cases, sizeof(cases) / sizeof((cases)[0]))

#endif
