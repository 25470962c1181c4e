/* sink.h - the delivery sink both fuzz targets hand the receive path: every
 * byte of a frame is read (so ASan sees an out-of-bounds piece), and a frame
 * the receiver should never deliver aborts: no pieces or more than
 * SV_MAX_FRAGS, longer than SV_MAX_UNIT, or, on a vnet device, shorter than
 * its virtio_net_hdr (SV_VNET_LEN). */
#ifndef FUZZ_SINK_H
#define FUZZ_SINK_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "sleeve.h"
#include "wire.h"

static volatile uint64_t sink;

/* The frame's length, after the checks above. */
static size_t sink_frame(const struct iovec *iov, int n, int has_vnet)
{
	uint64_t x = 0;
	size_t len = 0;

	if (n < 1 || n > (int)SV_MAX_FRAGS)
		abort();
	for (int k = 0; k < n; k++) {
		const uint8_t *f = iov[k].iov_base;

		for (size_t i = 0; i < iov[k].iov_len; i++)
			x += f[i];
		len += iov[k].iov_len;
	}
	sink += x;
	if (len > SV_MAX_UNIT || (has_vnet && len < SV_VNET_LEN))
		abort();
	return len;
}

#endif
