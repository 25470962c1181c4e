/* aead_bench.c - the sleeve's AEADs on this CPU, one core, through its own
 * seal and open (sv_seal_buf, sv_open_raw: OpenSSL EVP, contexts reused) at
 * datagram and super-frame sizes, in place; memcpy for scale. `make aead-bench`.
 * Not a test: prints numbers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "crypto.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* GB/s over about 0.3 s of calls on len-byte messages: cipher 0 is memcpy */
static double run(struct sv_aead_set *t, int cipher, int open, uint8_t *buf, uint8_t *other, size_t len)
{
	static uint8_t ad[24];
	uint8_t sealed[16];
	size_t total = 0;
	double t0 = now_s(), el;
	unsigned long long bad = 0, ctr = 1;

	if (cipher && open) {
		/* a valid unit, so that every open really authenticates and decrypts */
		sv_seal_buf(t, cipher, ctr, buf, len, ad, sizeof(ad));
		memcpy(other, buf, len + 16);
		memcpy(sealed, buf + len, 16);
	}
	do {
		for (int i = 0; i < 64; i++) {
			if (!cipher) {
				memcpy(other, buf, len);
			} else if (!open) {
				bad += sv_seal_buf(t, cipher, ++ctr, buf, len, ad, sizeof(ad)) != 0;
			} else {
				/* open in place and seal back, so the next open has its
				 * ciphertext: counts as two passes */
				bad += sv_open_raw(t, cipher, ctr, buf, len + 16, ad, sizeof(ad)) != 0;
				bad += sv_seal_buf(t, cipher, ctr, buf, len, ad, sizeof(ad)) != 0;
				total += len;
			}
			total += len;
		}
		el = now_s() - t0;
	} while (el < 0.3);
	if (bad)
		fprintf(stderr, "aead_bench: %llu calls failed\n", bad);
	return (double)total / el / 1e9;
}

int main(void)
{
	static const size_t sizes[] = {1400, 8900, 16384, 65536};
	static const struct {
		const char *name;
		int cipher, open;
	} rows[] = {
		{"aes-256-gcm seal", SV_AEAD_AES256GCM, 0},
		{"aes-256-gcm open+seal", SV_AEAD_AES256GCM, 1},
		{"chacha20-poly1305 seal", SV_AEAD_CHACHA20POLY1305, 0},
		{"chacha20-poly1305 open+seal", SV_AEAD_CHACHA20POLY1305, 1},
		{"memcpy", 0, 0},
	};
	uint8_t *buf = malloc(65536 + 64), *other = malloc(65536 + 64), master[SV_KEY_LEN];
	struct sv_aead_set t = {0};
	struct sv_seal s;
	struct sv_ident id = {.b = {4, 198, 18, 0, 1, 0x1a, 0x80}, .len = 7};

	memset(master, 0x42, sizeof(master));
	if (!buf || !other || sv_seal_init(&s, master, 1, 1, &id, SV_AEAD_AES256GCM) < 0 ||
	    sv_seal_set_init(&t, &s) < 0) {
		fprintf(stderr, "aead_bench: init failed\n");
		return 1;
	}
	memset(buf, 0x5a, 65536);
	printf("aes-256-gcm: %s, chacha20-poly1305: %s; fast here: 0x%x; one core, GB/s (in place)\n",
	       sv_aead_impl(SV_AEAD_AES256GCM), sv_aead_impl(SV_AEAD_CHACHA20POLY1305), sv_aead_fast());
	printf("%-30s", "bytes per call");
	for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
		printf("%9zu", sizes[j]);
	printf("\n");
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		printf("%-30s", rows[r].name);
		for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
			printf("%9.2f", run(&t, rows[r].cipher, rows[r].open, buf, other, sizes[j]));
		printf("\n");
	}
	sv_aead_set_free(&t);
	sv_seal_free(&s);
	free(buf);
	free(other);
	return 0;
}
