/* seg.h - cutting a TCP super-frame into MSS-sized frames in userspace (--segment) */
#ifndef SLEEVE_SEG_H
#define SLEEVE_SEG_H

#include <linux/virtio_net.h>
#include <stddef.h>
#include <stdint.h>

#define SV_SEG_MAX 1024u /* segments per super-frame (64 KB at an MSS of 64) */

/* A planned cut: what sv_seg_build needs, filled by sv_seg_plan. */
struct sv_seg {
	const uint8_t *frame; /* the super-frame, without its virtio_net_hdr */
	size_t flen;
	size_t l3off; /* Ethernet header length (L2), 0 (L3) */
	size_t iphl, thl, hlen; /* IP header, TCP header, all headers */
	size_t mss, plen;       /* segment payload size, total payload */
	unsigned count;
	int v6;
};

/* Plans the cut of a TSO super-frame (gso_type TCPV4 or TCPV6, ECN bit allowed),
 * checking its headers: Ethernet (unless l3) + IPv4 without fragmentation or
 * IPv6 with TCP as the next header + TCP. Returns the segment count, or 0 when
 * this frame is not one the sleeve cuts (it is then carried whole). */
unsigned sv_seg_plan(struct sv_seg *g, const uint8_t *frame, size_t flen,
		     const struct virtio_net_hdr *vh, int l3);
/* Length of segment i. */
size_t sv_seg_len(const struct sv_seg *g, unsigned i);
/* Writes segment i (sv_seg_len bytes) to out as the kernel's software GSO would:
 * IPv4 length, id + i and header checksum, IPv6 payload length, TCP sequence
 * number, FIN and PSH on the last segment only, CWR on the first only, and a
 * complete TCP checksum (the segments are ordinary frames to the peer). */
void sv_seg_build(const struct sv_seg *g, unsigned i, uint8_t *out);

/* Writes the pseudo header of a TCP segment of tcplen bytes behind this IP header
 * to pseudo (40 bytes of room); returns its length. */
size_t sv_tcp_pseudo(const uint8_t *ip, int v6, size_t tcplen, uint8_t *pseudo);
/* Sets the IP length fields for a TCP segment of tcplen bytes (IPv4: total length
 * and a fresh header checksum), then as sv_tcp_pseudo. */
size_t sv_tcp_ip_fix(uint8_t *ip, size_t iphl, int v6, size_t tcplen, uint8_t *pseudo);

#endif
