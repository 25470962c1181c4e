/* unit.c - unit tests of the wire format, batching, reassembly, the rx path
 * (plain and sealed under both AEADs, the cipher agreed by heartbeats), the
 * receive entry and the send thread; the AEAD layer is in unit_aead.c.
 * `unit --write-corpus DIR` and `unit --write-sock-corpus DIR` write fuzz seeds
 * instead. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_net.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "frame.h"
#include "reasm.h"
#include "crypto.h"
#include "seg.h"
#include "gro.h"
#include "pmtu.h"
#include "rx.h"
#include "sleeve.h"
#include "spin.h"
#include "tx.h"

int failures, checks;

/* stubs of what the daemon's env.c provides */
static uint64_t fake_now;   /* sv_now_ns(), 0 unless a test moves it */
static int fake_yield_quick; /* sv_spin_yield(): nobody else wanted the CPU */
uint64_t sv_now_ns(void) { return fake_now; }
int sv_spin_yield(uint64_t now) { (void)now; return fake_yield_quick; }
void sv_log(const struct sv *s, const char *fmt, ...) { (void)s; (void)fmt; }
static int warned; /* sv_warn lines: a refused peer is said once */
void sv_warn(const char *fmt, ...) { (void)fmt; warned++; }

static const uint8_t test_key[SV_KEY_LEN] = {
	0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42,
	0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42,
	0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42,
};

/* ---- a struct sv with a fake device and a fake socket ---- */
static struct {
	int n;
	size_t len[64];
	int vnet[64];
	uint8_t data[64][2048];
	int ctl_sent;
	uint8_t ctl[2048];
	size_t ctl_len;
} cap;

/* flattens iov into out (at most max bytes); returns the total length */
static size_t flatten(const struct iovec *iov, int n, uint8_t *out, size_t max)
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
static enum sv_drop rx(struct sv *s, uint8_t *d, size_t n, uint64_t now)
{
	enum sv_drop r = sv_rx_datagram(s, &s->peers[0], d, n, now);

	sv_rx_settle(s);
	return r;
}

static int unit_eq(const struct sv_unit *u, const uint8_t *want, size_t len)
{
	static uint8_t tmp[70000];

	return u->n > 0 && u->len == len && flatten(u->iov, u->n, tmp, sizeof(tmp)) == len &&
	       !memcmp(tmp, want, len);
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

/* the AEAD the tests seal with (they run under each) */
static int test_cipher = SV_AEAD_AES256GCM;

static void addr4(struct sockaddr_storage *ss, const char *ip, uint16_t port)
{
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	a->sin_family = AF_INET;
	a->sin_port = htons(port);
	inet_pton(AF_INET, ip, &a->sin_addr);
}

/* Makes s->seal's session the proven one of peer 0, through the receive path: a
 * HEARTBEAT that echoes it (the struct plays both sides, so the peer's session
 * is also "ours"). Leaves no other trace: the answer, the counters and what the
 * HEARTBEAT told are undone. */
static void prove(struct sv *s)
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

static void sv_free(struct sv *s)
{
	for (int i = 0; i < SV_MAX_PEERS; i++) {
		sv_reasm_free(&s->peers[i].reasm);
		sv_open_free(&s->peers[i].open);
	}
	sv_seal_free(&s->seal); /* also when a test turned enc off */
}

/* One peer, 198.18.0.1:6784. The sv seals *as that peer* (its address in the
 * key derivation), so that what it seals opens as coming from the peer: the
 * tests play both sides with one struct. */
static void sv_setup(struct sv *s, int enc, int l3, int vnet, uint64_t session)
{
	struct sv_ident id;

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
	memcpy(s->master, test_key, SV_KEY_LEN);
	CHECK_EQ(sv_ident_of(&id, &s->peers[0].addr), 0);
	sv_open_init(&s->peers[0].open, &id);
	if (enc) {
		s->aead_acc = s->aead_fast = SV_AEAD_ALL;
		CHECK_EQ(sv_seal_init(&s->seal, test_key, session, 1000, &id, test_cipher), 0);
		prove(s);
	}
}

static uint64_t drops(struct sv *s, enum sv_drop d)
{
	return s->ctr_rx.drop[d];
}

/* ---- header ---- */
static void test_hdr(void)
{
	uint8_t d[64];
	struct sv_hdr h;

	sv_hdr_put(d, SV_T_DATA, SV_F_L3, 10);
	memset(d + 8, 0xaa, 10);
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_OK);
	CHECK_EQ(h.type, SV_T_DATA);
	CHECK_EQ(h.flags, SV_F_L3);
	CHECK_EQ(h.len, 10);
	for (size_t n = 0; n < 8; n++)
		CHECK_EQ(sv_hdr_parse(d, n, &h), SV_D_TRUNCATED);
	CHECK_EQ(sv_hdr_parse(d, 17, &h), SV_D_TRUNCATED);
	CHECK_EQ(sv_hdr_parse(d, 19, &h), SV_D_BAD_LENGTH);
	d[0] ^= 1;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_MAGIC);
	d[0] ^= 1;
	d[1] ^= 0x80;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_MAGIC);
	d[1] ^= 0x80;
	d[2] = 0;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_VERSION);
	/* version 1 had no SINGLE form, 2 sealed every FRAG piece, 3 had no aead
	 * byte and libsodium's keys: refused, not misread */
	for (uint8_t v = 1; v <= 5; v++) {
		if (v == SV_VERSION)
			continue;
		d[2] = v;
		CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_VERSION);
	}
	d[2] = SV_VERSION;
	d[3] = 0;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_TYPE);
	d[3] = 6;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_TYPE);
	d[3] = SV_T_DATA;
	d[4] = 0x10;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	d[4] = 0x80;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	d[4] = SV_F_VNET; /* VNET only on FRAG */
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	d[4] = SV_F_SINGLE | SV_F_VNET; /* SINGLE with a FRAG-only flag */
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	d[4] = SV_F_SINGLE;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_OK);
	CHECK_EQ(h.flags, SV_F_SINGLE);
	/* SINGLE only on DATA: not on FRAG (even with VNET) nor on control types */
	for (uint8_t t = SV_T_FRAG; t <= SV_T_PROBE_ACK; t++) {
		d[3] = t;
		CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	}
	d[3] = SV_T_FRAG;
	d[4] = SV_F_SINGLE | SV_F_VNET;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	d[3] = SV_T_DATA;
	/* DATA with an empty body, SINGLE or not */
	sv_hdr_put(d, SV_T_DATA, SV_F_SINGLE, 0);
	CHECK_EQ(sv_hdr_parse(d, 8, &h), SV_D_BAD_LENGTH);
	sv_hdr_put(d, SV_T_DATA, 0, 0);
	CHECK_EQ(sv_hdr_parse(d, 8, &h), SV_D_BAD_LENGTH);
	sv_hdr_put(d, SV_T_DATA, SV_F_SINGLE | SV_F_ENC, 0);
	d[5] = SV_AEAD_AES256GCM;
	CHECK_EQ(sv_hdr_parse(d, 8 + 32, &h), SV_D_BAD_LENGTH);
	/* the aead byte: 0 without ENC; an AEAD's id with it */
	sv_hdr_put(d, SV_T_DATA, SV_F_L3, 10);
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_OK);
	CHECK_EQ(h.aead, 0);
	for (int v = 1; v < 256; v++) {
		d[5] = (uint8_t)v;
		CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	}
	sv_hdr_put(d, SV_T_DATA, SV_F_ENC, 10);
	for (int v = 0; v < 256; v++) {
		d[5] = (uint8_t)v;
		CHECK_EQ(sv_hdr_parse(d, 50, &h),
			 v == SV_AEAD_AES256GCM || v == SV_AEAD_CHACHA20POLY1305 ? SV_OK : SV_D_BAD_FLAGS);
	}
	d[5] = SV_AEAD_CHACHA20POLY1305;
	CHECK_EQ(sv_hdr_parse(d, 50, &h), SV_OK);
	CHECK_EQ(h.aead, SV_AEAD_CHACHA20POLY1305);
	/* sealed: 32 more bytes are expected */
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_TRUNCATED);
	CHECK_EQ(sv_hdr_parse(d, 50, &h), SV_OK);
	CHECK_EQ(sv_hdr_parse(d, 49, &h), SV_D_TRUNCATED);
	CHECK_EQ(sv_hdr_parse(d, 51, &h), SV_D_BAD_LENGTH);
	/* a sealed FRAG piece: session and counter, no tag of its own */
	sv_hdr_put(d, SV_T_FRAG, SV_F_ENC, 20);
	d[5] = SV_AEAD_AES256GCM;
	CHECK_EQ(sv_hdr_parse(d, 8 + 16 + 20, &h), SV_OK);
	CHECK_EQ(sv_hdr_parse(d, 8 + 16 + 19, &h), SV_D_TRUNCATED);
	CHECK_EQ(sv_hdr_parse(d, 8 + 16 + 20 + 16, &h), SV_D_BAD_LENGTH);
}

/* ---- batching ---- */
static void test_pack(void)
{
	uint8_t buf[2048 + SV_PACK_SLACK], frame[1500];
	struct sv_packer pk;
	size_t cap = 1472, maxf = sv_pack_max_frame(cap, 0), len;
	const uint8_t *cur, *end, *f;
	unsigned nrec;
	size_t flen;
	struct sv_hdr h;

	for (size_t i = 0; i < sizeof(frame); i++)
		frame[i] = (uint8_t)i;
	/* one frame: no record length, so 8 bytes of header only */
	CHECK_EQ(maxf, 1472 - 8);
	CHECK_EQ(sv_pack_max_frame(cap, 1), 1472 - 8 - 32);
	/* exact fit of a single frame; nothing more fits beside it */
	sv_pack_begin(&pk, buf, cap, 0);
	CHECK_EQ(sv_pack_add(&pk, frame, maxf), 1);
	CHECK_EQ(sv_pack_add(&pk, frame, 1), 0);
	len = sv_pack_finish(&pk);
	CHECK_EQ(len, cap);
	CHECK(pk.dgram == buf + SV_REC_HDR);
	CHECK_EQ(pk.blen, maxf);
	CHECK_EQ(sv_hdr_parse(pk.dgram, len, &h), SV_OK);
	CHECK_EQ(h.flags, SV_F_SINGLE);
	CHECK_EQ(h.len, maxf);
	CHECK(!memcmp(pk.dgram + 8, frame, maxf));
	/* one byte over does not fit an empty datagram */
	sv_pack_begin(&pk, buf, cap, 0);
	CHECK_EQ(sv_pack_add(&pk, frame, maxf + 1), 0);
	CHECK_EQ(sv_pack_add(&pk, frame, 0), 0);
	/* a full single frame leaves no room for a batch: a second frame needs both
	 * record lengths to fit too */
	sv_pack_begin(&pk, buf, cap, 0);
	CHECK_EQ(sv_pack_add(&pk, frame, maxf - 4), 1);
	CHECK_EQ(sv_pack_add(&pk, frame, 1), 0);
	sv_pack_begin(&pk, buf, cap, 0);
	CHECK_EQ(sv_pack_add(&pk, frame, maxf - 5), 1);
	CHECK_EQ(sv_pack_add(&pk, frame, 1), 1);
	CHECK_EQ(sv_pack_finish(&pk), cap);
	CHECK(pk.dgram == buf);
	/* several frames, the last one exactly filling the datagram */
	sv_pack_begin(&pk, buf, cap, 0);
	CHECK_EQ(sv_pack_add(&pk, frame, 100), 1);
	CHECK_EQ(sv_pack_add(&pk, frame + 1, 200), 1);
	CHECK_EQ(sv_pack_add(&pk, frame + 2, maxf - 100 - 200 - 6 + 1), 0);
	CHECK_EQ(sv_pack_add(&pk, frame + 2, maxf - 100 - 200 - 6), 1);
	CHECK_EQ(pk.nrec, 3);
	len = sv_pack_finish(&pk);
	CHECK_EQ(len, cap);
	CHECK(pk.dgram == buf);
	CHECK_EQ(sv_hdr_parse(buf, len, &h), SV_OK);
	CHECK_EQ(h.flags & SV_F_SINGLE, 0);
	CHECK_EQ(sv_records_check(buf + 8, h.len, &nrec), SV_OK);
	CHECK_EQ(nrec, 3);
	cur = buf + 8;
	end = buf + len;
	f = sv_records_next(&cur, end, &flen);
	CHECK(f && flen == 100 && !memcmp(f, frame, 100));
	f = sv_records_next(&cur, end, &flen);
	CHECK(f && flen == 200 && !memcmp(f, frame + 1, 200));
	f = sv_records_next(&cur, end, &flen);
	CHECK(f && flen == maxf - 306 && !memcmp(f, frame + 2, flen));
	CHECK(sv_records_next(&cur, end, &flen) == NULL);
	/* a cap beyond one UDP datagram is clamped */
	CHECK_EQ(sv_pack_max_frame(100000, 0), SV_MAX_DGRAM - 8);
	/* overhead from the overlay MTU to the underlay MTU (IPv4 20 + UDP 8 + this) */
	CHECK_EQ(28 + sv_payload_over(0, 0), 50);
	CHECK_EQ(28 + sv_payload_over(1, 0), 36);
	CHECK_EQ(28 + sv_payload_over(0, 1), 82);
	CHECK_EQ(28 + sv_payload_over(1, 1), 68);
}

static void test_records_bad(void)
{
	uint8_t b[16] = {0};
	unsigned n;

	CHECK_EQ(sv_records_check(b, 0, &n), SV_D_BAD_LENGTH);
	b[0] = 0;
	b[1] = 0; /* zero-length record */
	CHECK_EQ(sv_records_check(b, 2, &n), SV_D_BAD_LENGTH);
	b[1] = 5; /* record longer than the body */
	CHECK_EQ(sv_records_check(b, 6, &n), SV_D_BAD_LENGTH);
	/* one record alone is not a batch: that frame has to be SINGLE */
	CHECK_EQ(sv_records_check(b, 7, &n), SV_D_BAD_LENGTH);
	CHECK_EQ(sv_records_check(b, 8, &n), SV_D_BAD_LENGTH); /* 1 trailing byte */
	b[7] = 0;
	b[8] = 1;
	CHECK_EQ(sv_records_check(b, 10, &n), SV_OK);
	CHECK_EQ(n, 2);
	CHECK_EQ(sv_records_check(b, 9, &n), SV_D_BAD_LENGTH);
}

/* ---- FRAG ---- */
static void test_frag_parse(void)
{
	uint8_t b[32] = {0};
	struct sv_frag f;
	size_t chunk;

	sv_frag_put(b, 7, 100, 1, 3);
	CHECK_EQ(sv_frag_parse(b, 12 + 10, &f), SV_OK);
	CHECK_EQ(f.id, 7);
	CHECK_EQ(f.total, 100);
	CHECK_EQ(f.index, 1);
	CHECK_EQ(f.count, 3);
	CHECK_EQ(f.clen, 10);
	CHECK_EQ(sv_frag_parse(b, 12, &f), SV_D_BAD_LENGTH); /* empty chunk */
	CHECK_EQ(sv_frag_parse(b, 5, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, 100, 3, 3); /* index == count */
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, 100, 0, 0);
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, 0, 0, 1);
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, SV_MAX_STREAM + 1, 0, 2);
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, 100, 0, SV_MAX_FRAGS + 1);
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, 5, 0, 1); /* chunk longer than the unit */
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);

	CHECK_EQ(sv_frag_plan(65546, 1472, 0, &chunk), 46);
	CHECK_EQ(chunk, 1472 - 20);
	CHECK_EQ(sv_frag_plan(1452, 1472, 0, &chunk), 1);
	CHECK_EQ(sv_frag_plan(1453, 1472, 0, &chunk), 2);
	CHECK_EQ(sv_frag_plan(100, 1472, 1, &chunk), 1);
	CHECK_EQ(chunk, 1472 - 36); /* header, session, counter, FRAG header; no tag per piece */
	CHECK_EQ(sv_frag_plan(SV_MAX_STREAM, 1472, 1, &chunk), 46);
	CHECK_EQ(sv_frag_plan(SV_MAX_STREAM, 1472, 0, &chunk), 0); /* plain: a unit at most */
	CHECK_EQ(sv_frag_plan(0, 1472, 0, &chunk), 0);
	CHECK_EQ(sv_frag_plan(SV_MAX_UNIT + 1, 1472, 0, &chunk), 0);
	CHECK_EQ(sv_frag_plan(65000, 30, 0, &chunk), 0); /* too many pieces */
	CHECK_EQ(sv_frag_plan(100, 20, 0, &chunk), 0);
}

static struct sv_frag mk(uint32_t id, uint32_t total, uint16_t idx, uint16_t cnt,
			 const uint8_t *data, size_t csize)
{
	struct sv_frag f = {.id = id, .total = total, .index = idx, .count = cnt};
	size_t off = (size_t)idx * csize;

	f.chunk = data + off;
	f.clen = idx == cnt - 1 ? total - off : csize;
	return f;
}

static void test_reasm(void)
{
	static struct sv_reasm r;
	static uint8_t data[5000];
	struct sv_unit u;
	struct sv_frag f;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	/* in order */
	for (int i = 0; i < 4; i++) {
		f = mk(1, 5000, (uint16_t)i, 4, data, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
		CHECK(i < 3 ? u.n == 0 : (unit_eq(&u, data, 5000) && u.n == 4)); /* not copied */
	}
	/* reverse order, last piece first */
	for (int i = 3; i >= 0; i--) {
		f = mk(2, 5000, (uint16_t)i, 4, data, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
		CHECK(i > 0 ? u.n == 0 : unit_eq(&u, data, 5000));
	}
	/* a duplicate piece is dropped, the unit survives */
	f = mk(3, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	for (int i = 1; i < 4; i++) {
		f = mk(3, 5000, (uint16_t)i, 4, data, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	}
	CHECK(unit_eq(&u, data, 5000));
	/* inconsistent pieces: other total, other chunk size, other count, other flags */
	f = mk(4, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(4, 4999, 1, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	f = mk(5, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(5, 5000, 1, 4, data, 1300);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	f = mk(6, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(6, 5000, 1, 5, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	f = mk(7, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(7, 5000, 1, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, SV_F_VNET, 10, &u), SV_D_REASM_BAD);
	/* pieces whose sizes leave a hole: 3 x 1000 + last 1000 != 5000 */
	f = mk(8, 5000, 0, 4, data, 1000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(8, 5000, 1, 4, data, 1000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(8, 5000, 2, 4, data, 1000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = (struct sv_frag){.id = 8, .total = 5000, .index = 3, .count = 4, .chunk = data, .clen = 1000};
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	CHECK(u.n == 0);
	/* a chunk size that puts the last piece out of range */
	f = mk(9, 5000, 0, 4, data, 2000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	/* one piece, no slot */
	f = mk(10, 100, 0, 1, data, 100);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	CHECK(u.n == 1 && u.iov[0].iov_base == data && u.len == 100);
	f.clen = 99;
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	/* a lost piece: the unit times out, later ones still work */
	memset(&r.timeouts, 0, sizeof(r.timeouts));
	f = mk(11, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(12, 5000, 0, 2, data, 4000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10 + SV_REASM_TIMEOUT_NS + 1, &u), SV_OK);
	CHECK(r.timeouts >= 1);
	f = mk(12, 5000, 1, 2, data, 4000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10 + SV_REASM_TIMEOUT_NS + 2, &u), SV_OK);
	CHECK(unit_eq(&u, data, 5000));
	/* more incomplete units than slots: the oldest are evicted */
	r.evicted = 0;
	for (uint32_t id = 100; id < 100 + SV_REASM_SLOTS + 3; id++) {
		f = mk(id, 5000, 0, 4, data, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 2 * SV_REASM_TIMEOUT_NS + id, &u), SV_OK);
	}
	CHECK(r.evicted >= 3);
	/* pieces settled (copied) between batches: the source may change afterwards */
	{
		static uint8_t scratch[5000];

		memcpy(scratch, data, sizeof(scratch));
		f = mk(200, 5000, 0, 4, scratch, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 3 * SV_REASM_TIMEOUT_NS, &u), SV_OK);
		f = mk(200, 5000, 2, 4, scratch, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 3 * SV_REASM_TIMEOUT_NS, &u), SV_OK);
		sv_reasm_settle(&r);
		memset(scratch, 0xee, sizeof(scratch)); /* the receive buffer is reused */
		memcpy(scratch + 1400, data + 1400, 1400);
		memcpy(scratch + 4200, data + 4200, 800);
		f = mk(200, 5000, 1, 4, scratch, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 3 * SV_REASM_TIMEOUT_NS, &u), SV_OK);
		f = mk(200, 5000, 3, 4, scratch, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 3 * SV_REASM_TIMEOUT_NS, &u), SV_OK);
		CHECK(unit_eq(&u, data, 5000));
		CHECK_EQ(u.n, 1); /* came out of the slot's own buffer */
	}
	sv_reasm_free(&r);
}

/* ---- the replay window ---- */
static void test_replay_window(void)
{
	static struct sv_replay w;

	memset(&w, 0, sizeof(w));
	CHECK_EQ(sv_replay_check(&w, 100), 0);
	sv_replay_update(&w, 100);
	CHECK_EQ(sv_replay_check(&w, 100), -1);
	CHECK_EQ(sv_replay_check(&w, 99), 0); /* late but new */
	sv_replay_update(&w, 99);
	CHECK_EQ(sv_replay_check(&w, 99), -1);
	for (uint64_t c = 101; c < 101 + 5000; c += 3)
		sv_replay_update(&w, c);
	/* top = 5099 */
	CHECK_EQ(w.top, 5099);
	CHECK_EQ(sv_replay_check(&w, 5099), -1);
	CHECK_EQ(sv_replay_check(&w, 5098), 0);
	CHECK_EQ(sv_replay_check(&w, 5096), -1);
	CHECK_EQ(sv_replay_check(&w, 5099 - 4031), sv_replay_check(&w, 5099 - 4031)); /* in range */
	CHECK_EQ(sv_replay_check(&w, 5099 - 4032), -1); /* outside the window */
	CHECK_EQ(sv_replay_check(&w, 5099 - 4500), -1);
	CHECK_EQ(sv_replay_check(&w, 100), -1);
	/* a big jump forgets everything but keeps old counters out */
	sv_replay_update(&w, 1000000);
	CHECK_EQ(sv_replay_check(&w, 999999), 0);
	CHECK_EQ(sv_replay_check(&w, 1000000), -1);
	CHECK_EQ(sv_replay_check(&w, 5099), -1);
	/* every counter in a window accepted exactly once, in shuffled order */
	{
		static struct sv_replay v;
		uint64_t base = 1ull << 40;
		int ok = 1;

		memset(&v, 0, sizeof(v));
		sv_replay_update(&v, base + 3000);
		for (uint64_t i = 0; i < 3000; i++) {
			uint64_t c = base + (i * 7919) % 3000;

			if (sv_replay_check(&v, c) != 0)
				ok = 0;
			sv_replay_update(&v, c);
			if (sv_replay_check(&v, c) != -1)
				ok = 0;
		}
		CHECK(ok);
	}
}

/* ---- the whole receive path ---- */
static size_t mk_data(struct sv *s, uint8_t *d, const uint8_t *f1, size_t l1, const uint8_t *f2,
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
static size_t mk_piece(struct sv *s, uint8_t *d, uint8_t flags, uint32_t id, const uint8_t *unit,
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

static void test_rx_path(void)
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

static void test_rx_input(void)
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

/* ---- sealed units: one AEAD per FRAG unit ---- */
static void test_sealed_units(void)
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

static void test_rx_cipher(void)
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

/* ---- a sleeve's own datagrams sent back to it with its peer's address ---- */
static void test_rx_reflected(void)
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

/* ---- checksum completion ---- */
/* one's complement sum, not inverted (reference, byte by byte) */
static uint32_t ref_sum(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

static uint16_t ref_csum(const uint8_t *p, size_t n, uint32_t sum)
{
	return (uint16_t)~ref_sum(p, n, sum);
}

static void test_csum(void)
{
	for (size_t len = 20; len < 200; len += 7) {
		uint8_t pkt[256];
		uint16_t want, got;

		for (size_t i = 0; i < len; i++)
			pkt[i] = (uint8_t)(i * 31 + len);
		/* checksum field at 16..17, seeded with a "pseudo header" value 0x1234 */
		pkt[16] = 0x12;
		pkt[17] = 0x34;
		{
			uint8_t tmp[256];

			memcpy(tmp, pkt, len);
			tmp[16] = tmp[17] = 0;
			want = ref_csum(tmp, len, 0x1234);
			if (want == 0)
				want = 0xffff;
		}
		CHECK_EQ(sv_csum_complete(pkt, len, 0, 16), 0);
		got = (uint16_t)(pkt[16] << 8 | pkt[17]);
		CHECK_EQ(got, want);
		/* verifying the whole range now gives 0 (or all ones) */
		CHECK(ref_csum(pkt, len, 0x1234) == 0 || ref_csum(pkt, len, 0x1234) == 0xffff);
	}
	{
		uint8_t pkt[40] = {0};

		CHECK_EQ(sv_csum_complete(pkt, 40, 40, 0), -EINVAL);
		CHECK_EQ(sv_csum_complete(pkt, 40, 30, 9), -EINVAL);
		CHECK_EQ(sv_csum_complete(pkt, 40, 30, 8), 0);
	}
}

/* ---- fuzz seeds: cfg byte, then (len u16, datagram)* ---- */
static int write_seed(const char *dir, const char *name, uint8_t cfg, uint8_t *d[], size_t n[],
		      int k)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		return -errno;
	fputc(cfg, f);
	for (int i = 0; i < k; i++) {
		fputc((int)(n[i] >> 8), f);
		fputc((int)(n[i] & 0xff), f);
		fwrite(d[i], 1, n[i], f);
	}
	return fclose(f) ? -errno : 0;
}

static int write_seg_seeds(const char *dir, struct sv *s, uint8_t **d, size_t *n);

static int write_corpus(const char *dir)
{
	static struct sv s;
	static uint8_t b[4][4096], unit[3000];
	uint8_t *d[4] = {b[0], b[1], b[2], b[3]};
	size_t n[4];
	uint8_t f1[60], f2[40];
	int ret = 0;

	memset(f1, 1, sizeof(f1));
	memset(f2, 2, sizeof(f2));
	memset(unit, 3, sizeof(unit));
	/* cfg bits: 1 enc, 2 l3, 4 vnet, 8 segment, 128 a ChaCha20-Poly1305-only
	 * receiver (see fuzz/fuzz_rx.c); keyed seeds under each AEAD, and AES-GCM
	 * ones at a ChaCha-only receiver */
	for (unsigned run = 0; run < 8 + 4 * 2; run++) {
		uint8_t cfg = (uint8_t)(run < 8 ? run : ((run - 8) / 2 * 2 + 1) | ((run & 1) ? 0x80 : 0));
		char name[64];

		const char *sfx;

		test_cipher = run >= 8 && !(run & 1) ? SV_AEAD_CHACHA20POLY1305 : SV_AEAD_AES256GCM;
		sfx = test_cipher == SV_AEAD_CHACHA20POLY1305 ? "-chacha" : "";
		sv_setup(&s, cfg & 1, (cfg >> 1) & 1, (cfg >> 2) & 1, 0x1111);
		n[0] = mk_data(&s, d[0], f1, sizeof(f1), f2, sizeof(f2));
		snprintf(name, sizeof(name), "data-%u%s", cfg, sfx);
		ret |= write_seed(dir, name, cfg, d, n, 1);
		n[0] = mk_data(&s, d[0], f1, sizeof(f1), NULL, 0);
		n[1] = mk_data(&s, d[1], f2, sizeof(f2), NULL, 0);
		snprintf(name, sizeof(name), "single-%u%s", cfg, sfx);
		ret |= write_seed(dir, name, cfg, d, n, 2);
		for (uint16_t i = 0; i < 3; i++)
			n[i] = mk_piece(&s, d[i], (cfg & 4) ? SV_F_VNET : 0, 5, unit, 3000, 1200, i, 3);
		snprintf(name, sizeof(name), "frag-%u%s", cfg, sfx);
		ret |= write_seed(dir, name, cfg, d, n, 3);
		n[0] = sv_build_heartbeat(&s, &s.peers[0], d[0], 1);
		n[1] = sv_build_probe(&s, d[1], 1, 200);
		n[2] = sv_build_probe_ack(&s, d[2], 1, 200);
		snprintf(name, sizeof(name), "ctl-%u%s", cfg, sfx);
		ret |= write_seed(dir, name, cfg, d, n, 3);
		/* the handshake: a HEARTBEAT echoing the fuzz target's session (0x2222)
		 * proves the peer's, then its DATA opens */
		s.peers[0].echo = 0x2222;
		n[0] = sv_build_heartbeat(&s, &s.peers[0], d[0], 1);
		n[1] = mk_data(&s, d[1], f1, sizeof(f1), NULL, 0);
		snprintf(name, sizeof(name), "hello-%u%s", cfg, sfx);
		ret |= write_seed(dir, name, cfg, d, n, 2);
	}
	test_cipher = SV_AEAD_AES256GCM;
	ret |= write_seg_seeds(dir, &s, d, n);
	sv_setup(&s, 0, 0, 0, 0);
	return ret;
}


/* ---- fuzz seeds for the socket entry (fuzz/fuzz_sock.c): cfg byte, then reads
 * (how u8, [seg u16], len u16, bytes) ---- */
struct sock_read {
	uint8_t how;
	uint16_t seg;
	const uint8_t *d;
	size_t n;
};
#define FROM_PEER 0
#define FROM_OTHER_PORT 1
#define FROM_STRANGER 2
#define FROM_PEER2 3
#define GRO_SEG (1 << 4)
#define GRO_NEG (2 << 4)
#define GRO_SHORT (3 << 4)
#define END_BATCH (1 << 6)

static int write_sock_seed(const char *dir, const char *name, uint8_t cfg, const struct sock_read *r,
			   int k)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		return -errno;
	fputc(cfg, f);
	for (int i = 0; i < k; i++) {
		fputc(r[i].how, f);
		if (r[i].how & (3 << 4)) {
			fputc(r[i].seg >> 8, f);
			fputc(r[i].seg & 0xff, f);
		}
		fputc((int)(r[i].n >> 8), f);
		fputc((int)(r[i].n & 0xff), f);
		fwrite(r[i].d, 1, r[i].n, f);
	}
	return fclose(f) ? -errno : 0;
}

static int write_sock_corpus(const char *dir)
{
	static struct sv s;
	static uint8_t b[4][4096], train[3 * 200], unit[3000];
	uint8_t f1[60], f2[40];
	size_t n[4];
	int ret = 0;

	memset(f1, 1, sizeof(f1));
	memset(f2, 2, sizeof(f2));
	memset(unit, 3, sizeof(unit));
	/* the empty datagram: from a stranger (it killed the daemon), from the peer,
	 * from the peer's address on another port, with a GRO size of 0 */
	{
		const struct sock_read r[] = {
			{FROM_STRANGER, 0, b[0], 0},
			{FROM_PEER, 0, b[0], 0},
			{FROM_OTHER_PORT | GRO_SEG, 0, b[0], 0},
			{FROM_STRANGER | GRO_SEG | END_BATCH, 1400, b[0], 0},
		};

		ret |= write_sock_seed(dir, "empty", 0, r, 1);
		ret |= write_sock_seed(dir, "empty-all", 0, r, 4);
		ret |= write_sock_seed(dir, "empty-basic", 0x40, r, 4);
	}
	/* cfg bits: 1 enc, 2 l3, 4 vnet, 8 segment, 16 IPv6, 32 two peers, 128 a
	 * ChaCha20-Poly1305-only receiver; then keyed ones sealed with ChaCha20-Poly1305,
	 * and AES-GCM ones at a ChaCha-only receiver */
	for (unsigned run = 0; run < 12; run++) {
		static const uint8_t extra[4] = {1, 5, 0x80 | 1, 0x80 | 5};
		uint8_t cfg = (uint8_t)(run < 8 ? run : extra[run - 8] & 7);
		uint8_t c = (uint8_t)(cfg | (cfg == 5 ? 16 : 0) | (cfg == 6 ? 32 : 0) |
				      (run >= 8 ? extra[run - 8] & 0x80 : 0));
		char name[64];

		test_cipher = run == 8 || run == 9 ? SV_AEAD_CHACHA20POLY1305 : SV_AEAD_AES256GCM;
		sv_setup(&s, cfg & 1, (cfg >> 1) & 1, (cfg >> 2) & 1, 0x1111);
		if ((c & 16) && s.enc) {
			/* sealed by the IPv6 peer the fuzz target knows */
			struct sockaddr_storage a = {0};
			struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&a;
			struct sv_ident id;

			a6->sin6_family = AF_INET6;
			a6->sin6_port = htons(6784);
			inet_pton(AF_INET6, "2001:db8::1", &a6->sin6_addr);
			sv_ident_of(&id, &a);
			sv_seal_free(&s.seal);
			sv_seal_init(&s.seal, test_key, 0x1111, 1000, &id, test_cipher);
		}
		/* a GRO train of three SINGLE datagrams from the peer, cut at its size */
		n[0] = mk_data(&s, b[0], f1, sizeof(f1), NULL, 0);
		for (int i = 0; i < 3; i++)
			mk_data(&s, train + (size_t)i * n[0], f1, sizeof(f1), NULL, 0);
		n[1] = mk_data(&s, b[1], f1, sizeof(f1), f2, sizeof(f2));
		n[2] = sv_build_heartbeat(&s, &s.peers[0], b[2], 1);
		n[3] = sv_build_probe(&s, b[3], 1, 200);
		{
			const struct sock_read r[] = {
				{FROM_PEER | GRO_SEG, (uint16_t)n[0], train, 3 * n[0]},
				{FROM_PEER | GRO_SEG, 1, b[1], n[1]},
				{FROM_PEER | GRO_SEG, (uint16_t)(n[1] + 1), b[1], n[1]},
				{FROM_PEER | GRO_NEG, 5, b[1], n[1]},
				{FROM_PEER | GRO_SHORT | END_BATCH, 1, b[1], n[1]},
				{FROM_PEER2, 0, b[2], n[2]},
				{FROM_PEER | 0x80, 0, b[3], n[3]},
				/* the same, valid, from strangers: never opened or answered */
				{FROM_OTHER_PORT, 0, b[2], n[2]},
				{FROM_STRANGER | END_BATCH, 0, b[3], n[3]},
				{FROM_OTHER_PORT | GRO_SEG, (uint16_t)n[0], train, 3 * n[0]},
				{FROM_PEER | 4 /* short address */, 0, b[1], n[1]},
				{FROM_PEER | 8 /* MSG_TRUNC */, 0, b[1], n[1]},
			};

			snprintf(name, sizeof(name), "reads-%u%s", c, run == 8 || run == 9 ? "-chacha" : "");
			ret |= write_sock_seed(dir, name, c, r, (int)(sizeof(r) / sizeof(r[0])));
		}
		/* a unit in three pieces, two in one batch, one in the next */
		for (uint16_t i = 0; i < 3; i++)
			n[i] = mk_piece(&s, b[i], (cfg & 4) ? SV_F_VNET : 0, 5, unit, 3000, 1200, i, 3);
		{
			const struct sock_read r[] = {
				{FROM_PEER, 0, b[0], n[0]},
				{FROM_PEER | END_BATCH, 0, b[2], n[2]},
				{FROM_PEER, 0, b[1], n[1]},
			};

			snprintf(name, sizeof(name), "unit-%u%s", c, run == 8 || run == 9 ? "-chacha" : "");
			ret |= write_sock_seed(dir, name, c, r, 3);
		}
		/* the handshake (fuzz/seedver.h): a HEARTBEAT echoing the target's session */
		s.peers[0].echo = 0x2222;
		n[0] = sv_build_heartbeat(&s, &s.peers[0], b[0], 1);
		n[1] = mk_data(&s, b[1], f1, sizeof(f1), NULL, 0);
		{
			const struct sock_read r[] = {
				{FROM_PEER | END_BATCH, 0, b[0], n[0]},
				{FROM_PEER, 0, b[1], n[1]},
			};

			snprintf(name, sizeof(name), "hello-%u%s", c, run == 8 || run == 9 ? "-chacha" : "");
			ret |= write_sock_seed(dir, name, c, r, 2);
		}
	}
	test_cipher = SV_AEAD_AES256GCM;
	sv_setup(&s, 0, 0, 0, 0);
	return ret;
}

/* ---- --segment: cutting a super-frame and gathering it back ---- */

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

/* An Ethernet + IPv4/IPv6 + TCP (12 bytes of options) super-frame with plen
 * bytes of payload and consistent lengths; returns its length. */
static size_t make_super(uint8_t *f, int v6, size_t plen, uint8_t flags)
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

/* seeds for the gathering path (cfg bit 8: --segment): three segments of a
 * super-frame, one DATA datagram each, plain and sealed */
static int write_seg_seeds(const char *dir, struct sv *s, uint8_t **d, size_t *n)
{
	static uint8_t sf[8000], seg[3][1600];
	/* segments that fit a sealed datagram on a 1500 underlay too */
	struct virtio_net_hdr vh = {.gso_type = VIRTIO_NET_HDR_GSO_TCPV4, .gso_size = 1300};
	size_t flen = make_super(sf, 0, 3300, 0x18);
	struct sv_seg g;
	int ret = 0;

	sv_seg_plan(&g, sf, flen, &vh, 0);
	for (unsigned i = 0; i < 3; i++)
		sv_seg_build(&g, i, seg[i]);
	for (uint8_t enc = 0; enc < 2; enc++) {
		char name[64];

		sv_setup(s, enc, 0, 1, 0x3333);
		for (unsigned i = 0; i < 3; i++)
			n[i] = mk_data(s, d[i], seg[i], sv_seg_len(&g, i), NULL, 0);
		snprintf(name, sizeof(name), "segments-%u", 12u | enc);
		ret |= write_seed(dir, name, (uint8_t)(12u | enc), d, n, 3);
	}
	return ret;
}

static void test_segment(void)
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

/* ---- the device side: the send thread between a fake device and real sockets ----
 * The device is one end of an AF_UNIX datagram socket pair (a read returns one
 * written datagram, as a TAP read returns one frame); the peers are UDP sockets
 * on 127.0.0.1. */
#define TX_PEERS 8
static struct {
	int dev[2], peer[TX_PEERS];
	pthread_t thread;
} txl;

static void tx_start(struct sv *s, int npeers, int vnet, int udp_gso, int enc)
{
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int big = 4 << 20;

	sv_setup(s, enc, 0, vnet, 0x7777); /* seals as 198.18.0.1:6784 */
	s->batch = 1;
	s->offload = vnet;
	s->udp_gso = udp_gso;
	s->mmsg = 1;
	s->npeers = npeers;
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, txl.dev) == 0);
	setsockopt(txl.dev[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	fcntl(txl.dev[0], F_SETFL, O_NONBLOCK);
	s->tap_fd = txl.dev[0];
	s->udp_fd = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(bind(s->udp_fd, (struct sockaddr *)&lo, sizeof(lo)) == 0);
	for (int i = 0; i < npeers; i++) {
		struct sv_peer *p = &s->peers[i];

		txl.peer[i] = socket(AF_INET, SOCK_DGRAM, 0);
		setsockopt(txl.peer[i], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		CHECK(bind(txl.peer[i], (struct sockaddr *)&lo, sizeof(lo)) == 0);
		p->alen = sizeof(struct sockaddr_in);
		getsockname(txl.peer[i], (struct sockaddr *)&p->addr, &p->alen);
		p->pmtu = 1472;
	}
	CHECK(pthread_create(&txl.thread, NULL, sv_tx_thread, s) == 0);
}

static void tx_stop(struct sv *s)
{
	pthread_cancel(txl.thread);
	pthread_join(txl.thread, NULL);
	for (int i = 0; i < s->npeers; i++)
		close(txl.peer[i]);
	close(txl.dev[0]);
	close(txl.dev[1]);
	close(s->udp_fd);
	s->npeers = 1;
}

/* Datagrams that reach peer i: waits up to first_ms for one, then until none
 * came for 100 ms; each one's first bytes kept in d (up to max). Pieces of one
 * FRAG unit are waited for until all of them (the count in their header) are
 * there, 10 s at most: the send thread may flush a unit in several batches, and
 * a busy machine can hold it between two for longer than any short gap. */
static int tx_collect(int i, uint8_t (*d)[64], size_t *len, int max, int first_ms)
{
	struct pollfd pfd = {.fd = txl.peer[i], .events = POLLIN};
	static uint8_t buf[65536];
	unsigned frag_count = 0;
	int n = 0;

	while (poll(&pfd, 1, n ? (frag_count ? 10000 : 100) : first_ms) == 1) {
		ssize_t r = recv(txl.peer[i], buf, sizeof(buf), 0);
		struct sv_hdr h;

		if (r < 0)
			break;
		if (n < max) {
			memcpy(d[n], buf, r < 64 ? (size_t)r : 64);
			len[n] = (size_t)r;
		}
		n++;
		if (sv_hdr_parse(buf, (size_t)r, &h) == SV_OK && h.type == SV_T_FRAG &&
		    (size_t)r >= SV_HDR_LEN + 12)
			frag_count = sv_get16(buf + SV_HDR_LEN + 10);
		else
			frag_count = 0;
		if (frag_count && (unsigned)n >= frag_count)
			break;
	}
	return n;
}

static void test_tx_device(void)
{
	static struct sv s;
	static uint8_t frame[70000], got[1100][64];
	static size_t glen[1100];
	struct sv_hdr h;
	int n;

	/* a read of nothing is no frame: nothing is sent for it, and the next
	 * frame leaves alone in a well-formed datagram */
	tx_start(&s, 1, 0, 1, 0);
	CHECK(write(txl.dev[1], frame, 0) == 0);
	n = tx_collect(0, got, glen, 4, 200);
	CHECK_EQ(n, 0);
	memset(frame, 0x5a, 60);
	CHECK(write(txl.dev[1], frame, 60) == 60);
	n = tx_collect(0, got, glen, 4, 10000);
	CHECK_EQ(n, 1);
	CHECK(n >= 1 && glen[0] == 8 + 60 && sv_hdr_parse(got[0], glen[0], &h) == SV_OK &&
	      (h.flags & SV_F_SINGLE));
	CHECK_EQ(s.ctr_tx.c[SV_C_TX_FRAMES], 1);
	tx_stop(&s);

	/* a 64 kB super-frame to eight peers without UDP GSO: 45 pieces each, one
	 * message per piece and peer, more than one send queue holds */
	tx_start(&s, TX_PEERS, 1, 0, 0);
	{
		struct virtio_net_hdr vh = {.gso_type = VIRTIO_NET_HDR_GSO_TCPV4, .gso_size = 1400};
		size_t flen = make_super(frame + SV_VNET_LEN, 0, 65000, 0x10);

		memcpy(frame, &vh, sizeof(vh));
		CHECK(write(txl.dev[1], frame, SV_VNET_LEN + flen) == (ssize_t)(SV_VNET_LEN + flen));
		for (int i = 0; i < TX_PEERS; i++) {
			uint8_t seen[SV_MAX_FRAGS] = {0};
			unsigned cnt = 0, dup = 0, bad = 0;

			n = tx_collect(i, got, glen, 1100, 10000);
			for (int k = 0; k < n && k < 1100; k++) {
				unsigned idx;

				if (sv_hdr_parse(got[k], glen[k], &h) != SV_OK || h.type != SV_T_FRAG) {
					bad++;
					continue;
				}
				/* the FRAG header: id, total, index, count */
				idx = sv_get16(got[k] + SV_HDR_LEN + 8);
				cnt = sv_get16(got[k] + SV_HDR_LEN + 10);
				dup += idx < SV_MAX_FRAGS && seen[idx]++;
			}
			CHECK_EQ(bad, 0);
			CHECK_EQ(dup, 0);
			CHECK(cnt > 40);
			CHECK_EQ(n, cnt);
		}
		for (int i = 0; i < TX_PEERS; i++) /* and no piece more */
			CHECK_EQ(tx_collect(i, got, glen, 4, 100), 0);
		CHECK_EQ(s.ctr_tx.c[SV_C_TX_SUPER], 1);
		CHECK_EQ(s.ctr_tx.drop[SV_D_SEND_ERR], 0);
	}
	tx_stop(&s);

	/* keyed, two peers, the second accepting none of our AEADs: a frame and a
	 * 3000-byte unit go sealed to the first, which opens them; nothing goes to
	 * the second, and every datagram it would have got is counted */
	for (int k = 0; k < 2; k++) {
		static struct sv_open op;
		static uint8_t buf[4][2048];
		struct pollfd pfd;
		struct sv_hdr hs[4];
		size_t lens[4];
		int got0 = 0, opened = 0;

		test_cipher = k ? SV_AEAD_CHACHA20POLY1305 : SV_AEAD_AES256GCM;
		tx_start(&s, 2, 0, 1, 1);
		s.peers[1].aead_skip = 1;
		memset(frame, 0x5a, 3000);
		CHECK(write(txl.dev[1], frame, 60) == 60);
		CHECK(write(txl.dev[1], frame, 3000) == 3000);
		pfd = (struct pollfd){.fd = txl.peer[0], .events = POLLIN};
		while (got0 < 4 && poll(&pfd, 1, 2000) == 1) {
			ssize_t r = recv(txl.peer[0], buf[got0], sizeof(buf[0]), 0);

			if (r <= 0)
				break;
			lens[got0] = (size_t)r;
			got0++;
		}
		CHECK_EQ(got0, 4); /* one DATA, three pieces */
		CHECK_EQ(tx_collect(1, got, glen, 4, 300), 0);
		CHECK_EQ(s.ctr_tx.drop[SV_D_CIPHER_MISMATCH], 4);
		/* what peer 0 got opens as sealed by 198.18.0.1:6784 */
		{
			static uint8_t stream[4000];
			struct sockaddr_storage me;
			struct sv_ident id;
			size_t slen = 0;
			struct sv_frag f = {0};

			addr4(&me, "198.18.0.1", 6784);
			sv_ident_of(&id, &me);
			sv_open_init(&op, &id);
			test_trust(&op, s.seal.session);
			for (int i = 0; i < got0; i++) {
				if (sv_hdr_parse(buf[i], lens[i], &hs[i]) != SV_OK || hs[i].aead != test_cipher)
					continue;
				if (hs[i].type == SV_T_DATA) {
					opened += sv_open_dgram(&op, test_key, buf[i], &hs[i]) == SV_OK &&
						  hs[i].len == 60 && buf[i][24] == 0x5a && buf[i][24 + 59] == 0x5a;
					continue;
				}
				if (sv_frag_parse(buf[i] + 24, hs[i].len, &f) != SV_OK)
					continue;
				memcpy(stream + slen, f.chunk, f.clen); /* in order on loopback */
				slen += f.clen;
				opened++;
			}
			if (slen == f.total && slen == 3016) {
				uint8_t ad[SV_FRAG_AD_LEN];

				sv_frag_ad(ad, SV_F_ENC, (uint8_t)test_cipher, sv_get64(buf[1] + 8),
					   sv_get64(buf[1] + 16), f.id, f.total, f.count);
				CHECK_EQ(sv_open_buf(&op, test_key, test_cipher, sv_get64(buf[1] + 8),
						     sv_get64(buf[1] + 16), stream, slen, ad, sizeof(ad)),
					 SV_OK);
				CHECK(stream[0] == 0x5a && stream[2999] == 0x5a);
			} else {
				CHECK(0); /* the unit's pieces did not add up */
			}
			sv_open_free(&op);
		}
		CHECK_EQ(opened, 4);
		tx_stop(&s);
	}
	test_cipher = SV_AEAD_AES256GCM;
	sv_setup(&s, 0, 0, 0, 0);
}

/* Busy-polling: the window and what is counted. */
static void test_spin(void)
{
	const uint64_t max = 100000;
	struct sv_counters k;
	struct sv_spin p;

	/* polls until the window is over, counts the miss, the time, the sleep */
	memset(&k, 0, sizeof(k));
	sv_spin_init(&p, max);
	fake_yield_quick = 1;
	fake_now = 1000;
	CHECK(sv_spin_again(&p, &k));
	fake_now += max - 1;
	CHECK(sv_spin_again(&p, &k));
	fake_now += 1;
	CHECK(!sv_spin_again(&p, &k));
	CHECK_EQ(k.c[SV_C_SPIN_MISS], 1);
	CHECK_EQ(k.c[SV_C_SPIN_NS], max);
	fake_now += 10 * max;
	sv_spin_work(&p, &k, 0);
	CHECK_EQ(k.c[SV_C_SLEEPS], 1);
	/* work found while polling is a hit, not a sleep */
	CHECK(sv_spin_again(&p, &k));
	fake_now += 500;
	sv_spin_work(&p, &k, fake_now);
	CHECK_EQ(k.c[SV_C_SPIN_HIT], 1);
	CHECK_EQ(k.c[SV_C_SPIN_NS], max + 500);
	CHECK_EQ(k.c[SV_C_SLEEPS], 1);
	/* work right after work: neither */
	sv_spin_work(&p, &k, fake_now);
	CHECK_EQ(k.c[SV_C_SPIN_HIT] + k.c[SV_C_SLEEPS], 2);
	/* a slow yield (someone else needed the CPU) ends polling at once */
	fake_yield_quick = 0;
	CHECK(!sv_spin_again(&p, &k));
	CHECK_EQ(k.c[SV_C_SPIN_MISS], 2);
	fake_yield_quick = 1;
	sv_spin_work(&p, &k, 0);
	CHECK_EQ(k.c[SV_C_SLEEPS], 2);
	/* polling off: sleeps at once, nothing polled */
	memset(&k, 0, sizeof(k));
	sv_spin_init(&p, 0);
	CHECK(!sv_spin_again(&p, &k));
	sv_spin_work(&p, &k, 0);
	CHECK_EQ(k.c[SV_C_SPIN_NS] + k.c[SV_C_SPIN_MISS] + k.c[SV_C_SPIN_HIT], 0);
	CHECK_EQ(k.c[SV_C_SLEEPS], 1);
	fake_now = 0;
	fake_yield_quick = 0;
}

int main(int argc, char **argv)
{
	int counting = aead_count_allocs(); /* before anything allocates */

	if (argc == 3 && !strcmp(argv[1], "--write-sock-corpus")) {
		int ret = write_sock_corpus(argv[2]);

		if (ret)
			fprintf(stderr, "unit: writing corpus to %s: %s\n", argv[2], strerror(-ret));
		return ret ? 1 : 0;
	}
	if (argc == 3 && !strcmp(argv[1], "--write-corpus")) {
		int ret = write_corpus(argv[2]);

		if (ret)
			fprintf(stderr, "unit: writing corpus to %s: %s\n", argv[2], strerror(-ret));
		return ret ? 1 : 0;
	}
	test_hdr();
	test_pack();
	test_records_bad();
	test_frag_parse();
	test_reasm();
	CHECK(counting);
	test_aead_kat();
	test_hkdf_kat();
	test_aead_pick();
	test_aead_sealing();
	test_aead_no_alloc();
	test_replay_window();
	for (int k = 0; k < 2; k++) {
		test_cipher = k ? SV_AEAD_CHACHA20POLY1305 : SV_AEAD_AES256GCM;
		test_rx_path();
		test_sealed_units();
		test_rx_cipher();
		test_rx_reflected();
	}
	test_rx_input();
	test_harden();
	test_csum();
	test_segment();
	test_tx_device();
	test_spin();
	printf("unit: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
