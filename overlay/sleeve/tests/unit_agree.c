/* unit_agree.c - agree.c through the receive path: the AEAD a receiver accepts,
 * the one both sides agree on from heartbeats, a peer refused and said once */
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "pmtu.h"
#include "unit.h"

/* ---- the AEAD at the receiver: refused frames, agreed by heartbeats ---- */

/* A heartbeat as a peer with these masks sends it (the sv plays the peer). */
static size_t peer_heartbeat(struct sv *s, uint8_t *d, unsigned acc, unsigned fast)
{
	unsigned a = s->aead_acc, f = s->aead_fast;
	size_t n;

	s->aead_acc = acc;
	s->aead_fast = fast;
	n = sv_build_heartbeat(s, &s->peers[0], d, 0);
	s->aead_acc = a;
	s->aead_fast = f;
	return n;
}

void test_rx_cipher(void)
{
	static struct sv s;
	static uint8_t d[4096], unit[3000];
	const unsigned aes = SV_AEAD_BIT(SV_AEAD_AES256GCM), chacha = SV_AEAD_BIT(SV_AEAD_CHACHA20POLY1305);
	int other = test_cipher == SV_AEAD_AES256GCM ? SV_AEAD_CHACHA20POLY1305 : SV_AEAD_AES256GCM;
	uint8_t f1[60];
	size_t n;

	memset(f1, 1, sizeof(f1));
	memset(unit, 3, sizeof(unit));
	/* a receiver that accepts only the other AEAD: frames are refused and
	 * counted before anything is opened or reassembled */
	sv_setup(&s, 1, 0, 1, 21);
	s.aead_acc = SV_AEAD_BIT(other);
	s.cipher_flag = other;
	n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
	CHECK_EQ(rx(&s, d, n, 1), SV_D_CIPHER_MISMATCH);
	for (uint16_t i = 0; i < 3; i++) {
		n = mk_piece(&s, d, SV_F_VNET, 5, unit, 3000, 1200, i, 3);
		CHECK_EQ(rx(&s, d, n, 1), SV_D_CIPHER_MISMATCH);
	}
	CHECK_EQ(cap.n, 0);
	CHECK_EQ(drops(&s, SV_D_CIPHER_MISMATCH), 4);
	CHECK_EQ(s.ctr_rx.c[SV_C_RX_FRAGS], 0);
	CHECK_EQ(s.peers[0].open.win.top, s.seal.counter - 4); /* where prove() left it */
	/* its peer accepts only ours: the heartbeat opens (control under either),
	 * the peer is refused, said once, and nothing is sealed in plaintext */
	warned = 0;
	n = peer_heartbeat(&s, d, SV_AEAD_BIT(test_cipher), SV_AEAD_ALL);
	CHECK_EQ(rx(&s, d, n, 2), SV_OK);
	CHECK_EQ(s.peers[0].heard, 1);
	CHECK_EQ(s.peers[0].aead_acc, SV_AEAD_BIT(test_cipher));
	CHECK_EQ(sv_peer_skipped(&s.peers[0]), 1);
	CHECK_EQ(sv_seal_cipher(&s.seal), other);
	CHECK_EQ(warned, 1);
	n = peer_heartbeat(&s, d, SV_AEAD_BIT(test_cipher), SV_AEAD_ALL);
	CHECK_EQ(rx(&s, d, n, 3), SV_OK);
	CHECK_EQ(warned, 1);
	/* the peer comes back with auto: agreed, no longer refused */
	n = peer_heartbeat(&s, d, SV_AEAD_ALL, SV_AEAD_ALL);
	CHECK_EQ(rx(&s, d, n, 4), SV_OK);
	CHECK_EQ(sv_peer_skipped(&s.peers[0]), 0);
	CHECK_EQ(sv_seal_cipher(&s.seal), other);

	/* auto here: what the peer says decides */
	sv_setup(&s, 1, 0, 1, 22);
	n = peer_heartbeat(&s, d, chacha, SV_AEAD_ALL);
	CHECK_EQ(rx(&s, d, n, 1), SV_OK);
	CHECK_EQ(sv_seal_cipher(&s.seal), SV_AEAD_CHACHA20POLY1305);
	n = peer_heartbeat(&s, d, SV_AEAD_ALL, chacha); /* no AES-NI there */
	CHECK_EQ(rx(&s, d, n, 2), SV_OK);
	CHECK_EQ(sv_seal_cipher(&s.seal), SV_AEAD_CHACHA20POLY1305);
	n = peer_heartbeat(&s, d, SV_AEAD_ALL, SV_AEAD_ALL);
	CHECK_EQ(rx(&s, d, n, 3), SV_OK);
	CHECK_EQ(sv_seal_cipher(&s.seal), SV_AEAD_AES256GCM);
	n = peer_heartbeat(&s, d, aes, chacha); /* forced AES there, even without AES-NI */
	CHECK_EQ(rx(&s, d, n, 4), SV_OK);
	CHECK_EQ(sv_seal_cipher(&s.seal), SV_AEAD_AES256GCM);
	CHECK_EQ(sv_peer_skipped(&s.peers[0]), 0);
	/* frames under either AEAD open at an auto receiver */
	cap.n = 0;
	for (int c = SV_AEAD_AES256GCM; c <= SV_AEAD_CHACHA20POLY1305; c++) {
		__atomic_store_n(&s.seal.cipher, c, __ATOMIC_RELAXED);
		n = mk_data(&s, d, f1, sizeof(f1), NULL, 0);
		CHECK_EQ(d[5], c);
		CHECK_EQ(rx(&s, d, n, 5), SV_OK);
	}
	CHECK_EQ(cap.n, 2);
	/* a heartbeat shorter than version 4's is refused */
	sv_setup(&s, 0, 0, 1, 0);
	n = sv_build_heartbeat(&s, &s.peers[0], d, 0);
	CHECK_EQ(n, 8 + SV_HB_LEN);
	CHECK(d[8 + 8] == 0 && d[8 + 9] == 0); /* no AEADs without a key */
	sv_put16(d + 6, 8);
	CHECK_EQ(rx(&s, d, 16, 1), SV_D_BAD_LENGTH);
	CHECK_EQ(s.peers[0].heard, 0);
	sv_setup(&s, 0, 0, 0, 0);
}
