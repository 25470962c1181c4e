/* reasm.c - bounded reassembly of FRAG units */
#include <stdlib.h>
#include <string.h>

#include "reasm.h"

static void slot_reset(struct sv_reasm_slot *s)
{
	s->used = 0;
	s->nref = 0;
	s->got = 0;
	s->sum = 0;
	s->csize = 0;
	s->lastlen = 0;
	memset(s->seen, 0, sizeof(s->seen));
}

static int same_unit(const struct sv_reasm_slot *s, const struct sv_frag *f)
{
	return s->used && s->id == f->id && s->session == f->session && s->ctr == f->ctr;
}

/* A free slot, or the oldest one the piece may evict; NULL if none. */
static struct sv_reasm_slot *slot_free(struct sv_reasm *r, const struct sv_frag *f)
{
	struct sv_reasm_slot *old = NULL;

	for (int i = 0; i < SV_REASM_SLOTS; i++) {
		struct sv_reasm_slot *s = &r->slot[i];

		if (!s->used)
			return s;
		if (s->trusted && !f->trusted)
			continue;
		if (!old || s->t0 < old->t0)
			old = s;
	}
	if (old) {
		r->evicted++;
		slot_reset(old);
	}
	return old;
}

static struct sv_reasm_slot *slot_for(struct sv_reasm *r, const struct sv_frag *f, uint8_t flags,
				      uint64_t now)
{
	struct sv_reasm_slot *s;

	for (int i = 0; i < SV_REASM_SLOTS; i++) {
		s = &r->slot[i];
		if (s->used && now - s->t0 > SV_REASM_TIMEOUT_NS) {
			r->timeouts++;
			slot_reset(s);
		}
		if (same_unit(s, f))
			return s;
	}
	s = slot_free(r, f);
	if (!s)
		return NULL;
	if (!s->buf)
		s->buf = malloc(SV_MAX_STREAM);
	if (!s->piece)
		s->piece = malloc(SV_MAX_FRAGS * sizeof(*s->piece));
	if (!s->buf || !s->piece)
		return NULL;
	s->used = 1;
	s->trusted = f->trusted;
	s->id = f->id;
	s->total = f->total;
	s->count = f->count;
	s->flags = flags;
	s->session = f->session;
	s->ctr = f->ctr;
	s->aead = f->aead;
	s->t0 = now;
	return s;
}

/* Where the piece's chunk goes in the stream, or -1 if it does not fit the
 * unit's cut as far as it is known (then nothing changed). Non-last chunks all
 * have one size c with (count - 1) * c < total; the last holds the rest. */
static long piece_off(struct sv_reasm_slot *s, const struct sv_frag *f)
{
	size_t rest = (size_t)f->count - 1;

	if (f->index != f->count - 1) {
		if (s->csize ? s->csize != f->clen
			     : (rest * f->clen >= f->total ||
				(s->lastlen && f->total - rest * f->clen != s->lastlen)))
			return -1;
		s->csize = (uint32_t)f->clen;
		return (long)((size_t)f->index * f->clen);
	}
	if (s->csize ? f->clen != f->total - rest * s->csize : f->clen + rest > f->total)
		return -1;
	s->lastlen = (uint32_t)f->clen;
	return (long)(f->total - f->clen);
}

static void settle_slot(struct sv_reasm_slot *s)
{
	for (unsigned i = 0; s->nref && i < s->count; i++) {
		struct sv_reasm_piece *p = &s->piece[i];

		if ((s->seen[i / 64] & (1ull << (i % 64))) && p->ref) {
			memcpy(s->buf + p->off, p->ref, p->len);
			p->ref = NULL;
			s->nref--;
		}
	}
}

void sv_reasm_settle(struct sv_reasm *r)
{
	if (!r->pending)
		return;
	for (int i = 0; i < SV_REASM_SLOTS; i++)
		if (r->slot[i].used && r->slot[i].nref)
			settle_slot(&r->slot[i]);
	r->pending = 0;
}

enum sv_drop sv_reasm_add(struct sv_reasm *r, const struct sv_frag *f, uint8_t flags,
			  uint64_t now, struct sv_unit *u)
{
	struct sv_reasm_slot *s;
	struct sv_reasm_piece *p;
	long off;

	u->n = 0;
	if (f->count == 1) {
		/* a unit in one piece needs no slot */
		if (f->clen != f->total)
			return SV_D_REASM_BAD;
		r->iov[0] = (struct iovec){(void *)f->chunk, f->clen};
		u->iov = r->iov;
		u->n = 1;
		u->len = f->clen;
		return SV_OK;
	}
	s = slot_for(r, f, flags, now);
	if (!s)
		return SV_D_REASM_EVICTED;
	/* a piece that disagrees with its unit is dropped, the unit kept */
	if (s->total != f->total || s->count != f->count || s->flags != flags || s->aead != f->aead)
		return SV_D_REASM_BAD;
	if (s->seen[f->index / 64] & (1ull << (f->index % 64)))
		return SV_D_REASM_BAD; /* duplicate piece: drop it, keep the unit */
	off = piece_off(s, f);
	if (off < 0)
		return SV_D_REASM_BAD;
	p = &s->piece[f->index];
	p->ref = f->chunk;
	p->off = (uint32_t)off;
	p->len = (uint32_t)f->clen;
	s->nref++;
	r->pending = 1;
	s->seen[f->index / 64] |= 1ull << (f->index % 64);
	s->got++;
	s->sum += (uint32_t)f->clen;
	if (s->got < s->count)
		return SV_OK;
	/* all pieces: equal non-last chunks and a sum equal to total means no hole
	 * (piece_off already saw to it) */
	if (s->sum != s->total) {
		slot_reset(s);
		return SV_D_REASM_BAD;
	}
	u->len = s->total;
	u->iov = r->iov;
	if (s->nref == s->count) {
		/* nothing copied yet: hand out the pieces where they are */
		for (unsigned i = 0; i < s->count; i++)
			r->iov[i] = (struct iovec){(void *)s->piece[i].ref, s->piece[i].len};
		u->n = s->count;
	} else {
		settle_slot(s);
		r->iov[0] = (struct iovec){s->buf, s->total};
		u->n = 1;
	}
	slot_reset(s);
	return SV_OK;
}

uint8_t *sv_reasm_flatten(struct sv_reasm *r, const struct sv_unit *u)
{
	size_t off = 0;

	if (u->n == 1)
		return u->iov[0].iov_base;
	if (!r->flat)
		r->flat = malloc(SV_MAX_STREAM);
	if (!r->flat || u->len > SV_MAX_STREAM)
		return NULL;
	for (int i = 0; i < u->n; i++) {
		memcpy(r->flat + off, u->iov[i].iov_base, u->iov[i].iov_len);
		off += u->iov[i].iov_len;
	}
	return r->flat;
}

void sv_reasm_free(struct sv_reasm *r)
{
	free(r->flat);
	r->flat = NULL;
	for (int i = 0; i < SV_REASM_SLOTS; i++) {
		free(r->slot[i].buf);
		free(r->slot[i].piece);
		r->slot[i].buf = NULL;
		r->slot[i].piece = NULL;
		slot_reset(&r->slot[i]);
	}
	r->pending = 0;
}
