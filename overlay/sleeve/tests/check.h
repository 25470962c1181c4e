/* check.h - the unit tests' CHECK: counts, prints the failing line, goes on */
#ifndef SLEEVE_TEST_CHECK_H
#define SLEEVE_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>

extern int failures, checks;

#define CHECK(cond)                                                                          \
	do {                                                                                 \
		checks++;                                                                    \
		if (!(cond)) {                                                               \
			failures++;                                                          \
			fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, \
				__func__, #cond);                                            \
		}                                                                            \
	} while (0)
#define CHECK_EQ(a, b) CHECK((long long)(a) == (long long)(b))

#endif
