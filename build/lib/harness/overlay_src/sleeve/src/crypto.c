/* crypto.c - ChaCha20-Poly1305 (IETF) per datagram or per unit, per-session keys,
 * replay window */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "crypto.h"

#define KDF_CTX "sleeve01"

int sv_crypto_init(void)
{
	return sodium_init() < 0 ? -EIO : 0;
}

int sv_key_load(const char *path, uint8_t key[SV_KEY_LEN], char *err, size_t errlen)
{
	struct stat st;
	uint8_t buf[SV_KEY_LEN + 1];
	ssize_t n;
	int fd, ret = -EINVAL;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "key file %s: %s", path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		snprintf(err, errlen, "key file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "key file %s: not a regular file", path);
		goto out;
	}
	if (st.st_mode & 077) {
		snprintf(err, errlen, "key file %s: mode %04o is too open, must be 0600 or stricter",
			 path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	n = read(fd, buf, sizeof(buf));
	if (n != SV_KEY_LEN) {
		snprintf(err, errlen, "key file %s: must hold exactly %d raw bytes", path,
			 SV_KEY_LEN);
		goto out;
	}
	memcpy(key, buf, SV_KEY_LEN);
	ret = 0;
out:
	sodium_memzero(buf, sizeof(buf));
	close(fd);
	return ret;
}

static void derive(uint8_t out[SV_KEY_LEN], const uint8_t master[SV_KEY_LEN], uint64_t session)
{
	crypto_kdf_derive_from_key(out, SV_KEY_LEN, session, KDF_CTX, master);
}

void sv_seal_init(struct sv_seal *s, const uint8_t master[SV_KEY_LEN], uint64_t session,
		  uint64_t counter0)
{
	s->session = session;
	s->counter = counter0;
	derive(s->key, master, session);
}

static void nonce_of(uint8_t n[12], uint64_t ctr)
{
	memset(n, 0, 4);
	for (int i = 0; i < 8; i++)
		n[4 + i] = (uint8_t)(ctr >> (8 * i));
}

uint64_t sv_seal_next(struct sv_seal *s)
{
	return __atomic_fetch_add(&s->counter, 1, __ATOMIC_RELAXED);
}

void sv_seal_buf(const struct sv_seal *s, uint64_t ctr, uint8_t *m, size_t len, const uint8_t *ad,
		 size_t adlen)
{
	uint8_t nonce[12];

	nonce_of(nonce, ctr);
	crypto_aead_chacha20poly1305_ietf_encrypt_detached(m, m + len, NULL, m, len, ad, adlen, NULL,
							   nonce, s->key);
}

size_t sv_seal_dgram(struct sv_seal *s, uint8_t *dgram, size_t len)
{
	uint64_t ctr = sv_seal_next(s);

	sv_put64(dgram + SV_HDR_LEN, s->session);
	sv_put64(dgram + SV_HDR_LEN + 8, ctr);
	sv_seal_buf(s, ctr, dgram + SV_HDR_LEN + SV_CRYPTO_PRE, len, dgram, SV_HDR_LEN + SV_CRYPTO_PRE);
	return SV_HDR_LEN + SV_CRYPTO_OVER + len;
}

enum sv_drop sv_open_buf(struct sv_open *o, const uint8_t master[SV_KEY_LEN], uint64_t session,
			 uint64_t ctr, uint8_t *c, size_t len, const uint8_t *ad, size_t adlen)
{
	uint8_t nonce[12], newkey[SV_KEY_LEN];
	const uint8_t *key = o->key;

	if (len < SV_TAG_LEN)
		return SV_D_BAD_LENGTH;
	len -= SV_TAG_LEN;
	if (sv_replay_check(&o->win, ctr) < 0)
		return SV_D_REPLAY;
	if (!o->have || session != o->session) {
		derive(newkey, master, session);
		key = newkey;
	}
	nonce_of(nonce, ctr);
	if (crypto_aead_chacha20poly1305_ietf_decrypt_detached(c, NULL, c, len, c + len, ad, adlen,
							       nonce, key) != 0)
		return SV_D_AUTH_FAIL;
	if (key == newkey) {
		memcpy(o->key, newkey, SV_KEY_LEN);
		o->session = session;
		o->have = 1;
		sodium_memzero(newkey, sizeof(newkey));
	}
	sv_replay_update(&o->win, ctr);
	return SV_OK;
}

enum sv_drop sv_open_dgram(struct sv_open *o, const uint8_t master[SV_KEY_LEN], uint8_t *dgram,
			   const struct sv_hdr *h)
{
	return sv_open_buf(o, master, sv_get64(dgram + SV_HDR_LEN),
			   sv_get64(dgram + SV_HDR_LEN + 8), dgram + SV_HDR_LEN + SV_CRYPTO_PRE,
			   (size_t)h->len + SV_TAG_LEN, dgram, SV_HDR_LEN + SV_CRYPTO_PRE);
}

/* The ring has SV_REPLAY_BITS bits; the usable window is one word less so that
 * the oldest word is never shared with the newest (as in WireGuard). */
#define WINDOW (SV_REPLAY_BITS - 64)
#define WORDS (SV_REPLAY_BITS / 64)

int sv_replay_check(const struct sv_replay *w, uint64_t ctr)
{
	if (!w->any || ctr > w->top)
		return 0;
	if (w->top - ctr >= WINDOW)
		return -1;
	if (w->bits[(ctr / 64) % WORDS] & (1ull << (ctr % 64)))
		return -1;
	return 0;
}

void sv_replay_update(struct sv_replay *w, uint64_t ctr)
{
	if (!w->any) {
		memset(w->bits, 0, sizeof(w->bits));
		w->any = 1;
		w->top = ctr;
	} else if (ctr > w->top) {
		uint64_t from = w->top / 64 + 1, to = ctr / 64;

		if (to >= from) {
			if (to - from >= WORDS)
				memset(w->bits, 0, sizeof(w->bits));
			else
				for (uint64_t i = from; i <= to; i++)
					w->bits[i % WORDS] = 0;
		}
		w->top = ctr;
	}
	w->bits[(ctr / 64) % WORDS] |= 1ull << (ctr % 64);
}
