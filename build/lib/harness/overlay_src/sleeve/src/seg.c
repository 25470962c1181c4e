/* seg.c - cutting a TCP super-frame into MSS-sized frames in userspace (--segment) */
#include <string.h>

#include "frame.h"
#include "seg.h"

#define SEG_ETH_IP 0x0800
#define SEG_ETH_IP6 0x86dd
#define IPPROTO_TCP_ 6
#define TCP_FIN 0x01
#define TCP_PSH 0x08
#define TCP_CWR 0x80

unsigned sv_seg_plan(struct sv_seg *g, const uint8_t *frame, size_t flen,
		     const struct virtio_net_hdr *vh, int l3)
{
	uint8_t type = vh->gso_type & (uint8_t)~VIRTIO_NET_HDR_GSO_ECN;
	const uint8_t *ip, *th;
	size_t l3off = l3 ? 0 : SV_ETH_HLEN;

	memset(g, 0, sizeof(*g));
	if ((type != VIRTIO_NET_HDR_GSO_TCPV4 && type != VIRTIO_NET_HDR_GSO_TCPV6) ||
	    vh->gso_size == 0 || flen < l3off + 20)
		return 0;
	ip = frame + l3off;
	if (!l3) {
		uint16_t et = sv_get16(frame + 12);

		if (et != (type == VIRTIO_NET_HDR_GSO_TCPV4 ? SEG_ETH_IP : SEG_ETH_IP6))
			return 0;
	}
	if (type == VIRTIO_NET_HDR_GSO_TCPV4) {
		/* version 4, TCP, neither a fragment nor more to come */
		if (ip[0] >> 4 != 4 || ip[9] != IPPROTO_TCP_ || (sv_get16(ip + 6) & 0x3fff))
			return 0;
		g->iphl = (size_t)(ip[0] & 0x0f) * 4;
		if (g->iphl < 20)
			return 0;
	} else {
		/* no extension headers: TCP follows the fixed header */
		if (flen < l3off + 40 || ip[0] >> 4 != 6 || ip[6] != IPPROTO_TCP_)
			return 0;
		g->iphl = 40;
		g->v6 = 1;
	}
	if (flen < l3off + g->iphl + 20)
		return 0;
	th = ip + g->iphl;
	g->thl = (size_t)(th[12] >> 4) * 4;
	if (g->thl < 20)
		return 0;
	g->hlen = l3off + g->iphl + g->thl;
	if (flen <= g->hlen)
		return 0;
	g->frame = frame;
	g->flen = flen;
	g->l3off = l3off;
	g->mss = vh->gso_size;
	g->plen = flen - g->hlen;
	g->count = (unsigned)((g->plen + g->mss - 1) / g->mss);
	if (g->count > SV_SEG_MAX)
		return g->count = 0;
	return g->count;
}

size_t sv_seg_len(const struct sv_seg *g, unsigned i)
{
	size_t off = (size_t)i * g->mss;

	return g->hlen + (g->plen - off < g->mss ? g->plen - off : g->mss);
}

size_t sv_tcp_pseudo(const uint8_t *ip, int v6, size_t tcplen, uint8_t *pseudo)
{
	if (v6) {
		/* addresses, TCP length (32 bits), zero, next header */
		memcpy(pseudo, ip + 8, 32);
		sv_put32(pseudo + 32, (uint32_t)tcplen);
		memset(pseudo + 36, 0, 3);
		pseudo[39] = IPPROTO_TCP_;
		return 40;
	}
	/* addresses, zero, protocol, TCP length */
	memcpy(pseudo, ip + 12, 8);
	pseudo[8] = 0;
	pseudo[9] = IPPROTO_TCP_;
	sv_put16(pseudo + 10, (uint16_t)tcplen);
	return 12;
}

size_t sv_tcp_ip_fix(uint8_t *ip, size_t iphl, int v6, size_t tcplen, uint8_t *pseudo)
{
	uint16_t c;

	if (v6) {
		sv_put16(ip + 4, (uint16_t)tcplen);
	} else {
		sv_put16(ip + 2, (uint16_t)(iphl + tcplen));
		memset(ip + 10, 0, 2);
		c = (uint16_t)~sv_csum_fold(ip, iphl, 0);
		memcpy(ip + 10, &c, 2);
	}
	return sv_tcp_pseudo(ip, v6, tcplen, pseudo);
}

void sv_seg_build(const struct sv_seg *g, unsigned i, uint8_t *out)
{
	size_t off = (size_t)i * g->mss, pl = g->plen - off < g->mss ? g->plen - off : g->mss;
	uint8_t *ip = out + g->l3off, *th = ip + g->iphl, pseudo[40];
	size_t tcplen = g->thl + pl, plen_ps;
	uint16_t c;

	memcpy(out, g->frame, g->hlen);
	memcpy(out + g->hlen, g->frame + g->hlen + off, pl);
	if (!g->v6)
		sv_put16(ip + 4, (uint16_t)(sv_get16(ip + 4) + i));
	plen_ps = sv_tcp_ip_fix(ip, g->iphl, g->v6, tcplen, pseudo);
	sv_put32(th + 4, (uint32_t)(sv_get32(th + 4) + off));
	if (i + 1 < g->count)
		th[13] &= (uint8_t)~(TCP_FIN | TCP_PSH);
	if (i > 0)
		th[13] &= (uint8_t)~TCP_CWR;
	memset(th + 16, 0, 2);
	c = (uint16_t)~sv_csum_fold(th, tcplen, sv_csum_fold(pseudo, plen_ps, 0));
	memcpy(th + 16, &c, 2);
}
