/* fixture.c - the unit tests' shared fixture (fixture.h) */
#include <arpa/inet.h>
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "pmtu.h"
#include "rx.h"

/* ---- stand-ins for the daemon's env.c ---- */
uint64_t fake_now;
int fake_yield_quick;
int warned;
uint64_t sv_now_ns(void) { return fake_now; }
int sv_spin_yield(uint64_t now) { (void)now; return fake_yield_quick; }
void sv_log(const struct sv *s, const char *fmt, ...) { (void)s; (void)fmt; }
void sv_warn(const char *fmt, ...) { (void)fmt; warned++; }

const uint8_t test_key[SV_KEY_LEN] = {
	0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42,
	0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42,
	0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42,
};

/* ---- a struct sv with a fake device and a fake socket ---- */
struct fx_cap cap;

/* flattens iov into out (at most max bytes); returns the total length */
size_t flatten(const struct iovec *iov, int n, uint8_t *out, size_t max)
{
	size_t len = 0;

	for (int i = 0; i < n; i++) {
		if (len < max)
			memcpy(out + len, iov[i].iov_base,
			       iov[i].iov_len < max - len ? iov[i].iov_len : max - len);
		len += iov[i].iov_len;
	}
	return len;
}

static int fake_deliver(struct sv *s, const struct iovec *iov, int n, int has_vnet)
{
	uint8_t tmp[70000];
	size_t len = flatten(iov, n, tmp, sizeof(tmp)), skip = has_vnet ? 10 : 0;

	(void)s;
	if (cap.n < 64) {
		cap.len[cap.n] = len - skip;
		cap.vnet[cap.n] = has_vnet;
		memcpy(cap.data[cap.n], tmp + skip, len - skip < 2048 ? len - skip : 2048);
	}
	cap.n++;
	return 0;
}

/* one datagram through the receive path, then settle (d is reused) */
enum sv_drop rx(struct sv *s, uint8_t *d, size_t n, uint64_t now)
{
	enum sv_drop r = sv_rx_datagram(s, &s->peers[0], d, n, now);

	sv_rx_settle(s);
	return r;
}

static int fake_send(struct sv *s, struct sv_peer *p, const uint8_t *d, size_t len)
{
	(void)s;
	(void)p;
	cap.ctl_sent++;
	memcpy(cap.ctl, d, len < sizeof(cap.ctl) ? len : sizeof(cap.ctl));
	cap.ctl_len = len;
	return 0;
}

int test_cipher = SV_AEAD_AES256GCM;

void addr4(struct sockaddr_storage *ss, const char *ip, uint16_t port)
{
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	a->sin_family = AF_INET;
	a->sin_port = htons(port);
	inet_pton(AF_INET, ip, &a->sin_addr);
}

void ident4(struct sv_ident *id, struct sockaddr_storage *ss, const char *ip)
{
	addr4(ss, ip, 6784);
	CHECK_EQ(sv_ident_of(id, ss), 0);
}

/* Makes s->seal's session the proven one of peer 0, through the receive path: a
 * HEARTBEAT that echoes it (the struct plays both sides, so the peer's session
 * is also "ours"). Leaves no other trace: the answer, the counters and what the
 * HEARTBEAT told are undone. */
void prove(struct sv *s)
{
	struct sv_peer *p = &s->peers[0];
	uint8_t d[128];
	int cipher = sv_seal_cipher(&s->seal);
	uint64_t c0 = s->seal.counter;
	size_t n;

	/* the HEARTBEAT and our answer take the two counters before c0 */
	s->seal.counter = c0 - 2;
	p->echo = s->seal.session;
	n = sv_build_heartbeat(s, p, d, 0);
	CHECK_EQ(sv_rx_datagram(s, p, d, n, 0), SV_OK);
	CHECK(sv_open_proven(&p->open, s->seal.session));
	CHECK_EQ(s->seal.counter, c0);
	memset(&cap, 0, sizeof(cap));
	memset(&s->ctr_rx, 0, sizeof(s->ctr_rx));
	p->heard = p->aead_skip = p->aead_told = 0;
	p->caps = p->aead_acc = p->aead_fast = 0;
	p->last_heard_ns = p->echo = p->echo_ctr = 0;
	s->seal.cipher = cipher;
	s->tso = 0;
}

void sv_free(struct sv *s)
{
	for (int i = 0; i < SV_MAX_PEERS; i++) {
		sv_reasm_free(&s->peers[i].reasm);
		sv_open_free(&s->peers[i].open);
	}
	sv_seal_free(&s->seal); /* also when a test turned enc off */
}

void sv_fixture(struct sv *s, const uint8_t key[SV_KEY_LEN], int enc, int l3, int vnet,
		struct sv_ident *peer)
{
	sv_free(s);
	memset(s, 0, sizeof(*s));
	memset(&cap, 0, sizeof(cap));
	s->enc = enc;
	s->l3 = l3;
	s->vnet = vnet;
	s->mtu = 1500;
	s->npeers = 1;
	s->peers[0].pmtu = 1472;
	addr4(&s->peers[0].addr, "198.18.0.1", 6784);
	s->peers[0].alen = sizeof(struct sockaddr_in);
	s->deliver = fake_deliver;
	s->send_ctl = fake_send;
	s->tap_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	memcpy(s->master, key, SV_KEY_LEN);
	CHECK_EQ(sv_ident_of(peer, &s->peers[0].addr), 0);
	sv_open_init(&s->peers[0].open, peer);
	if (enc)
		s->aead_acc = s->aead_fast = SV_AEAD_ALL;
}

/* One peer, 198.18.0.1:6784. The sv seals *as that peer* (its address in the
 * key derivation), so that what it seals opens as coming from the peer: the
 * tests play both sides with one struct. */
void sv_setup(struct sv *s, int enc, int l3, int vnet, uint64_t session)
{
	struct sv_ident id;

	sv_fixture(s, test_key, enc, l3, vnet, &id);
	if (enc) {
		CHECK_EQ(sv_seal_init(&s->seal, test_key, session, 1000, &id, test_cipher), 0);
		prove(s);
	}
}

uint64_t drops(struct sv *s, enum sv_drop d)
{
	return s->ctr_rx.drop[d];
}

/* ---- the sending side, as the tests build it ---- */
size_t mk_data(struct sv *s, uint8_t *d, const uint8_t *f1, size_t l1, const uint8_t *f2,
	       size_t l2)
{
	static uint8_t tmp[1472 + SV_PACK_SLACK];
	struct sv_packer pk;
	size_t n;

	/* one frame comes out SINGLE, two as a batch; either way it ends up at d */
	sv_pack_begin(&pk, tmp, 1472, (uint8_t)((s->enc ? SV_F_ENC : 0) | (s->l3 ? SV_F_L3 : 0)));
	sv_pack_add(&pk, f1, l1);
	if (f2)
		sv_pack_add(&pk, f2, l2);
	n = sv_pack_finish(&pk);
	if (s->enc)
		n = sv_seal_ctl(&s->seal, pk.dgram, pk.blen);
	memcpy(d, pk.dgram, n);
	return n;
}

/* Piece idx of a unit of total bytes cut at csize, as the sender makes it: with
 * a key the unit is sealed once (one counter) and the pieces cut its stream
 * (ciphertext || tag). Successive calls for the same unit reuse its sealing. */
size_t mk_piece(struct sv *s, uint8_t *d, uint8_t flags, uint32_t id, const uint8_t *unit,
		size_t total, size_t csize, uint16_t idx, uint16_t cnt)
{
	static uint8_t stream[SV_MAX_STREAM];
	static struct {
		uint64_t session, ctr, next;
		uint32_t id;
		uint8_t flags, aead;
		size_t total;
	} last;
	size_t slen = total + (s->enc ? SV_TAG_LEN : 0);
	size_t off = (size_t)idx * csize, clen = idx == cnt - 1 ? slen - off : csize;
	size_t hlen = sv_frag_over(s->enc);
	const uint8_t *src = unit;

	flags |= (uint8_t)((s->enc ? SV_F_ENC : 0) | (s->l3 ? SV_F_L3 : 0));
	if (s->enc) {
		if (!(last.session == s->seal.session && last.id == id && last.flags == flags &&
		      last.total == total && last.next == s->seal.counter &&
		      last.aead == sv_seal_cipher(&s->seal))) {
			uint8_t ad[SV_FRAG_AD_LEN];

			CHECK_EQ(sv_seal_next(&s->seal, &last.ctr), 0);
			last.next = s->seal.counter;
			last.session = s->seal.session;
			last.aead = (uint8_t)sv_seal_cipher(&s->seal);
			last.id = id;
			last.flags = flags;
			last.total = total;
			memcpy(stream, unit, total);
			sv_frag_ad(ad, flags, last.aead, s->seal.session, last.ctr, id, (uint32_t)slen, cnt);
			CHECK_EQ(sv_seal_buf(&s->seal.ctl, last.aead, last.ctr, stream, total, ad,
					     sizeof(ad)),
				 0);
		}
		src = stream;
	}
	sv_piece_put(d, flags, s->enc ? last.aead : 0, s->seal.session, s->enc ? last.ctr : 0, id,
		     (uint32_t)slen, idx, cnt, clen);
	memcpy(d + hlen, src + off, clen);
	return hlen + clen;
}

/* one's complement sum, not inverted (reference, byte by byte) */
uint32_t ref_sum(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

/* An Ethernet + IPv4/IPv6 + TCP (12 bytes of options) super-frame with plen
 * bytes of payload and consistent lengths; returns its length. */
size_t make_super(uint8_t *f, int v6, size_t plen, uint8_t flags)
{
	size_t iphl = v6 ? 40 : 20, hl = SV_ETH_HLEN + iphl + 32, len = hl + plen;
	uint8_t *ip = f + SV_ETH_HLEN, *th = ip + iphl;

	memset(f, 0, hl);
	memcpy(f, "\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01", 12);
	sv_put16(f + 12, v6 ? 0x86dd : 0x0800);
	if (!v6) {
		ip[0] = 0x45;
		sv_put16(ip + 2, (uint16_t)(len - SV_ETH_HLEN));
		sv_put16(ip + 4, 0x1000);
		sv_put16(ip + 6, 0x4000); /* DF */
		ip[8] = 64;
		ip[9] = 6;
		memcpy(ip + 12, "\xc6\x12\x40\x0b\xc6\x12\x40\x0c", 8);
		sv_put16(ip + 10, (uint16_t)~ref_sum(ip, 20, 0));
	} else {
		ip[0] = 0x60;
		sv_put16(ip + 4, (uint16_t)(len - SV_ETH_HLEN - 40));
		ip[6] = 6;
		ip[7] = 64;
		ip[8] = 0x20; /* 2001:db8::1 -> ::2 (documentation addresses, never sent) */
		ip[9] = 0x01;
		ip[10] = 0x0d;
		ip[11] = 0xb8;
		memcpy(ip + 24, ip + 8, 16);
		ip[23] = 1;
		ip[39] = 2;
	}
	sv_put16(th, 40000);
	sv_put16(th + 2, 5201);
	sv_put32(th + 4, 0xfffff000u); /* wraps around inside the frame */
	sv_put32(th + 8, 77);
	th[12] = 8 << 4;
	th[13] = flags;
	sv_put16(th + 14, 502);
	memcpy(th + 20, "\x01\x01\x08\x0a\x00\x00\x00\x01\x00\x00\x00\x02", 12);
	for (size_t i = 0; i < plen; i++)
		f[hl + i] = (uint8_t)(i * 7 + 3);
	return len;
}
