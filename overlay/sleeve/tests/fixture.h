/* fixture.h - what the unit tests share: the daemon's env.c replaced (a clock
 * the tests move, logs they count), a struct sv with a fake device and a fake
 * socket that capture what they get, and the sending side as the tests build
 * it (DATA datagrams, FRAG pieces, TCP super-frames) */
#ifndef SLEEVE_TEST_FIXTURE_H
#define SLEEVE_TEST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "sleeve.h"

/* env.c's stand-ins: sv_now_ns() returns fake_now (0 unless a test moves it),
 * sv_spin_yield() fake_yield_quick (1: nobody else wanted the CPU); sv_warn
 * counts its lines in warned, sv_log prints nothing */
extern uint64_t fake_now;
extern int fake_yield_quick;
extern int warned;

extern const uint8_t test_key[SV_KEY_LEN];
/* the AEAD the tests seal with (they run under each) */
extern int test_cipher;

/* What the fake device got (frames) and the fake socket sent (control). */
struct fx_cap {
	int n;
	size_t len[64];
	int vnet[64];
	uint8_t data[64][2048];
	int ctl_sent;
	uint8_t ctl[2048];
	size_t ctl_len;
};
extern struct fx_cap cap;

/* flattens iov into out (at most max bytes); returns the total length */
size_t flatten(const struct iovec *iov, int n, uint8_t *out, size_t max);
/* ip:port as an IPv4 address */
void addr4(struct sockaddr_storage *ss, const char *ip, uint16_t port);
/* ip:6784 into ss, and the sender identity it makes (checked) */
void ident4(struct sv_ident *id, struct sockaddr_storage *ss, const char *ip);

/* A struct sv with one peer, 198.18.0.1:6784, ready to receive from it: key
 * as the master key, the peer's opening state, the fake device and socket
 * (cap emptied), and with enc both AEADs accepted; nothing sealed yet. *peer:
 * the peer's identity. Frees what s held before. */
void sv_fixture(struct sv *s, const uint8_t key[SV_KEY_LEN], int enc, int l3, int vnet,
		struct sv_ident *peer);
/* sv_fixture with test_key, and with enc sealing as that peer (its address in
 * the key derivation) under test_cipher, session proven: what the sv seals
 * opens as coming from the peer, so the tests play both sides with one struct. */
void sv_setup(struct sv *s, int enc, int l3, int vnet, uint64_t session);
/* Makes s->seal's session the proven one of peer 0 through the receive path,
 * leaving no other trace. */
void prove(struct sv *s);
void sv_free(struct sv *s);
/* the receive side's drops of one reason */
uint64_t drops(struct sv *s, enum sv_drop d);
/* one datagram from peer 0 through the receive path, then settle (d is reused) */
enum sv_drop rx(struct sv *s, uint8_t *d, size_t n, uint64_t now);

/* One DATA datagram of s's kind carrying f1 (and f2): SINGLE or a batch, sealed
 * with a key; written to d, its length returned. */
size_t mk_data(struct sv *s, uint8_t *d, const uint8_t *f1, size_t l1, const uint8_t *f2,
	       size_t l2);
/* FRAG piece idx of a unit, as the sender makes it (sealed once with a key). */
size_t mk_piece(struct sv *s, uint8_t *d, uint8_t flags, uint32_t id, const uint8_t *unit,
		size_t total, size_t csize, uint16_t idx, uint16_t cnt);
/* one's complement sum, not inverted (reference, byte by byte) */
uint32_t ref_sum(const uint8_t *p, size_t n, uint32_t sum);
/* An Ethernet + IPv4/IPv6 + TCP super-frame with plen bytes of payload. */
size_t make_super(uint8_t *f, int v6, size_t plen, uint8_t flags);

#endif
