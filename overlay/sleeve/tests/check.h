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

/* tests/unit_aead.c */
/* Counts OpenSSL's allocations from now on: call first, before anything
 * allocates through OpenSSL; 0 if that was too late. */
int aead_count_allocs(void);
void test_aead_kat(void);
void test_hkdf_kat(void);
void test_aead_pick(void);
void test_aead_sealing(void);
void test_aead_no_alloc(void);
/* tests/unit_harden.c */
void test_harden(void);
struct sv_open;
/* Makes session the proven one of o directly (tests of the sealing side). */
void test_trust(struct sv_open *o, uint64_t session);

#endif
