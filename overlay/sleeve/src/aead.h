/* aead.h - the two AEADs (OpenSSL EVP; AES-256-GCM from AWS-LC in AWSLC builds),
 * which of them this CPU runs fast, and which one two sides agree on
 * (overlay/README.md, "Choosing the cipher") */
#ifndef SLEEVE_AEAD_H
#define SLEEVE_AEAD_H

#include <stddef.h>
#include <stdint.h>

/* the header's aead byte */
enum sv_cipher {
	SV_AEAD_NONE = 0,
	SV_AEAD_AES256GCM = 1,
	SV_AEAD_CHACHA20POLY1305 = 2,
	SV_AEAD__MAX
};

#define SV_AEAD_BIT(c) (1u << ((c) - 1))
#define SV_AEAD_ALL (SV_AEAD_BIT(SV_AEAD_AES256GCM) | SV_AEAD_BIT(SV_AEAD_CHACHA20POLY1305))
#define SV_AEAD_KEY_LEN 32
#define SV_AEAD_NONCE_LEN 12
#define SV_AEAD_TAG_LEN 16

/* "aes-256-gcm", "chacha20-poly1305"; "none" for anything else */
const char *sv_aead_name(int c);
/* the id for a name, 0 if none */
int sv_aead_by_name(const char *name);

/* The AEADs this CPU runs fast, as OpenSSL sees it: ChaCha20-Poly1305 always,
 * AES-256-GCM with AES-NI and PCLMULQDQ (arm64: AES and PMULL), unless an
 * OPENSSL_ia32cap mask clears them. */
unsigned sv_aead_fast(void);
/* The same from an OPENSSL_ia32cap value (NULL: unset) and the CPU's own bits. */
unsigned sv_aead_fast_from(const char *ia32cap, int aesni, int pclmul);

/* The AEAD to seal with (overlay/README.md, "Choosing the cipher"): own masks
 * acc and fast, and per peer whether it was heard and its masks. skip[i] is set
 * for a heard peer that does not accept the result. Returns 0 only if acc is 0. */
int sv_aead_pick(unsigned acc, unsigned fast, int n, const int *heard, const unsigned *peer_acc,
		 const unsigned *peer_fast, int *skip);

/* One EVP context for one AEAD, keyed once, reused for every message: only the
 * nonce changes per call, nothing is allocated. One thread at a time. */
struct sv_aead {
	void *ctx; /* EVP_CIPHER_CTX, or AWS-LC's EVP_AEAD_CTX when awslc */
	int cipher;
	int keyed;
	int awslc;
};

/* The library that seals cipher in this build: "OpenSSL 3.0.19 ...", "AWS-LC 5.12.0". */
const char *sv_aead_impl(int cipher);

int sv_aead_init(struct sv_aead *a, int cipher);
void sv_aead_free(struct sv_aead *a);
int sv_aead_setkey(struct sv_aead *a, const uint8_t key[SV_AEAD_KEY_LEN]);
/* In place: m[0..len) becomes ciphertext, the tag goes to tag. 0 or -EIO. */
int sv_aead_seal(struct sv_aead *a, const uint8_t nonce[SV_AEAD_NONCE_LEN], uint8_t *m, size_t len,
		 const uint8_t *ad, size_t adlen, uint8_t tag[SV_AEAD_TAG_LEN]);
/* In place: 0 and c[0..len) plaintext, or -EBADMSG (c is then garbage). */
int sv_aead_open(struct sv_aead *a, const uint8_t nonce[SV_AEAD_NONCE_LEN], uint8_t *c, size_t len,
		 const uint8_t *ad, size_t adlen, const uint8_t tag[SV_AEAD_TAG_LEN]);

/* HKDF-SHA256 (RFC 5869): out_len bytes from ikm, salt and info. 0 or -EIO. */
int sv_hkdf_sha256(uint8_t *out, size_t out_len, const uint8_t *ikm, size_t ikm_len,
		   const uint8_t *salt, size_t salt_len, const uint8_t *info, size_t info_len);

/* wipes n bytes (not optimised away) */
void sv_wipe(void *p, size_t n);

#endif
