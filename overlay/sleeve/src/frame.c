/* frame.c - encapsulation, decapsulation and batching (no I/O) */
#include <errno.h>
#include <string.h>

#include "aead.h"
#include "frame.h"

const char *const sv_drop_names[SV_D__MAX] = {
	[SV_OK] = "ok",
	[SV_D_BAD_MAGIC] = "bad_magic",
	[SV_D_BAD_VERSION] = "bad_version",
	[SV_D_BAD_TYPE] = "bad_type",
	[SV_D_BAD_FLAGS] = "bad_flags",
	[SV_D_BAD_LENGTH] = "bad_length",
	[SV_D_TRUNCATED] = "truncated",
	[SV_D_AUTH_FAIL] = "auth_fail",
	[SV_D_REPLAY] = "replay",
	[SV_D_CRYPTO_MISMATCH] = "crypto_mismatch",
	[SV_D_CIPHER_MISMATCH] = "cipher_mismatch",
	[SV_D_MODE_MISMATCH] = "mode_mismatch",
	[SV_D_OVERSIZE] = "oversize",
	[SV_D_NO_PEER] = "no_peer",
	[SV_D_WRONG_PORT] = "wrong_port",
	[SV_D_GSO_UNSUPPORTED] = "gso_unsupported",
	[SV_D_REASM_TIMEOUT] = "reasm_timeout",
	[SV_D_REASM_EVICTED] = "reasm_evicted",
	[SV_D_REASM_BAD] = "reasm_bad",
	[SV_D_DEV_WRITE] = "dev_write",
	[SV_D_SEND_ERR] = "send_err",
	[SV_D_UNPROVEN_SESSION] = "unproven_session",
	[SV_D_TRIAL_LIMIT] = "trial_limit",
	[SV_D_BAD_VNET] = "bad_vnet",
};

void sv_hdr_put(uint8_t *p, uint8_t type, uint8_t flags, uint16_t len)
{
	sv_put16(p, SV_MAGIC);
	p[2] = SV_VERSION;
	p[3] = type;
	p[4] = flags;
	p[5] = 0;
	sv_put16(p + 6, len);
}

enum sv_drop sv_hdr_parse(const uint8_t *p, size_t n, struct sv_hdr *h)
{
	size_t want;

	if (n < SV_HDR_LEN)
		return SV_D_TRUNCATED;
	if (sv_get16(p) != SV_MAGIC)
		return SV_D_BAD_MAGIC;
	if (p[2] != SV_VERSION)
		return SV_D_BAD_VERSION;
	if (p[3] < SV_T_DATA || p[3] > SV_T_PROBE_ACK)
		return SV_D_BAD_TYPE;
	if (p[4] & ~SV_F_KNOWN)
		return SV_D_BAD_FLAGS;
	/* the aead byte: an AEAD's id exactly when sealed */
	if ((p[4] & SV_F_ENC) ? !(p[5] > SV_AEAD_NONE && p[5] < SV_AEAD__MAX) : p[5] != 0)
		return SV_D_BAD_FLAGS;
	if ((p[4] & SV_F_VNET) && p[3] != SV_T_FRAG)
		return SV_D_BAD_FLAGS;
	if ((p[4] & SV_F_SINGLE) && p[3] != SV_T_DATA)
		return SV_D_BAD_FLAGS;
	h->type = p[3];
	h->flags = p[4];
	h->aead = p[5];
	h->len = sv_get16(p + 6);
	if (h->type == SV_T_DATA && h->len == 0)
		return SV_D_BAD_LENGTH;
	/* a sealed FRAG piece has no tag of its own: its unit has one */
	want = sv_dgram_over(h->flags & SV_F_ENC) + h->len;
	if ((h->flags & SV_F_ENC) && h->type == SV_T_FRAG)
		want -= SV_TAG_LEN;
	if (n < want)
		return SV_D_TRUNCATED;
	if (n > want)
		return SV_D_BAD_LENGTH;
	return SV_OK;
}

void sv_pack_begin(struct sv_packer *pk, uint8_t *buf, size_t cap, uint8_t flags)
{
	pk->buf = buf;
	pk->cap = cap > SV_MAX_DGRAM ? SV_MAX_DGRAM : cap;
	pk->used = 0;
	pk->nrec = 0;
	pk->flags = flags & (uint8_t)~SV_F_SINGLE;
	pk->dgram = NULL;
	pk->blen = 0;
}

size_t sv_pack_max_frame(size_t cap, int enc)
{
	size_t over = sv_dgram_over(enc);

	if (cap > SV_MAX_DGRAM)
		cap = SV_MAX_DGRAM;
	return cap > over ? cap - over : 0;
}

uint8_t *sv_pack_reserve(struct sv_packer *pk, size_t flen)
{
	int enc = pk->flags & SV_F_ENC;
	size_t over = sv_dgram_over(enc);
	uint8_t *p;

	if (flen == 0)
		return NULL;
	/* the first frame alone goes without its record length (SINGLE); a second
	 * one makes a batch, where every frame needs one */
	if (pk->nrec == 0 ? over + flen > pk->cap
			  : over + pk->used + SV_REC_HDR + flen > pk->cap)
		return NULL;
	p = pk->buf + sv_body_off(enc) + pk->used;
	sv_put16(p, (uint16_t)flen);
	pk->used += SV_REC_HDR + flen;
	pk->nrec++;
	return p + SV_REC_HDR;
}

int sv_pack_add(struct sv_packer *pk, const uint8_t *frame, size_t flen)
{
	uint8_t *p = sv_pack_reserve(pk, flen);

	if (p)
		memcpy(p, frame, flen);
	return p != NULL;
}

size_t sv_pack_finish(struct sv_packer *pk)
{
	uint8_t flags = pk->flags;

	if (pk->nrec == 1) {
		/* drop the record length: the datagram starts two bytes later */
		pk->dgram = pk->buf + SV_REC_HDR;
		pk->blen = pk->used - SV_REC_HDR;
		flags |= SV_F_SINGLE;
	} else {
		pk->dgram = pk->buf;
		pk->blen = pk->used;
	}
	sv_hdr_put(pk->dgram, SV_T_DATA, flags, (uint16_t)pk->blen);
	return sv_body_off(pk->flags & SV_F_ENC) + pk->blen;
}

enum sv_drop sv_records_check(const uint8_t *body, size_t len, unsigned *nrec)
{
	const uint8_t *p = body, *end = body + len;
	unsigned n = 0;

	if (len == 0)
		return SV_D_BAD_LENGTH;
	while (p < end) {
		size_t flen;

		if (end - p < SV_REC_HDR)
			return SV_D_BAD_LENGTH;
		flen = sv_get16(p);
		p += SV_REC_HDR;
		if (flen == 0 || flen > (size_t)(end - p))
			return SV_D_BAD_LENGTH;
		p += flen;
		n++;
	}
	/* one frame has exactly one encoding: SINGLE */
	if (n < 2)
		return SV_D_BAD_LENGTH;
	*nrec = n;
	return SV_OK;
}

const uint8_t *sv_records_next(const uint8_t **cur, const uint8_t *end, size_t *flen)
{
	const uint8_t *p = *cur;

	if (p >= end)
		return NULL;
	*flen = sv_get16(p);
	*cur = p + SV_REC_HDR + *flen;
	return p + SV_REC_HDR;
}

void sv_frag_put(uint8_t *p, uint32_t id, uint32_t total, uint16_t index, uint16_t count)
{
	sv_put32(p, id);
	sv_put32(p + 4, total);
	sv_put16(p + 8, index);
	sv_put16(p + 10, count);
}

enum sv_drop sv_frag_parse(const uint8_t *body, size_t len, struct sv_frag *f)
{
	if (len <= SV_FRAG_HDR)
		return SV_D_BAD_LENGTH;
	f->id = sv_get32(body);
	f->total = sv_get32(body + 4);
	f->index = sv_get16(body + 8);
	f->count = sv_get16(body + 10);
	f->chunk = body + SV_FRAG_HDR;
	f->clen = len - SV_FRAG_HDR;
	f->session = f->ctr = 0;
	f->aead = f->trusted = 0;
	if (f->total == 0 || f->total > SV_MAX_STREAM || f->count == 0 ||
	    f->count > SV_MAX_FRAGS || f->index >= f->count || f->clen > f->total)
		return SV_D_BAD_LENGTH;
	return SV_OK;
}

void sv_piece_put(uint8_t *p, uint8_t flags, uint8_t aead, uint64_t session, uint64_t ctr,
		  uint32_t id, uint32_t total, uint16_t index, uint16_t count, size_t clen)
{
	uint8_t *f = p + SV_HDR_LEN;

	sv_hdr_put(p, SV_T_FRAG, flags, (uint16_t)(SV_FRAG_HDR + clen));
	if (flags & SV_F_ENC) {
		p[5] = aead;
		sv_put64(f, session);
		sv_put64(f + 8, ctr);
		f += SV_CRYPTO_PRE;
	}
	sv_frag_put(f, id, total, index, count);
}

void sv_frag_ad(uint8_t *ad, uint8_t flags, uint8_t aead, uint64_t session, uint64_t ctr,
		uint32_t id, uint32_t total, uint16_t count)
{
	sv_hdr_put(ad, SV_T_FRAG, flags, 0);
	ad[5] = aead;
	sv_put64(ad + 8, session);
	sv_put64(ad + 16, ctr);
	sv_put32(ad + 24, id);
	sv_put32(ad + 28, total);
	sv_put16(ad + 32, count);
}

unsigned sv_frag_plan(size_t len, size_t dgram, int enc, size_t *chunk)
{
	size_t over = sv_frag_over(enc), n;

	if (dgram > SV_MAX_DGRAM)
		dgram = SV_MAX_DGRAM;
	if (len == 0 || len > (enc ? SV_MAX_STREAM : SV_MAX_UNIT) || dgram <= over)
		return 0;
	*chunk = dgram - over;
	n = (len + *chunk - 1) / *chunk;
	if (n > SV_MAX_FRAGS)
		return 0;
	return (unsigned)n;
}

uint16_t sv_csum_fold(const uint8_t *p, size_t len, uint32_t seed)
{
	uint64_t sum = seed;
	uint32_t w;

	while (len >= 4) {
		memcpy(&w, p, 4);
		sum += w;
		p += 4;
		len -= 4;
	}
	if (len >= 2) {
		uint16_t h;

		memcpy(&h, p, 2);
		sum += h;
		p += 2;
		len -= 2;
	}
	if (len) {
		/* odd trailing byte: pad with zero in network order */
		uint16_t h = 0;

		memcpy(&h, p, 1);
		sum += h;
	}
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

int sv_csum_complete(uint8_t *frame, size_t len, size_t start, size_t off)
{
	uint16_t c;

	if (start >= len || off + 2 > len - start)
		return -EINVAL;
	/* the field holds the pseudo-header sum already; it is part of the range */
	c = (uint16_t)~sv_csum_fold(frame + start, len - start, 0);
	if (c == 0)
		c = 0xffff;
	memcpy(frame + start + off, &c, 2);
	return 0;
}
