/* gro.h - coalescing received TCP segments back into super-frames (--segment) */
#ifndef SLEEVE_GRO_H
#define SLEEVE_GRO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "wire.h"

#define SV_GRO_MAX 64      /* segments per super-frame */
#define SV_GRO_HDR_MAX 134 /* Ethernet + IPv4 with options (60) + TCP with options (60) */

/* One super-frame being built from consecutive segments of one TCP flow (one
 * flow at a time: any other frame in between ends it). The payloads are not copied: iov points into the receive buffers, so the caller
 * finishes (and writes) it before those buffers are reused. */
struct sv_gro {
	uint8_t hdr[SV_VNET_LEN + SV_GRO_HDR_MAX]; /* virtio_net_hdr + the first segment's headers */
	struct iovec iov[SV_GRO_MAX + 1];
	const uint8_t *first; /* the first segment, as received */
	size_t first_len;
	size_t l3off, iphl, thl, hlen, mss, payload;
	uint32_t next_seq;
	unsigned segs;
	int v6, open, closed;
};

/* Offers one received frame (Ethernet, or IP with l3). Returns 1 if it joined
 * (or began) the super-frame in g; 0 if it cannot join: the caller then writes
 * g out (sv_gro_finish) and offers the frame again, and a frame that is refused
 * by an empty g goes to the device alone. */
int sv_gro_add(struct sv_gro *g, const uint8_t *frame, size_t len, int l3);
/* Closes g and returns what to write: *iov, the count, *len and *has_vnet (a
 * single segment is written back as it came). Returns 0 when g is empty. */
int sv_gro_finish(struct sv_gro *g, const struct iovec **iov, size_t *len, int *has_vnet);

#endif
