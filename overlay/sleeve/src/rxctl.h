/* rxctl.h - network -> this side: control datagrams, virtio_net_hdrs from the network */
#ifndef SLEEVE_RXCTL_H
#define SLEEVE_RXCTL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "sleeve.h"

/* A control datagram (d, header h, opened body of n bytes) from p. */
enum sv_drop sv_rx_ctl(struct sv *s, struct sv_peer *p, const uint8_t *d, const struct sv_hdr *h,
		       const uint8_t *body, size_t n, uint64_t now);
/* 1 if the virtio_net_hdr in front of a VNET unit from the network (len bytes in
 * iov[0..n)) names only offloads this side advertised and fits its frame */
int sv_vnet_ok(const struct sv *s, const struct iovec *iov, int n, size_t len);

#endif
