/* unit_harden.c - what a hostile network may try on the receive path: a restarted
 * receiver fed a recording, sessions made up to cost key derivations, pieces that
 * disturb reassembly, virtio_net_hdrs that do not fit their frame. A receiver
 * (198.18.0.2) and its peer (198.18.0.1) as two separate sealing sides. */
#include <arpa/inet.h>
#include <linux/virtio_net.h>
#include <string.h>

#include "check.h"
#include "rx.h"
#include "sleeve.h"
#include "tap.h"

#define PEER_SESSION 0xa1a1a1a1a1a1a1a1ull

static const uint8_t key[SV_KEY_LEN] = {
	7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
};
static int delivered, answered;

static int h_deliver(struct sv *s, const struct iovec *iov, int n, int has_vnet)
{
	(void)s;
	(void)iov;
	(void)n;
	(void)has_vnet;
	delivered++;
	return 0;
}

static int h_send(struct sv *s, struct sv_peer *p, const uint8_t *d, size_t len)
{
	(void)s;
	(void)p;
	(void)d;
	(void)len;
	answered++;
	return 0;
}

static void ident4(struct sv_ident *id, struct sockaddr_storage *ss, const char *ip)
{
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	a->sin_family = AF_INET;
	a->sin_port = htons(6784);
	inet_pton(AF_INET, ip, &a->sin_addr);
	CHECK_EQ(sv_ident_of(id, ss), 0);
}

static void h_free(struct sv *s)
{
	sv_reasm_free(&s->peers[0].reasm);
	sv_open_free(&s->peers[0].open);
	if (s->enc)
		sv_seal_free(&s->seal);
}

/* The receiver: session own (with a key), L2, one peer. */
static void h_setup(struct sv *s, int enc, int vnet, uint64_t own)
{
	struct sockaddr_storage me;
	struct sv_ident id, mine;

	memset(s, 0, sizeof(*s));
	s->enc = enc;
	s->vnet = vnet;
	s->mtu = 3000;
	s->npeers = 1;
	s->peers[0].pmtu = 1472;
	s->peers[0].alen = sizeof(struct sockaddr_in);
	s->deliver = h_deliver;
	s->send_ctl = h_send;
	s->tap_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	memcpy(s->master, key, SV_KEY_LEN);
	ident4(&id, &s->peers[0].addr, "198.18.0.1");
	sv_open_init(&s->peers[0].open, &id);
	ident4(&mine, &me, "198.18.0.2");
	if (enc) {
		s->aead_acc = s->aead_fast = SV_AEAD_ALL;
		CHECK_EQ(sv_seal_init(&s->seal, key, own, 1000, &mine, SV_AEAD_AES256GCM), 0);
	}
	delivered = answered = 0;
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

static enum sv_drop rx1(struct sv *s, uint8_t *d, size_t n, uint64_t now)
{
	enum sv_drop r = sv_rx_datagram(s, &s->peers[0], d, n, now);

	sv_rx_settle(s);
	return r;
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
		CHECK_EQ(rx1(&s, d, n[i], 1), SV_OK);
	}
	CHECK_EQ(delivered, 2); /* the first run: proven by the echo, DATA delivered */
	h_free(&s);
	h_setup(&s, 1, 0, 0x2222); /* restarted: same key, new session */
	for (int i = 0; i < 3; i++) {
		memcpy(d, rec[i], n[i]);
		rx1(&s, d, n[i], 2);
	}
	CHECK_EQ(delivered, 0);
#if SV_VERSION >= 5
	CHECK_EQ(s.ctr_rx.drop[SV_D_UNPROVEN_SESSION], 2);
	CHECK(!sv_open_proven(&s.peers[0].open, PEER_SESSION));
	/* the live peer learns the new session (from our HEARTBEAT) and echoes it */
	n[3] = peer_hb(&pe, rec[3], 0x2222);
	CHECK_EQ(rx1(&s, rec[3], n[3], 3), SV_OK);
	CHECK(sv_open_proven(&s.peers[0].open, PEER_SESSION));
	n[3] = peer_data(&pe, rec[3]);
	CHECK_EQ(rx1(&s, rec[3], n[3], 3), SV_OK);
	CHECK_EQ(delivered, 1);
	/* and the recording stays refused: its counters precede the proof */
	memcpy(d, rec[2], n[2]);
	CHECK_EQ(rx1(&s, d, n[2], 3), SV_D_REPLAY);
	CHECK_EQ(delivered, 1);
#endif
	sv_seal_free(&pe);
	h_free(&s);
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
		rx1(&s, d, n, 1000000000ull + i); /* all within one second */
		sv_seal_free(&pe);
	}
	CHECK_EQ(delivered, 0);
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
	CHECK_EQ(rx1(&s, d, n, 2000000001ull), SV_OK);
	CHECK(sv_open_proven(&s.peers[0].open, PEER_SESSION));
	CHECK_EQ(s.peers[0].open.derived, SV_TRIALS_PER_S + 1);
	n = peer_data(&pe, d);
	CHECK_EQ(rx1(&s, d, n, 2000000002ull), SV_OK);
	CHECK_EQ(delivered, 1);
	CHECK_EQ(s.peers[0].open.derived, SV_TRIALS_PER_S + 1); /* its key came along */
	sv_seal_free(&pe);
#endif
	h_free(&s);
}

static struct sv_frag piece(uint32_t id, uint64_t ctr, uint32_t total, uint16_t idx,
			    const uint8_t *data)
{
	struct sv_frag f = {.id = id, .total = total, .index = idx, .count = 4, .ctr = ctr};

	f.chunk = data + (size_t)idx * 1000;
	f.clen = idx == 3 ? total - 3000 : 1000;
	return f;
}

/* A piece that disagrees with its unit is dropped alone; units with one frame
 * id but other counters are different units. */
static void test_reasm_keyed(void)
{
	static struct sv_reasm r;
	static uint8_t data[4000];
	struct sv_unit u;
	struct sv_frag f;
	int done = 0;

	for (int i = 0; i < 4; i++) {
		f = piece(1, 50, 3500, (uint16_t)i, data);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
		if (i == 1) { /* a guessed id with another total: dropped, unit kept */
			f = piece(1, 50, 3600, 2, data);
			CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
		}
		done += u.n > 0 && u.len == 3500;
	}
	CHECK_EQ(done, 1);
	/* two units, one id, two counters, interleaved: both complete */
	done = 0;
	for (int i = 0; i < 4; i++)
		for (uint64_t c = 60; c < 62; c++) {
			f = piece(2, c, 3500, (uint16_t)i, data);
			CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
			done += u.n > 0 && u.len == 3500;
		}
	CHECK_EQ(done, 2);
	CHECK_EQ(r.evicted, 0);
#if SV_VERSION >= 5
	/* untrusted pieces never evict trusted units */
	for (uint32_t id = 10; id < 10 + SV_REASM_SLOTS; id++) {
		f = piece(id, 70, 3500, 0, data);
		f.trusted = 1;
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 20, &u), SV_OK);
	}
	for (uint32_t id = 100; id < 120; id++) {
		f = piece(id, 80, 3500, 0, data);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 30, &u), SV_D_REASM_EVICTED);
	}
	CHECK_EQ(r.evicted, 0);
	for (uint32_t id = 10; id < 10 + SV_REASM_SLOTS; id++) {
		int got = 0;

		for (int i = 1; i < 4; i++) {
			f = piece(id, 70, 3500, (uint16_t)i, data);
			f.trusted = 1;
			CHECK_EQ(sv_reasm_add(&r, &f, 0, 40, &u), SV_OK);
			got += u.n > 0;
		}
		CHECK_EQ(got, 1);
	}
#endif
	sv_reasm_free(&r);
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
	CHECK_EQ(rx1(&s, d, n, 1), SV_OK); /* a proven peer (version 5; before, any) */
	memset(unit, 0x33, 3000);
	CHECK_EQ(sv_seal_next(&pe, &ctr), 0);
	sv_frag_ad(ad, flags, SV_AEAD_AES256GCM, PEER_SESSION, ctr, 1, 3016, 3);
	CHECK_EQ(sv_seal_buf(&pe.ctl, SV_AEAD_AES256GCM, ctr, unit, 3000, ad, sizeof(ad)), 0);
	for (uint16_t i = 0; i < 3; i++) {
		size_t clen = i < 2 ? 1200 : 3016 - 2400;

		sv_piece_put(d, flags, SV_AEAD_AES256GCM, PEER_SESSION, ctr, 1, 3016, i, 3, clen);
		memcpy(d + sv_frag_over(1), unit + i * 1200, clen);
		CHECK_EQ(rx1(&s, d, sv_frag_over(1) + clen, 2), SV_OK);
		for (uint32_t k = 0; i == 0 && k < 3 * SV_REASM_SLOTS; k++) {
			peer_init(&junk, 0x7000 + k, 1ull << 60);
			sv_piece_put(d, flags, SV_AEAD_AES256GCM, junk.session, 1ull << 60, k, 3016, 0,
				     3, 1200);
			rx1(&s, d, sv_frag_over(1) + 1200, 2);
			sv_seal_free(&junk);
		}
	}
	CHECK_EQ(delivered, 1);
	sv_seal_free(&pe);
	h_free(&s);
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
		r = rx1(s, d, sv_frag_over(0) + clen, 1);
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
	CHECK_EQ(delivered, 1);
	for (int i = 0; i < 7; i++)
		n += vnet_unit(&s, &bad[i]) != SV_OK;
	CHECK_EQ(n, 7);
	CHECK_EQ(delivered, 1);
#if SV_VERSION >= 5
	CHECK_EQ(s.ctr_rx.drop[SV_D_BAD_VNET], 7);
	/* UDP GSO where it is advertised (the kernel took USO) */
	s.tun_ok = TUN_F_USO4;
	CHECK_EQ(vnet_unit(&s, &bad[1]), SV_OK);
	CHECK_EQ(delivered, 2);
#endif
	h_free(&s);
}

void test_harden(void)
{
	test_restart_replay();
	test_trial_cap();
	test_reasm_keyed();
	test_reasm_spoofed();
	test_vnet_from_net();
}
