/* flood.c - hostile datagrams at a running sleeve, for the flood tests.
 *
 * Runs on the peer's host. First it captures, on the underlay device, datagrams
 * the peer's sleeve really sends to the target (the replay pool; optionally
 * written out as fuzz seeds for fuzz/fuzz_sock.c). Then, for a bounded time and
 * at a bounded rate, it sends a mix of kinds from up to three sources:
 *
 *   other_port  the peer's address, another port          -> wrong_port
 *   stranger    an address that is no peer's (--stranger)  -> no_peer
 *   spoofed     the peer's address from --spoof-port, which a packet filter on
 *               this host rewrites to the peer's own port: the target takes
 *               these for the peer's and drops them by what they hold
 *
 * Kinds: empty, one (1 byte), header (a header alone: DATA of length 0),
 * truncated (a header promising more than follows), oversized (65,507 bytes:
 * one frame far above the MTU, unsealed), random (8..1472 random bytes, not
 * starting with the magic), replayed (a captured datagram of the peer's),
 * wrongkey (a DATA datagram sealed under a random key, with a fresh session and
 * counter, under --cipher), reflected (--keyed only: a captured DATA or FRAG
 * datagram the target itself sent to the peer, sent back to it from the peer's
 * address), wronghb (--only: a HEARTBEAT like wrongkey's, which a keyed target
 * tries a key for at most 8 times a second: auth_fail or trial_limit),
 * marked (--mark-dst only: a valid plaintext DATA datagram of the current wire
 * version, SINGLE, whose frame is a UDP packet from --mark-src to the container
 * at --mark-dst, port 9 (discard), with a correct IPv4 header checksum, UDP
 * checksum 0 and the payload MARK_PAYLOAD; in L2 an Ethernet frame to --mark-mac,
 * broadcast by default, with --l3 the bare IP packet. Its UDP source port names
 * the flood source it was sent from: --mark-sport + 0 other_port, + 1 stranger,
 * + 2 spoofed, so a packet filter in the receiving container can count, source
 * by source, which of them came through. Only the spoofed ones may, and only
 * without a key: "accepted" there, crypto_mismatch with one).
 *
 * Prints one JSON object: what was captured, what was sent per source and
 * kind, which drop counter of the target each should land in (--keyed: the
 * target has a key), and the marked kind's UDP source port per source.
 * Replayed datagrams from the spoofed source are not drops without a key
 * (plaintext has no replay protection): "accepted". With a key, wrongkey and
 * reflected datagrams name a session the target never proved for the peer:
 * unproven_session, before any key is derived. --only KIND[,KIND...] sends
 * only those kinds, with --spoof-port from the spoofed source alone (the
 * measurements of what a forged datagram costs, tests/forged_cost.sh). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "crypto.h"
#include "frame.h"

#define PROG "flood"
#define POOL_MAX 256
#define POOL_PER_READ 8 /* a GSO send holds up to 64: keep the pool varied */

enum kind {
	K_EMPTY, K_ONE, K_HEADER, K_TRUNCATED, K_OVERSIZED, K_RANDOM, K_REPLAYED, K_WRONGKEY, K_REFLECTED,
	K_MARKED, K_WRONGHB, K__N
};
static const char *const kind_names[K__N] = {"empty",  "one",      "header",   "truncated", "oversized",
					     "random", "replayed", "wrongkey", "reflected", "marked",
					     "wronghb"};
enum source { S_OTHER_PORT, S_STRANGER, S_SPOOFED, S__N };
static const char *const source_names[S__N] = {"other_port", "stranger", "spoofed"};

/* the marked kind's UDP payload (16 bytes; a filter may match its first 8) */
#define MARK_PAYLOAD "obflood marked!\n"
#define MARK_PAYLOAD_LEN 16
#define MARK_SPORT 47000 /* default --mark-sport */
#define MARK_DPORT 9     /* discard */

struct opts {
	struct sockaddr_in target, peer;
	const char *stranger, *capture_dev, *seeds_dir, *seed_prefix;
	int spoof_port, l3, keyed, seed_cfg, seeds_max, seed_from, cipher;
	unsigned only; /* --only: a mask of kinds, 0 = the usual mix */
	int mark, mark_sport;              /* mark: --mark-dst given */
	struct in_addr mark_dst, mark_src; /* the marked frames' IPv4 addresses */
	uint8_t mark_mac[6];               /* and their Ethernet destination (L2) */
	double seconds, capture_s;
	long rate;
};

/* captured datagrams: the peer's to the target (replay), the target's to the
 * peer (reflect) */
struct pool {
	uint8_t *d[POOL_MAX];
	size_t n[POOL_MAX];
	int count, reads, seeds;
};
static struct pool pool, reflect, *const pools[2] = {&pool, &reflect};

/* not cryptographic: the junk kinds only (xorshift64*, seeded by getrandom) */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static void rnd_buf(void *p, size_t n)
{
	uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(rnd() >> 56);
}

static void die(const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
	char host[64];
	const char *colon = strchr(s, ':');
	size_t hl = colon ? (size_t)(colon - s) : strlen(s);

	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons(colon ? (uint16_t)atoi(colon + 1) : SV_DEFAULT_PORT);
	if (hl >= sizeof(host))
		return -1;
	memcpy(host, s, hl);
	host[hl] = 0;
	return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

/* The length of the sleeve datagram at p (at most n bytes), from its header;
 * 0 if p holds none. */
static size_t dgram_len(const uint8_t *p, size_t n)
{
	size_t len;

	if (n < SV_HDR_LEN || sv_get16(p) != SV_MAGIC)
		return 0;
	len = SV_HDR_LEN + sv_get16(p + 6);
	if (p[4] & SV_F_ENC)
		len += p[3] == SV_T_FRAG ? SV_CRYPTO_PRE : SV_CRYPTO_OVER;
	return len <= n ? len : 0;
}

/* A captured read as fuzz_sock's input: from the peer, with its GRO segment
 * size when it holds more than one datagram, a batch of its own. */
static void write_seed(const struct opts *o, const uint8_t *p, size_t n, size_t seg)
{
	char path[4096];
	FILE *f;

	if (!o->seeds_dir || pool.seeds >= o->seeds_max || n > 0xffff)
		return;
	snprintf(path, sizeof(path), "%s/%s%d", o->seeds_dir, o->seed_prefix, pool.seeds++);
	f = fopen(path, "wb");
	if (!f)
		die(path);
	fputc(o->seed_cfg, f);
	/* the peer (or fuzz_sock's second one), [GRO size], the batch ends */
	fputc((seg < n ? 0x50 : 0x40) | (o->seed_from & 3), f);
	if (seg < n) {
		fputc((int)(seg >> 8), f);
		fputc((int)(seg & 0xff), f);
	}
	fputc((int)(n >> 8), f);
	fputc((int)(n & 0xff), f);
	fwrite(p, 1, n, f);
	if (fclose(f))
		die(path);
}

/* Keeps the datagrams of one captured read (a GSO send is one packet here:
 * cut back into datagrams by their headers) in pl. */
static void keep(struct pool *pl, const uint8_t *p, size_t n)
{
	size_t off = 0;

	for (int taken = 0; off < n && pl->count < POOL_MAX && taken < POOL_PER_READ; taken++) {
		size_t len = dgram_len(p + off, n - off);

		if (!len)
			break;
		/* the target's own HEARTBEATs are not reflected: where one lands
		 * depends on how its counter compares with the peer's */
		if (len <= 1472 && !(pl == &reflect && p[off + 3] == SV_T_HEARTBEAT)) {
			pl->d[pl->count] = malloc(len);
			if (!pl->d[pl->count])
				die("malloc");
			memcpy(pl->d[pl->count], p + off, len);
			pl->n[pl->count++] = len;

		}
		off += len;
	}
}

/* On dev: the peer's datagrams to the target as they leave (the replay pool)
 * and, with a key, the target's to the peer as they arrive (the reflect pool). */
static void capture(const struct opts *o)
{
	/* ETH_P_ALL: only such a socket sees what leaves, not just what arrives */
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
	struct timeval tv = {0, 100000};
	static uint8_t buf[70000];
	double end = now_s() + o->capture_s;
	int fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_ALL));

	if (fd < 0)
		die("capture socket");
	sll.sll_ifindex = (int)if_nametoindex(o->capture_dev);
	if (!sll.sll_ifindex || bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		die(o->capture_dev);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while ((pool.count < POOL_MAX || (o->keyed && reflect.count < POOL_MAX)) && now_s() < end) {
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		ssize_t r = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		const uint8_t *ip = buf, *udp, *p;
		size_t ihl, n;
		int out, back;

		if (r < 28 || from.sll_protocol != htons(ETH_P_IP))
			continue;
		ihl = (size_t)(ip[0] & 0x0f) * 4;
		if (ip[0] >> 4 != 4 || ip[9] != IPPROTO_UDP || (size_t)r < ihl + 8 || (sv_get16(ip + 6) & 0x3fff))
			continue;
		udp = ip + ihl;
		out = !memcmp(ip + 12, &o->peer.sin_addr, 4) && !memcmp(ip + 16, &o->target.sin_addr, 4) &&
		      sv_get16(udp) == ntohs(o->peer.sin_port) && sv_get16(udp + 2) == ntohs(o->target.sin_port);
		back = o->keyed && !memcmp(ip + 12, &o->target.sin_addr, 4) &&
		       !memcmp(ip + 16, &o->peer.sin_addr, 4) && sv_get16(udp) == ntohs(o->target.sin_port) &&
		       sv_get16(udp + 2) == ntohs(o->peer.sin_port);
		if (!out && !back)
			continue;
		p = udp + 8;
		n = (size_t)r - ihl - 8;
		if (back) {
			reflect.reads++;
			keep(&reflect, p, n);
			continue;
		}
		pool.reads++;
		write_seed(o, p, n, dgram_len(p, n));
		keep(&pool, p, n);
	}
	close(fd);
}

/* Where the target's own datagrams (DATA and FRAG), sent back as the peer's,
 * must land: under the target's own session, which is never the peer's proven
 * one. NULL: nothing captured to send. */
static const char *reflect_reason(void)
{
	return reflect.count ? "unproven_session" : NULL;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A marked datagram, number i, from source src: header (DATA, SINGLE, plain) ||
 * [Ethernet] || IPv4 || UDP || MARK_PAYLOAD. */
static long build_marked(const struct opts *o, enum source src, unsigned long i, uint8_t *buf)
{
	static const uint8_t mark_smac[6] = {0x02, 0x6f, 0x62, 0x66, 0x6c, 0x64}; /* local, "obfld" */
	size_t link = o->l3 ? 0 : SV_ETH_HLEN, ip_len = 20 + 8 + MARK_PAYLOAD_LEN;
	uint8_t *f = buf + SV_HDR_LEN, *ip = f + link, *udp = ip + 20;
	uint16_t csum;

	if (!o->mark)
		return -1;
	sv_hdr_put(buf, SV_T_DATA, SV_F_SINGLE | (o->l3 ? SV_F_L3 : 0), (uint16_t)(link + ip_len));
	if (!o->l3) {
		memcpy(f, o->mark_mac, 6);
		memcpy(f + 6, mark_smac, 6);
		sv_put16(f + 12, ETH_P_IP);
	}
	ip[0] = 0x45;
	ip[1] = 0;
	sv_put16(ip + 2, (uint16_t)ip_len);
	sv_put16(ip + 4, (uint16_t)i);
	sv_put16(ip + 6, 0x4000); /* DF */
	ip[8] = 64;
	ip[9] = IPPROTO_UDP;
	sv_put16(ip + 10, 0);
	memcpy(ip + 12, &o->mark_src, 4);
	memcpy(ip + 16, &o->mark_dst, 4);
	csum = (uint16_t)~sv_csum_fold(ip, 20, 0);
	memcpy(ip + 10, &csum, 2);
	sv_put16(udp, (uint16_t)(o->mark_sport + (int)src));
	sv_put16(udp + 2, MARK_DPORT);
	sv_put16(udp + 4, (uint16_t)(8 + MARK_PAYLOAD_LEN));
	sv_put16(udp + 6, 0); /* no checksum (IPv4) */
	memcpy(udp + 8, MARK_PAYLOAD, MARK_PAYLOAD_LEN);
	return (long)(SV_HDR_LEN + link + ip_len);
}

/* Builds datagram number i of a kind from source src into buf; returns its
 * length, or -1 when there is nothing of the kind to send (no capture). */
static long build(const struct opts *o, enum source src, enum kind k, unsigned long i, uint8_t *buf)
{
	uint8_t l3 = o->l3 ? SV_F_L3 : 0;
	size_t n;

	switch (k) {
	case K_EMPTY:
		return 0;
	case K_ONE:
		buf[0] = (uint8_t)rnd();
		return 1;
	case K_HEADER:
		sv_hdr_put(buf, SV_T_DATA, l3, 0);
		return SV_HDR_LEN;
	case K_TRUNCATED:
		sv_hdr_put(buf, SV_T_DATA, SV_F_SINGLE | l3, 200);
		rnd_buf(buf + SV_HDR_LEN, 100);
		return SV_HDR_LEN + 100;
	case K_OVERSIZED:
		sv_hdr_put(buf, SV_T_DATA, SV_F_SINGLE | l3, (uint16_t)(SV_MAX_DGRAM - SV_HDR_LEN));
		memset(buf + SV_HDR_LEN, 0x4f, SV_MAX_DGRAM - SV_HDR_LEN);
		return SV_MAX_DGRAM;
	case K_RANDOM:
		n = 8 + rnd() % (1472 - 8 + 1);
		rnd_buf(buf, n);
		if (buf[0] == SV_MAGIC >> 8)
			buf[0] ^= 0x80;
		return (long)n;
	case K_REPLAYED:
		if (!pool.count)
			return -1;
		n = pool.n[i % (unsigned long)pool.count];
		memcpy(buf, pool.d[i % (unsigned long)pool.count], n);
		return (long)n;
	case K_WRONGKEY:
	case K_WRONGHB: {
		static struct sv_seal seal;
		struct sockaddr_storage peer = {0};
		uint8_t key[SV_KEY_LEN];
		uint64_t session;
		struct sv_ident id;

		if (getrandom(key, sizeof(key), 0) != sizeof(key) ||
		    getrandom(&session, sizeof(session), 0) != sizeof(session))
			die("getrandom");
		memcpy(&peer, &o->peer, sizeof(o->peer));
		sv_ident_of(&id, &peer);
		/* a counter no window has seen: the target must check the tag */
		if (sv_seal_init(&seal, key, session, realtime_ns(), &id, o->cipher) < 0)
			die("sv_seal_init");
		if (k == K_WRONGHB)
			sv_hdr_put(buf, SV_T_HEARTBEAT, SV_F_ENC | l3, 60);
		else
			sv_hdr_put(buf, SV_T_DATA, SV_F_ENC | SV_F_SINGLE | l3, 60);
		rnd_buf(buf + sv_body_off(1), 60);
		n = sv_seal_ctl(&seal, buf, 60);
		sv_seal_free(&seal);
		return n ? (long)n : -1;
	}
	case K_REFLECTED:
		if (!o->keyed || !reflect_reason())
			return -1;
		n = reflect.n[i % (unsigned long)reflect.count];
		memcpy(buf, reflect.d[i % (unsigned long)reflect.count], n);
		return (long)n;
	case K_MARKED:
		return build_marked(o, src, i, buf);
	default:
		return -1;
	}
}

/* The drop counter a datagram of kind k from source src lands in. */
static const char *expect(const struct opts *o, enum source src, enum kind k)
{
	if (src == S_OTHER_PORT)
		return "wrong_port";
	if (src == S_STRANGER)
		return "no_peer";
	switch (k) {
	case K_EMPTY:
	case K_ONE:
	case K_TRUNCATED:
		return "truncated";
	case K_HEADER:
		return "bad_length";
	case K_OVERSIZED:
		return o->keyed ? "crypto_mismatch" : "oversize";
	case K_RANDOM:
		return "bad_magic";
	case K_REPLAYED:
		return o->keyed ? "replay" : "accepted";
	case K_WRONGKEY:
		return o->keyed ? "unproven_session" : "crypto_mismatch";
	case K_WRONGHB:
		return o->keyed ? "auth_fail|trial_limit" : "crypto_mismatch";
	case K_REFLECTED:
		return o->keyed && reflect_reason() ? reflect_reason() : "accepted";
	case K_MARKED:
		/* a valid frame from the peer: delivered without a key */
		return o->keyed ? "crypto_mismatch" : "accepted";
	default:
		return "?";
	}
}

/* Kinds in the output: all of the usual mix (sent or not), wronghb only when
 * asked for (its drops split between two reasons by timing). */
static int listed(const struct opts *o, int k)
{
	return k != K_WRONGHB || (o->only >> K_WRONGHB) & 1;
}

static int src_socket(const char *addr, uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), big = 4 << 20;

	if (fd < 0)
		die("socket");
	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
		fprintf(stderr, PROG ": bad address %s\n", addr);
		exit(2);
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die(addr);
	return fd;
}

/* "wrongkey,wronghb" -> a mask of kinds; -1 on a name that is none */
static int parse_kinds(const char *s, unsigned *mask)
{
	char buf[256], *save = NULL, *w;

	snprintf(buf, sizeof(buf), "%s", s);
	for (w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		int k = 0;

		while (k < K__N && strcmp(w, kind_names[k]))
			k++;
		if (k == K__N)
			return -1;
		*mask |= 1u << k;
	}
	return *mask ? 0 : -1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " --target ADDR:PORT --peer ADDR:PORT [--stranger ADDR] [--spoof-port N]\n"
		   "             [--seconds S] [--rate N] [--l3] [--keyed [--cipher AEAD]]\n"
		   "             [--mark-dst IP [--mark-src IP] [--mark-mac MAC] [--mark-sport N]]\n"
		   "             [--capture DEV [--capture-seconds S]\n"
		   "              [--seeds DIR --seed-cfg N [--seed-prefix NAME] [--seeds-max N]\n"
		   "               [--seed-from 0|3]]]\n");
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{"target", required_argument, NULL, 't'},   {"peer", required_argument, NULL, 'p'},
		{"stranger", required_argument, NULL, 's'}, {"spoof-port", required_argument, NULL, 'P'},
		{"seconds", required_argument, NULL, 'S'},  {"rate", required_argument, NULL, 'r'},
		{"l3", no_argument, NULL, '3'},             {"keyed", no_argument, NULL, 'k'},
		{"capture", required_argument, NULL, 'c'},  {"capture-seconds", required_argument, NULL, 'C'},
		{"seeds", required_argument, NULL, 'd'},    {"seed-cfg", required_argument, NULL, 'g'},
		{"seed-prefix", required_argument, NULL, 'x'}, {"seeds-max", required_argument, NULL, 'm'},
		{"seed-from", required_argument, NULL, 'f'}, {"cipher", required_argument, NULL, 'a'},
		{"mark-dst", required_argument, NULL, 'D'}, {"mark-src", required_argument, NULL, 'R'},
		{"mark-mac", required_argument, NULL, 'M'}, {"mark-sport", required_argument, NULL, 'o'},
		{"only", required_argument, NULL, 'O'},     {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c, have_t = 0, have_p = 0, have_src = 0, bad = 0;

	memset(o, 0, sizeof(*o));
	o->seconds = 4;
	o->rate = 2000;
	o->capture_s = 1.5;
	o->seed_prefix = "capture-";
	o->seeds_max = 8;
	o->cipher = SV_AEAD_AES256GCM;
	o->mark_sport = MARK_SPORT;
	memset(o->mark_mac, 0xff, sizeof(o->mark_mac));
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			have_t = parse_addr(optarg, &o->target) == 0;
			break;
		case 'p':
			have_p = parse_addr(optarg, &o->peer) == 0;
			break;
		case 's':
			o->stranger = optarg;
			break;
		case 'P':
			o->spoof_port = atoi(optarg);
			break;
		case 'S':
			o->seconds = atof(optarg);
			break;
		case 'r':
			o->rate = atol(optarg);
			break;
		case '3':
			o->l3 = 1;
			break;
		case 'k':
			o->keyed = 1;
			break;
		case 'a':
			o->cipher = sv_aead_by_name(optarg);
			if (!o->cipher) {
				usage(stderr);
				exit(2);
			}
			break;
		case 'f':
			o->seed_from = atoi(optarg);
			break;
		case 'c':
			o->capture_dev = optarg;
			break;
		case 'C':
			o->capture_s = atof(optarg);
			break;
		case 'd':
			o->seeds_dir = optarg;
			break;
		case 'g':
			o->seed_cfg = atoi(optarg);
			break;
		case 'x':
			o->seed_prefix = optarg;
			break;
		case 'm':
			o->seeds_max = atoi(optarg);
			break;
		case 'D':
			o->mark = 1;
			bad |= inet_pton(AF_INET, optarg, &o->mark_dst) != 1;
			break;
		case 'R':
			have_src = 1;
			bad |= inet_pton(AF_INET, optarg, &o->mark_src) != 1;
			break;
		case 'M':
			bad |= sscanf(optarg, "%2hhx:%2hhx:%2hhx:%2hhx:%2hhx:%2hhx", &o->mark_mac[0], &o->mark_mac[1],
				      &o->mark_mac[2], &o->mark_mac[3], &o->mark_mac[4], &o->mark_mac[5]) != 6;
			break;
		case 'o':
			o->mark_sport = atoi(optarg);
			break;
		case 'O':
			bad |= parse_kinds(optarg, &o->only);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (!have_src)
		o->mark_src = o->peer.sin_addr; /* without --mark-src: the peer's underlay address */
	/* bounded: at most a minute, at most 100k datagrams a second */
	if (!have_t || !have_p || o->seconds < 0 || o->seconds > 60 || o->rate < 1 || o->rate > 100000 ||
	    o->capture_s < 0 || o->capture_s > 60 || o->spoof_port < 0 || o->spoof_port > 65535 || bad ||
	    o->mark_sport < 1 || o->mark_sport > 65535 - (S__N - 1)) {
		usage(stderr);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	static uint8_t buf[SV_MAX_DGRAM + 64];
	static unsigned long sent[S__N][K__N], errs;
	struct opts o;
	char peer_ip[INET_ADDRSTRLEN];
	int fd[S__N] = {-1, -1, -1}, nsrc = 0, srcs[S__N], nkinds = 0;
	enum kind kinds[K__N];
	double t0, end;
	unsigned long i;

	parse(argc, argv, &o);
	if (getrandom(&rng, sizeof(rng), 0) != sizeof(rng) || !rng)
		rng = 0x9e3779b97f4a7c15ull;
	inet_ntop(AF_INET, &o.peer.sin_addr, peer_ip, sizeof(peer_ip));
	if (o.capture_dev)
		capture(&o);
	/* --only with --spoof-port: the spoofed source alone (the measurements) */
	if (!o.only || !o.spoof_port) {
		fd[S_OTHER_PORT] = src_socket(peer_ip, 0);
		srcs[nsrc++] = S_OTHER_PORT;
	}
	if (o.stranger && !(o.only && o.spoof_port)) {
		fd[S_STRANGER] = src_socket(o.stranger, 0);
		srcs[nsrc++] = S_STRANGER;
	}
	if (o.spoof_port) {
		fd[S_SPOOFED] = src_socket(peer_ip, (uint16_t)o.spoof_port);
		srcs[nsrc++] = S_SPOOFED;
	}
	/* the kinds there is something to send of, in turn */
	for (int k = 0; k < K__N; k++)
		if ((k != K_REPLAYED || pool.count) && (k != K_REFLECTED || (o.keyed && reflect_reason())) &&
		    (k != K_MARKED || o.mark) && (o.only ? (o.only >> k) & 1 : k != K_WRONGHB))
			kinds[nkinds++] = (enum kind)k;
	t0 = now_s();
	end = t0 + o.seconds;
	for (i = 0; o.seconds > 0 && now_s() < end; i++) {
		enum source src = (enum source)srcs[i % (unsigned long)nsrc];
		enum kind k = kinds[(i / (unsigned long)nsrc) % (unsigned long)nkinds];
		long n = build(&o, src, k, i / (unsigned long)(nsrc * nkinds), buf);
		double due = t0 + (double)i / (double)o.rate;

		while (now_s() < due) {
			struct timespec ts = {0, 200000};

			nanosleep(&ts, NULL);
		}
		if (n < 0)
			continue;
		if (sendto(fd[src], buf, (size_t)n, 0, (struct sockaddr *)&o.target, sizeof(o.target)) == n)
			sent[src][k]++;
		else
			errs++;
	}
	printf("{\"captured\": {\"reads\": %d, \"datagrams\": %d, \"seeds\": %d, \"reflect\": %d}, "
	       "\"seconds\": %.2f, "
	       "\"send_errors\": %lu,\n \"sent\": {",
	       pool.reads, pool.count, pool.seeds, reflect.count, now_s() - t0, errs);
	for (int j = 0; j < nsrc; j++) {
		enum source src = (enum source)srcs[j];

		printf("%s\n  \"%s\": {", j ? "," : "", source_names[src]);
		for (int k = 0; k < K__N; k++)
			if (listed(&o, k))
				printf("%s\"%s\": %lu", k ? ", " : "", kind_names[k], sent[src][k]);
		printf("}");
	}
	printf("},\n \"expect\": {");
	for (int j = 0; j < nsrc; j++) {
		enum source src = (enum source)srcs[j];

		printf("%s\n  \"%s\": {", j ? "," : "", source_names[src]);
		for (int k = 0; k < K__N; k++)
			if (listed(&o, k))
				printf("%s\"%s\": \"%s\"", k ? ", " : "", kind_names[k],
				       expect(&o, src, (enum kind)k));
		printf("}");
	}
	printf("},\n \"mark_sport\": {");
	for (int j = 0; j < nsrc; j++)
		printf("%s\"%s\": %d", j ? ", " : "", source_names[srcs[j]], o.mark_sport + srcs[j]);
	printf("}}\n");
	for (int j = 0; j < S__N; j++)
		if (fd[j] >= 0)
			close(fd[j]);
	for (int k = 0; k < 2; k++)
		for (int j = 0; j < pools[k]->count; j++)
			free(pools[k]->d[j]);
	return 0;
}
