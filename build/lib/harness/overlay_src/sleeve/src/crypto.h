/* crypto.h - AEAD sealing, opening and the replay window (libsodium) */
#ifndef SLEEVE_CRYPTO_H
#define SLEEVE_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"

#define SV_KEY_LEN 32
#define SV_REPLAY_BITS 4096u

struct sv_replay {
	uint64_t top;   /* highest counter accepted */
	int any;        /* anything accepted yet */
	uint64_t bits[SV_REPLAY_BITS / 64];
};

/* Sending side: one session per daemon start. */
struct sv_seal {
	uint8_t key[SV_KEY_LEN]; /* derived for this session */
	uint64_t session;
	uint64_t counter; /* atomic: several threads seal */
};

/* Receiving side, per peer: the last session that authenticated. */
struct sv_open {
	uint64_t session;
	int have;
	uint8_t key[SV_KEY_LEN];
	struct sv_replay win;
};

int sv_crypto_init(void);
int sv_key_load(const char *path, uint8_t key[SV_KEY_LEN], char *err, size_t errlen);
void sv_seal_init(struct sv_seal *s, const uint8_t master[SV_KEY_LEN], uint64_t session,
		  uint64_t counter0);
/* The next send counter (one per sealed datagram or unit). */
uint64_t sv_seal_next(struct sv_seal *s);
/* Seals m[0..len) in place under counter ctr and writes the tag at m + len. */
void sv_seal_buf(const struct sv_seal *s, uint64_t ctr, uint8_t *m, size_t len, const uint8_t *ad,
		 size_t adlen);
/* dgram: header (ENC set) at 0, body of len bytes at 24; writes session, counter
 * and the tag after the body. Returns the datagram length. */
size_t sv_seal_dgram(struct sv_seal *s, uint8_t *dgram, size_t len);
/* c: ciphertext || tag, len bytes in all: checks replay, authenticates and
 * decrypts in place; the window moves only after the tag verified. */
enum sv_drop sv_open_buf(struct sv_open *o, const uint8_t master[SV_KEY_LEN], uint64_t session,
			 uint64_t ctr, uint8_t *c, size_t len, const uint8_t *ad, size_t adlen);
/* dgram of n bytes whose header parsed as h: sv_open_buf on its body (at
 * dgram + 24), the first 24 bytes as associated data. */
enum sv_drop sv_open_dgram(struct sv_open *o, const uint8_t master[SV_KEY_LEN], uint8_t *dgram,
			   const struct sv_hdr *h);

int sv_replay_check(const struct sv_replay *w, uint64_t ctr);
void sv_replay_update(struct sv_replay *w, uint64_t ctr);

#endif
