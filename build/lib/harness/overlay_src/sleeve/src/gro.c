/* gro.c - coalescing received TCP segments back into super-frames (--segment)
 *
 * The rules follow the kernel's tcp_gro_receive: same flow and headers (IP id,
 * lengths and checksums aside), the next sequence number, plain ACK segments
 * (PSH ends a super-frame), every segment but the last of the same size. The
 * result goes to the device with a GSO virtio_net_hdr and a partial checksum,
 * as the kernel hands super-frames over itself. As the kernel's GRO, it
 * merges only segments whose TCP checksum verifies: the partial checksum the
 * whole gets is trusted by the stack, and a frame may have been damaged before
 * it ever reached the peer's sleeve (a bridged host in L2 mode); such a
 * segment goes to the device alone, where the stack drops it. */
#include <linux/virtio_net.h>
#include <string.h>

#include "frame.h"
#include "gro.h"
#include "seg.h"

#define TCP_ACK 0x10
#define TCP_PSH 0x08

struct parsed {
	size_t l3off, iphl, thl, hlen, pl;
	int v6;
};

static int parse(const uint8_t *f, size_t len, int l3, struct parsed *p)
{
	const uint8_t *ip, *th;

	p->l3off = l3 ? 0 : SV_ETH_HLEN;
	if (len < p->l3off + 40)
		return 0;
	ip = f + p->l3off;
	if (!l3 && sv_get16(f + 12) != (ip[0] >> 4 == 6 ? 0x86dd : 0x0800))
		return 0;
	if (ip[0] >> 4 == 4) {
		p->v6 = 0;
		p->iphl = (size_t)(ip[0] & 0x0f) * 4;
		if (p->iphl < 20 || ip[9] != 6 || (sv_get16(ip + 6) & 0x3fff) ||
		    sv_get16(ip + 2) != len - p->l3off)
			return 0;
	} else if (ip[0] >> 4 == 6) {
		p->v6 = 1;
		p->iphl = 40;
		if (ip[6] != 6 || len < p->l3off + 60 || sv_get16(ip + 4) != len - p->l3off - 40)
			return 0;
	} else {
		return 0;
	}
	if (len < p->l3off + p->iphl + 20)
		return 0;
	th = ip + p->iphl;
	p->thl = (size_t)(th[12] >> 4) * 4;
	p->hlen = p->l3off + p->iphl + p->thl;
	if (p->thl < 20 || p->hlen > SV_GRO_HDR_MAX || len <= p->hlen)
		return 0;
	p->pl = len - p->hlen;
	/* plain ACK, or ACK + PSH: anything else goes alone */
	if ((th[13] & (uint8_t)~TCP_PSH) != TCP_ACK)
		return 0;
	return 1;
}

static int csum_ok(const uint8_t *f, const struct parsed *p)
{
	uint8_t pseudo[40];
	size_t tcplen = p->thl + p->pl, plen = sv_tcp_pseudo(f + p->l3off, p->v6, tcplen, pseudo);

	/* the sum over everything, checksum field included, is all ones */
	return sv_csum_fold(f + p->l3off + p->iphl, tcplen, sv_csum_fold(pseudo, plen, 0)) == 0xffff;
}

/* Headers equal but for what differs between segments of one super-frame. */
static int same_headers(const struct sv_gro *g, const uint8_t *f)
{
	const uint8_t *a = g->hdr + SV_VNET_LEN, *b = f;
	const uint8_t *ia = a + g->l3off, *ib = b + g->l3off;
	const uint8_t *ta = ia + g->iphl, *tb = ib + g->iphl;

	if (memcmp(a, b, g->l3off))
		return 0;
	if (!g->v6) {
		/* version..tos, flags..protocol, addresses and options */
		if (memcmp(ia, ib, 2) || memcmp(ia + 6, ib + 6, 4) ||
		    memcmp(ia + 12, ib + 12, g->iphl - 12))
			return 0;
	} else if (memcmp(ia, ib, 4) || memcmp(ia + 6, ib + 6, 34)) {
		return 0;
	}
	/* ports; ack, offset, window, urgent pointer and options; not seq, flags, check */
	return !memcmp(ta, tb, 4) && !memcmp(ta + 8, tb + 8, 5) && !memcmp(ta + 14, tb + 14, 2) &&
	       !memcmp(ta + 18, tb + 18, g->thl - 18);
}

int sv_gro_add(struct sv_gro *g, const uint8_t *frame, size_t len, int l3)
{
	struct parsed p;
	const uint8_t *th;

	if (!parse(frame, len, l3, &p))
		return 0;
	th = frame + p.l3off + p.iphl;
	if (g->open && (g->closed || g->segs >= SV_GRO_MAX || p.hlen != g->hlen || p.v6 != g->v6 ||
			p.pl > g->mss || sv_get32(th + 4) != g->next_seq ||
			g->hlen + g->payload + p.pl > 65535 || !same_headers(g, frame)))
		return 0;
	/* last: the one pass over the payload, only for a frame that would join */
	if (!csum_ok(frame, &p))
		return 0;
	if (!g->open) {
		memset(g->hdr, 0, SV_VNET_LEN);
		memcpy(g->hdr + SV_VNET_LEN, frame, p.hlen);
		g->first = frame;
		g->first_len = len;
		g->l3off = p.l3off;
		g->iphl = p.iphl;
		g->thl = p.thl;
		g->hlen = p.hlen;
		g->v6 = p.v6;
		g->mss = p.pl;
		g->payload = 0;
		g->segs = 0;
		g->closed = 0;
		g->open = 1;
		g->iov[0] = (struct iovec){g->hdr, SV_VNET_LEN + p.hlen};
	}
	g->iov[++g->segs] = (struct iovec){(void *)(frame + p.hlen), p.pl};
	g->payload += p.pl;
	g->next_seq = sv_get32(th + 4) + (uint32_t)p.pl;
	if (p.pl < g->mss || (th[13] & TCP_PSH)) {
		/* a short or pushed segment is the last one; its PSH goes to the whole */
		g->hdr[SV_VNET_LEN + g->l3off + g->iphl + 13] |= th[13] & TCP_PSH;
		g->closed = 1;
	}
	return 1;
}

int sv_gro_finish(struct sv_gro *g, const struct iovec **iov, size_t *len, int *has_vnet)
{
	struct virtio_net_hdr vh = {0};
	uint8_t *ip = g->hdr + SV_VNET_LEN + g->l3off, *th = ip + g->iphl, pseudo[40];
	size_t tcplen = g->thl + g->payload, plen;
	uint16_t c;

	if (!g->open)
		return 0;
	g->open = 0;
	if (g->segs == 1) {
		g->iov[0] = (struct iovec){(void *)g->first, g->first_len};
		*iov = g->iov;
		*len = g->first_len;
		*has_vnet = 0;
		return 1;
	}
	plen = sv_tcp_ip_fix(ip, g->iphl, g->v6, tcplen, pseudo);
	vh.gso_type = g->v6 ? VIRTIO_NET_HDR_GSO_TCPV6 : VIRTIO_NET_HDR_GSO_TCPV4;
	/* partial checksum: the pseudo-header sum, completed by whoever needs it */
	c = sv_csum_fold(pseudo, plen, 0);
	memcpy(th + 16, &c, 2);
	vh.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	vh.hdr_len = (uint16_t)g->hlen;
	vh.gso_size = (uint16_t)g->mss;
	vh.csum_start = (uint16_t)(g->l3off + g->iphl);
	vh.csum_offset = 16;
	memcpy(g->hdr, &vh, SV_VNET_LEN);
	*iov = g->iov;
	*len = SV_VNET_LEN + g->hlen + g->payload;
	*has_vnet = 1;
	return g->segs + 1;
}
