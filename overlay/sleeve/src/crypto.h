/* crypto.h - sessions, keys bound to their sender, sealing and opening datagrams
 * and units, the replay window (overlay/README.md, "Crypto framing") */
#ifndef SLEEVE_CRYPTO_H
#define SLEEVE_CRYPTO_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "aead.h"
#include "frame.h"

#define SV_KEY_LEN 32
#define SV_REPLAY_BITS 4096u
/* counters from here on are refused: a nonce never wraps */
#define SV_CTR_LIMIT (UINT64_MAX - (1ull << 62))

/* Who sealed: family (4|6) ‖ address ‖ port, the sender's underlay address. */
struct sv_ident {
	uint8_t b[1 + 16 + 2];
	uint8_t len;
};
/* -EINVAL unless a is IPv4 or IPv6 */
int sv_ident_of(struct sv_ident *id, const struct sockaddr_storage *a);

/* HKDF-SHA256 from the master key: the key of one AEAD for one sender's session. */
int sv_derive(uint8_t out[SV_KEY_LEN], const uint8_t master[SV_KEY_LEN], int cipher,
	      uint64_t session, const struct sv_ident *sender);

/* One context per AEAD: what one thread seals (or opens) with. */
struct sv_aead_set {
	struct sv_aead a[SV_AEAD__MAX];
};
void sv_aead_set_free(struct sv_aead_set *t);

struct sv_replay {
	uint64_t top;   /* highest counter accepted */
	int any;        /* anything accepted yet */
	uint64_t bits[SV_REPLAY_BITS / 64];
};

/* Sending side: one session per daemon start. */
struct sv_seal {
	uint64_t session;
	uint64_t counter; /* atomic: several threads seal */
	int cipher;       /* atomic: the AEAD DATA and FRAG are sealed with now */
	uint8_t key[SV_AEAD__MAX][SV_KEY_LEN]; /* per AEAD, for this session and sender */
	struct sv_aead_set ctl; /* control datagrams (main and receive threads), under lock */
	pthread_mutex_t lock;
};

/* A new session's key is tried at most this often per peer and second. */
#define SV_TRIALS_PER_S 8u

/* Receiving side, per peer. DATA, FRAG and probes open only under the proven
 * session: one that authenticated a HEARTBEAT echoing this side's own session
 * (so it was sealed after this side started). A newer session that
 * authenticated a HEARTBEAT but is not proven yet is the candidate. */
struct sv_open {
	struct sv_ident id; /* the peer's: who seals what comes from it */
	uint64_t session;   /* the proven session */
	int have;
	unsigned keyed; /* AEADs of cur keyed for session */
	struct sv_aead_set cur, cand, trial; /* trial: an unknown session, until its tag verifies */
	uint64_t cand_session, cand_ctr; /* cand_ctr: the newest counter a HEARTBEAT under a
					  * session other than the proven one carried */
	int cand_have;
	unsigned cand_keyed;
	uint64_t trial_t0; /* the second the trials are counted in, and how many */
	unsigned trial_n;
	uint64_t derived; /* keys derived for this peer (tests count them) */
	struct sv_replay win;
};

int sv_key_load(const char *path, uint8_t key[SV_KEY_LEN], char *err, size_t errlen);

/* Derives this sender's keys for the session; the counter starts at counter0. */
int sv_seal_init(struct sv_seal *s, const uint8_t master[SV_KEY_LEN], uint64_t session,
		 uint64_t counter0, const struct sv_ident *me, int cipher);
void sv_seal_free(struct sv_seal *s);
static inline int sv_seal_cipher(const struct sv_seal *s)
{
	return __atomic_load_n(&s->cipher, __ATOMIC_RELAXED);
}
/* Contexts keyed with the session's keys, for one thread. */
int sv_seal_set_init(struct sv_aead_set *t, const struct sv_seal *s);
/* The next send counter (one per sealed datagram or unit); -ERANGE at the limit. */
int sv_seal_next(struct sv_seal *s, uint64_t *ctr);
/* Seals m[0..len) in place under counter ctr and writes the tag at m + len. */
int sv_seal_buf(struct sv_aead_set *t, int cipher, uint64_t ctr, uint8_t *m, size_t len,
		const uint8_t *ad, size_t adlen);
/* The other way: c is ciphertext || tag, len bytes in all (>= the tag); opens in
 * place under counter ctr. 0, or -EBADMSG. */
int sv_open_raw(struct sv_aead_set *t, int cipher, uint64_t ctr, uint8_t *c, size_t len,
		const uint8_t *ad, size_t adlen);
/* dgram: header (ENC set) at 0, body of len bytes at 24; writes the aead byte,
 * session, counter and the tag after the body, sealed with the current AEAD.
 * Returns the datagram length, 0 if it could not be sealed (send nothing). */
size_t sv_seal_dgram(struct sv_seal *s, struct sv_aead_set *t, uint8_t *dgram, size_t len);
/* The same for control datagrams, with the shared contexts. */
size_t sv_seal_ctl(struct sv_seal *s, uint8_t *dgram, size_t len);

/* Zeroed is ready (contexts are made on first use); id: the peer's address. */
void sv_open_init(struct sv_open *o, const struct sv_ident *id);
void sv_open_free(struct sv_open *o);
/* c: ciphertext || tag, len bytes in all, sealed with cipher under the proven
 * session: checks replay, authenticates and decrypts in place; the window moves
 * only after the tag verified. Any other session is unproven_session, and costs
 * no key derivation. */
enum sv_drop sv_open_buf(struct sv_open *o, const uint8_t master[SV_KEY_LEN], int cipher,
			 uint64_t session, uint64_t ctr, uint8_t *c, size_t len, const uint8_t *ad,
			 size_t adlen);
/* dgram of n bytes whose header parsed as h: sv_open_buf on its body (at
 * dgram + 24), the first 24 bytes as associated data. */
enum sv_drop sv_open_dgram(struct sv_open *o, const uint8_t master[SV_KEY_LEN], uint8_t *dgram,
			   const struct sv_hdr *h);
/* A HEARTBEAT: under the proven session as sv_open_dgram; under another, its
 * counter must be newer than any such HEARTBEAT's (else replay), an unknown
 * session's key is derived at most SV_TRIALS_PER_S times a second (else
 * trial_limit), and once its tag verifies the session is the candidate. */
enum sv_drop sv_open_hello(struct sv_open *o, const uint8_t master[SV_KEY_LEN], uint8_t *dgram,
			   const struct sv_hdr *h, uint64_t now);
/* The candidate's HEARTBEAT with counter ctr echoed our session: the candidate
 * becomes the proven session, and every counter up to ctr is refused. */
void sv_open_prove(struct sv_open *o, uint64_t ctr);
static inline int sv_open_proven(const struct sv_open *o, uint64_t session)
{
	return o->have && o->session == session;
}

int sv_replay_check(const struct sv_replay *w, uint64_t ctr);
void sv_replay_update(struct sv_replay *w, uint64_t ctr);
/* The window refuses every counter up to ctr and accepts the ones after it. */
void sv_replay_from(struct sv_replay *w, uint64_t ctr);

#endif
