/* unit_harden.c - what a hostile network may try on the receive path (rx.c): a
 * restarted receiver fed a recording, sessions made up to cost key derivations,
 * pieces under made-up sessions between a unit's own, virtio_net_hdrs that do
 * not fit their frame. A receiver (198.18.0.2) and its peer (198.18.0.1) as two
 * separate sealing sides; reassembly's own defences are in unit_reasm.c. */
#include <arpa/inet.h>
#include <linux/virtio_net.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "rx.h"
#include "tap.h"
#include "unit.h"

#define PEER_SESSION 0xa1a1a1a1a1a1a1a1ull

static const uint8_t key[SV_KEY_LEN] = {
	7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
};

/* The receiver: session own (with a key), L2, one peer. */
static void h_setup(struct sv *s, int enc, int vnet, uint64_t own)
{
	struct sockaddr_storage me;
	struct sv_ident id, mine;

	sv_fixture(s, key, enc, 0, vnet, &id);
	s->mtu = 3000;
	ident4(&mine, &me, "198.18.0.2");
	if (enc)
		CHECK_EQ(sv_seal_init(&s->seal, key, own, 1000, &mine, SV_AEAD_AES256GCM), 0);
}

static void peer_init(struct sv_seal *pe, uint64_t session, uint64_t ctr0)
{
	struct sockaddr_storage a;
	struct sv_ident id;

	ident4(&id, &a, "198.18.0.1");
	CHECK_EQ(sv_seal_init(pe, key, session, ctr0, &id, SV_AEAD_AES256GCM), 0);
}

/* The peer's HEARTBEAT echoing echo (18 bytes of body, written by hand). */
static size_t peer_hb(struct sv_seal *pe, uint8_t *d, uint64_t echo)
{
	uint8_t *b = d + SV_HDR_LEN + SV_CRYPTO_PRE;

	sv_hdr_put(d, SV_T_HEARTBEAT, SV_F_ENC, 18);
	memset(b, 0, 18);
	sv_put16(b + 2, 1500);
	b[8] = b[9] = SV_AEAD_ALL;
	sv_put64(b + 10, echo);
	return sv_seal_ctl(pe, d, 18);
}

/* One 60-byte Ethernet frame in a SINGLE DATA datagram, sealed by pe if given. */
static size_t peer_data(struct sv_seal *pe, uint8_t *d)
{
	size_t off = pe ? SV_HDR_LEN + SV_CRYPTO_PRE : SV_HDR_LEN;

	sv_hdr_put(d, SV_T_DATA, (uint8_t)(SV_F_SINGLE | (pe ? SV_F_ENC : 0)), 60);
	memset(d + off, 0x5a, 60);
	return pe ? sv_seal_ctl(pe, d, 60) : SV_HDR_LEN + 60;
}

/* A receiver that restarted (a new session) with the same key takes nothing a
 * recording of its peer holds: not the HEARTBEAT (it echoes the old session),
 * not the DATA (its session was never proven to the new receiver). */
static void test_restart_replay(void)
{
	static struct sv s;
	static struct sv_seal pe;
	static uint8_t rec[4][256];
	size_t n[4];
	uint8_t d[256];

	h_setup(&s, 1, 0, 0x1111);
	peer_init(&pe, PEER_SESSION, 5000);
	n[0] = peer_hb(&pe, rec[0], 0x1111);
	n[1] = peer_data(&pe, rec[1]);
	n[2] = peer_data(&pe, rec[2]);
	for (int i = 0; i < 3; i++) {
		memcpy(d, rec[i], n[i]);
		CHECK_EQ(rx(&s, d, n[i], 1), SV_OK);
	}
	CHECK_EQ(cap.n, 2); /* the first run: proven by the echo, DATA delivered */
	sv_free(&s);
	h_setup(&s, 1, 0, 0x2222); /* restarted: same key, new session */
	for (int i = 0; i < 3; i++) {
		memcpy(d, rec[i], n[i]);
		rx(&s, d, n[i], 2);
	}
	CHECK_EQ(cap.n, 0);
#if SV_VERSION >= 5
	CHECK_EQ(s.ctr_rx.drop[SV_D_UNPROVEN_SESSION], 2);
	CHECK(!sv_open_proven(&s.peers[0].open, PEER_SESSION));
	/* the live peer learns the new session (from our HEARTBEAT) and echoes it */
	n[3] = peer_hb(&pe, rec[3], 0x2222);
	CHECK_EQ(rx(&s, rec[3], n[3], 3), SV_OK);
	CHECK(sv_open_proven(&s.peers[0].open, PEER_SESSION));
	n[3] = peer_data(&pe, rec[3]);
	CHECK_EQ(rx(&s, rec[3], n[3], 3), SV_OK);
	CHECK_EQ(cap.n, 1);
	/* and the recording stays refused: its counters precede the proof */
	memcpy(d, rec[2], n[2]);
	CHECK_EQ(rx(&s, d, n[2], 3), SV_D_REPLAY);
	CHECK_EQ(cap.n, 1);
#endif
	sv_seal_free(&pe);
	sv_free(&s);
}

/* Made-up sessions from the peer's address: DATA costs no key derivation at
 * all, HEARTBEATs at most SV_TRIALS_PER_S a second. */
static void test_trial_cap(void)
{
	static struct sv s;
	static struct sv_seal pe;
	uint8_t d[256];
	size_t n;

	h_setup(&s, 1, 0, 0x1111);
	for (uint64_t i = 0; i < 1000; i++) {
		peer_init(&pe, 0x5000 + i, 1ull << 40);
		n = i % 2 ? peer_data(&pe, d) : peer_hb(&pe, d, 0x9999);
		d[n - 1] ^= 1; /* forged: a tag nobody could make without the key */
		rx(&s, d, n, 1000000000ull + i); /* all within one second */
		sv_seal_free(&pe);
	}
	CHECK_EQ(cap.n, 0);
#ifdef SV_TRIALS_PER_S
	CHECK_EQ(s.peers[0].open.derived, SV_TRIALS_PER_S);
#endif
#if SV_VERSION >= 5
	CHECK_EQ(s.ctr_rx.drop[SV_D_UNPROVEN_SESSION], 500);
	CHECK_EQ(s.ctr_rx.drop[SV_D_TRIAL_LIMIT], 500 - SV_TRIALS_PER_S);
	CHECK_EQ(s.ctr_rx.drop[SV_D_AUTH_FAIL], SV_TRIALS_PER_S);
	/* the next second has a new budget: the real peer's handshake goes through */
	peer_init(&pe, PEER_SESSION, 1ull << 41);
	n = peer_hb(&pe, d, 0x1111);
	CHECK_EQ(rx(&s, d, n, 2000000001ull), SV_OK);
	CHECK(sv_open_proven(&s.peers[0].open, PEER_SESSION));
	CHECK_EQ(s.peers[0].open.derived, SV_TRIALS_PER_S + 1);
	n = peer_data(&pe, d);
	CHECK_EQ(rx(&s, d, n, 2000000002ull), SV_OK);
	CHECK_EQ(cap.n, 1);
	CHECK_EQ(s.peers[0].open.derived, SV_TRIALS_PER_S + 1); /* its key came along */
	sv_seal_free(&pe);
#endif
	sv_free(&s);
}

/* With a key, a peer's unit survives pieces under made-up sessions (frame ids
 * guessed, counters fresh) sent from its address between its pieces. */
static void test_reasm_spoofed(void)
{
	static struct sv s;
	static struct sv_seal pe, junk;
	static uint8_t unit[3000 + SV_TAG_LEN], d[1600];
	uint8_t ad[SV_FRAG_AD_LEN], flags = SV_F_ENC;
	uint64_t ctr;
	size_t n;

	h_setup(&s, 1, 0, 0x1111);
	peer_init(&pe, PEER_SESSION, 5000);
	n = peer_hb(&pe, d, 0x1111);
	CHECK_EQ(rx(&s, d, n, 1), SV_OK); /* a proven peer (version 5; before, any) */
	memset(unit, 0x33, 3000);
	CHECK_EQ(sv_seal_next(&pe, &ctr), 0);
	sv_frag_ad(ad, flags, SV_AEAD_AES256GCM, PEER_SESSION, ctr, 1, 3016, 3);
	CHECK_EQ(sv_seal_buf(&pe.ctl, SV_AEAD_AES256GCM, ctr, unit, 3000, ad, sizeof(ad)), 0);
	for (uint16_t i = 0; i < 3; i++) {
		size_t clen = i < 2 ? 1200 : 3016 - 2400;

		sv_piece_put(d, flags, SV_AEAD_AES256GCM, PEER_SESSION, ctr, 1, 3016, i, 3, clen);
		memcpy(d + sv_frag_over(1), unit + i * 1200, clen);
		CHECK_EQ(rx(&s, d, sv_frag_over(1) + clen, 2), SV_OK);
		for (uint32_t k = 0; i == 0 && k < 3 * SV_REASM_SLOTS; k++) {
			peer_init(&junk, 0x7000 + k, 1ull << 60);
			sv_piece_put(d, flags, SV_AEAD_AES256GCM, junk.session, 1ull << 60, k, 3016, 0,
				     3, 1200);
			rx(&s, d, sv_frag_over(1) + 1200, 2);
			sv_seal_free(&junk);
		}
	}
	CHECK_EQ(cap.n, 1);
	sv_seal_free(&pe);
	sv_free(&s);
}

/* A plaintext VNET unit of a 1000-byte frame whose header is vh. */
static enum sv_drop vnet_unit(struct sv *s, const struct virtio_net_hdr *vh)
{
	static uint8_t u[SV_VNET_LEN + 1000], d[1600];
	enum sv_drop r = SV_OK;

	memset(u, 0x44, sizeof(u));
	memcpy(u, vh, sizeof(*vh));
	for (uint16_t i = 0; i < 2 && !r; i++) {
		size_t clen = i ? sizeof(u) - 600 : 600;

		sv_piece_put(d, SV_F_VNET, 0, 0, 0, 9, sizeof(u), i, 2, clen);
		memcpy(d + sv_frag_over(0), u + i * 600, clen);
		r = rx(s, d, sv_frag_over(0) + clen, 1);
	}
	return r;
}

/* virtio_net_hdrs from the network: only offloads this side advertised, every
 * offset inside the frame */
static void test_vnet_from_net(void)
{
	static struct sv s;
	const struct virtio_net_hdr ok = {.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
					  .gso_type = VIRTIO_NET_HDR_GSO_TCPV4,
					  .hdr_len = 54, .gso_size = 900, .csum_start = 34,
					  .csum_offset = 16};
	struct virtio_net_hdr bad[7];
	int n = 0;

	for (int i = 0; i < 7; i++)
		bad[i] = ok;
	bad[0].gso_type = VIRTIO_NET_HDR_GSO_UDP;             /* UFO: never advertised */
	bad[1].gso_type = 5;                                  /* UDP_L4, not advertised here */
	bad[2].hdr_len = 1001;                                /* beyond the frame */
	bad[3].csum_start = 990;                              /* 990 + 16 + 2 > 1000 */
	bad[4].gso_size = 0;                                  /* GSO without a size */
	bad[5].gso_size = 1001;                               /* larger than the frame */
	bad[6].gso_type = VIRTIO_NET_HDR_GSO_ECN;             /* ECN without TCP */
	h_setup(&s, 0, 1, 0);
	CHECK_EQ(vnet_unit(&s, &ok), SV_OK);
	CHECK_EQ(cap.n, 1);
	for (int i = 0; i < 7; i++)
		n += vnet_unit(&s, &bad[i]) != SV_OK;
	CHECK_EQ(n, 7);
	CHECK_EQ(cap.n, 1);
#if SV_VERSION >= 5
	CHECK_EQ(s.ctr_rx.drop[SV_D_BAD_VNET], 7);
	/* UDP GSO where it is advertised (the kernel took USO) */
	s.tun_ok = TUN_F_USO4;
	CHECK_EQ(vnet_unit(&s, &bad[1]), SV_OK);
	CHECK_EQ(cap.n, 2);
#endif
	sv_free(&s);
}

void test_harden(void)
{
	test_restart_replay();
	test_trial_cap();
	test_reasm_spoofed();
	test_vnet_from_net();
}
