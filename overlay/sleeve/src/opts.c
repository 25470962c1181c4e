/* opts.c - the command line */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "opts.h"
#include "sleeve.h"

#define PROG "sleeve"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " --dev NAME --local ADDR[:PORT] --peer ADDR[:PORT] [--peer ...]\n"
		"              [--l3] [--mtu N|auto] [--basic] [--no-batch] [--no-offload] [--segment]\n"
		"              [--key-file FILE [--cipher auto|aes-256-gcm|chacha20-poly1305]]\n"
		"              [--stats-file FILE] [--heartbeat-ms N] [--calibrate-ns N] [-v]\n"
		"              [--version] [--help]\n"
		"\n"
		"Moves frames between a TAP (or TUN with --l3) device and UDP (port %d).\n"
		"  --dev NAME          device to create (removed on exit)\n"
		"  --local ADDR[:PORT] underlay address to bind\n"
		"  --peer ADDR[:PORT]  peer sleeve (repeatable)\n"
		"  --l3                TUN: IP packets instead of Ethernet frames\n"
		"  --mtu N|auto        device MTU; auto (default) = path MTU - overhead\n"
		"  --basic             one frame per datagram, one syscall per packet, no offloads\n"
		"  --no-batch          one frame per datagram\n"
		"  --no-offload        no vnet header/TSO on the device, no UDP GSO/GRO\n"
		"  --segment           cut TCP super-frames into MSS-sized frames here instead of\n"
		"                      carrying them whole (they still leave in UDP GSO trains)\n"
		"  --key-file FILE     32 raw bytes, mode 0600: every datagram sealed (AEAD)\n"
		"  --cipher C          with a key: auto (default: the fastest both peers have),\n"
		"                      aes-256-gcm or chacha20-poly1305 (only that one)\n"
		"  --stats-file FILE   counters JSON on SIGUSR1 and at exit\n"
		"  --heartbeat-ms N    heartbeat interval (default 1000)\n"
		"  --calibrate-ns N    busy-wait N ns per frame read from or written to the device:\n"
		"                      a known slowdown for measuring benchmarks (default 0)\n"
		"  -v                  log decisions to stderr\n"
		"Prints 'ready dev=NAME mtu=N' on stdout when the device is up.\n",
		SV_DEFAULT_PORT);
}

static void version(void)
{
	unsigned fast = sv_aead_fast();

	printf(PROG " " SV_VERSION_STR "\n");
	printf("features: tap tun vnet_hdr tso uso udp_gso udp_gro mmsg batching segment pmtu "
	       "wire=%d aead=aes-256-gcm,chacha20-poly1305 fast=%s%s%s openssl=%s%s\n",
	       SV_VERSION, fast & SV_AEAD_BIT(SV_AEAD_AES256GCM) ? "aes-256-gcm" : "",
	       fast == SV_AEAD_ALL ? "," : "", fast & SV_AEAD_BIT(SV_AEAD_CHACHA20POLY1305) ? "chacha20-poly1305" : "",
	       OpenSSL_version(OPENSSL_VERSION_STRING),
#ifdef SV_AWSLC
	       " aes-256-gcm-from=aws-lc"
#else
	       ""
#endif
	);
}

enum {
	O_DEV = 256,
	O_LOCAL,
	O_PEER,
	O_L3,
	O_MTU,
	O_BASIC,
	O_NOBATCH,
	O_SEGMENT,
	O_NOOFFLOAD,
	O_KEY,
	O_CIPHER,
	O_STATS,
	O_HB,
	O_CALIBRATE,
	O_VERSION,
	O_HELP,
};

int sv_parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || !*s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

static const struct option long_opts[] = {
	{"dev", required_argument, NULL, O_DEV},
	{"local", required_argument, NULL, O_LOCAL},
	{"peer", required_argument, NULL, O_PEER},
	{"l3", no_argument, NULL, O_L3},
	{"mtu", required_argument, NULL, O_MTU},
	{"basic", no_argument, NULL, O_BASIC},
	{"no-batch", no_argument, NULL, O_NOBATCH},
	{"segment", no_argument, NULL, O_SEGMENT},
	{"no-offload", no_argument, NULL, O_NOOFFLOAD},
	{"key-file", required_argument, NULL, O_KEY},
	{"cipher", required_argument, NULL, O_CIPHER},
	{"stats-file", required_argument, NULL, O_STATS},
	{"heartbeat-ms", required_argument, NULL, O_HB},
	{"calibrate-ns", required_argument, NULL, O_CALIBRATE},
	{"version", no_argument, NULL, O_VERSION},
	{"help", no_argument, NULL, O_HELP},
	{NULL, 0, NULL, 0},
};

/* The field an option without a value sets to 1, or NULL. */
static int *flag_of(int c, struct opts *o)
{
	switch (c) {
	case O_L3:
		return &o->l3;
	case O_BASIC:
		return &o->basic;
	case O_SEGMENT:
		return &o->segment;
	case O_NOBATCH:
		return &o->nobatch;
	case O_NOOFFLOAD:
		return &o->nooffload;
	case 'v':
		return &o->verbose;
	}
	return NULL;
}

/* An option that names something: 0, or 2 (bad usage, message printed). */
static int name_opt(int c, const char *arg, struct opts *o)
{
	switch (c) {
	case O_DEV:
		if (!*arg || strlen(arg) >= IFNAMSIZ || strchr(arg, '/') || strchr(arg, ' ')) {
			sv_warn("--dev: bad device name '%s' (1-%d characters)", arg, IFNAMSIZ - 1);
			return 2;
		}
		o->dev = arg;
		break;
	case O_LOCAL:
		o->local = arg;
		break;
	case O_PEER:
		if (o->npeers == SV_MAX_PEERS) {
			sv_warn("--peer: at most %d peers", SV_MAX_PEERS);
			return 2;
		}
		o->peer[o->npeers++] = arg;
		break;
	case O_KEY:
		o->key_file = arg;
		break;
	case O_STATS:
		o->stats_file = arg;
		break;
	}
	return 0;
}

/* An option with a number or a choice: 0, or 2 (bad usage, message printed). */
static int value_opt(int c, const char *arg, struct opts *o)
{
	switch (c) {
	case O_MTU:
		if (!strcmp(arg, "auto"))
			o->mtu = 0;
		else if (sv_parse_int(arg, 68, 65535, &o->mtu) < 0) {
			sv_warn("--mtu: expected 68..65535 or 'auto', got '%s'", arg);
			return 2;
		}
		break;
	case O_CIPHER:
		if (strcmp(arg, "auto") && !sv_aead_by_name(arg)) {
			sv_warn("--cipher: expected auto, aes-256-gcm or chacha20-poly1305, got '%s'",
				arg);
			return 2;
		}
		o->cipher = sv_aead_by_name(arg);
		o->cipher_given = 1;
		break;
	case O_HB:
		if (sv_parse_int(arg, 10, 600000, &o->hb_ms) < 0) {
			sv_warn("--heartbeat-ms: expected 10..600000, got '%s'", arg);
			return 2;
		}
		break;
	case O_CALIBRATE:
		if (sv_parse_int(arg, 0, 10000000, &o->calibrate_ns) < 0) {
			sv_warn("--calibrate-ns: expected 0..10000000, got '%s'", arg);
			return 2;
		}
		break;
	}
	return 0;
}

/* One option getopt_long returned: -1 to go on, else what sv_opts_parse returns. */
static int one_opt(int c, char **argv, struct opts *o)
{
	int *flag = flag_of(c, o);

	if (flag) {
		*flag = 1;
		return -1;
	}
	switch (c) {
	case O_DEV:
	case O_LOCAL:
	case O_PEER:
	case O_KEY:
	case O_STATS:
		return name_opt(c, optarg, o) ? 2 : -1;
	case O_MTU:
	case O_CIPHER:
	case O_HB:
	case O_CALIBRATE:
		return value_opt(c, optarg, o) ? 2 : -1;
	case O_VERSION:
		version();
		return 1;
	case 'h':
	case O_HELP:
		usage(stdout);
		return 1;
	case ':':
		sv_warn("%s needs a value", argv[optind - 1]);
		return 2;
	}
	sv_warn("unknown option '%s' (see --help)", argv[optind - 1]);
	return 2;
}

int sv_opts_parse(int argc, char **argv, struct opts *o)
{
	int c, ret;

	memset(o, 0, sizeof(*o));
	o->hb_ms = 1000;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":vh", long_opts, NULL)) != -1) {
		ret = one_opt(c, argv, o);
		if (ret >= 0)
			return ret;
	}
	if (optind < argc) {
		sv_warn("unexpected argument '%s' (see --help)", argv[optind]);
		return 2;
	}
	if (!o->dev || !o->local || !o->npeers) {
		sv_warn("--dev, --local and --peer are required (see --help)");
		return 2;
	}
	if (o->cipher_given && !o->key_file) {
		sv_warn("--cipher needs --key-file (without a key nothing is sealed)");
		return 2;
	}
	return 0;
}
