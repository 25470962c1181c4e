/* unit_segment.c - --segment: seg.c cuts a TCP super-frame as the kernel's
 * software GSO does, gro.c gathers the segments back; which frames are left
 * whole and which segments may join */
#include <linux/virtio_net.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "gro.h"
#include "seg.h"
#include "unit.h"

/* the pseudo-header sum of the TCP segment in this Ethernet frame; *th, *tl: the
 * segment and its length */
static uint32_t ref_pseudo(uint8_t *f, size_t len, int v6, uint8_t **th, size_t *tl)
{
	uint8_t *ip = f + SV_ETH_HLEN;
	size_t iphl = v6 ? 40 : (size_t)(ip[0] & 15) * 4;
	uint8_t ps[40] = {0};

	*th = ip + iphl;
	*tl = len - SV_ETH_HLEN - iphl;
	if (!v6) {
		memcpy(ps, ip + 12, 8);
		ps[9] = 6;
		ps[10] = (uint8_t)(*tl >> 8);
		ps[11] = (uint8_t)*tl;
		return ref_sum(ps, 12, 0);
	}
	memcpy(ps, ip + 8, 32);
	ps[34] = (uint8_t)(*tl >> 8);
	ps[35] = (uint8_t)*tl;
	ps[39] = 6;
	return ref_sum(ps, 40, 0);
}

/* does the TCP checksum of this Ethernet frame verify? */
static int tcp_csum_ok(uint8_t *f, size_t len, int v6)
{
	uint8_t *th;
	size_t tl;
	uint32_t ps = ref_pseudo(f, len, v6, &th, &tl);

	return ref_sum(th, tl, ps) == 0xffff;
}

/* gives the frame a correct TCP checksum (after a test changed it) */
static void fix_tcp_csum(uint8_t *f, size_t len, int v6)
{
	uint8_t *th;
	size_t tl;
	uint32_t ps = ref_pseudo(f, len, v6, &th, &tl);
	uint16_t c;

	th[16] = th[17] = 0;
	c = (uint16_t)~ref_sum(th, tl, ps);
	th[16] = (uint8_t)(c >> 8);
	th[17] = (uint8_t)c;
}

static void test_segment_roundtrip(int v6)
{
	/* odd sizes: the checksums' trailing-byte path runs too */
	enum { MSS = 1397, PLEN = 5001, LAST = PLEN - 3 * MSS };
	static uint8_t sf[70000], seg[SV_SEG_MAX][1600], out[70000];
	struct virtio_net_hdr vh = {.gso_type = v6 ? VIRTIO_NET_HDR_GSO_TCPV6 : VIRTIO_NET_HDR_GSO_TCPV4,
				    .gso_size = MSS};
	size_t flen = make_super(sf, v6, PLEN, 0x18 /* ACK PSH */), hl = flen - PLEN;
	struct sv_seg g;
	struct sv_gro gro = {0};
	const struct iovec *iov;
	struct virtio_net_hdr got;
	size_t len, cut;
	int has_vnet, n;

	CHECK_EQ(sv_seg_plan(&g, sf, flen, &vh, 0), 4);
	CHECK_EQ(g.hlen, hl);
	for (unsigned i = 0; i < g.count; i++) {
		size_t sl = sv_seg_len(&g, i), pl = i < 3 ? MSS : LAST;
		const uint8_t *ip = seg[i] + SV_ETH_HLEN, *th = ip + (v6 ? 40 : 20);

		CHECK_EQ(sl, hl + pl);
		sv_seg_build(&g, i, seg[i]);
		if (!v6) {
			CHECK_EQ(sv_get16(ip + 2), sl - SV_ETH_HLEN);
			CHECK_EQ(sv_get16(ip + 4), 0x1000 + i);
			CHECK_EQ(ref_sum(ip, 20, 0), 0xffff);
		} else {
			CHECK_EQ(sv_get16(ip + 4), sl - SV_ETH_HLEN - 40);
		}
		CHECK_EQ(sv_get32(th + 4), (uint32_t)(0xfffff000u + i * MSS));
		CHECK_EQ(th[13], i == 3 ? 0x18 : 0x10);
		CHECK(tcp_csum_ok(seg[i], sl, v6));
		CHECK(!memcmp(seg[i] + hl, sf + hl + i * MSS, pl));
		CHECK(!gro.closed);
		CHECK_EQ(sv_gro_add(&gro, seg[i], sl, 0), 1);
	}
	/* the short, pushed last segment closed it */
	CHECK(gro.closed);
	n = sv_gro_finish(&gro, &iov, &len, &has_vnet);
	CHECK_EQ(n, 5);
	CHECK_EQ(has_vnet, 1);
	CHECK_EQ(len, SV_VNET_LEN + flen);
	cut = flatten(iov, n, out, sizeof(out));
	CHECK_EQ(cut, len);
	memcpy(&got, out, sizeof(got));
	CHECK_EQ(got.gso_type, vh.gso_type);
	CHECK_EQ(got.gso_size, MSS);
	CHECK_EQ(got.hdr_len, hl);
	CHECK_EQ(got.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
	CHECK_EQ(got.csum_start, SV_ETH_HLEN + (v6 ? 40 : 20));
	CHECK_EQ(got.csum_offset, 16);
	/* the original super-frame again, but for the partial checksum, which
	 * completes to a valid one */
	CHECK(!memcmp(out + SV_VNET_LEN, sf, hl - 16));
	CHECK(!memcmp(out + SV_VNET_LEN + hl - 14, sf + hl - 14, flen - hl + 14));
	CHECK_EQ(sv_csum_complete(out + SV_VNET_LEN, flen, got.csum_start, got.csum_offset), 0);
	CHECK(tcp_csum_ok(out + SV_VNET_LEN, flen, v6));
	CHECK_EQ(sv_gro_finish(&gro, &iov, &len, &has_vnet), 0);
}

void test_segment(void)
{
	static uint8_t sf[70000], seg[2][1600];
	struct virtio_net_hdr vh = {.gso_type = VIRTIO_NET_HDR_GSO_TCPV4, .gso_size = 1000};
	size_t flen = make_super(sf, 0, 3000, 0x10);
	struct sv_seg g;
	struct sv_gro gro = {0};
	const struct iovec *iov;
	size_t len;
	int has_vnet;

	test_segment_roundtrip(0);
	test_segment_roundtrip(1);
	/* frames the sleeve leaves whole */
	CHECK_EQ(sv_seg_plan(&g, sf, flen, &vh, 0), 3);
	CHECK_EQ(sv_seg_plan(&g, sf, 60, &vh, 0), 0); /* headers only */
	vh.gso_type = VIRTIO_NET_HDR_GSO_UDP;
	CHECK_EQ(sv_seg_plan(&g, sf, flen, &vh, 0), 0);
	vh.gso_type = VIRTIO_NET_HDR_GSO_TCPV6; /* an IPv4 frame */
	CHECK_EQ(sv_seg_plan(&g, sf, flen, &vh, 0), 0);
	vh.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
	vh.gso_size = 0;
	CHECK_EQ(sv_seg_plan(&g, sf, flen, &vh, 0), 0);
	vh.gso_size = 2; /* more than SV_SEG_MAX segments */
	CHECK_EQ(sv_seg_plan(&g, sf, flen, &vh, 0), 0);
	vh.gso_size = 1000;
	sf[SV_ETH_HLEN + 6] |= 0x20; /* more fragments */
	CHECK_EQ(sv_seg_plan(&g, sf, flen, &vh, 0), 0);
	sf[SV_ETH_HLEN + 6] &= 0xdf;
	CHECK_EQ(sv_seg_plan(&g, sf + SV_ETH_HLEN, flen - SV_ETH_HLEN, &vh, 1), 3); /* L3 */

	/* gathering: only the next segment of the same flow joins */
	sv_seg_plan(&g, sf, flen, &vh, 0);
	sv_seg_build(&g, 0, seg[0]);
	sv_seg_build(&g, 2, seg[1]); /* a gap */
	CHECK_EQ(sv_gro_add(&gro, seg[0], sv_seg_len(&g, 0), 0), 1);
	CHECK_EQ(sv_gro_add(&gro, seg[1], sv_seg_len(&g, 2), 0), 0);
	/* one segment goes back as it came, without a vnet header */
	CHECK_EQ(sv_gro_finish(&gro, &iov, &len, &has_vnet), 1);
	CHECK_EQ(has_vnet, 0);
	CHECK_EQ(len, sv_seg_len(&g, 0));
	CHECK(iov[0].iov_base == seg[0]);
	sv_seg_build(&g, 1, seg[1]);
	CHECK_EQ(sv_gro_add(&gro, seg[0], sv_seg_len(&g, 0), 0), 1);
	/* each refusal below has a valid checksum, so it is refused for its reason */
	seg[1][SV_ETH_HLEN + 20 + 1] ^= 1; /* another source port */
	fix_tcp_csum(seg[1], sv_seg_len(&g, 1), 0);
	CHECK_EQ(sv_gro_add(&gro, seg[1], sv_seg_len(&g, 1), 0), 0);
	seg[1][SV_ETH_HLEN + 20 + 1] ^= 1;
	seg[1][SV_ETH_HLEN + 20 + 14] ^= 1; /* another window */
	fix_tcp_csum(seg[1], sv_seg_len(&g, 1), 0);
	CHECK_EQ(sv_gro_add(&gro, seg[1], sv_seg_len(&g, 1), 0), 0);
	seg[1][SV_ETH_HLEN + 20 + 14] ^= 1;
	seg[1][SV_ETH_HLEN + 20 + 13] = 0x11; /* FIN */
	fix_tcp_csum(seg[1], sv_seg_len(&g, 1), 0);
	CHECK_EQ(sv_gro_add(&gro, seg[1], sv_seg_len(&g, 1), 0), 0);
	seg[1][SV_ETH_HLEN + 20 + 13] = 0x10;
	seg[1][g.hlen + 7] ^= 0x40; /* damaged payload: the checksum fails */
	fix_tcp_csum(seg[1], sv_seg_len(&g, 1), 0);
	seg[1][g.hlen + 7] ^= 0x40;
	CHECK(!tcp_csum_ok(seg[1], sv_seg_len(&g, 1), 0));
	CHECK_EQ(sv_gro_add(&gro, seg[1], sv_seg_len(&g, 1), 0), 0);
	fix_tcp_csum(seg[1], sv_seg_len(&g, 1), 0);
	CHECK_EQ(sv_gro_add(&gro, seg[1], sv_seg_len(&g, 1), 0), 1);
	CHECK_EQ(sv_gro_finish(&gro, &iov, &len, &has_vnet), 3);
	/* FIN never joins, not even an empty coalescer */
	seg[0][SV_ETH_HLEN + 20 + 13] = 0x11;
	fix_tcp_csum(seg[0], sv_seg_len(&g, 0), 0);
	CHECK_EQ(sv_gro_add(&gro, seg[0], sv_seg_len(&g, 0), 0), 0);
	/* nor does a pure ACK (no payload), lengths and checksum right */
	{
		static uint8_t ack[200];
		size_t alen = make_super(ack, 0, 0, 0x10);

		fix_tcp_csum(ack, alen, 0);
		CHECK(tcp_csum_ok(ack, alen, 0));
		CHECK_EQ(sv_gro_add(&gro, ack, alen, 0), 0);
	}
	/* a length that disagrees with the IP header */
	seg[0][SV_ETH_HLEN + 20 + 13] = 0x10;
	fix_tcp_csum(seg[0], sv_seg_len(&g, 0), 0);
	CHECK_EQ(sv_gro_add(&gro, seg[0], sv_seg_len(&g, 0) - 1, 0), 0);
	CHECK_EQ(sv_gro_finish(&gro, &iov, &len, &has_vnet), 0);
}
