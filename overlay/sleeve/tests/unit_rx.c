/* unit_rx.c - rx.c: the whole receive path (plain and sealed, under each AEAD),
 * sealed units opened once, a sleeve's own datagrams sent back to it, and the
 * receive entry: what a read returned, before any peer is known */
#include <linux/virtio_net.h>
#include <netinet/udp.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "pmtu.h"
#include "rx.h"
#include "unit.h"

/* ---- the whole receive path ---- */
void test_rx_path(void)
{
	static struct sv s;
	static uint8_t d[4096], unit[3000];
	uint8_t f1[60], f2[98];
	size_t n;

	memset(f1, 1, sizeof(f1));
	memset(f2, 2, sizeof(f2));
	for (size_t i = 0; i < sizeof(unit); i++)
		unit[i] = (uint8_t)(i ^ 0x33);
	for (int enc = 0; enc <= 1; enc++) {
		/* DATA with two frames */
		sv_setup(&s, enc, 0, 1, 77);
		n = mk_data(&s, d, f1, sizeof(f1), f2, sizeof(f2));
		CHECK_EQ(rx(&s, d, n, 1), SV_OK);
		CHECK_EQ(cap.n, 2);
		CHECK(cap.len[0] == 60 && !memcmp(cap.data[0], f1, 60) && !cap.vnet[0]);
		CHECK(cap.len[1] == 98 && !memcmp(cap.data[1], f2, 98));
		CHECK_EQ(s.ctr_rx.c[SV_C_RX_FRAMES], 2);
		/* DATA with one frame: SINGLE, 8 (+32) bytes around the frame */
		cap.n = 0;
		n = mk_data(&s, d, f2, sizeof(f2), NULL, 0);
		CHECK_EQ(n, 8 + (enc ? 32 : 0) + sizeof(f2));
		CHECK(d[4] & SV_F_SINGLE);
		CHECK_EQ(rx(&s, d, n, 1), SV_OK);
		CHECK(cap.n == 1 && cap.len[0] == 98 && !memcmp(cap.data[0], f2, 98));
		/* the biggest single frame the path takes: 1472 - 8 (- 32) */
		{
			static uint8_t big[1472];
			size_t bl = sv_pack_max_frame(1472, enc);

			memset(big, 0x77, sizeof(big));
			s.mtu = (int)bl - SV_ETH_HLEN; /* as --mtu auto picks it */
			cap.n = 0;
			n = mk_data(&s, d, big, bl, NULL, 0);
			CHECK_EQ(n, 1472);
			CHECK_EQ(rx(&s, d, n, 1), SV_OK);
			CHECK(cap.n == 1 && cap.len[0] == bl && !memcmp(cap.data[0], big, 2048 < bl ? 2048 : bl));
			s.mtu = 1500;
		}
		if (!enc) {
			/* malformed plain DATA: a batch of one record (one frame must be
			 * SINGLE), SINGLE with no frame, SINGLE beside a FRAG-only flag or
			 * on FRAG */
			sv_hdr_put(d, SV_T_DATA, 0, 2 + 60);
			sv_put16(d + 8, 60);
			memcpy(d + 10, f1, 60);
			CHECK_EQ(rx(&s, d, 8 + 62, 1), SV_D_BAD_LENGTH);
			sv_hdr_put(d, SV_T_DATA, SV_F_SINGLE, 0);
			CHECK_EQ(rx(&s, d, 8, 1), SV_D_BAD_LENGTH);
			sv_hdr_put(d, SV_T_DATA, SV_F_SINGLE | SV_F_VNET, 60);
			CHECK_EQ(rx(&s, d, 8 + 60, 1), SV_D_BAD_FLAGS);
			sv_hdr_put(d, SV_T_FRAG, SV_F_SINGLE, 60);
			CHECK_EQ(rx(&s, d, 8 + 60, 1), SV_D_BAD_FLAGS);
			/* a SINGLE runt is dropped like a runt record */
			cap.n = 0;
			sv_hdr_put(d, SV_T_DATA, SV_F_SINGLE, 5);
			CHECK_EQ(rx(&s, d, 8 + 5, 1), SV_D_BAD_LENGTH);
			CHECK_EQ(cap.n, 0);
		}
		/* a super-frame in 3 pieces, out of order, written with its vnet header */
		{
			struct virtio_net_hdr vh = {.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
						    .gso_type = VIRTIO_NET_HDR_GSO_TCPV4,
						    .hdr_len = 66, .gso_size = 1400,
						    .csum_start = 34, .csum_offset = 16};

			memcpy(unit, &vh, sizeof(vh));
			cap.n = 0;
			n = mk_piece(&s, d, SV_F_VNET, 9, unit, 3000, 1200, 2, 3);
			CHECK_EQ(rx(&s, d, n, 1), SV_OK);
			n = mk_piece(&s, d, SV_F_VNET, 9, unit, 3000, 1200, 0, 3);
			CHECK_EQ(rx(&s, d, n, 1), SV_OK);
			CHECK_EQ(cap.n, 0);
			n = mk_piece(&s, d, SV_F_VNET, 9, unit, 3000, 1200, 1, 3);
			CHECK_EQ(rx(&s, d, n, 1), SV_OK);
			CHECK_EQ(cap.n, 1);
			CHECK(cap.vnet[0] && cap.len[0] == 3000 - 10 &&
			      !memcmp(cap.data[0], unit + 10, 2000));
			CHECK_EQ(s.ctr_rx.c[SV_C_RX_SUPER], 1);
		}
		/* an oversize single frame split into pieces without VNET */
		cap.n = 0;
		s.mtu = 2000;
		n = mk_piece(&s, d, 0, 10, unit, 2014, 1400, 0, 2);
		CHECK_EQ(rx(&s, d, n, 1), SV_OK);
		n = mk_piece(&s, d, 0, 10, unit, 2014, 1400, 1, 2);
		CHECK_EQ(rx(&s, d, n, 1), SV_OK);
		CHECK(cap.n == 1 && !cap.vnet[0] && cap.len[0] == 2014);
		/* bigger than our MTU: oversize */
		s.mtu = 1500;
		n = mk_piece(&s, d, 0, 11, unit, 2014, 1400, 0, 2);
		rx(&s, d, n, 1);
		n = mk_piece(&s, d, 0, 11, unit, 2014, 1400, 1, 2);
		CHECK_EQ(rx(&s, d, n, 1), SV_D_OVERSIZE);
		CHECK_EQ(drops(&s, SV_D_OVERSIZE), 1);
		/* mode mismatch: L3 frames at an L2 sleeve */
		s.l3 = 1;
		n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
		s.l3 = 0;
		CHECK_EQ(rx(&s, d, n, 1), SV_D_MODE_MISMATCH);
		/* runt frame in a batch: dropped alone */
		cap.n = 0;
		{
			uint64_t before = drops(&s, SV_D_BAD_LENGTH);

			n = mk_data(&s, d, f1, 5, f2, sizeof(f2));
			CHECK_EQ(rx(&s, d, n, 1), SV_OK);
			CHECK_EQ(cap.n, 1);
			CHECK_EQ(drops(&s, SV_D_BAD_LENGTH), before + 1);
		}
		/* heartbeat asking for a reply */
		cap.ctl_sent = 0;
		n = sv_build_heartbeat(&s, &s.peers[0], d, 1);
		CHECK_EQ(rx(&s, d, n, 5), SV_OK);
		CHECK_EQ(s.peers[0].heard, 1);
		CHECK_EQ(s.peers[0].caps & SV_CAP_GSO_RX, SV_CAP_GSO_RX);
		CHECK_EQ(cap.ctl_sent, 1);
		/* the reply is a heartbeat without WANT_REPLY: no ping-pong */
		n = cap.ctl_len;
		memcpy(d, cap.ctl, n);
		CHECK_EQ(rx(&s, d, n, 6), SV_OK);
		CHECK_EQ(cap.ctl_sent, 1);
		/* probe -> ack carrying the size; ack -> recorded */
		n = sv_build_probe(&s, d, 4242, 1400);
		CHECK_EQ(n, 1400);
		CHECK_EQ(rx(&s, d, n, 7), SV_OK);
		CHECK_EQ(cap.ctl_sent, 2);
		n = cap.ctl_len;
		memcpy(d, cap.ctl, n);
		CHECK_EQ(rx(&s, d, n, 8), SV_OK);
		CHECK_EQ(s.peers[0].probe_ack_id, 4242);
		CHECK_EQ(s.peers[0].probe_ack_size, 1400);
	}
	/* VNET pieces at a device without vnet header */
	sv_setup(&s, 0, 0, 0, 0);
	n = mk_piece(&s, d, SV_F_VNET, 9, unit, 3000, 1200, 0, 3);
	CHECK_EQ(rx(&s, d, n, 1), SV_D_GSO_UNSUPPORTED);
	/* plaintext at a keyed receiver, sealed at an unkeyed one */
	sv_setup(&s, 0, 0, 1, 0);
	n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
	s.enc = 1;
	CHECK_EQ(rx(&s, d, n, 1), SV_D_CRYPTO_MISMATCH);
	sv_setup(&s, 1, 0, 1, 5);
	n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
	s.enc = 0;
	CHECK_EQ(rx(&s, d, n, 1), SV_D_CRYPTO_MISMATCH);
	/* sealed path: replay, forged and truncated through sv_rx_datagram */
	sv_setup(&s, 1, 0, 1, 6);
	n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
	{
		uint8_t copy[2048];

		memcpy(copy, d, n);
		CHECK_EQ(rx(&s, d, n, 1), SV_OK);
		memcpy(d, copy, n);
		CHECK_EQ(rx(&s, d, n, 1), SV_D_REPLAY);
		CHECK_EQ(drops(&s, SV_D_REPLAY), 1);
		n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
		d[n - 1] ^= 0x80;
		CHECK_EQ(rx(&s, d, n, 1), SV_D_AUTH_FAIL);
		CHECK_EQ(drops(&s, SV_D_AUTH_FAIL), 1);
		CHECK_EQ(rx(&s, d, n - 1, 1), SV_D_TRUNCATED);
		CHECK_EQ(rx(&s, d, 20, 1), SV_D_TRUNCATED);
		/* a restarted peer: new session, counters from a later clock */
		struct sv_ident id;

		sv_ident_of(&id, &s.peers[0].addr);
		sv_seal_free(&s.seal);
		sv_seal_init(&s.seal, test_key, 999, 1ull << 50, &id, test_cipher);
		n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
		CHECK_EQ(rx(&s, d, n, 1), SV_D_UNPROVEN_SESSION); /* not before proven */
		prove(&s);
		n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
		CHECK_EQ(rx(&s, d, n, 1), SV_OK);
		CHECK_EQ(cap.n, 1);
		/* and the old session's datagram is now refused */
		memcpy(d, copy, sizeof(copy));
		CHECK_EQ(rx(&s, d, 8 + 16 + 60 + 16, 1), SV_D_UNPROVEN_SESSION);
	}
	sv_setup(&s, 0, 0, 0, 0);
}

/* ---- sealed units: one AEAD per FRAG unit ---- */
void test_sealed_units(void)
{
	static struct sv s;
	static uint8_t unit[5000], d[4][2048], copy[4][2048];
	size_t n[4];
	struct virtio_net_hdr vh = {.gso_type = VIRTIO_NET_HDR_GSO_TCPV4, .hdr_len = 54,
				    .gso_size = 1400};

	for (size_t i = 0; i < sizeof(unit); i++)
		unit[i] = (uint8_t)(i * 13);
	memcpy(unit, &vh, sizeof(vh));
	/* 5000 bytes + tag in 4 pieces of 1400; delivered once, whole */
	sv_setup(&s, 1, 0, 1, 41);
	for (uint16_t i = 0; i < 4; i++) {
		n[i] = mk_piece(&s, d[i], SV_F_VNET, 1, unit, 5000, 1400, i, 4);
		memcpy(copy[i], d[i], n[i]);
	}
	CHECK_EQ(s.seal.counter, 1001); /* one counter for the whole unit */
	CHECK_EQ(n[0], 36 + 1400);
	CHECK_EQ(n[3], 36 + 5016 - 3 * 1400);
	for (int i = 3; i >= 0; i--) /* any order */
		CHECK_EQ(rx(&s, d[i], n[i], 1), SV_OK);
	CHECK(cap.n == 1 && cap.vnet[0] && cap.len[0] == 4990 && !memcmp(cap.data[0], unit + 10, 2048));
	CHECK_EQ(s.ctr_rx.c[SV_C_RX_SUPER], 1);
	/* the same pieces again: every one is a replay (the unit was opened) */
	for (int i = 0; i < 4; i++) {
		memcpy(d[i], copy[i], n[i]);
		CHECK_EQ(rx(&s, d[i], n[i], 1), SV_D_REPLAY);
	}
	CHECK_EQ(cap.n, 1);
	/* all pieces in one receive batch (GRO): opened from a gathered copy */
	{
		static uint8_t batch[8192];
		size_t off[4], used = 0;

		for (uint16_t i = 0; i < 4; i++) {
			off[i] = used;
			used += mk_piece(&s, batch + used, SV_F_VNET, 2, unit, 5000, 1400, i, 4);
		}
		cap.n = 0;
		for (int i = 0; i < 4; i++)
			CHECK_EQ(sv_rx_datagram(&s, &s.peers[0], batch + off[i],
						(i < 3 ? off[i + 1] : used) - off[i], 1),
				 SV_OK);
		sv_rx_settle(&s);
		CHECK(cap.n == 1 && cap.len[0] == 4990 && !memcmp(cap.data[0], unit + 10, 2048));
	}
	/* forged: any bit of any piece's chunk, or of what the AD covers, fails the
	 * unit once (auth_fail), and the unit is not delivered */
	{
		static const size_t where[] = {4, 8 + 3, 24 + 2, 24 + 6, 36, 36 + 700, 36 + 1399};
		uint64_t before = drops(&s, SV_D_AUTH_FAIL);
		uint32_t id = 10;

		for (size_t w = 0; w < sizeof(where) / sizeof(where[0]); w++, id++) {
			int bad = (int)(w % 4), got = 0, unproven = 0;

			cap.n = 0;
			for (uint16_t i = 0; i < 4; i++)
				n[i] = mk_piece(&s, d[i], SV_F_VNET, id, unit, 5000, 1400, i, 4);
			if (where[w] == 4) {
				/* flags: VNET off in every piece (consistent, so reassembly
				 * completes; only the tag can tell) */
				for (int i = 0; i < 4; i++)
					d[i][4] &= (uint8_t)~SV_F_VNET;
				s.vnet = 1;
			} else if (where[w] < 24) {
				/* session: changed in every piece alike */
				for (int i = 0; i < 4; i++)
					d[i][where[w]] ^= 0x01;
			} else if (where[w] < 36) {
				/* frame id (24..27) or total (28..31) in every piece alike */
				for (int i = 0; i < 4; i++)
					d[i][where[w]] ^= 0x01;
			} else {
				d[bad][where[w] < n[bad] ? where[w] : n[bad] - 1] ^= 0x01;
			}
			for (int i = 0; i < 4; i++) {
				enum sv_drop r = rx(&s, d[i], n[i], 1);

				got += r == SV_D_AUTH_FAIL;
				unproven += r == SV_D_UNPROVEN_SESSION;
			}
			if (where[w] == 24 + 6) {
				/* total changed: the pieces no longer add up */
				CHECK_EQ(got, 0);
			} else if (where[w] >= 8 && where[w] < 16) {
				/* another session: no piece even takes a slot */
				CHECK_EQ(got, 0);
				CHECK_EQ(unproven, 4);
			} else {
				CHECK_EQ(got, 1);
			}
			CHECK_EQ(cap.n, 0);
		}
		CHECK(drops(&s, SV_D_AUTH_FAIL) >= before + 5);
	}
	/* a piece with another counter belongs to another unit (a unit is known by
	 * session, counter and frame id): neither completes */
	{
		for (uint16_t i = 0; i < 4; i++)
			n[i] = mk_piece(&s, d[i], SV_F_VNET, 30, unit, 5000, 1400, i, 4);
		d[1][8 + 15] ^= 0x02; /* counter of piece 1 */
		cap.n = 0;
		for (int i = 0; i < 4; i++)
			CHECK_EQ(rx(&s, d[i], n[i], 1), SV_OK);
		CHECK_EQ(cap.n, 0);
	}
	/* truncated: a stream not longer than a tag, a short last piece */
	{
		uint8_t tiny[64];
		size_t k;

		sv_piece_put(tiny, SV_F_ENC | SV_F_VNET, (uint8_t)test_cipher, s.seal.session,
			     s.seal.counter + 100, 40, 16, 0, 1, 16);
		memset(tiny + 36, 0, 16);
		CHECK_EQ(rx(&s, tiny, 36 + 16, 1), SV_D_BAD_LENGTH);
		for (uint16_t i = 0; i < 4; i++)
			n[i] = mk_piece(&s, d[i], SV_F_VNET, 41, unit, 5000, 1400, i, 4);
		cap.n = 0;
		for (k = 0; k < 3; k++)
			CHECK_EQ(rx(&s, d[k], n[k], 1), SV_OK);
		CHECK_EQ(rx(&s, d[3], n[3] - 1, 1), SV_D_TRUNCATED);
		CHECK_EQ(cap.n, 0);
	}
	/* a restarted peer (new session, later clock): its units are accepted */
	{
		struct sv_ident id;

		sv_ident_of(&id, &s.peers[0].addr);
		sv_seal_free(&s.seal);
		sv_seal_init(&s.seal, test_key, 4242, 1ull << 52, &id, test_cipher);
		prove(&s);
	}
	for (uint16_t i = 0; i < 4; i++)
		n[i] = mk_piece(&s, d[i], SV_F_VNET, 1, unit, 5000, 1400, i, 4);
	cap.n = 0;
	for (int i = 0; i < 4; i++)
		CHECK_EQ(rx(&s, d[i], n[i], 1), SV_OK);
	CHECK_EQ(cap.n, 1);
	/* and the old session's unit is refused, piece by piece */
	for (int i = 0; i < 4; i++) {
		memcpy(d[i], copy[i], sizeof(copy[i]));
		CHECK_EQ(rx(&s, d[i], 36 + (i < 3 ? 1400 : 5016 - 3 * 1400), 1), SV_D_UNPROVEN_SESSION);
	}
	sv_setup(&s, 0, 0, 0, 0);
}

/* ---- a sleeve's own datagrams sent back to it with its peer's address ---- */
void test_rx_reflected(void)
{
	static struct sv s;
	static uint8_t d[4096], unit[3000];
	struct sockaddr_storage local;
	struct sv_ident me, peer;
	uint8_t f1[60];
	size_t n;

	memset(f1, 1, sizeof(f1));
	memset(unit, 3, sizeof(unit));
	sv_setup(&s, 1, 0, 1, 31);
	/* this side seals as itself (198.18.0.2), having started after its peer:
	 * its counters are ahead of every counter the peer has used */
	addr4(&local, "198.18.0.2", 6784);
	CHECK_EQ(sv_ident_of(&me, &local), 0);
	sv_seal_free(&s.seal);
	CHECK_EQ(sv_seal_init(&s.seal, test_key, 31, 1ull << 55, &me, test_cipher), 0);
	cap.n = cap.ctl_sent = 0;
	n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
	CHECK_EQ(rx(&s, d, n, 1), SV_D_AUTH_FAIL);
	n = sv_build_heartbeat(&s, &s.peers[0], d, 1);
	CHECK_EQ(rx(&s, d, n, 1), SV_D_AUTH_FAIL);
	for (uint16_t i = 0; i < 3; i++) {
		n = mk_piece(&s, d, SV_F_VNET, 6, unit, 3000, 1200, i, 3);
		CHECK_EQ(rx(&s, d, n, 1), i < 2 ? SV_OK : SV_D_AUTH_FAIL);
	}
	n = sv_build_probe(&s, d, 9, 300);
	CHECK_EQ(rx(&s, d, n, 1), SV_D_AUTH_FAIL);
	/* nothing delivered, answered, heard or moved */
	CHECK_EQ(cap.n, 0);
	CHECK_EQ(cap.ctl_sent, 0);
	CHECK_EQ(s.peers[0].heard, 0);
	CHECK_EQ(s.peers[0].open.win.top, 998); /* where prove() left it */
	CHECK_EQ(drops(&s, SV_D_AUTH_FAIL), 4);
	/* and the peer's own datagrams, counters far behind ours, still open */
	CHECK_EQ(sv_ident_of(&peer, &s.peers[0].addr), 0);
	sv_seal_free(&s.seal);
	CHECK_EQ(sv_seal_init(&s.seal, test_key, 32, 2000, &peer, test_cipher), 0);
	prove(&s);
	n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
	CHECK_EQ(rx(&s, d, n, 2), SV_OK);
	CHECK_EQ(cap.n, 1);
	sv_setup(&s, 0, 0, 0, 0);
}

/* ---- the socket side: what a read returned, before any peer is known ---- */

/* One read through the receive entry, as recvmmsg returns it: len bytes from src
 * (alen bytes of it), the UDP_GRO segment size seg (-1: no control message),
 * msg_flags flags; the control message's length is cmsg_len (0: the right one). */
static void rx_read_cm(struct sv *s, const struct sockaddr_storage *src, socklen_t alen,
		       uint8_t *buf, size_t len, int seg, int flags, size_t cmsg_len)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct sockaddr_storage a = *src;
	struct iovec iov = {buf, len};
	struct mmsghdr mm = {.msg_hdr = {.msg_name = &a, .msg_namelen = alen, .msg_iov = &iov,
					 .msg_iovlen = 1, .msg_flags = flags},
			     .msg_len = (unsigned)len};

	if (seg >= 0) {
		struct cmsghdr *c;

		memset(&cm, 0, sizeof(cm));
		mm.msg_hdr.msg_control = cm.b;
		mm.msg_hdr.msg_controllen = sizeof(cm.b);
		c = CMSG_FIRSTHDR(&mm.msg_hdr);
		c->cmsg_level = SOL_UDP;
		c->cmsg_type = UDP_GRO;
		c->cmsg_len = cmsg_len ? cmsg_len : CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	}
	sv_rx_batch(s, &mm, 1, 1);
}

static void rx_read(struct sv *s, const struct sockaddr_storage *src, uint8_t *buf, size_t len,
		    int seg)
{
	rx_read_cm(s, src, sizeof(struct sockaddr_in), buf, len, seg, 0, 0);
}

static uint64_t dgrams(struct sv *s)
{
	return s->ctr_rx.c[SV_C_RX_DGRAMS];
}

void test_rx_input(void)
{
	static struct sv s;
	static uint8_t buf[4096], d[2048];
	struct sockaddr_storage peer, other_port, stranger;
	uint8_t f1[60];
	size_t n;

	memset(f1, 1, sizeof(f1));
	sv_setup(&s, 0, 0, 1, 0);
	addr4(&s.peers[0].addr, "198.18.0.1", 6784);
	s.peers[0].alen = sizeof(struct sockaddr_in);
	addr4(&peer, "198.18.0.1", 6784);
	addr4(&other_port, "198.18.0.1", 6785);
	addr4(&stranger, "198.18.0.77", 6784);

	/* an empty datagram from anyone: counted once and dropped, not a division by
	 * zero; with or without a GRO segment size */
	rx_read(&s, &stranger, buf, 0, -1);
	CHECK_EQ(dgrams(&s), 1);
	CHECK_EQ(drops(&s, SV_D_NO_PEER), 1);
	rx_read(&s, &stranger, buf, 0, 1400);
	rx_read(&s, &stranger, buf, 0, 0);
	CHECK_EQ(dgrams(&s), 3);
	CHECK_EQ(drops(&s, SV_D_NO_PEER), 3);
	rx_read(&s, &other_port, buf, 0, -1);
	CHECK_EQ(drops(&s, SV_D_WRONG_PORT), 1);
	/* from the peer it is one datagram too short for a header */
	rx_read(&s, &peer, buf, 0, -1);
	rx_read(&s, &peer, buf, 0, 1);
	CHECK_EQ(dgrams(&s), 6);
	CHECK_EQ(drops(&s, SV_D_TRUNCATED), 2);
	CHECK_EQ(cap.n, 0);
	CHECK_EQ(cap.ctl_sent, 0);

	/* a GRO train of three DATA datagrams from the peer: cut at the segment size */
	n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
	for (int i = 0; i < 3; i++)
		memcpy(buf + (size_t)i * n, d, n);
	memset(&s.ctr_rx, 0, sizeof(s.ctr_rx));
	rx_read(&s, &peer, buf, 3 * n, (int)n);
	CHECK_EQ(dgrams(&s), 3);
	CHECK_EQ(cap.n, 3);
	/* segment sizes that do not fit the read: 0, negative, larger than it, absent */
	for (int seg = -1; seg <= 1; seg += 2) {
		cap.n = 0;
		memcpy(buf, d, n);
		rx_read(&s, &peer, buf, n, seg < 0 ? 0 : (int)n + 1);
		memcpy(buf, d, n);
		rx_read(&s, &peer, buf, n, seg < 0 ? -1 : INT32_MIN);
		CHECK_EQ(cap.n, 2);
	}
	/* a segment size of 1: every byte is a datagram, each too short */
	memset(&s.ctr_rx, 0, sizeof(s.ctr_rx));
	cap.n = 0;
	memcpy(buf, d, n);
	rx_read(&s, &peer, buf, n, 1);
	CHECK_EQ(dgrams(&s), n);
	CHECK_EQ(drops(&s, SV_D_TRUNCATED), n);
	CHECK_EQ(cap.n, 0);
	/* a control message too short to hold a segment size is not read */
	memset(&s.ctr_rx, 0, sizeof(s.ctr_rx));
	memcpy(buf, d, n);
	rx_read_cm(&s, &peer, sizeof(struct sockaddr_in), buf, n, 1, 0, CMSG_LEN(0));
	CHECK_EQ(dgrams(&s), 1);
	CHECK_EQ(cap.n, 1);

	/* a source address shorter than an IPv4 one is nobody, whatever the bytes
	 * after it say */
	memset(&s.ctr_rx, 0, sizeof(s.ctr_rx));
	cap.n = 0;
	memcpy(buf, d, n);
	rx_read_cm(&s, &peer, 0, buf, n, -1, 0, 0);
	memcpy(buf, d, n);
	rx_read_cm(&s, &peer, sizeof(struct sockaddr_in) - 1, buf, n, -1, 0, 0);
	CHECK_EQ(cap.n, 0);
	CHECK_EQ(drops(&s, SV_D_NO_PEER), 2);

	/* larger than the buffer (MSG_TRUNC): oversize from the peer, a stranger's
	 * is a stranger's */
	memset(&s.ctr_rx, 0, sizeof(s.ctr_rx));
	rx_read_cm(&s, &peer, sizeof(struct sockaddr_in), buf, n, -1, MSG_TRUNC, 0);
	rx_read_cm(&s, &stranger, sizeof(struct sockaddr_in), buf, n, -1, MSG_TRUNC, 0);
	CHECK_EQ(drops(&s, SV_D_OVERSIZE), 1);
	CHECK_EQ(drops(&s, SV_D_NO_PEER), 1);
	CHECK_EQ(cap.n, 0);

	/* valid datagrams from strangers, even the peer's own: never opened, never
	 * answered */
	memset(&s.ctr_rx, 0, sizeof(s.ctr_rx));
	cap.n = cap.ctl_sent = 0;
	for (int k = 0; k < 2; k++) {
		const struct sockaddr_storage *from = k ? &stranger : &other_port;

		n = mk_data(&s, buf, f1, sizeof(f1), NULL, 0);
		rx_read(&s, from, buf, n, -1);
		n = sv_build_heartbeat(&s, &s.peers[0], buf, 1);
		rx_read(&s, from, buf, n, -1);
		n = sv_build_probe(&s, buf, 7, 200);
		rx_read(&s, from, buf, n, -1);
	}
	CHECK_EQ(cap.n, 0);
	CHECK_EQ(cap.ctl_sent, 0);
	CHECK_EQ(s.peers[0].heard, 0);
	CHECK_EQ(drops(&s, SV_D_WRONG_PORT), 3);
	CHECK_EQ(drops(&s, SV_D_NO_PEER), 3);
	sv_setup(&s, 0, 0, 0, 0);
}
