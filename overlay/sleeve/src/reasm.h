/* reasm.h - bounded reassembly of FRAG units (no I/O, time passed in)
 *
 * Pieces are first only referenced where they arrived (the receive buffer); the
 * caller calls sv_reasm_settle() before it reuses that buffer, which copies what
 * is still pending into the slot. A unit whose pieces all arrived in one receive
 * batch (the common case with UDP GRO) is handed out as an iovec list over the
 * receive buffer and never copied. */
#ifndef SLEEVE_REASM_H
#define SLEEVE_REASM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "frame.h"

#define SV_REASM_SLOTS 8
#define SV_REASM_TIMEOUT_NS 500000000ull

struct sv_reasm_piece {
	const uint8_t *ref; /* where it arrived, NULL once copied into buf */
	uint32_t off;
	uint32_t len;
};

struct sv_reasm_slot {
	int used;
	int trusted;   /* its first piece was trusted */
	int nref;      /* pieces only referenced */
	uint8_t flags;
	uint32_t id, total;
	uint64_t session, ctr; /* of a sealed unit; every piece must agree */
	uint8_t aead;
	uint16_t count, got;
	uint32_t csize; /* chunk size of the non-last pieces, 0 = not seen yet */
	uint32_t lastlen; /* chunk size of the last piece, 0 = not seen yet */
	uint32_t sum;   /* bytes received */
	uint64_t t0;
	uint64_t seen[SV_MAX_FRAGS / 64];
	struct sv_reasm_piece *piece; /* SV_MAX_FRAGS, allocated on first use */
	uint8_t *buf;                 /* SV_MAX_STREAM bytes, allocated on first use */
};

struct sv_unit {
	const struct iovec *iov;
	int n;      /* 0 = nothing complete */
	size_t len;
};

struct sv_reasm {
	struct sv_reasm_slot slot[SV_REASM_SLOTS];
	struct iovec iov[SV_MAX_FRAGS];
	int pending; /* some slot holds references */
	uint8_t *flat; /* SV_MAX_STREAM bytes for sv_reasm_flatten, on first use */
	uint64_t timeouts, evicted; /* units lost (counted here, read by stats) */
};

/* Adds one piece; on SV_OK u->n > 0 when a unit is complete (valid until the next
 * call or settle). Returns a drop reason for a bad piece. A unit is known by
 * (session, counter, frame id) (the peer: one sv_reasm per peer); a piece that
 * disagrees with its unit's first piece (total, count, flags, aead, chunk
 * sizes) is dropped alone (reasm_bad) and the unit kept. With no free slot the
 * oldest unit is evicted, but an untrusted piece (f->trusted 0) never evicts a
 * trusted unit: then the piece is dropped (reasm_evicted). */
enum sv_drop sv_reasm_add(struct sv_reasm *r, const struct sv_frag *f, uint8_t flags,
			  uint64_t now, struct sv_unit *u);
/* Copies every still-referenced piece into its slot: call before the buffers the
 * pieces arrived in are reused. */
void sv_reasm_settle(struct sv_reasm *r);
/* The complete unit u as one writable, contiguous buffer (a sealed unit is opened
 * in place): its single piece where it is, else a copy into r's own buffer.
 * NULL if out of memory. Valid as long as u. */
uint8_t *sv_reasm_flatten(struct sv_reasm *r, const struct sv_unit *u);
void sv_reasm_free(struct sv_reasm *r);

#endif
