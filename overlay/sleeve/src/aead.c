/* aead.c - AES-256-GCM and ChaCha20-Poly1305 through OpenSSL's EVP (AES-256-GCM
 * through AWS-LC in AWSLC builds: aead_awslc.c), HKDF-SHA256, the CPU's fast
 * AEADs and the choice between them */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include "aead.h"
#ifdef SV_AWSLC
#include "aead_awslc.h"
#endif

static const char *const names[SV_AEAD__MAX] = {
	[SV_AEAD_NONE] = "none",
	[SV_AEAD_AES256GCM] = "aes-256-gcm",
	[SV_AEAD_CHACHA20POLY1305] = "chacha20-poly1305",
};

const char *sv_aead_name(int c)
{
	return c > SV_AEAD_NONE && c < SV_AEAD__MAX ? names[c] : names[SV_AEAD_NONE];
}

int sv_aead_by_name(const char *name)
{
	for (int c = SV_AEAD_NONE + 1; c < SV_AEAD__MAX; c++)
		if (!strcmp(name, names[c]))
			return c;
	return 0;
}

/* OPENSSL_ia32cap (OpenSSL's own syntax): "~X" clears the bits of X from what the
 * CPU reports, "X" replaces it, ":..." leaves the first word alone. Bit 57 of the
 * first word is AES-NI, bit 33 PCLMULQDQ. */
unsigned sv_aead_fast_from(const char *ia32cap, int aesni, int pclmul)
{
	unsigned fast = SV_AEAD_BIT(SV_AEAD_CHACHA20POLY1305);

	if (ia32cap && *ia32cap && *ia32cap != ':') {
		int clear = *ia32cap == '~';
		unsigned long long v = strtoull(ia32cap + clear, NULL, 0);

		if (clear) {
			aesni = aesni && !(v >> 57 & 1);
			pclmul = pclmul && !(v >> 33 & 1);
		} else {
			aesni = v >> 57 & 1;
			pclmul = v >> 33 & 1;
		}
	}
	if (aesni && pclmul)
		fast |= SV_AEAD_BIT(SV_AEAD_AES256GCM);
	return fast;
}

unsigned sv_aead_fast(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_cpu_init();
	return sv_aead_fast_from(getenv("OPENSSL_ia32cap"), __builtin_cpu_supports("aes"),
				 __builtin_cpu_supports("pclmul"));
#elif defined(__aarch64__)
	unsigned long hw = getauxval(AT_HWCAP);

	return sv_aead_fast_from(NULL, !!(hw & HWCAP_AES), !!(hw & HWCAP_PMULL));
#else
	return sv_aead_fast_from(NULL, 0, 0);
#endif
}

int sv_aead_pick(unsigned acc, unsigned fast, int n, const int *heard, const unsigned *peer_acc,
		 const unsigned *peer_fast, int *skip)
{
	const unsigned aes = SV_AEAD_BIT(SV_AEAD_AES256GCM);
	int pref = (fast & aes) ? SV_AEAD_AES256GCM : SV_AEAD_CHACHA20POLY1305;
	int best = 0, best_n = -1;

	/* peers that accept none of ours have no say */
	for (int i = 0; i < n; i++)
		if (heard[i] && (peer_acc[i] & acc) && !(peer_fast[i] & aes))
			pref = SV_AEAD_CHACHA20POLY1305;
	/* the preferred one first, so that it wins a tie */
	for (int k = 0; k < 2; k++) {
		int c = k == 0 ? pref : SV_AEAD_AES256GCM + SV_AEAD_CHACHA20POLY1305 - pref, cnt = 0;

		if (!(acc & SV_AEAD_BIT(c)))
			continue;
		for (int i = 0; i < n; i++)
			if (heard[i] && (peer_acc[i] & SV_AEAD_BIT(c)))
				cnt++;
		if (cnt > best_n) {
			best = c;
			best_n = cnt;
		}
	}
	for (int i = 0; i < n; i++)
		skip[i] = best && heard[i] && !(peer_acc[i] & SV_AEAD_BIT(best));
	return best;
}

static const EVP_CIPHER *evp_of(int cipher)
{
	switch (cipher) {
	case SV_AEAD_AES256GCM:
		return EVP_aes_256_gcm();
	case SV_AEAD_CHACHA20POLY1305:
		return EVP_chacha20_poly1305();
	}
	return NULL;
}

#ifdef SV_AWSLC
/* the cipher this build seals with AWS-LC (aead_awslc.c) */
static int awslc_for(int cipher)
{
	return cipher == SV_AEAD_AES256GCM;
}
#endif

const char *sv_aead_impl(int cipher)
{
#ifdef SV_AWSLC
	if (awslc_for(cipher))
		return sv_awslc_version();
#endif
	return evp_of(cipher) ? OpenSSL_version(OPENSSL_VERSION) : "none";
}

int sv_aead_init(struct sv_aead *a, int cipher)
{
	const EVP_CIPHER *e = evp_of(cipher);
	EVP_CIPHER_CTX *c;

	memset(a, 0, sizeof(*a));
	if (!e)
		return -EINVAL;
#ifdef SV_AWSLC
	if (awslc_for(cipher)) {
		static const uint8_t none[SV_AEAD_KEY_LEN];

		/* AWS-LC keys a context when it makes it: this one, until setkey */
		a->ctx = sv_awslc_gcm_new(none);
		a->awslc = 1;
		a->cipher = cipher;
		return a->ctx ? 0 : -ENOMEM;
	}
#endif
	c = EVP_CIPHER_CTX_new();
	if (!c)
		return -ENOMEM;
	if (!EVP_EncryptInit_ex(c, e, NULL, NULL, NULL) ||
	    EVP_CIPHER_CTX_get_iv_length(c) != SV_AEAD_NONCE_LEN ||
	    EVP_CIPHER_CTX_get_key_length(c) != SV_AEAD_KEY_LEN) {
		EVP_CIPHER_CTX_free(c);
		return -EIO;
	}
	a->ctx = c;
	a->cipher = cipher;
	return 0;
}

void sv_aead_free(struct sv_aead *a)
{
#ifdef SV_AWSLC
	if (a->awslc)
		sv_awslc_gcm_free(a->ctx);
	else
#endif
		EVP_CIPHER_CTX_free(a->ctx); /* wipes the key schedule */
	memset(a, 0, sizeof(*a));
}

int sv_aead_setkey(struct sv_aead *a, const uint8_t key[SV_AEAD_KEY_LEN])
{
#ifdef SV_AWSLC
	if (a->awslc) {
		void *n = sv_awslc_gcm_new(key); /* once per session, never per datagram */

		a->keyed = n != NULL;
		if (n) {
			sv_awslc_gcm_free(a->ctx);
			a->ctx = n;
		}
		return a->keyed ? 0 : -EIO;
	}
#endif
	a->keyed = a->ctx && EVP_EncryptInit_ex(a->ctx, NULL, NULL, key, NULL);
	return a->keyed ? 0 : -EIO;
}

int sv_aead_seal(struct sv_aead *a, const uint8_t nonce[SV_AEAD_NONCE_LEN], uint8_t *m, size_t len,
		 const uint8_t *ad, size_t adlen, uint8_t tag[SV_AEAD_TAG_LEN])
{
	EVP_CIPHER_CTX *c = a->ctx;
	uint8_t end[32];
	int n;

	if (!a->keyed || len > INT_MAX || adlen > INT_MAX)
		return -EINVAL;
#ifdef SV_AWSLC
	if (a->awslc)
		return sv_awslc_gcm_seal(c, nonce, m, len, ad, adlen, tag);
#endif
	if (!EVP_EncryptInit_ex(c, NULL, NULL, NULL, nonce) ||
	    (adlen && !EVP_EncryptUpdate(c, NULL, &n, ad, (int)adlen)) ||
	    (len && !EVP_EncryptUpdate(c, m, &n, m, (int)len)) || !EVP_EncryptFinal_ex(c, end, &n) ||
	    !EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, SV_AEAD_TAG_LEN, tag))
		return -EIO;
	return 0;
}

int sv_aead_open(struct sv_aead *a, const uint8_t nonce[SV_AEAD_NONCE_LEN], uint8_t *c, size_t len,
		 const uint8_t *ad, size_t adlen, const uint8_t tag[SV_AEAD_TAG_LEN])
{
	EVP_CIPHER_CTX *x = a->ctx;
	uint8_t end[32];
	int n;

	if (!a->keyed || len > INT_MAX || adlen > INT_MAX)
		return -EINVAL;
#ifdef SV_AWSLC
	if (a->awslc)
		return sv_awslc_gcm_open(x, nonce, c, len, ad, adlen, tag);
#endif
	if (!EVP_DecryptInit_ex(x, NULL, NULL, NULL, nonce) ||
	    !EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, SV_AEAD_TAG_LEN, (void *)tag) ||
	    (adlen && !EVP_DecryptUpdate(x, NULL, &n, ad, (int)adlen)) ||
	    (len && !EVP_DecryptUpdate(x, c, &n, c, (int)len)) || EVP_DecryptFinal_ex(x, end, &n) <= 0)
		return -EBADMSG;
	return 0;
}

static EVP_KDF *hkdf;
static pthread_once_t hkdf_once = PTHREAD_ONCE_INIT;

static void hkdf_fetch(void)
{
	hkdf = EVP_KDF_fetch(NULL, OSSL_KDF_NAME_HKDF, NULL);
}

int sv_hkdf_sha256(uint8_t *out, size_t out_len, const uint8_t *ikm, size_t ikm_len,
		   const uint8_t *salt, size_t salt_len, const uint8_t *info, size_t info_len)
{
	OSSL_PARAM p[5], *q = p;
	EVP_KDF_CTX *k;
	int ok;

	pthread_once(&hkdf_once, hkdf_fetch);
	if (!hkdf)
		return -EIO;
	k = EVP_KDF_CTX_new(hkdf);
	if (!k)
		return -ENOMEM;
	*q++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
	*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikm_len);
	if (salt_len)
		*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_len);
	*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_len);
	*q = OSSL_PARAM_construct_end();
	ok = EVP_KDF_derive(k, out, out_len, p) > 0;
	EVP_KDF_CTX_free(k);
	return ok ? 0 : -EIO;
}

void sv_wipe(void *p, size_t n)
{
	OPENSSL_cleanse(p, n);
}
