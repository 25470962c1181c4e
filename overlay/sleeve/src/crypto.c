/* crypto.c - per-session keys bound to their sender (HKDF-SHA256), sealing and
 * opening datagrams and units with reused contexts */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crypto.h"

#define KDF_LABEL "sleeve5"

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
	sv_wipe(buf, sizeof(buf));
	close(fd);
	return ret;
}

int sv_ident_of(struct sv_ident *id, const struct sockaddr_storage *a)
{
	memset(id, 0, sizeof(*id));
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *v = (const void *)a;

		id->b[0] = 4;
		memcpy(id->b + 1, &v->sin_addr, 4);
		memcpy(id->b + 5, &v->sin_port, 2); /* network order */
		id->len = 7;
	} else if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *v = (const void *)a;

		id->b[0] = 6;
		memcpy(id->b + 1, &v->sin6_addr, 16);
		memcpy(id->b + 17, &v->sin6_port, 2);
		id->len = 19;
	} else {
		return -EINVAL;
	}
	return 0;
}

/* info = "sleeve5" ‖ aead u8 ‖ session u64 ‖ sender identity */
int sv_derive(uint8_t out[SV_KEY_LEN], const uint8_t master[SV_KEY_LEN], int cipher,
	      uint64_t session, const struct sv_ident *sender)
{
	uint8_t info[sizeof(KDF_LABEL) - 1 + 1 + 8 + sizeof(sender->b)];
	size_t n = sizeof(KDF_LABEL) - 1;

	memcpy(info, KDF_LABEL, n);
	info[n++] = (uint8_t)cipher;
	sv_put64(info + n, session);
	n += 8;
	memcpy(info + n, sender->b, sender->len);
	n += sender->len;
	return sv_hkdf_sha256(out, SV_KEY_LEN, master, SV_KEY_LEN, NULL, 0, info, n);
}

void sv_aead_set_free(struct sv_aead_set *t)
{
	for (int c = 0; c < SV_AEAD__MAX; c++)
		sv_aead_free(&t->a[c]);
}

/* the context for cipher in t, made on first use */
static struct sv_aead *ctx_of(struct sv_aead_set *t, int cipher)
{
	struct sv_aead *a;

	if (cipher <= SV_AEAD_NONE || cipher >= SV_AEAD__MAX)
		return NULL;
	a = &t->a[cipher];
	if (!a->ctx && sv_aead_init(a, cipher) < 0)
		return NULL;
	return a;
}

int sv_seal_init(struct sv_seal *s, const uint8_t master[SV_KEY_LEN], uint64_t session,
		 uint64_t counter0, const struct sv_ident *me, int cipher)
{
	int ret = 0;

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	s->session = session;
	s->counter = counter0;
	s->cipher = cipher;
	for (int c = SV_AEAD_NONE + 1; c < SV_AEAD__MAX && !ret; c++)
		ret = sv_derive(s->key[c], master, c, session, me);
	if (!ret)
		ret = sv_seal_set_init(&s->ctl, s);
	return ret;
}

void sv_seal_free(struct sv_seal *s)
{
	sv_aead_set_free(&s->ctl);
	sv_wipe(s->key, sizeof(s->key));
}

int sv_seal_set_init(struct sv_aead_set *t, const struct sv_seal *s)
{
	for (int c = SV_AEAD_NONE + 1; c < SV_AEAD__MAX; c++) {
		struct sv_aead *a = ctx_of(t, c);

		if (!a || sv_aead_setkey(a, s->key[c]) < 0)
			return -EIO;
	}
	return 0;
}

int sv_seal_next(struct sv_seal *s, uint64_t *ctr)
{
	*ctr = __atomic_fetch_add(&s->counter, 1, __ATOMIC_RELAXED);
	return *ctr >= SV_CTR_LIMIT ? -ERANGE : 0;
}

static void nonce_of(uint8_t n[SV_AEAD_NONCE_LEN], uint64_t ctr)
{
	memset(n, 0, 4);
	for (int i = 0; i < 8; i++)
		n[4 + i] = (uint8_t)(ctr >> (8 * i));
}

int sv_seal_buf(struct sv_aead_set *t, int cipher, uint64_t ctr, uint8_t *m, size_t len,
		const uint8_t *ad, size_t adlen)
{
	struct sv_aead *a = ctx_of(t, cipher);
	uint8_t nonce[SV_AEAD_NONCE_LEN];

	if (!a)
		return -EINVAL;
	nonce_of(nonce, ctr);
	return sv_aead_seal(a, nonce, m, len, ad, adlen, m + len);
}

int sv_open_raw(struct sv_aead_set *t, int cipher, uint64_t ctr, uint8_t *c, size_t len,
		const uint8_t *ad, size_t adlen)
{
	struct sv_aead *a = ctx_of(t, cipher);
	uint8_t nonce[SV_AEAD_NONCE_LEN];

	if (!a || len < SV_AEAD_TAG_LEN)
		return -EBADMSG;
	nonce_of(nonce, ctr);
	return sv_aead_open(a, nonce, c, len - SV_AEAD_TAG_LEN, ad, adlen, c + len - SV_AEAD_TAG_LEN);
}

size_t sv_seal_dgram(struct sv_seal *s, struct sv_aead_set *t, uint8_t *dgram, size_t len)
{
	int cipher = sv_seal_cipher(s);
	uint64_t ctr;

	if (sv_seal_next(s, &ctr) == 0) {
		dgram[5] = (uint8_t)cipher;
		sv_put64(dgram + SV_HDR_LEN, s->session);
		sv_put64(dgram + SV_HDR_LEN + 8, ctr);
		if (sv_seal_buf(t, cipher, ctr, dgram + SV_HDR_LEN + SV_CRYPTO_PRE, len, dgram,
				SV_HDR_LEN + SV_CRYPTO_PRE) == 0)
			return SV_HDR_LEN + SV_CRYPTO_OVER + len;
	}
	/* never let a plain or half-sealed body out */
	sv_wipe(dgram, SV_HDR_LEN + SV_CRYPTO_OVER + len);
	return 0;
}

size_t sv_seal_ctl(struct sv_seal *s, uint8_t *dgram, size_t len)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = sv_seal_dgram(s, &s->ctl, dgram, len);
	pthread_mutex_unlock(&s->lock);
	return n;
}

void sv_open_init(struct sv_open *o, const struct sv_ident *id)
{
	memset(o, 0, sizeof(*o));
	o->id = *id;
}

void sv_open_free(struct sv_open *o)
{
	sv_aead_set_free(&o->cur);
	sv_aead_set_free(&o->cand);
	sv_aead_set_free(&o->trial);
	o->keyed = o->cand_keyed = 0;
	o->have = o->cand_have = 0;
}

/* Keys a with the peer's key for (session, cipher). */
static int key_for(struct sv_open *o, struct sv_aead *a, const uint8_t master[SV_KEY_LEN], int cipher,
		   uint64_t session)
{
	uint8_t k[SV_KEY_LEN];
	int ret = sv_derive(k, master, cipher, session, &o->id);

	o->derived++;
	if (!ret)
		ret = sv_aead_setkey(a, k);
	sv_wipe(k, sizeof(k));
	return ret;
}

enum sv_drop sv_open_buf(struct sv_open *o, const uint8_t master[SV_KEY_LEN], int cipher,
			 uint64_t session, uint64_t ctr, uint8_t *c, size_t len, const uint8_t *ad,
			 size_t adlen)
{
	struct sv_aead *a;

	if (len < SV_TAG_LEN)
		return SV_D_BAD_LENGTH;
	if (!sv_open_proven(o, session))
		return SV_D_UNPROVEN_SESSION;
	if (sv_replay_check(&o->win, ctr) < 0)
		return SV_D_REPLAY;
	/* the proven session's key is derived once per AEAD */
	a = ctx_of(&o->cur, cipher);
	if (!a)
		return SV_D_AUTH_FAIL;
	if (!(o->keyed & SV_AEAD_BIT(cipher))) {
		if (key_for(o, a, master, cipher, session) < 0)
			return SV_D_AUTH_FAIL;
		o->keyed |= SV_AEAD_BIT(cipher);
	}
	if (sv_open_raw(&o->cur, cipher, ctr, c, len, ad, adlen) < 0)
		return SV_D_AUTH_FAIL;
	sv_replay_update(&o->win, ctr);
	return SV_OK;
}

enum sv_drop sv_open_dgram(struct sv_open *o, const uint8_t master[SV_KEY_LEN], uint8_t *dgram,
			   const struct sv_hdr *h)
{
	return sv_open_buf(o, master, h->aead, sv_get64(dgram + SV_HDR_LEN),
			   sv_get64(dgram + SV_HDR_LEN + 8), dgram + SV_HDR_LEN + SV_CRYPTO_PRE,
			   (size_t)h->len + SV_TAG_LEN, dgram, SV_HDR_LEN + SV_CRYPTO_PRE);
}

/* The context a HEARTBEAT under a session that is not the proven one opens with:
 * the candidate's (keyed once per AEAD), or for an unknown session a trial key,
 * within the per-second budget. NULL with *why set when there is none. */
static struct sv_aead_set *hello_set(struct sv_open *o, const uint8_t master[SV_KEY_LEN], int cipher,
				     uint64_t session, uint64_t now, enum sv_drop *why)
{
	int known = o->cand_have && o->cand_session == session;
	struct sv_aead_set *t = known ? &o->cand : &o->trial;
	struct sv_aead *a = ctx_of(t, cipher);

	*why = SV_D_AUTH_FAIL;
	if (!a)
		return NULL;
	if (known && (o->cand_keyed & SV_AEAD_BIT(cipher)))
		return t;
	if (!known) {
		if (now - o->trial_t0 >= 1000000000ull || now < o->trial_t0) {
			o->trial_t0 = now;
			o->trial_n = 0;
		}
		if (o->trial_n >= SV_TRIALS_PER_S) {
			*why = SV_D_TRIAL_LIMIT;
			return NULL;
		}
		o->trial_n++;
	}
	if (key_for(o, a, master, cipher, session) < 0)
		return NULL;
	if (known)
		o->cand_keyed |= SV_AEAD_BIT(cipher);
	return t;
}

enum sv_drop sv_open_hello(struct sv_open *o, const uint8_t master[SV_KEY_LEN], uint8_t *dgram,
			   const struct sv_hdr *h, uint64_t now)
{
	uint64_t session = sv_get64(dgram + SV_HDR_LEN), ctr = sv_get64(dgram + SV_HDR_LEN + 8);
	size_t len = (size_t)h->len + SV_TAG_LEN;
	struct sv_aead_set *t;
	enum sv_drop why;

	if (sv_open_proven(o, session))
		return sv_open_dgram(o, master, dgram, h);
	/* older than a newer session's HEARTBEAT, or than the window: a replay,
	 * refused before any key is derived */
	if (sv_replay_check(&o->win, ctr) < 0 || (o->cand_have && ctr <= o->cand_ctr))
		return SV_D_REPLAY;
	t = hello_set(o, master, h->aead, session, now, &why);
	if (!t)
		return why;
	if (sv_open_raw(t, h->aead, ctr, dgram + SV_HDR_LEN + SV_CRYPTO_PRE, len, dgram,
			SV_HDR_LEN + SV_CRYPTO_PRE) < 0)
		return SV_D_AUTH_FAIL;
	if (t == &o->trial) {
		/* the trial context becomes the candidate's */
		struct sv_aead x = o->cand.a[h->aead];

		o->cand.a[h->aead] = o->trial.a[h->aead];
		o->trial.a[h->aead] = x;
		o->cand_keyed = SV_AEAD_BIT(h->aead);
		o->cand_session = session;
	}
	o->cand_have = 1;
	o->cand_ctr = ctr;
	return SV_OK;
}

void sv_open_prove(struct sv_open *o, uint64_t ctr)
{
	struct sv_aead_set x = o->cur;

	if (!o->cand_have)
		return;
	o->cur = o->cand;
	o->cand = x;
	o->keyed = o->cand_keyed;
	o->session = o->cand_session;
	o->have = 1;
	o->cand_keyed = 0;
	o->cand_have = 0;
	sv_replay_from(&o->win, ctr);
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

void sv_replay_from(struct sv_replay *w, uint64_t ctr)
{
	unsigned b = (unsigned)(ctr % 64);

	memset(w->bits, 0xff, sizeof(w->bits));
	w->bits[(ctr / 64) % WORDS] = b == 63 ? ~0ull : (1ull << (b + 1)) - 1;
	w->top = ctr;
	w->any = 1;
}
