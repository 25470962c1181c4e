/* main.c - setup, the signal loop; the only place that prints errors */
#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "basic.h"
#include "opts.h"
#include "pmtu.h"
#include "rx.h"
#include "sleeve.h"
#include "stats.h"
#include "tap.h"
#include "tx.h"
#include "udp.h"

#define GSO_MAX_SIZE 65536u
#define AUTO_TIMEOUT_MS 5000
#define SPIN_US_DEFAULT 100

/* The datapath's two threads, chosen once at start: batched with offloads
 * (rx.c, tx.c), or --basic's one syscall per packet (basic.c). */
struct datapath {
	void *(*rx)(void *);
	void *(*tx)(void *);
};
static const struct datapath batched = {sv_rx_thread, sv_tx_thread};
static const struct datapath unbatched = {sv_basic_rx_thread, sv_basic_tx_thread};

/* The threads started so far. */
struct threads {
	pthread_t rx, tx;
	int rx_up, tx_up;
};

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

/* The command line into the daemon's state; nothing opened yet. */
static void configure(struct sv *s, const struct opts *o)
{
	const char *e = getenv("SLEEVE_SPIN_US");
	int us = SPIN_US_DEFAULT;

	s->dev = o->dev;
	s->l3 = o->l3;
	s->basic = o->basic;
	s->batch = !o->basic && !o->nobatch;
	s->offload = !o->basic && !o->nooffload;
	s->segment = s->offload && o->segment;
	s->verbose = o->verbose;
	s->hb_ms = o->hb_ms;
	s->calibrate_ns = (uint64_t)o->calibrate_ns;
	s->mtu_auto = !o->mtu;
	s->stats_file = o->stats_file;
	s->tap_fd = s->udp_fd = -1;
	s->deliver = sv_tap_deliver;
	s->send_ctl = udp_send_ctl;
	s->start_ns = sv_now_ns();
	s->mtu = 1500;
	/* busy-poll window after traffic (see README "Latency"); 0 turns it off */
	if (e && sv_parse_int(e, 0, 1000000, &us) < 0)
		us = SPIN_US_DEFAULT;
	s->spin_ns = o->basic ? 0 : (uint64_t)us * 1000u;
	pthread_mutex_init(&s->lock, NULL);
}

/* 1 if a is the wildcard address of its family */
static int wildcard(const struct sockaddr_storage *a)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;

	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &any6, sizeof(any6));
}

/* The key, our AEADs, a session sealed under our own address; exit code. */
static int setup_crypto(struct sv *s, const struct opts *o, const struct sockaddr_storage *local)
{
	struct sv_ident me;
	struct timespec ts;
	uint64_t session;
	char err[512];
	int ret, pick, heard[SV_MAX_PEERS] = {0}, skip[SV_MAX_PEERS];
	unsigned none[SV_MAX_PEERS] = {0};

	if (wildcard(local) || sv_ident_of(&me, local) < 0) {
		sv_warn("--key-file: --local must be a specific address (it names this side in "
			"the key derivation), not '%s'", o->local);
		return 2;
	}
	if (sv_key_load(o->key_file, s->master, err, sizeof(err)) < 0) {
		sv_warn("%s", err);
		return 2;
	}
	s->enc = 1;
	s->cipher_flag = o->cipher;
	s->aead_acc = o->cipher ? SV_AEAD_BIT(o->cipher) : SV_AEAD_ALL;
	s->aead_fast = sv_aead_fast();
	/* before any peer is heard: our preferred one */
	pick = sv_aead_pick(s->aead_acc, s->aead_fast, s->npeers, heard, none, none, skip);
	if (getrandom(&session, sizeof(session), 0) != sizeof(session)) {
		sv_warn("getrandom: %s", strerror(errno));
		return 1;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ret = sv_seal_init(&s->seal, s->master, session,
			   (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, &me, pick);
	for (int i = 0; i < s->npeers && !ret; i++) {
		struct sv_ident id;

		ret = sv_ident_of(&id, &s->peers[i].addr);
		sv_open_init(&s->peers[i].open, &id);
	}
	if (ret) {
		sv_warn("cannot set up the AEAD contexts (OpenSSL): %s", strerror(-ret));
		return 1;
	}
	sv_log(s, "AEADs accepted 0x%x, fast here 0x%x, sealing with %s until peers are heard",
	       s->aead_acc, s->aead_fast, sv_aead_name(pick));
	return 0;
}

/* The peers' addresses: parsed, of --local's family, each once; exit code. */
static int setup_peers(struct sv *s, const struct opts *o)
{
	for (int i = 0; i < o->npeers; i++) {
		struct sv_peer *p = &s->peers[i];

		if (sv_addr_parse(o->peer[i], SV_DEFAULT_PORT, &p->addr, &p->alen) < 0) {
			sv_warn("--peer: bad address '%s' (ADDR[:PORT], numeric)", o->peer[i]);
			return 2;
		}
		if (p->addr.ss_family != s->family) {
			sv_warn("--peer %s: address family differs from --local", o->peer[i]);
			return 2;
		}
		for (int j = 0; j < i; j++)
			if (sv_addr_equal(&s->peers[j].addr, &p->addr)) {
				sv_warn("--peer %s given twice", o->peer[i]);
				return 2;
			}
		sv_addr_str(&p->addr, p->name, sizeof(p->name));
		s->npeers++;
	}
	return 0;
}

/* The offloads the kernel takes on the device (the most it offers first);
 * super-frames stay off until every peer has said it takes them. */
static void device_offloads(struct sv *s, const struct opts *o)
{
	static const unsigned tries[] = {
		TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN | TUN_F_USO4 | TUN_F_USO6,
		TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN,
		TUN_F_CSUM,
	};
	int ret;

	for (unsigned i = 0; i < sizeof(tries) / sizeof(tries[0]) && !s->tun_ok; i++)
		if (sv_tap_set_offload(s->tap_fd, tries[i]) == 0)
			s->tun_ok = tries[i];
	if (s->tun_ok && sv_tap_set_offload(s->tap_fd, TUN_F_CSUM) == 0)
		s->tso = TUN_F_CSUM;
	sv_log(s, "device offloads the kernel accepts: 0x%x", s->tun_ok);
	ret = sv_link_set_gso_max_size(o->dev, GSO_MAX_SIZE);
	if (ret < 0)
		sv_log(s, "gso_max_size %u on %s: %s", GSO_MAX_SIZE, o->dev, strerror(-ret));
}

/* The TAP or TUN device, not up yet; exit code. */
static int setup_device(struct sv *s, const struct opts *o)
{
	int ret;

	s->vnet = !o->basic && !o->nooffload;
	ret = sv_tap_open(o->dev, o->l3, s->vnet);
	if (ret < 0) {
		sv_warn("cannot create %s device %s: %s", o->l3 ? "TUN" : "TAP", o->dev,
			strerror(-ret));
		return 1;
	}
	s->tap_fd = ret;
	if (s->vnet)
		device_offloads(s, o);
	if (!o->basic && sv_tap_set_nonblock(s->tap_fd, 1) < 0) {
		sv_warn("%s: cannot make non-blocking: %s", o->dev, strerror(errno));
		return 1;
	}
	return 0;
}

/* The UDP socket, and each peer's path MTU from its route; exit code. */
static int setup_socket(struct sv *s, const struct opts *o, const struct sockaddr_storage *local,
			socklen_t llen)
{
	struct sv_udp_opts uo = {.gro = !o->basic && !o->nooffload, .bufsz = 8 << 20};
	int ret, gso_ok = 0;

	ret = sv_udp_open(local, llen, &uo, &s->udp_gro, &gso_ok);
	if (ret < 0) {
		sv_warn("cannot bind UDP %s: %s", o->local, strerror(-ret));
		return 1;
	}
	s->udp_fd = ret;
	s->udp_gso = !o->basic && !o->nooffload && gso_ok;
	s->mmsg = !o->basic;
	for (int i = 0; i < s->npeers; i++) {
		struct sv_peer *p = &s->peers[i];
		int mtu = sv_udp_route_mtu(local, &p->addr, llen);

		if (mtu < 0) {
			sv_warn("no route to peer %s: %s", p->name, strerror(-mtu));
			return 1;
		}
		p->pmtu = (uint32_t)(mtu - s->ip_over - 8);
	}
	return 0;
}

/* Everything set up before the device comes up; exit code on failure. */
static int setup(struct sv *s, const struct opts *o)
{
	struct sockaddr_storage local;
	socklen_t llen;
	int ret;

	if (sv_addr_parse(o->local, SV_DEFAULT_PORT, &local, &llen) < 0) {
		sv_warn("--local: bad address '%s' (ADDR[:PORT], numeric)", o->local);
		return 2;
	}
	s->family = local.ss_family;
	s->ip_over = s->family == AF_INET ? 20 : 40;
	ret = setup_peers(s, o);
	if (!ret && o->key_file)
		ret = setup_crypto(s, o, &local);
	if (!ret)
		ret = setup_device(s, o);
	if (!ret)
		ret = setup_socket(s, o, &local, llen);
	return ret;
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
			sv_warn("peer %s did not answer probes within %d ms; using the route MTU",
			       p->name, AUTO_TIMEOUT_MS);
			found = route;
		}
		__atomic_store_n(&p->pmtu, found, __ATOMIC_RELAXED);
	}
	s->mtu = (int)sv_min_pmtu(s) - payload;
	if (s->mtu < 68) {
		sv_warn("path MTU too small for an overlay (%d)", s->mtu);
		return 1;
	}
	return 0;
}

/* The device's MTU (given, or from the peers' answers to probes), then the
 * device up; exit code. */
static int device_up(struct sv *s, const struct opts *o)
{
	int ret = choose_mtu(s, o);

	if (ret)
		return ret;
	ret = sv_link_set_mtu(o->dev, s->mtu);
	if (ret < 0) {
		sv_warn("cannot set MTU %d on %s: %s", s->mtu, o->dev, strerror(-ret));
		return 1;
	}
	ret = sv_link_up(o->dev);
	if (ret < 0) {
		sv_warn("cannot bring %s up: %s", o->dev, strerror(-ret));
		return 1;
	}
	sv_warn("%s %s mtu %d (path mtu %u to %s, overhead %d%s%s%s)", o->l3 ? "TUN" : "TAP", o->dev,
		s->mtu, sv_min_pmtu(s) + (unsigned)s->ip_over + 8, s->peers[0].name, sv_overhead(s),
		s->mtu_auto ? ", discovered" : ", given", s->enc ? ", crypto" : "",
		s->basic ? ", basic" : "");
	return 0;
}

/* Set up, the receive thread (it hears the answers to the MTU probes), the
 * device up, the send thread, "ready"; exit code. */
static int start(struct sv *s, const struct opts *o, const struct datapath *dp, struct threads *t)
{
	int code = setup(s, o);

	if (code)
		return code;
	if (pthread_create(&t->rx, NULL, dp->rx, s) != 0) {
		sv_warn("cannot start the receive thread");
		return 1;
	}
	t->rx_up = 1;
	pthread_setname_np(t->rx, "sleeve-rx");
	sv_heartbeat_all(s);
	code = device_up(s, o);
	if (code)
		return code;
	if (pthread_create(&t->tx, NULL, dp->tx, s) != 0) {
		sv_warn("cannot start the send thread");
		return 1;
	}
	t->tx_up = 1;
	pthread_setname_np(t->tx, "sleeve-tx");
	sv_heartbeat_all(s);
	printf("ready dev=%s mtu=%d\n", o->dev, s->mtu);
	fflush(stdout);
	return 0;
}

static void write_stats(struct sv *s)
{
	int ret = sv_stats_write(s, s->stats_file);

	if (ret < 0)
		sv_warn("cannot write %s: %s", s->stats_file, strerror(-ret));
}

/* Heartbeats every --heartbeat-ms and stats on SIGUSR1, until SIGTERM or SIGINT. */
static void serve(struct sv *s, const sigset_t *set)
{
	uint64_t next_hb = sv_now_ns() + (uint64_t)s->hb_ms * 1000000ull;

	for (;;) {
		uint64_t now = sv_now_ns();
		uint64_t wait = next_hb > now ? next_hb - now : 0;
		struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000ull),
				      .tv_nsec = (long)(wait % 1000000000ull)};
		int sig = sigtimedwait(set, NULL, &ts);

		if (sig == SIGTERM || sig == SIGINT)
			break;
		if (sig == SIGUSR1 && s->stats_file)
			write_stats(s);
		if (sv_now_ns() >= next_hb) {
			sv_heartbeat_all(s);
			next_hb += (uint64_t)s->hb_ms * 1000000ull;
			if (next_hb < sv_now_ns())
				next_hb = sv_now_ns() + (uint64_t)s->hb_ms * 1000000ull;
		}
	}
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

/* The threads stopped, the last stats written, the device removed, the keys wiped. */
static void stop(struct sv *s, const struct opts *o, struct threads *t)
{
	if (t->tx_up) {
		pthread_cancel(t->tx);
		pthread_join(t->tx, NULL);
	}
	if (t->rx_up) {
		pthread_cancel(t->rx);
		pthread_join(t->rx, NULL);
	}
	if (s->stats_file && s->udp_fd >= 0)
		write_stats(s);
	if (s->udp_fd >= 0)
		close(s->udp_fd);
	if (s->tap_fd >= 0) {
		close(s->tap_fd);
		if (!device_gone(o->dev))
			sv_warn("device %s still present after close", o->dev);
	}
	for (int i = 0; i < s->npeers; i++) {
		sv_reasm_free(&s->peers[i].reasm);
		sv_open_free(&s->peers[i].open);
	}
	sv_seal_free(&s->seal);
	sv_wipe(s->master, sizeof(s->master));
}

int main(int argc, char **argv)
{
	static struct sv sv;
	struct sv *s = &sv;
	struct threads t = {0};
	struct opts o;
	sigset_t set;
	int code;

	code = sv_opts_parse(argc, argv, &o);
	if (code)
		return code == 1 ? 0 : 2;
	configure(s, &o);
	/* every thread inherits this mask; main takes the signals with sigtimedwait */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	code = start(s, &o, o.basic ? &unbatched : &batched, &t);
	if (!code)
		serve(s, &set);
	stop(s, &o, &t);
	return code;
}
