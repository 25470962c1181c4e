/* frame.h - encapsulation, decapsulation and batching: pure functions */
#ifndef SLEEVE_FRAME_H
#define SLEEVE_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* Why a datagram (or a piece of one) was dropped; SV_OK = not dropped. */
enum sv_drop {
	SV_OK = 0,
	SV_D_BAD_MAGIC,
	SV_D_BAD_VERSION,
	SV_D_BAD_TYPE,
	SV_D_BAD_FLAGS,
	SV_D_BAD_LENGTH,
	SV_D_TRUNCATED,
	SV_D_AUTH_FAIL,
	SV_D_REPLAY,
	SV_D_CRYPTO_MISMATCH,
	SV_D_CIPHER_MISMATCH,
	SV_D_MODE_MISMATCH,
	SV_D_OVERSIZE,
	SV_D_NO_PEER,
	SV_D_WRONG_PORT,
	SV_D_GSO_UNSUPPORTED,
	SV_D_REASM_TIMEOUT,
	SV_D_REASM_EVICTED,
	SV_D_REASM_BAD,
	SV_D_DEV_WRITE,
	SV_D_SEND_ERR,
	SV_D_UNPROVEN_SESSION,
	SV_D_TRIAL_LIMIT,
	SV_D_BAD_VNET,
	SV_D__MAX
};

extern const char *const sv_drop_names[SV_D__MAX];

struct sv_hdr {
	uint8_t type;
	uint8_t flags;
	uint8_t aead; /* with ENC: the AEAD that sealed it (enum sv_cipher) */
	uint16_t len; /* plaintext body length */
};

static inline void sv_put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}
static inline void sv_put32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}
static inline void sv_put64(uint8_t *p, uint64_t v)
{
	sv_put32(p, v >> 32);
	sv_put32(p + 4, (uint32_t)v);
}
static inline uint16_t sv_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static inline uint32_t sv_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t sv_get64(const uint8_t *p)
{
	return (uint64_t)sv_get32(p) << 32 | sv_get32(p + 4);
}

/* Bytes a datagram needs around its body: header (+ session, counter, tag). */
static inline size_t sv_dgram_over(int enc)
{
	return SV_HDR_LEN + (enc ? SV_CRYPTO_OVER : 0);
}
/* Offset of the body inside a datagram. */
static inline size_t sv_body_off(int enc)
{
	return SV_HDR_LEN + (enc ? SV_CRYPTO_PRE : 0);
}

/* writes a header with aead 0 (sealing sets it) */
void sv_hdr_put(uint8_t *p, uint8_t type, uint8_t flags, uint16_t len);
/* Check a whole received datagram of n bytes; fills h on SV_OK. */
enum sv_drop sv_hdr_parse(const uint8_t *p, size_t n, struct sv_hdr *h);

/* Bytes a UDP payload carries beyond an overlay-MTU-sized packet: header, the
 * link header (L2), session, counter and tag (crypto). Add outer IP + UDP for the
 * overhead from the overlay MTU to the underlay MTU. */
static inline size_t sv_payload_over(int l3, int enc)
{
	return sv_dgram_over(enc) + (l3 ? 0 : SV_ETH_HLEN);
}

/* DATA packing (batching). A datagram with one frame is written in the SINGLE
 * form (no record length); with two or more, every frame is a record and all of
 * them, record lengths included, must fit cap (the largest datagram allowed on
 * the path, tag included). buf needs cap + SV_PACK_SLACK bytes: the datagram
 * starts at buf (batch) or SV_REC_HDR bytes later (single), so that switching
 * forms moves no frame bytes. */
#define SV_PACK_SLACK (SV_REC_HDR + SV_TAG_LEN)
struct sv_packer {
	uint8_t *buf;
	size_t cap;
	size_t used; /* bytes of body so far, as records */
	unsigned nrec;
	uint8_t flags;
	uint8_t *dgram; /* set by sv_pack_finish: where the datagram starts */
	size_t blen;    /* set by sv_pack_finish: its body length (what seal takes) */
};
void sv_pack_begin(struct sv_packer *pk, uint8_t *buf, size_t cap, uint8_t flags);
/* Largest frame that fits an empty DATA datagram of this size (SINGLE form). */
size_t sv_pack_max_frame(size_t cap, int enc);
/* 1 = added, 0 = does not fit (finish and begin a new one). */
int sv_pack_add(struct sv_packer *pk, const uint8_t *frame, size_t flen);
/* Like sv_pack_add, but the caller writes the flen frame bytes at the returned
 * place (NULL = does not fit). */
uint8_t *sv_pack_reserve(struct sv_packer *pk, size_t flen);
/* Writes the header (SINGLE when one frame); sets dgram and blen; returns the
 * datagram length without the tag (seal adds it). */
size_t sv_pack_finish(struct sv_packer *pk);

/* Validates a batched DATA body (records, at least two); returns SV_OK and the
 * record count in *nrec. */
enum sv_drop sv_records_check(const uint8_t *body, size_t len, unsigned *nrec);
/* Iterates a checked body: returns the next frame or NULL at the end. */
const uint8_t *sv_records_next(const uint8_t **cur, const uint8_t *end, size_t *flen);

/* FRAG pieces. A unit's stream is the unit itself, or with ENC the unit sealed
 * once: ciphertext || tag. Pieces carry chunks of the stream. */
struct sv_frag {
	uint32_t id;
	uint32_t total; /* stream length */
	uint16_t index;
	uint16_t count;
	const uint8_t *chunk;
	size_t clen;
	uint64_t session, ctr; /* ENC: the unit's (from every piece), else 0 */
	uint8_t aead;          /* ENC: the unit's AEAD, else 0 */
	uint8_t trusted;       /* ENC: it names the peer's proven session (reasm.h) */
};
void sv_frag_put(uint8_t *p, uint32_t id, uint32_t total, uint16_t index, uint16_t count);
enum sv_drop sv_frag_parse(const uint8_t *body, size_t len, struct sv_frag *f);
/* Bytes in front of a chunk: header (+ session, counter) + FRAG header. */
static inline size_t sv_frag_over(int enc)
{
	return SV_HDR_LEN + (enc ? SV_CRYPTO_PRE : 0) + SV_FRAG_HDR;
}
/* Writes everything in front of a chunk of clen bytes (sv_frag_over(enc) bytes);
 * aead, session and ctr only with ENC in flags. */
void sv_piece_put(uint8_t *p, uint8_t flags, uint8_t aead, uint64_t session, uint64_t ctr,
		  uint32_t id, uint32_t total, uint16_t index, uint16_t count, size_t clen);
/* The associated data of a sealed unit (SV_FRAG_AD_LEN bytes). */
void sv_frag_ad(uint8_t *ad, uint8_t flags, uint8_t aead, uint64_t session, uint64_t ctr,
		uint32_t id, uint32_t total, uint16_t count);
/* How to cut a stream of len bytes for datagrams of at most dgram bytes: returns
 * the piece count (0 if it cannot be done) and the chunk size in *chunk. */
unsigned sv_frag_plan(size_t len, size_t dgram, int enc, size_t *chunk);

/* Completes a CHECKSUM_PARTIAL frame: ones' complement sum from start to the end,
 * stored at start + off. Returns -EINVAL if out of bounds. */
int sv_csum_complete(uint8_t *frame, size_t len, size_t start, size_t off);
uint16_t sv_csum_fold(const uint8_t *p, size_t len, uint32_t seed);

#endif
