/* sleeve.h - the daemon's state, shared by the datapath threads: types and
 * inline helpers only; each .c file's functions are in its own header */
#ifndef SLEEVE_SLEEVE_H
#define SLEEVE_SLEEVE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "crypto.h"
#include "env.h"
#include "frame.h"
#include "gro.h"
#include "reasm.h"

#define SV_VERSION_STR "0.5.0"
#define SV_MAX_PEERS 16
#define SV_ROUTE_SLOTS 1024 /* where sources live, learned (route.h) */

enum sv_ctr {
	SV_C_TX_FRAMES,
	SV_C_TX_BYTES,
	SV_C_TX_DGRAMS,
	SV_C_TX_BATCHES,
	SV_C_TX_SUPER,
	SV_C_TX_FRAGS,
	SV_C_TX_SEGMENTED,
	SV_C_TX_CALLS,
	SV_C_RX_FRAMES,
	SV_C_RX_BYTES,
	SV_C_RX_DGRAMS,
	SV_C_RX_SUPER,
	SV_C_RX_FRAGS,
	SV_C_RX_COALESCED,
	SV_C_RX_CALLS,
	SV_C_HB_SENT,
	SV_C_HB_RECV,
	SV_C_PROBE_SENT,
	SV_C_PROBE_ACKED,
	SV_C_SPIN_HIT,  /* polling found work */
	SV_C_SPIN_MISS, /* polling gave up, the thread slept */
	SV_C_SPIN_NS,   /* time spent polling */
	SV_C_SLEEPS,    /* woke from a sleep with work */
	SV_C__MAX
};

/* One writer thread per block; others read with atomic loads. */
struct sv_counters {
	uint64_t c[SV_C__MAX];
	uint64_t drop[SV_D__MAX];
} __attribute__((aligned(64)));

static inline void sv_count(struct sv_counters *k, enum sv_ctr i, uint64_t n)
{
	__atomic_store_n(&k->c[i], k->c[i] + n, __ATOMIC_RELAXED);
}
static inline void sv_count_drop(struct sv_counters *k, enum sv_drop d, uint64_t n)
{
	__atomic_store_n(&k->drop[d], k->drop[d] + n, __ATOMIC_RELAXED);
}

struct sv_peer {
	struct sockaddr_storage addr;
	socklen_t alen;
	char name[64];
	/* owned by the rx thread */
	struct sv_open open;
	struct sv_reasm reasm;
	/* shared: atomic loads/stores */
	uint64_t last_heard_ns;
	uint32_t caps;
	int heard;
	uint32_t probe_ack_id, probe_ack_size;
	uint32_t pmtu; /* largest UDP payload to this peer */
	/* AEADs it advertised (heartbeat); sv_update_cipher decides aead_skip */
	uint32_t aead_acc, aead_fast;
	int aead_skip; /* accepts none of ours: no DATA or FRAG to it */
	int aead_told; /* the refusal was logged */
	/* with a key: the session of the newest HEARTBEAT that authenticated from it
	 * (atomic; our HEARTBEATs echo it) and that HEARTBEAT's counter (rx thread) */
	uint64_t echo, echo_ctr;
};

struct sv;
/* Hands one frame to the device: the bytes of iov[0..n) in order; with has_vnet
 * they start with a virtio_net_hdr, otherwise the writer supplies one if needed. */
typedef int (*sv_deliver_fn)(struct sv *s, const struct iovec *iov, int n, int has_vnet);
/* Sends one control datagram (already sealed) to a peer. */
typedef int (*sv_send_fn)(struct sv *s, struct sv_peer *p, const uint8_t *dgram, size_t len);

struct sv {
	/* configuration */
	const char *dev;
	int l3, basic, batch, offload, segment, verbose, hb_ms;
	uint64_t spin_ns; /* busy-poll up to this long after traffic before sleeping */
	uint64_t calibrate_ns; /* --calibrate-ns: busy-wait per frame to or from the device */
	int mtu_auto, mtu; /* mtu: the device MTU in effect */
	const char *stats_file;
	int enc;
	uint8_t master[SV_KEY_LEN];
	struct sv_seal seal;
	int cipher_flag;         /* --cipher: 0 auto, else the only AEAD accepted */
	unsigned aead_acc, aead_fast; /* our masks (SV_AEAD_BIT) */
	int family;
	int ip_over; /* outer IP header: 20 or 40 */

	/* runtime */
	int tap_fd, udp_fd;
	int vnet;      /* device opened with IFF_VNET_HDR */
	int tso;       /* TSO currently on (super-frames come from the device) */
	unsigned tun_ok; /* TUN_F_* the kernel accepted */
	int udp_gso, udp_gro, mmsg;
	struct sv_peer peers[SV_MAX_PEERS];
	int npeers;
	uint64_t routes[SV_ROUTE_SLOTS]; /* where each source lives (route.h) */
	int rx_from; /* the peer whose datagram the rx thread is opening (its index) */
	struct sv_counters ctr_tx, ctr_rx, ctr_main;
	sv_deliver_fn deliver;
	sv_send_fn send_ctl;
	uint64_t start_ns;
	uint32_t hb_seq;
	pthread_mutex_t lock; /* offload and cipher changes */
	struct sv_gro gro; /* owned by the rx thread */
};

/* --calibrate-ns: spend a fixed time on one frame (a known, adjustable slowdown). */
static inline void sv_calibrate(const struct sv *s)
{
	uint64_t end;

	if (!s->calibrate_ns)
		return;
	end = sv_now_ns() + s->calibrate_ns;
	while (sv_now_ns() < end)
		;
}
/* The flags every datagram of this daemon carries: ENC with a key, L3 with --l3. */
static inline uint8_t sv_base_flags(const struct sv *s)
{
	return (uint8_t)((s->enc ? SV_F_ENC : 0) | (s->l3 ? SV_F_L3 : 0));
}
/* 1 if no DATA or FRAG may go to p (it accepts none of our AEADs) */
static inline int sv_peer_skipped(const struct sv_peer *p)
{
	return __atomic_load_n(&p->aead_skip, __ATOMIC_RELAXED);
}

#endif
