/* unit_aead.c - the AEAD layer (aead.c, crypto.c): known-answer vectors through
 * the sleeve's own seal and open functions, forgery, truncation, replay and
 * reflection under both AEADs, the cipher choice, no allocation per datagram,
 * and the replay window. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "check.h"
#include "crypto.h"
#include "unit.h"

static const int ciphers[] = {SV_AEAD_AES256GCM, SV_AEAD_CHACHA20POLY1305};
#define AES SV_AEAD_BIT(SV_AEAD_AES256GCM)
#define CHACHA SV_AEAD_BIT(SV_AEAD_CHACHA20POLY1305)

/* ---- OpenSSL's allocations, counted ---- */
static unsigned long allocs;

static void *count_malloc(size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	__atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
	return malloc(n);
}

static void *count_realloc(void *p, size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	__atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
	return realloc(p, n);
}

static void count_free(void *p, const char *file, int line)
{
	(void)file;
	(void)line;
	free(p);
}

#ifdef SV_AWSLC
/* AWS-LC (AES-256-GCM in AWSLC builds) allocates through these when a program
 * defines them: counted the same way. Each block carries its size in front. */
void *OPENSSL_memory_alloc(size_t n);
void OPENSSL_memory_free(void *p);
size_t OPENSSL_memory_get_size(void *p);
void *OPENSSL_memory_realloc(void *p, size_t n);

void *OPENSSL_memory_alloc(size_t n)
{
	size_t *b = malloc(n + 16);

	__atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
	if (!b)
		return NULL;
	*b = n;
	return (char *)b + 16;
}

void OPENSSL_memory_free(void *p)
{
	if (p)
		free((char *)p - 16);
}

size_t OPENSSL_memory_get_size(void *p)
{
	return p ? *(size_t *)((char *)p - 16) : 0;
}

void *OPENSSL_memory_realloc(void *p, size_t n)
{
	size_t had = OPENSSL_memory_get_size(p);
	void *q = OPENSSL_memory_alloc(n);

	if (q && p)
		memcpy(q, p, had < n ? had : n);
	OPENSSL_memory_free(p);
	return q;
}
#endif

int aead_count_allocs(void)
{
	return CRYPTO_set_mem_functions(count_malloc, count_realloc, count_free);
}

/* hex (spaces and colons between bytes allowed) into out; returns the length */
static size_t unhex(uint8_t *out, size_t max, const char *h)
{
	size_t n = 0;

	while (*h) {
		char b[3] = {h[0], h[1], 0};

		if (!isxdigit((unsigned char)h[0])) {
			h++;
			continue;
		}
		if (n < max)
			out[n] = (uint8_t)strtoul(b, NULL, 16);
		n++;
		h += 2;
	}
	return n;
}

/* a context of one AEAD keyed with a vector's key */
static void keyed(struct sv_aead_set *t, int cipher, const char *key_hex)
{
	uint8_t key[SV_KEY_LEN];

	memset(t, 0, sizeof(*t));
	CHECK_EQ(unhex(key, sizeof(key), key_hex), SV_KEY_LEN);
	CHECK_EQ(sv_aead_init(&t->a[cipher], cipher), 0);
	CHECK_EQ(sv_aead_setkey(&t->a[cipher], key), 0);
}

/* ---- known answers ---- */

/* RFC 8439, section 2.8.2: "Example and Test Vector for AEAD_CHACHA20_POLY1305";
 * its nonce (07 00 00 00 ‖ IV) is no sleeve counter, so through the AEAD layer
 * the sleeve's seal and open call (sv_aead_seal, sv_aead_open). */
static void kat_rfc8439_282(void)
{
	static const char pt[] = "Ladies and Gentlemen of the class of '99: If I could offer you only "
				 "one tip for the future, sunscreen would be it.";
	uint8_t m[sizeof(pt)], want[sizeof(pt)], nonce[12], ad[12], tag[16], want_tag[16];
	size_t len = sizeof(pt) - 1;
	struct sv_aead_set t;

	keyed(&t, SV_AEAD_CHACHA20POLY1305,
	      "80 81 82 83 84 85 86 87 88 89 8a 8b 8c 8d 8e 8f 90 91 92 93 94 95 96 97 98 99 9a 9b 9c 9d 9e 9f");
	unhex(nonce, 12, "07 00 00 00 40 41 42 43 44 45 46 47");
	unhex(ad, 12, "50 51 52 53 c0 c1 c2 c3 c4 c5 c6 c7");
	CHECK_EQ(unhex(want, sizeof(want),
		       "d3 1a 8d 34 64 8e 60 db 7b 86 af bc 53 ef 7e c2"
		       "a4 ad ed 51 29 6e 08 fe a9 e2 b5 a7 36 ee 62 d6"
		       "3d be a4 5e 8c a9 67 12 82 fa fb 69 da 92 72 8b"
		       "1a 71 de 0a 9e 06 0b 29 05 d6 a5 b6 7e cd 3b 36"
		       "92 dd bd 7f 2d 77 8b 8c 98 03 ae e3 28 09 1b 58"
		       "fa b3 24 e4 fa d6 75 94 55 85 80 8b 48 31 d7 bc"
		       "3f f4 de f0 8e 4b 7a 9d e5 76 d2 65 86 ce c6 4b"
		       "61 16"),
		 len);
	unhex(want_tag, 16, "1a:e1:0b:59:4f:09:e2:6a:7e:90:2e:cb:d0:60:06:91");
	memcpy(m, pt, len);
	CHECK_EQ(sv_aead_seal(&t.a[SV_AEAD_CHACHA20POLY1305], nonce, m, len, ad, 12, tag), 0);
	CHECK(!memcmp(m, want, len));
	CHECK(!memcmp(tag, want_tag, 16));
	CHECK_EQ(sv_aead_open(&t.a[SV_AEAD_CHACHA20POLY1305], nonce, m, len, ad, 12, tag), 0);
	CHECK(!memcmp(m, pt, len));
	sv_aead_set_free(&t);
}

/* RFC 8439, appendix A.5: "ChaCha20-Poly1305 AEAD Decryption". Its nonce
 * 00 00 00 00 01 02 .. 08 is the sleeve's nonce of counter 0x0807060504030201
 * (0⁴ ‖ counter, little-endian), so it goes through sv_open_raw and sv_seal_buf,
 * what the datapath calls. */
static void kat_rfc8439_a5(void)
{
	static const char pt[] = "Internet-Drafts are draft documents valid for a maximum of six months "
				 "and may be updated, replaced, or obsoleted by other documents at any "
				 "time. It is inappropriate to use Internet-Drafts as reference material "
				 "or to cite them other than as /\xe2\x80\x9cwork in progress./\xe2\x80\x9d";
	static uint8_t c[300], sealed[300];
	uint8_t ad[12];
	size_t len = sizeof(pt) - 1;
	struct sv_aead_set t;

	CHECK_EQ(len, 265);
	keyed(&t, SV_AEAD_CHACHA20POLY1305,
	      "1c 92 40 a5 eb 55 d3 8a f3 33 88 86 04 f6 b5 f0 47 39 17 c1 40 2b 80 09 9d ca 5c bc 20 70 75 c0");
	unhex(ad, 12, "f3 33 88 86 00 00 00 00 00 00 4e 91");
	CHECK_EQ(unhex(c, sizeof(c),
		       "64 a0 86 15 75 86 1a f4 60 f0 62 c7 9b e6 43 bd"
		       "5e 80 5c fd 34 5c f3 89 f1 08 67 0a c7 6c 8c b2"
		       "4c 6c fc 18 75 5d 43 ee a0 9e e9 4e 38 2d 26 b0"
		       "bd b7 b7 3c 32 1b 01 00 d4 f0 3b 7f 35 58 94 cf"
		       "33 2f 83 0e 71 0b 97 ce 98 c8 a8 4a bd 0b 94 81"
		       "14 ad 17 6e 00 8d 33 bd 60 f9 82 b1 ff 37 c8 55"
		       "97 97 a0 6e f4 f0 ef 61 c1 86 32 4e 2b 35 06 38"
		       "36 06 90 7b 6a 7c 02 b0 f9 f6 15 7b 53 c8 67 e4"
		       "b9 16 6c 76 7b 80 4d 46 a5 9b 52 16 cd e7 a4 e9"
		       "90 40 c5 a4 04 33 22 5e e2 82 a1 b0 a0 6c 52 3e"
		       "af 45 34 d7 f8 3f a1 15 5b 00 47 71 8c bc 54 6a"
		       "0d 07 2b 04 b3 56 4e ea 1b 42 22 73 f5 48 27 1a"
		       "0b b2 31 60 53 fa 76 99 19 55 eb d6 31 59 43 4e"
		       "ce bb 4e 46 6d ae 5a 10 73 a6 72 76 27 09 7a 10"
		       "49 e6 17 d9 1d 36 10 94 fa 68 f0 ff 77 98 71 30"
		       "30 5b ea ba 2e da 04 df 99 7b 71 4d 6c 6f 2c 29"
		       "a6 ad 5c b4 02 2b 02 70 9b"
		       /* the tag */
		       "ee ad 9d 67 89 0c bb 22 39 23 36 fe a1 85 1f 38"),
		 len + 16);
	memcpy(sealed, c, len + 16);
	CHECK_EQ(sv_open_raw(&t, SV_AEAD_CHACHA20POLY1305, 0x0807060504030201ull, c, len + 16, ad, 12), 0);
	CHECK(!memcmp(c, pt, len));
	/* and sealing the plaintext gives ciphertext and tag back */
	memcpy(c, pt, len);
	CHECK_EQ(sv_seal_buf(&t, SV_AEAD_CHACHA20POLY1305, 0x0807060504030201ull, c, len, ad, 12), 0);
	CHECK(!memcmp(c, sealed, len + 16));
	/* one bit of the tag, or one counter off: refused */
	sealed[len + 15] ^= 1;
	memcpy(c, sealed, len + 16);
	CHECK(sv_open_raw(&t, SV_AEAD_CHACHA20POLY1305, 0x0807060504030201ull, c, len + 16, ad, 12) < 0);
	sealed[len + 15] ^= 1;
	memcpy(c, sealed, len + 16);
	CHECK(sv_open_raw(&t, SV_AEAD_CHACHA20POLY1305, 0x0807060504030202ull, c, len + 16, ad, 12) < 0);
	sv_aead_set_free(&t);
}

/* The GCM specification's AES-256 test cases (McGrew and Viega, "The
 * Galois/Counter Mode of Operation (GCM)", the submission NIST SP 800-38D
 * standardises, appendix B, test cases 13-16). 13 and 14 use the all-zero IV,
 * the sleeve's nonce of counter 0: through sv_seal_buf and sv_open_raw. 15 and
 * 16 use IV cafebabefacedbaddecaf888: through sv_aead_seal and sv_aead_open. */
static void kat_gcm(void)
{
	static const struct {
		int tc;
		const char *key, *iv, *pt, *ad, *ct, *tag;
	} v[] = {
		{13, "00000000000000000000000000000000" "00000000000000000000000000000000",
		 "000000000000000000000000", "", "", "", "530f8afbc74536b9a963b4f1c4cb738b"},
		{14, "00000000000000000000000000000000" "00000000000000000000000000000000",
		 "000000000000000000000000", "00000000000000000000000000000000", "",
		 "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"},
		{15, "feffe9928665731c6d6a8f9467308308" "feffe9928665731c6d6a8f9467308308",
		 "cafebabefacedbaddecaf888",
		 "d9313225f88406e5a55909c5aff5269a" "86a7a9531534f7da2e4c303d8a318a72"
		 "1c3c0c95956809532fcf0e2449a6b525" "b16aedf5aa0de657ba637b391aafd255",
		 "",
		 "522dc1f099567d07f47f37a32a84427d" "643a8cdcbfe5c0c97598a2bd2555d1aa"
		 "8cb08e48590dbb3da7b08b1056828838" "c5f61e6393ba7a0abcc9f662898015ad",
		 "b094dac5d93471bdec1a502270e3cc6c"},
		{16, "feffe9928665731c6d6a8f9467308308" "feffe9928665731c6d6a8f9467308308",
		 "cafebabefacedbaddecaf888",
		 "d9313225f88406e5a55909c5aff5269a" "86a7a9531534f7da2e4c303d8a318a72"
		 "1c3c0c95956809532fcf0e2449a6b525" "b16aedf5aa0de657ba637b39",
		 "feedfacedeadbeeffeedfacedeadbeef" "abaddad2",
		 "522dc1f099567d07f47f37a32a84427d" "643a8cdcbfe5c0c97598a2bd2555d1aa"
		 "8cb08e48590dbb3da7b08b1056828838" "c5f61e6393ba7a0abcc9f662",
		 "76fc6ece0f4e1768cddf8853bb2d551b"},
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint8_t iv[12], pt[80], ad[32], ct[80], tag[16], m[96], got[16];
		size_t len = unhex(pt, sizeof(pt), v[i].pt), adlen = unhex(ad, sizeof(ad), v[i].ad);
		struct sv_aead_set t;
		struct sv_aead *a = &t.a[SV_AEAD_AES256GCM];
		int zero_iv = v[i].tc <= 14;

		keyed(&t, SV_AEAD_AES256GCM, v[i].key);
		unhex(iv, 12, v[i].iv);
		CHECK_EQ(unhex(ct, sizeof(ct), v[i].ct), len);
		unhex(tag, 16, v[i].tag);
		memcpy(m, pt, len);
		if (zero_iv) {
			CHECK_EQ(sv_seal_buf(&t, SV_AEAD_AES256GCM, 0, m, len, ad, adlen), 0);
			memcpy(got, m + len, 16);
		} else {
			CHECK_EQ(sv_aead_seal(a, iv, m, len, ad, adlen, got), 0);
		}
		CHECK(!memcmp(m, ct, len));
		CHECK(!memcmp(got, tag, 16));
		if (memcmp(m, ct, len) || memcmp(got, tag, 16))
			fprintf(stderr, "  (GCM test case %d)\n", v[i].tc);
		memcpy(m, ct, len);
		memcpy(m + len, tag, 16);
		if (zero_iv)
			CHECK_EQ(sv_open_raw(&t, SV_AEAD_AES256GCM, 0, m, len + 16, ad, adlen), 0);
		else
			CHECK_EQ(sv_aead_open(a, iv, m, len, ad, adlen, tag), 0);
		CHECK(!memcmp(m, pt, len));
		/* the tag's last bit flipped: refused */
		tag[15] ^= 1;
		memcpy(m, ct, len);
		CHECK(sv_aead_open(a, iv, m, len, ad, adlen, tag) < 0);
		sv_aead_set_free(&t);
	}
}

void test_aead_kat(void)
{
	kat_rfc8439_282();
	kat_rfc8439_a5();
	kat_gcm();
}

/* RFC 5869, appendix A, test cases 1 (salt and info) and 3 (neither, as the
 * sleeve derives its keys), SHA-256. */
void test_hkdf_kat(void)
{
	uint8_t ikm[22], salt[13], info[10], okm[42], want[42];

	memset(ikm, 0x0b, sizeof(ikm));
	unhex(salt, sizeof(salt), "000102030405060708090a0b0c");
	unhex(info, sizeof(info), "f0f1f2f3f4f5f6f7f8f9");
	unhex(want, sizeof(want),
	      "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
	CHECK_EQ(sv_hkdf_sha256(okm, 42, ikm, 22, salt, 13, info, 10), 0);
	CHECK(!memcmp(okm, want, 42));
	unhex(want, sizeof(want),
	      "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8");
	CHECK_EQ(sv_hkdf_sha256(okm, 42, ikm, 22, NULL, 0, info, 0), 0);
	CHECK(!memcmp(okm, want, 42));
}

/* ---- which AEAD ---- */
static int pick1(unsigned acc, unsigned fast, int heard, unsigned pacc, unsigned pfast, int *skip)
{
	return sv_aead_pick(acc, fast, 1, &heard, &pacc, &pfast, skip);
}

void test_aead_pick(void)
{
	const unsigned masks[] = {AES, CHACHA, AES | CHACHA}, fasts[] = {CHACHA, AES | CHACHA};
	int skip[3], heard[3] = {1, 1, 1};
	unsigned acc[3], fast[3];

	CHECK(!strcmp(sv_aead_name(SV_AEAD_AES256GCM), "aes-256-gcm"));
	CHECK(!strcmp(sv_aead_name(SV_AEAD_CHACHA20POLY1305), "chacha20-poly1305"));
	CHECK(!strcmp(sv_aead_name(7), "none"));
	CHECK_EQ(sv_aead_by_name("chacha20-poly1305"), SV_AEAD_CHACHA20POLY1305);
	CHECK_EQ(sv_aead_by_name("aes-256-gcm"), SV_AEAD_AES256GCM);
	CHECK_EQ(sv_aead_by_name("auto"), 0);
	CHECK_EQ(sv_aead_by_name("aes-128-gcm"), 0);

	/* nobody heard yet: our preference */
	CHECK_EQ(pick1(SV_AEAD_ALL, SV_AEAD_ALL, 0, 0, 0, skip), SV_AEAD_AES256GCM);
	CHECK_EQ(skip[0], 0);
	CHECK_EQ(pick1(SV_AEAD_ALL, CHACHA, 0, 0, 0, skip), SV_AEAD_CHACHA20POLY1305);
	CHECK_EQ(pick1(CHACHA, SV_AEAD_ALL, 0, 0, 0, skip), SV_AEAD_CHACHA20POLY1305);
	CHECK_EQ(pick1(AES, CHACHA, 0, 0, 0, skip), SV_AEAD_AES256GCM);
	CHECK_EQ(pick1(0, SV_AEAD_ALL, 0, 0, 0, skip), 0);
	/* both auto: AES-NI on both, or not on one */
	CHECK_EQ(pick1(SV_AEAD_ALL, SV_AEAD_ALL, 1, SV_AEAD_ALL, SV_AEAD_ALL, skip), SV_AEAD_AES256GCM);
	CHECK_EQ(pick1(SV_AEAD_ALL, SV_AEAD_ALL, 1, SV_AEAD_ALL, CHACHA, skip), SV_AEAD_CHACHA20POLY1305);
	CHECK_EQ(pick1(SV_AEAD_ALL, CHACHA, 1, SV_AEAD_ALL, SV_AEAD_ALL, skip), SV_AEAD_CHACHA20POLY1305);
	/* forced on one side: that one, even without AES-NI */
	CHECK_EQ(pick1(SV_AEAD_ALL, CHACHA, 1, AES, SV_AEAD_ALL, skip), SV_AEAD_AES256GCM);
	CHECK_EQ(skip[0], 0);
	CHECK_EQ(pick1(AES, SV_AEAD_ALL, 1, SV_AEAD_ALL, SV_AEAD_ALL, skip), SV_AEAD_AES256GCM);
	CHECK_EQ(pick1(SV_AEAD_ALL, SV_AEAD_ALL, 1, CHACHA, SV_AEAD_ALL, skip), SV_AEAD_CHACHA20POLY1305);
	/* forced and different: refused, never nothing */
	CHECK_EQ(pick1(AES, SV_AEAD_ALL, 1, CHACHA, SV_AEAD_ALL, skip), SV_AEAD_AES256GCM);
	CHECK_EQ(skip[0], 1);
	CHECK_EQ(pick1(CHACHA, SV_AEAD_ALL, 1, AES, SV_AEAD_ALL, skip), SV_AEAD_CHACHA20POLY1305);
	CHECK_EQ(skip[0], 1);
	/* a heard peer that accepts nothing is refused; an unheard one counts not */
	CHECK_EQ(pick1(SV_AEAD_ALL, SV_AEAD_ALL, 1, 0, 0, skip), SV_AEAD_AES256GCM);
	CHECK_EQ(skip[0], 1);
	CHECK_EQ(pick1(SV_AEAD_ALL, SV_AEAD_ALL, 0, CHACHA, CHACHA, skip), SV_AEAD_AES256GCM);
	CHECK_EQ(skip[0], 0);

	/* two sides agree on one AEAD whatever each was told, and refuse each other
	 * exactly when they have none in common */
	for (int a = 0; a < 3; a++)
		for (int fa = 0; fa < 2; fa++)
			for (int b = 0; b < 3; b++)
				for (int fb = 0; fb < 2; fb++) {
					int sa, sb;
					int ca = pick1(masks[a], fasts[fa], 1, masks[b], fasts[fb], &sa);
					int cb = pick1(masks[b], fasts[fb], 1, masks[a], fasts[fa], &sb);
					int common = (masks[a] & masks[b]) != 0;

					CHECK_EQ(sa, !common);
					CHECK_EQ(sb, !common);
					if (common)
						CHECK_EQ(ca, cb);
					/* AES only where both run it fast or one insists */
					if (common && ca == SV_AEAD_AES256GCM)
						CHECK((fasts[fa] & fasts[fb] & AES) || masks[a] == AES ||
						      masks[b] == AES);
				}

	/* a mesh: the AEAD most peers accept, a tie to the preferred one */
	acc[0] = AES, fast[0] = SV_AEAD_ALL;
	acc[1] = CHACHA, fast[1] = SV_AEAD_ALL;
	acc[2] = SV_AEAD_ALL, fast[2] = CHACHA;
	CHECK_EQ(sv_aead_pick(SV_AEAD_ALL, SV_AEAD_ALL, 3, heard, acc, fast, skip), SV_AEAD_CHACHA20POLY1305);
	CHECK(skip[0] == 1 && skip[1] == 0 && skip[2] == 0);
	acc[1] = AES;
	CHECK_EQ(sv_aead_pick(SV_AEAD_ALL, SV_AEAD_ALL, 3, heard, acc, fast, skip), SV_AEAD_AES256GCM);
	CHECK(skip[0] == 0 && skip[1] == 0 && skip[2] == 0);

	/* AES-NI and PCLMULQDQ as OpenSSL sees them (OPENSSL_ia32cap) */
	CHECK_EQ(sv_aead_fast_from(NULL, 1, 1), SV_AEAD_ALL);
	CHECK_EQ(sv_aead_fast_from(NULL, 1, 0), CHACHA);
	CHECK_EQ(sv_aead_fast_from(NULL, 0, 1), CHACHA);
	CHECK_EQ(sv_aead_fast_from("", 1, 1), SV_AEAD_ALL);
	CHECK_EQ(sv_aead_fast_from("~0x200000000000000", 1, 1), CHACHA);       /* bit 57: AES-NI */
	CHECK_EQ(sv_aead_fast_from("~0x200000000", 1, 1), CHACHA);             /* bit 33: PCLMULQDQ */
	CHECK_EQ(sv_aead_fast_from("~0x200000200000000:0", 1, 1), CHACHA);
	CHECK_EQ(sv_aead_fast_from("~0x4", 1, 1), SV_AEAD_ALL);
	CHECK_EQ(sv_aead_fast_from("0x200000200000000", 0, 0), SV_AEAD_ALL); /* replaces */
	CHECK_EQ(sv_aead_fast_from("0x4", 1, 1), CHACHA);
	CHECK_EQ(sv_aead_fast_from(":~0x0", 1, 1), SV_AEAD_ALL);
}

/* ---- sealing and opening under both AEADs ---- */
static void ident(struct sv_ident *id, const char *ip, uint16_t port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *a = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	a->sin_family = AF_INET;
	a->sin_port = htons(port);
	inet_pton(AF_INET, ip, &a->sin_addr);
	CHECK_EQ(sv_ident_of(id, &ss), 0);
}

/* A sealed SINGLE DATA datagram around flen bytes of 0x5a at d. */
static size_t sealed_data(struct sv_seal *se, uint8_t *d, size_t flen)
{
	sv_hdr_put(d, SV_T_DATA, SV_F_ENC | SV_F_SINGLE, (uint16_t)flen);
	memset(d + SV_HDR_LEN + SV_CRYPTO_PRE, 0x5a, flen);
	return sv_seal_ctl(se, d, flen);
}

void test_trust(struct sv_open *o, uint64_t session)
{
	o->cand_session = session;
	o->cand_have = 1;
	sv_open_prove(o, 0);
}

static int all(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static void sealing(int c)
{
	static struct sv_seal se;
	static struct sv_open op, fresh;
	static uint8_t d[256], copy[256], unit[3100], ucopy[3100];
	uint8_t master[SV_KEY_LEN], other[SV_KEY_LEN], ad[SV_FRAG_AD_LEN];
	int other_c = c == SV_AEAD_AES256GCM ? SV_AEAD_CHACHA20POLY1305 : SV_AEAD_AES256GCM;
	struct sv_ident a, b, a_port;
	struct sv_hdr h;
	uint64_t ctr;
	size_t n;

	memset(master, 0x42, sizeof(master));
	memset(other, 0x43, sizeof(other));
	ident(&a, "198.18.0.1", 6784);
	ident(&b, "198.18.0.2", 6784);
	ident(&a_port, "198.18.0.1", 6785);
	CHECK_EQ(sv_seal_init(&se, master, 1234, 5000, &a, c), 0);
	n = sealed_data(&se, d, 100);
	CHECK_EQ(n, 8 + 16 + 100 + 16);
	CHECK_EQ(d[5], c); /* the header names the AEAD */
	CHECK(!all(d + 24, 100, 0x5a));
	memcpy(copy, d, n);
	CHECK_EQ(sv_hdr_parse(d, n, &h), SV_OK);
	CHECK_EQ(h.aead, c);
	sv_open_init(&op, &a);
	CHECK_EQ(sv_open_dgram(&op, master, d, &h), SV_D_UNPROVEN_SESSION); /* not before proven */
	CHECK_EQ(op.derived, 0);
	test_trust(&op, 1234);
	CHECK_EQ(sv_open_dgram(&op, master, d, &h), SV_OK);
	CHECK(all(d + 24, 100, 0x5a));
	/* the same datagram again is a replay */
	memcpy(d, copy, n);
	CHECK_EQ(sv_open_dgram(&op, master, d, &h), SV_D_REPLAY);
	/* forged: every bit of every byte but the counter's fails the tag (or the
	 * header check, first), at a receiver that has not seen it */
	for (size_t byte = 0; byte < n; byte++)
		for (int bit = 0; bit < 8; bit++) {
			if (byte >= 16 && byte < 24)
				continue; /* the counter: tested below */
			memcpy(d, copy, n);
			d[byte] ^= (uint8_t)(1 << bit);
			if (sv_hdr_parse(d, n, &h) != SV_OK)
				continue;
			sv_open_init(&fresh, &a);
			test_trust(&fresh, 1234);
			CHECK_EQ(sv_open_dgram(&fresh, master, d, &h),
				 byte >= 8 && byte < 16 ? SV_D_UNPROVEN_SESSION : SV_D_AUTH_FAIL);
			CHECK_EQ(fresh.win.top, 0);
			sv_open_free(&fresh);
		}
	/* a counter fresh to the window with the old tag */
	memcpy(d, copy, n);
	d[23] ^= 0x40;
	CHECK_EQ(sv_hdr_parse(d, n, &h), SV_OK);
	CHECK_EQ(sv_open_dgram(&op, master, d, &h), SV_D_AUTH_FAIL);
	CHECK_EQ(op.win.top, 5000); /* a failed tag moves nothing */
	/* the other AEAD named in the header: another key and algorithm */
	memcpy(d, copy, n);
	d[5] = (uint8_t)other_c;
	CHECK_EQ(sv_hdr_parse(d, n, &h), SV_OK);
	sv_open_init(&fresh, &a);
	test_trust(&fresh, 1234);
	CHECK_EQ(sv_open_dgram(&fresh, master, d, &h), SV_D_AUTH_FAIL);
	sv_open_free(&fresh);
	/* another master key */
	memcpy(d, copy, n);
	CHECK_EQ(sv_hdr_parse(d, n, &h), SV_OK);
	sv_open_init(&fresh, &a);
	test_trust(&fresh, 1234);
	CHECK_EQ(sv_open_dgram(&fresh, other, d, &h), SV_D_AUTH_FAIL);
	sv_open_free(&fresh);
	/* reflected: a's datagram taken for b's (or for a's other port) does not
	 * open, and the window of that peer does not move */
	sv_open_init(&fresh, &b);
	test_trust(&fresh, 1234);
	memcpy(d, copy, n);
	CHECK_EQ(sv_open_dgram(&fresh, master, d, &h), SV_D_AUTH_FAIL);
	CHECK_EQ(fresh.win.top, 0);
	sv_open_free(&fresh);
	sv_open_init(&fresh, &a_port);
	test_trust(&fresh, 1234);
	memcpy(d, copy, n);
	CHECK_EQ(sv_open_dgram(&fresh, master, d, &h), SV_D_AUTH_FAIL);
	sv_open_free(&fresh);
	/* truncated: never reaches the AEAD; longer: refused too */
	for (size_t k = 0; k < n; k++)
		CHECK_EQ(sv_hdr_parse(copy, k, &h), SV_D_TRUNCATED);
	CHECK_EQ(sv_hdr_parse(copy, n + 1, &h), SV_D_BAD_LENGTH);

	/* a unit, sealed once: opens, and refuses a forged or truncated stream */
	for (size_t i = 0; i < 3000; i++)
		unit[i] = (uint8_t)(i * 7);
	memcpy(ucopy, unit, 3000);
	CHECK_EQ(sv_seal_next(&se, &ctr), 0);
	sv_frag_ad(ad, SV_F_ENC | SV_F_VNET, (uint8_t)c, se.session, ctr, 9, 3016, 3);
	CHECK_EQ(sv_seal_buf(&se.ctl, c, ctr, unit, 3000, ad, sizeof(ad)), 0);
	memcpy(d, unit + 3000, 16); /* the tag */
	CHECK_EQ(sv_open_buf(&op, master, c, se.session, ctr, unit, 3016, ad, sizeof(ad)), SV_OK);
	CHECK(!memcmp(unit, ucopy, 3000));
	CHECK_EQ(sv_seal_next(&se, &ctr), 0);
	sv_frag_ad(ad, SV_F_ENC | SV_F_VNET, (uint8_t)c, se.session, ctr, 10, 3016, 3);
	CHECK_EQ(sv_seal_buf(&se.ctl, c, ctr, unit, 3000, ad, sizeof(ad)), 0);
	memcpy(ucopy, unit, 3016);
	unit[1500] ^= 0x10;
	CHECK_EQ(sv_open_buf(&op, master, c, se.session, ctr, unit, 3016, ad, sizeof(ad)), SV_D_AUTH_FAIL);
	memcpy(unit, ucopy, 3016);
	CHECK_EQ(sv_open_buf(&op, master, c, se.session, ctr, unit, 3015, ad, sizeof(ad)), SV_D_AUTH_FAIL);
	memcpy(unit, ucopy, 3016);
	CHECK_EQ(sv_open_buf(&op, master, c, se.session, ctr, unit, 15, ad, sizeof(ad)), SV_D_BAD_LENGTH);
	ad[33] ^= 1; /* the piece count the AD covers */
	CHECK_EQ(sv_open_buf(&op, master, c, se.session, ctr, unit, 3016, ad, sizeof(ad)), SV_D_AUTH_FAIL);
	ad[33] ^= 1;
	memcpy(unit, ucopy, 3016); /* a failed open leaves no ciphertext behind */
	CHECK_EQ(sv_open_buf(&op, master, c, se.session, ctr, unit, 3016, ad, sizeof(ad)), SV_OK);
	memcpy(unit, ucopy, 3016);
	CHECK_EQ(sv_open_buf(&op, master, c, se.session, ctr, unit, 3016, ad, sizeof(ad)), SV_D_REPLAY);

	/* the same session under the other AEAD (the peer switched after the
	 * first heartbeat): opens, from the same window */
	se.cipher = other_c;
	n = sealed_data(&se, d, 60);
	CHECK_EQ(d[5], other_c);
	CHECK_EQ(sv_hdr_parse(d, n, &h), SV_OK);
	CHECK_EQ(sv_open_dgram(&op, master, d, &h), SV_OK);
	CHECK(all(d + 24, 60, 0x5a));
	se.cipher = c;
	/* a restarted peer: its new session (a later clock) opens nothing until a
	 * HEARTBEAT under it proved it; then the old session's datagram is refused */
	sv_seal_free(&se);
	CHECK_EQ(sv_seal_init(&se, master, 999, 1ull << 50, &a, c), 0);
	n = sealed_data(&se, d, 60);
	CHECK_EQ(sv_hdr_parse(d, n, &h), SV_OK);
	CHECK_EQ(sv_open_dgram(&op, master, d, &h), SV_D_UNPROVEN_SESSION);
	sv_hdr_put(d, SV_T_HEARTBEAT, SV_F_ENC, SV_HB_LEN);
	memset(d + 24, 0, SV_HB_LEN);
	n = sv_seal_ctl(&se, d, SV_HB_LEN);
	CHECK_EQ(sv_hdr_parse(d, n, &h), SV_OK);
	memcpy(ucopy, d, n);
	CHECK_EQ(sv_open_hello(&op, master, d, &h, 1), SV_OK);
	CHECK(op.session == 1234 && op.cand_have && op.cand_session == 999);
	memcpy(d, ucopy, n); /* the same HEARTBEAT again: a replay, no key derived */
	ctr = op.derived;
	CHECK_EQ(sv_open_hello(&op, master, d, &h, 1), SV_D_REPLAY);
	CHECK_EQ(op.derived, ctr);
	sv_open_prove(&op, sv_get64(ucopy + 16));
	n = sealed_data(&se, d, 60);
	CHECK_EQ(sv_hdr_parse(d, n, &h), SV_OK);
	CHECK_EQ(sv_open_dgram(&op, master, d, &h), SV_OK);
	CHECK(op.have && op.session == 999);
	memcpy(d, copy, 140);
	CHECK_EQ(sv_hdr_parse(d, 140, &h), SV_OK);
	CHECK_EQ(sv_open_dgram(&op, master, d, &h), SV_D_UNPROVEN_SESSION);
	/* the counter never wraps: at the limit nothing is sealed, and nothing of
	 * the plaintext is left to send */
	se.counter = SV_CTR_LIMIT - 1;
	CHECK(sealed_data(&se, d, 60) > 0);
	CHECK_EQ(sealed_data(&se, d, 60), 0);
	CHECK(all(d + 24, 60, 0));
	CHECK_EQ(sv_seal_next(&se, &ctr), -ERANGE);
	sv_seal_free(&se);
	sv_open_free(&op);
}

void test_aead_sealing(void)
{
	for (size_t i = 0; i < sizeof(ciphers) / sizeof(ciphers[0]); i++)
		sealing(ciphers[i]);
}

/* After the first datagram of a session, sealing and opening allocate nothing:
 * datagrams and 64 kB units under both AEADs, 500 of each. */
void test_aead_no_alloc(void)
{
	static struct sv_seal se;
	static struct sv_open op;
	static struct sv_aead_set t;
	static uint8_t d[2048], unit[65536 + 16];
	uint8_t master[SV_KEY_LEN], ad[SV_FRAG_AD_LEN];
	struct sv_ident a;
	struct sv_hdr h;
	unsigned long before = 0;
	int bad = 0;

	memset(master, 0x42, sizeof(master));
	ident(&a, "198.18.0.1", 6784);
	CHECK_EQ(sv_seal_init(&se, master, 77, 1000, &a, SV_AEAD_AES256GCM), 0);
	CHECK_EQ(sv_seal_set_init(&t, &se), 0);
	sv_open_init(&op, &a);
	test_trust(&op, 77);
	for (int round = 0; round < 501; round++) {
		if (round == 1)
			before = __atomic_load_n(&allocs, __ATOMIC_RELAXED);
		for (size_t k = 0; k < 2; k++) {
			uint64_t ctr;
			size_t n;

			se.cipher = ciphers[k];
			sv_hdr_put(d, SV_T_DATA, SV_F_ENC | SV_F_SINGLE, 1400);
			n = sv_seal_dgram(&se, &t, d, 1400);
			bad += sv_hdr_parse(d, n, &h) != SV_OK || sv_open_dgram(&op, master, d, &h) != SV_OK;
			sv_seal_next(&se, &ctr);
			sv_frag_ad(ad, SV_F_ENC, (uint8_t)ciphers[k], se.session, ctr, 1, sizeof(unit), 46);
			bad += sv_seal_buf(&t, ciphers[k], ctr, unit, 65536, ad, sizeof(ad)) != 0;
			bad += sv_open_buf(&op, master, ciphers[k], se.session, ctr, unit, sizeof(unit), ad,
					   sizeof(ad)) != SV_OK;
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(__atomic_load_n(&allocs, __ATOMIC_RELAXED) - before, 0);
	CHECK(before > 0); /* the counting works: setting up did allocate */
#ifdef SV_AWSLC
	{ /* and it sees AWS-LC's allocations too */
		struct sv_aead x;
		unsigned long was = __atomic_load_n(&allocs, __ATOMIC_RELAXED);

		CHECK_EQ(sv_aead_init(&x, SV_AEAD_AES256GCM), 0);
		CHECK(x.awslc && __atomic_load_n(&allocs, __ATOMIC_RELAXED) > was);
		sv_aead_free(&x);
	}
#endif
	sv_aead_set_free(&t);
	sv_seal_free(&se);
	sv_open_free(&op);
}

/* ---- the replay window ---- */
void test_replay_window(void)
{
	static struct sv_replay w;

	memset(&w, 0, sizeof(w));
	CHECK_EQ(sv_replay_check(&w, 100), 0);
	sv_replay_update(&w, 100);
	CHECK_EQ(sv_replay_check(&w, 100), -1);
	CHECK_EQ(sv_replay_check(&w, 99), 0); /* late but new */
	sv_replay_update(&w, 99);
	CHECK_EQ(sv_replay_check(&w, 99), -1);
	for (uint64_t c = 101; c < 101 + 5000; c += 3)
		sv_replay_update(&w, c);
	/* top = 5099 */
	CHECK_EQ(w.top, 5099);
	CHECK_EQ(sv_replay_check(&w, 5099), -1);
	CHECK_EQ(sv_replay_check(&w, 5098), 0);
	CHECK_EQ(sv_replay_check(&w, 5096), -1);
	CHECK_EQ(sv_replay_check(&w, 5099 - 4031), sv_replay_check(&w, 5099 - 4031)); /* in range */
	CHECK_EQ(sv_replay_check(&w, 5099 - 4032), -1); /* outside the window */
	CHECK_EQ(sv_replay_check(&w, 5099 - 4500), -1);
	CHECK_EQ(sv_replay_check(&w, 100), -1);
	/* a big jump forgets everything but keeps old counters out */
	sv_replay_update(&w, 1000000);
	CHECK_EQ(sv_replay_check(&w, 999999), 0);
	CHECK_EQ(sv_replay_check(&w, 1000000), -1);
	CHECK_EQ(sv_replay_check(&w, 5099), -1);
	/* every counter in a window accepted exactly once, in shuffled order */
	{
		static struct sv_replay v;
		uint64_t base = 1ull << 40;
		int ok = 1;

		memset(&v, 0, sizeof(v));
		sv_replay_update(&v, base + 3000);
		for (uint64_t i = 0; i < 3000; i++) {
			uint64_t c = base + (i * 7919) % 3000;

			if (sv_replay_check(&v, c) != 0)
				ok = 0;
			sv_replay_update(&v, c);
			if (sv_replay_check(&v, c) != -1)
				ok = 0;
		}
		CHECK(ok);
	}
}
