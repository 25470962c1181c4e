/* reasm.h - bounded reassembly of FRAG units (no I/O, time passed in) */
#ifndef SLEEVE_REASM_H
#define SLEEVE_REASM_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"

#define SV_REASM_SLOTS 8
#define SV_REASM_TIMEOUT_NS 500000000ull

struct sv_reasm_slot {
	int used;
	uint8_t flags;
	uint32_t id, total;
	uint16_t count, got;
	uint32_t csize;   /* chunk size of the non-last pieces, 0 = not seen yet */
	uint32_t sum;     /* bytes received */
	uint64_t t0;
	uint64_t seen[SV_MAX_FRAGS / 64];
	uint8_t *buf;     /* SV_MAX_UNIT bytes, allocated on first use */
};

struct sv_reasm {
	struct sv_reasm_slot slot[SV_REASM_SLOTS];
	uint64_t timeouts, evicted; /* units lost (counted here, read by stats) */
};

/* Adds one piece. On SV_OK *unit is set when the unit is complete (valid until the
 * next call) and NULL otherwise. Returns a drop reason for a bad piece, -ENOMEM
 * never: allocation failure is reported as SV_D_REASM_EVICTED. */
enum sv_drop sv_reasm_add(struct sv_reasm *r, const struct sv_frag *f, uint8_t flags,
			  uint64_t now, const uint8_t **unit, size_t *unit_len);
void sv_reasm_free(struct sv_reasm *r);

#endif
