/* aead_awslc.c - AES-256-GCM through AWS-LC's EVP_AEAD, for builds with AWSLC=DIR
 * (overlay/README.md, "AES-256-GCM from AWS-LC").
 *
 * AWS-LC's AES-GCM uses VAES and VPCLMULQDQ on CPUs that have them, about 2.6 times
 * OpenSSL 3.0's speed on this project's machine; the cipher is the same AES-256-GCM,
 * so the wire does not change and a peer built on OpenSSL alone still talks. The
 * library is linked as DIR/lib/libsvlc.a, whose every global symbol carries the
 * prefix svlc_ (aws-lc.sh), so it sits beside the system's libcrypto, which keeps
 * ChaCha20-Poly1305, HKDF and the rest. */
#include <errno.h>
#include <stdint.h>

#define EVP_aead_aes_256_gcm svlc_EVP_aead_aes_256_gcm
#define EVP_AEAD_CTX_new svlc_EVP_AEAD_CTX_new
#define EVP_AEAD_CTX_free svlc_EVP_AEAD_CTX_free
#define EVP_AEAD_CTX_seal_scatter svlc_EVP_AEAD_CTX_seal_scatter
#define EVP_AEAD_CTX_open_gather svlc_EVP_AEAD_CTX_open_gather
#define ERR_clear_error svlc_ERR_clear_error
#include <openssl/aead.h>
#include <openssl/base.h>
#include <openssl/err.h>

#include "aead_awslc.h"

const char *sv_awslc_version(void)
{
	return "AWS-LC " AWSLC_VERSION_NUMBER_STRING;
}

void *sv_awslc_gcm_new(const uint8_t key[32])
{
	return EVP_AEAD_CTX_new(EVP_aead_aes_256_gcm(), key, 32, 16);
}

void sv_awslc_gcm_free(void *ctx)
{
	EVP_AEAD_CTX_free(ctx); /* wipes the key schedule */
}

int sv_awslc_gcm_seal(void *ctx, const uint8_t nonce[12], uint8_t *m, size_t len, const uint8_t *ad,
		      size_t adlen, uint8_t tag[16])
{
	size_t tl = 0;

	if (!EVP_AEAD_CTX_seal_scatter(ctx, m, tag, &tl, 16, nonce, 12, m, len, NULL, 0, ad, adlen) ||
	    tl != 16) {
		ERR_clear_error();
		return -EIO;
	}
	return 0;
}

int sv_awslc_gcm_open(void *ctx, const uint8_t nonce[12], uint8_t *c, size_t len, const uint8_t *ad,
		      size_t adlen, const uint8_t tag[16])
{
	if (!EVP_AEAD_CTX_open_gather(ctx, c, nonce, 12, c, len, tag, 16, ad, adlen)) {
		ERR_clear_error(); /* a forgery leaves an error on the thread's queue */
		return -EBADMSG;
	}
	return 0;
}
