/* aead_bench.c - raw libsodium AEAD throughput on this CPU, one core, in place:
 * ChaCha20-Poly1305 (IETF) and XChaCha20-Poly1305 at datagram and super-frame
 * sizes (open: into a second buffer), and memcpy for scale. `make aead-bench`.
 * Not a test: prints numbers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

enum alg { IETF_SEAL, IETF_OPEN, X_SEAL, MEMCPY };

/* GB/s over about 0.3 s of calls on len-byte messages */
static double run(enum alg a, uint8_t *buf, uint8_t *other, size_t len)
{
	static uint8_t key[32], nonce[24], tag[16], ad[24];
	size_t total = 0;
	double t0 = now_s(), t;
	unsigned long long n = 0;

	if (a == IETF_OPEN) /* a valid tag, so the open really decrypts */
		crypto_aead_chacha20poly1305_ietf_encrypt_detached(buf, tag, NULL, buf, len, ad, 24,
								   NULL, nonce, key);
	do {
		for (int i = 0; i < 64; i++) {
			switch (a) {
			case IETF_SEAL:
				crypto_aead_chacha20poly1305_ietf_encrypt_detached(
					buf, tag, NULL, buf, len, ad, 24, NULL, nonce, key);
				break;
			case IETF_OPEN:
				/* buf keeps the ciphertext: verify and decrypt into other */
				if (crypto_aead_chacha20poly1305_ietf_decrypt_detached(
					    other, NULL, buf, len, tag, ad, 24, nonce, key) != 0)
					n++;
				break;
			case X_SEAL:
				crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
					buf, tag, NULL, buf, len, ad, 24, NULL, nonce, key);
				break;
			case MEMCPY:
				memcpy(other, buf, len);
				break;
			}
			total += len;
		}
		t = now_s() - t0;
	} while (t < 0.3);
	if (n)
		fprintf(stderr, "aead_bench: %llu opens failed\n", n);
	return (double)total / t / 1e9;
}

int main(void)
{
	static const size_t sizes[] = {1400, 8900, 16384, 65536};
	static const char *const names[] = {"chacha20poly1305-ietf seal", "chacha20poly1305-ietf open",
					    "xchacha20poly1305-ietf seal", "memcpy"};
	uint8_t *buf = malloc(65536 + 64), *other = malloc(65536 + 64);

	if (sodium_init() < 0 || !buf || !other) {
		fprintf(stderr, "aead_bench: init failed\n");
		return 1;
	}
	memset(buf, 0x5a, 65536);
	printf("libsodium %s, one core, GB/s (in place)\n", sodium_version_string());
	printf("%-30s", "bytes per call");
	for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
		printf("%9zu", sizes[j]);
	printf("\n");
	for (int a = 0; a < 4; a++) {
		printf("%-30s", names[a]);
		for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
			printf("%9.2f", run((enum alg)a, buf, other, sizes[j]));
		printf("\n");
	}
	free(buf);
	free(other);
	return 0;
}
