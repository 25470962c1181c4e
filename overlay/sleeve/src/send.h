/* send.h - what both sending paths share: the batched one (tx.c) and the
 * unbatched one (basic.c) */
#ifndef SLEEVE_SEND_H
#define SLEEVE_SEND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "sleeve.h"

#define RBUF_SZ (SV_MAX_UNIT + 64)
#define TAILROOM SV_TAG_LEN /* after a read unit: its tag when sealed in place */

/* How one unit is cut, and with a key sealed. */
struct sv_txunit {
	size_t stream, chunk; /* stream: the unit, or ciphertext || tag */
	unsigned cnt;
	uint64_t ctr;
	uint8_t aead;
};

/* One sendmsg to p; 0 or -errno. */
int sv_send_one(struct sv *s, struct sv_peer *p, struct iovec *iov, size_t n);
/* Seals data[0..len) in place as one unit (the tag goes to data + len) with the
 * AEAD in use now; plain units are their own stream. SV_D_OVERSIZE if it cannot
 * be cut, SV_D_SEND_ERR if it could not be sealed. */
enum sv_drop sv_seal_unit(struct sv *s, struct sv_aead_set *t, uint8_t *data, size_t len,
			  uint8_t flags, uint32_t id, uint32_t dgram, struct sv_txunit *u);

#endif
