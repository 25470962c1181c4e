/* main.c - flags, setup, the signal loop; the only place that prints errors */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sleeve.h"
#include "tap.h"
#include "udp.h"

#define PROG "sleeve"
#define GSO_MAX_SIZE 65536u
#define AUTO_TIMEOUT_MS 5000
#define SPIN_US_DEFAULT 100

static int verbose_flag;

uint64_t sv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int sv_spin_yield(uint64_t now)
{
	sched_yield();
	return sv_now_ns() - now < 20000;
}

int sv_overhead(const struct sv *s)
{
	return s->ip_over + 8 + (int)sv_payload_over(s->l3, s->enc);
}

uint32_t sv_min_pmtu(struct sv *s)
{
	uint32_t m = UINT32_MAX;

	for (int i = 0; i < s->npeers; i++) {
		uint32_t v = __atomic_load_n(&s->peers[i].pmtu, __ATOMIC_RELAXED);

		if (v < m)
			m = v;
	}
	return m == UINT32_MAX ? 1472 : m;
}

void sv_log(const struct sv *s, const char *fmt, ...)
{
	va_list ap;

	if (s && !s->verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, PROG ": ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void warnx_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warnx_(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, PROG ": ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " --dev NAME --local ADDR[:PORT] --peer ADDR[:PORT] [--peer ...]\n"
		"              [--l3] [--mtu N|auto] [--basic] [--no-batch] [--no-offload] [--segment]\n"
		"              [--key-file FILE] [--stats-file FILE] [--heartbeat-ms N]\n"
		"              [--calibrate-ns N] [-v]\n"
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
		"  --key-file FILE     32 raw bytes, mode 0600: ChaCha20-Poly1305 on every datagram\n"
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
	printf(PROG " " SV_VERSION_STR "\n");
	printf("features: tap tun vnet_hdr tso uso udp_gso udp_gro mmsg batching segment pmtu "
	       "aead=chacha20poly1305-ietf libsodium=%s\n",
	       sodium_version_string());
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
	O_STATS,
	O_HB,
	O_CALIBRATE,
	O_VERSION,
	O_HELP,
};

struct opts {
	const char *dev, *local, *key_file, *stats_file;
	const char *peer[SV_MAX_PEERS];
	int npeers;
	int l3, basic, nobatch, nooffload, segment, verbose, hb_ms;
	int mtu; /* 0 = auto */
	int calibrate_ns;
};

static int parse_int(const char *s, long lo, long hi, int *out)
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

/* Returns 0, 1 (printed help/version: exit 0) or 2 (bad usage, message printed). */
static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
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
		{"stats-file", required_argument, NULL, O_STATS},
		{"heartbeat-ms", required_argument, NULL, O_HB},
		{"calibrate-ns", required_argument, NULL, O_CALIBRATE},
		{"version", no_argument, NULL, O_VERSION},
		{"help", no_argument, NULL, O_HELP},
		{NULL, 0, NULL, 0},
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->hb_ms = 1000;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":vh", lo, NULL)) != -1) {
		switch (c) {
		case O_DEV:
			if (!*optarg || strlen(optarg) >= IFNAMSIZ || strchr(optarg, '/') ||
			    strchr(optarg, ' ')) {
				warnx_("--dev: bad device name '%s' (1-%d characters)", optarg,
				       IFNAMSIZ - 1);
				return 2;
			}
			o->dev = optarg;
			break;
		case O_LOCAL:
			o->local = optarg;
			break;
		case O_PEER:
			if (o->npeers == SV_MAX_PEERS) {
				warnx_("--peer: at most %d peers", SV_MAX_PEERS);
				return 2;
			}
			o->peer[o->npeers++] = optarg;
			break;
		case O_L3:
			o->l3 = 1;
			break;
		case O_MTU:
			if (!strcmp(optarg, "auto"))
				o->mtu = 0;
			else if (parse_int(optarg, 68, 65535, &o->mtu) < 0) {
				warnx_("--mtu: expected 68..65535 or 'auto', got '%s'", optarg);
				return 2;
			}
			break;
		case O_BASIC:
			o->basic = 1;
			break;
		case O_SEGMENT:
			o->segment = 1;
			break;
		case O_NOBATCH:
			o->nobatch = 1;
			break;
		case O_NOOFFLOAD:
			o->nooffload = 1;
			break;
		case O_KEY:
			o->key_file = optarg;
			break;
		case O_STATS:
			o->stats_file = optarg;
			break;
		case O_HB:
			if (parse_int(optarg, 10, 600000, &o->hb_ms) < 0) {
				warnx_("--heartbeat-ms: expected 10..600000, got '%s'", optarg);
				return 2;
			}
			break;
		case O_CALIBRATE:
			if (parse_int(optarg, 0, 10000000, &o->calibrate_ns) < 0) {
				warnx_("--calibrate-ns: expected 0..10000000, got '%s'", optarg);
				return 2;
			}
			break;
		case 'v':
			o->verbose = 1;
			break;
		case O_VERSION:
			version();
			return 1;
		case 'h':
		case O_HELP:
			usage(stdout);
			return 1;
		case ':':
			warnx_("%s needs a value", argv[optind - 1]);
			return 2;
		default:
			warnx_("unknown option '%s' (see --help)", argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		warnx_("unexpected argument '%s' (see --help)", argv[optind]);
		return 2;
	}
	if (!o->dev || !o->local || !o->npeers) {
		warnx_("--dev, --local and --peer are required (see --help)");
		return 2;
	}
	return 0;
}

static int udp_send_ctl(struct sv *s, struct sv_peer *p, const uint8_t *d, size_t len)
{
	if (sendto(s->udp_fd, d, len, 0, (const struct sockaddr *)&p->addr, p->alen) < 0) {
		int e = errno;

		if (e != EMSGSIZE)
			sv_count_drop(&s->ctr_main, SV_D_SEND_ERR, 1);
		return -e;
	}
	return 0;
}

/* Everything set up before the device comes up; exit code on failure. */
static int setup(struct sv *s, const struct opts *o)
{
	struct sockaddr_storage local;
	socklen_t llen;
	struct sv_udp_opts uo = {.gro = !o->basic && !o->nooffload, .bufsz = 8 << 20};
	int ret, gso_ok = 0;
	char err[512];

	if (sv_addr_parse(o->local, SV_DEFAULT_PORT, &local, &llen) < 0) {
		warnx_("--local: bad address '%s' (ADDR[:PORT], numeric)", o->local);
		return 2;
	}
	s->family = local.ss_family;
	s->ip_over = s->family == AF_INET ? 20 : 40;
	for (int i = 0; i < o->npeers; i++) {
		struct sv_peer *p = &s->peers[i];

		if (sv_addr_parse(o->peer[i], SV_DEFAULT_PORT, &p->addr, &p->alen) < 0) {
			warnx_("--peer: bad address '%s' (ADDR[:PORT], numeric)", o->peer[i]);
			return 2;
		}
		if (p->addr.ss_family != s->family) {
			warnx_("--peer %s: address family differs from --local", o->peer[i]);
			return 2;
		}
		for (int j = 0; j < i; j++)
			if (sv_addr_equal(&s->peers[j].addr, &p->addr)) {
				warnx_("--peer %s given twice", o->peer[i]);
				return 2;
			}
		sv_addr_str(&p->addr, p->name, sizeof(p->name));
		s->npeers++;
	}
	if (sv_crypto_init() < 0) {
		warnx_("libsodium initialisation failed");
		return 1;
	}
	if (o->key_file) {
		if (sv_key_load(o->key_file, s->master, err, sizeof(err)) < 0) {
			warnx_("%s", err);
			return 2;
		}
		s->enc = 1;
		{
			uint64_t session;
			struct timespec ts;

			randombytes_buf(&session, sizeof(session));
			clock_gettime(CLOCK_REALTIME, &ts);
			sv_seal_init(&s->seal, s->master, session,
				     (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
		}
	}

	/* device */
	s->vnet = !o->basic && !o->nooffload;
	ret = sv_tap_open(o->dev, o->l3, s->vnet);
	if (ret < 0) {
		warnx_("cannot create %s device %s: %s", o->l3 ? "TUN" : "TAP", o->dev,
		       strerror(-ret));
		return 1;
	}
	s->tap_fd = ret;
	if (s->vnet) {
		static const unsigned tries[] = {
			TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN | TUN_F_USO4 | TUN_F_USO6,
			TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN,
			TUN_F_CSUM,
		};
		for (unsigned i = 0; i < sizeof(tries) / sizeof(tries[0]) && !s->tun_ok; i++)
			if (sv_tap_set_offload(s->tap_fd, tries[i]) == 0)
				s->tun_ok = tries[i];
		/* super-frames only once every peer has said it takes them */
		if (s->tun_ok && sv_tap_set_offload(s->tap_fd, TUN_F_CSUM) == 0)
			s->tso = TUN_F_CSUM;
		sv_log(s, "device offloads the kernel accepts: 0x%x", s->tun_ok);
		ret = sv_link_set_gso_max_size(o->dev, GSO_MAX_SIZE);
		if (ret < 0)
			sv_log(s, "gso_max_size %u on %s: %s", GSO_MAX_SIZE, o->dev, strerror(-ret));
	}
	if (!o->basic && sv_tap_set_nonblock(s->tap_fd, 1) < 0) {
		warnx_("%s: cannot make non-blocking: %s", o->dev, strerror(errno));
		return 1;
	}

	/* socket */
	ret = sv_udp_open(&local, llen, &uo, &s->udp_gro, &gso_ok);
	if (ret < 0) {
		warnx_("cannot bind UDP %s: %s", o->local, strerror(-ret));
		return 1;
	}
	s->udp_fd = ret;
	s->udp_gso = !o->basic && !o->nooffload && gso_ok;
	s->mmsg = !o->basic;
	for (int i = 0; i < s->npeers; i++) {
		struct sv_peer *p = &s->peers[i];
		int mtu = sv_udp_route_mtu(&local, &p->addr, llen);

		if (mtu < 0) {
			warnx_("no route to peer %s: %s", p->name, strerror(-mtu));
			return 1;
		}
		p->pmtu = (uint32_t)(mtu - s->ip_over - 8);
	}
	return 0;
}

static int choose_mtu(struct sv *s, const struct opts *o)
{
	int payload = (int)sv_payload_over(s->l3, s->enc);

	if (o->mtu) {
		s->mtu = o->mtu;
		return 0;
	}
	for (int i = 0; i < s->npeers; i++) {
		struct sv_peer *p = &s->peers[i];
		uint32_t route = p->pmtu;
		uint32_t found = sv_pmtu_discover(s, p, route, AUTO_TIMEOUT_MS);

		if (!found) {
			warnx_("peer %s did not answer probes within %d ms; using the route MTU",
			       p->name, AUTO_TIMEOUT_MS);
			found = route;
		}
		__atomic_store_n(&p->pmtu, found, __ATOMIC_RELAXED);
	}
	s->mtu = (int)sv_min_pmtu(s) - payload;
	if (s->mtu < 68) {
		warnx_("path MTU too small for an overlay (%d)", s->mtu);
		return 1;
	}
	return 0;
}

static int device_gone(const char *dev)
{
	for (int i = 0; i < 100; i++) {
		if (if_nametoindex(dev) == 0)
			return 1;
		usleep(10000);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct sv sv;
	struct sv *s = &sv;
	struct opts o;
	sigset_t set;
	pthread_t rx, tx;
	int ret, rx_up = 0, tx_up = 0, code = 0;
	uint64_t next_hb;

	ret = parse_args(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;

	s->dev = o.dev;
	s->l3 = o.l3;
	s->basic = o.basic;
	s->batch = !o.basic && !o.nobatch;
	s->offload = !o.basic && !o.nooffload;
	s->segment = s->offload && o.segment;
	s->verbose = verbose_flag = o.verbose;
	s->hb_ms = o.hb_ms;
	s->calibrate_ns = (uint64_t)o.calibrate_ns;
	s->mtu_auto = !o.mtu;
	s->stats_file = o.stats_file;
	s->tap_fd = s->udp_fd = -1;
	s->deliver = sv_tap_deliver;
	s->send_ctl = udp_send_ctl;
	s->start_ns = sv_now_ns();
	s->mtu = 1500;
	{
		/* busy-poll window after traffic (see README "Latency"); 0 turns it off */
		const char *e = getenv("SLEEVE_SPIN_US");
		int us = SPIN_US_DEFAULT;

		if (e && parse_int(e, 0, 1000000, &us) < 0)
			us = SPIN_US_DEFAULT;
		s->spin_ns = o.basic ? 0 : (uint64_t)us * 1000u;
	}
	pthread_mutex_init(&s->lock, NULL);

	/* every thread inherits this mask; main takes the signals with sigtimedwait */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	code = setup(s, &o);
	if (code)
		goto out;
	if (pthread_create(&rx, NULL, sv_rx_thread, s) != 0) {
		warnx_("cannot start the receive thread");
		code = 1;
		goto out;
	}
	rx_up = 1;
	pthread_setname_np(rx, "sleeve-rx");
	sv_heartbeat_all(s);
	code = choose_mtu(s, &o);
	if (code)
		goto out;
	ret = sv_link_set_mtu(o.dev, s->mtu);
	if (ret < 0) {
		warnx_("cannot set MTU %d on %s: %s", s->mtu, o.dev, strerror(-ret));
		code = 1;
		goto out;
	}
	ret = sv_link_up(o.dev);
	if (ret < 0) {
		warnx_("cannot bring %s up: %s", o.dev, strerror(-ret));
		code = 1;
		goto out;
	}
	warnx_("%s %s mtu %d (path mtu %u to %s, overhead %d%s%s%s)", o.l3 ? "TUN" : "TAP", o.dev,
	       s->mtu, sv_min_pmtu(s) + (unsigned)s->ip_over + 8, s->peers[0].name, sv_overhead(s),
	       s->mtu_auto ? ", discovered" : ", given", s->enc ? ", crypto" : "",
	       s->basic ? ", basic" : "");
	if (pthread_create(&tx, NULL, sv_tx_thread, s) != 0) {
		warnx_("cannot start the send thread");
		code = 1;
		goto out;
	}
	tx_up = 1;
	pthread_setname_np(tx, "sleeve-tx");
	sv_heartbeat_all(s);
	printf("ready dev=%s mtu=%d\n", o.dev, s->mtu);
	fflush(stdout);

	next_hb = sv_now_ns() + (uint64_t)s->hb_ms * 1000000ull;
	for (;;) {
		uint64_t now = sv_now_ns();
		uint64_t wait = next_hb > now ? next_hb - now : 0;
		struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000ull),
				      .tv_nsec = (long)(wait % 1000000000ull)};
		int sig = sigtimedwait(&set, NULL, &ts);

		if (sig == SIGTERM || sig == SIGINT)
			break;
		if (sig == SIGUSR1 && s->stats_file) {
			ret = sv_stats_write(s, s->stats_file);
			if (ret < 0)
				warnx_("cannot write %s: %s", s->stats_file, strerror(-ret));
		}
		if (sv_now_ns() >= next_hb) {
			sv_heartbeat_all(s);
			next_hb += (uint64_t)s->hb_ms * 1000000ull;
			if (next_hb < sv_now_ns())
				next_hb = sv_now_ns() + (uint64_t)s->hb_ms * 1000000ull;
		}
	}
out:
	if (tx_up) {
		pthread_cancel(tx);
		pthread_join(tx, NULL);
	}
	if (rx_up) {
		pthread_cancel(rx);
		pthread_join(rx, NULL);
	}
	if (s->stats_file && s->udp_fd >= 0) {
		ret = sv_stats_write(s, s->stats_file);
		if (ret < 0)
			warnx_("cannot write %s: %s", s->stats_file, strerror(-ret));
	}
	if (s->udp_fd >= 0)
		close(s->udp_fd);
	if (s->tap_fd >= 0) {
		close(s->tap_fd);
		if (!device_gone(o.dev))
			warnx_("device %s still present after close", o.dev);
	}
	for (int i = 0; i < s->npeers; i++)
		sv_reasm_free(&s->peers[i].reasm);
	sodium_memzero(s->master, sizeof(s->master));
	sodium_memzero(&s->seal, sizeof(s->seal));
	return code;
}
