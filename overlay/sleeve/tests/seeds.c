/* seeds.c - fuzz seeds the unit binary writes (`unit --write-corpus DIR`,
 * `unit --write-sock-corpus DIR`): valid datagrams and reads of every kind,
 * plain and sealed, built with the tests' fixture */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/virtio_net.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "pmtu.h"
#include "seg.h"
#include "unit.h"

/* A seed file dir/name opened for writing with its cfg byte; NULL with errno set. */
static FILE *open_seed(const char *dir, const char *name, uint8_t cfg)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f)
		fputc(cfg, f);
	return f;
}

static void put_u16(FILE *f, size_t v)
{
	fputc((int)(v >> 8), f);
	fputc((int)(v & 0xff), f);
}

/* ---- fuzz seeds: cfg byte, then (len u16, datagram)* ---- */
static int write_seed(const char *dir, const char *name, uint8_t cfg, uint8_t *d[], size_t n[],
		      int k)
{
	FILE *f = open_seed(dir, name, cfg);

	if (!f)
		return -errno;
	for (int i = 0; i < k; i++) {
		put_u16(f, n[i]);
		fwrite(d[i], 1, n[i], f);
	}
	return fclose(f) ? -errno : 0;
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

int write_corpus(const char *dir)
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
	FILE *f = open_seed(dir, name, cfg);

	if (!f)
		return -errno;
	for (int i = 0; i < k; i++) {
		fputc(r[i].how, f);
		if (r[i].how & (3 << 4))
			put_u16(f, r[i].seg);
		put_u16(f, r[i].n);
		fwrite(r[i].d, 1, r[i].n, f);
	}
	return fclose(f) ? -errno : 0;
}

int write_sock_corpus(const char *dir)
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
