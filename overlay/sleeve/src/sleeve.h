/* sleeve.h - the daemon's state, shared by the datapath threads */
#ifndef SLEEVE_SLEEVE_H
#define SLEEVE_SLEEVE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "crypto.h"
#include "frame.h"
#include "gro.h"
#include "reasm.h"
#include "spin.h"

#define SV_VERSION_STR "0.5.0"
#define SV_MAX_PEERS 16

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
	struct sv_counters ctr_tx, ctr_rx, ctr_main;
	sv_deliver_fn deliver;
	sv_send_fn send_ctl;
	uint64_t start_ns;
	uint32_t hb_seq;
	pthread_mutex_t lock; /* offload and cipher changes */
	struct sv_gro gro; /* owned by the rx thread */
};

uint64_t sv_now_ns(void);
/* One busy-poll step: yields the CPU; returns 0 when someone else needed it (the
 * yield took long), so that polling only ever uses otherwise idle CPU. */
int sv_spin_yield(uint64_t now);
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
/* Overhead from the overlay MTU to the underlay MTU (outer IP included). */
int sv_overhead(const struct sv *s);
/* Largest UDP payload allowed towards every peer. */
uint32_t sv_min_pmtu(struct sv *s);
void sv_log(const struct sv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Always printed (a condition the operator must see, e.g. a refused peer). */
void sv_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* stats.c */
int sv_stats_write(struct sv *s, const char *path);

/* rx.c */
enum sv_drop sv_rx_datagram(struct sv *s, struct sv_peer *p, uint8_t *d, size_t n, uint64_t now);
/* The receive entry: what one recvmmsg (or recvfrom) returned, n messages, as
 * the kernel fills them: the bytes in msg_iov[0] (msg_len of them, MSG_TRUNC in
 * msg_flags if they did not fit), the source in msg_name/msg_namelen, the UDP_GRO
 * segment size in msg_control. Every datagram is counted once and delivered or
 * dropped by reason; the batch is settled before it returns, so the caller may
 * reuse the buffers. */
void sv_rx_batch(struct sv *s, struct mmsghdr *msg, unsigned n, uint64_t now);
/* The peer at exactly this address and port, or NULL (alen: the address's length). */
struct sv_peer *sv_peer_find(struct sv *s, const struct sockaddr_storage *a, socklen_t alen);
void *sv_rx_thread(void *arg);
/* rxctl.c: a control datagram (d, header h, opened body) from p */
enum sv_drop sv_rx_ctl(struct sv *s, struct sv_peer *p, const uint8_t *d, const struct sv_hdr *h,
		       const uint8_t *body, size_t n, uint64_t now);
/* 1 if the virtio_net_hdr in front of a VNET unit from the network (len bytes in
 * iov[0..n)) names only offloads this side advertised and fits its frame */
int sv_vnet_ok(const struct sv *s, const struct iovec *iov, int n, size_t len);
void sv_update_tso(struct sv *s);
/* Recomputes the AEAD to seal with and the peers refused, from the heartbeats. */
void sv_update_cipher(struct sv *s);
/* 1 if no DATA or FRAG may go to p (it accepts none of our AEADs) */
static inline int sv_peer_skipped(const struct sv_peer *p)
{
	return __atomic_load_n(&p->aead_skip, __ATOMIC_RELAXED);
}
int sv_tap_deliver(struct sv *s, const struct iovec *iov, int n, int has_vnet);
/* after a receive batch, before its buffers are reused */
void sv_rx_settle(struct sv *s);
/* writes out a super-frame being gathered from segments (--segment) */
void sv_rx_gro_flush(struct sv *s);

/* tx.c */
void *sv_tx_thread(void *arg);

/* pmtu.c: heartbeats and probes */
/* The caps this side's HEARTBEATs advertise (SV_CAP_*). */
uint16_t sv_my_caps(const struct sv *s);
size_t sv_build_heartbeat(struct sv *s, struct sv_peer *p, uint8_t *buf, int want_reply);
void sv_heartbeat_all(struct sv *s);
size_t sv_build_probe(struct sv *s, uint8_t *buf, uint32_t id, size_t size);
size_t sv_build_probe_ack(struct sv *s, uint8_t *buf, uint32_t id, uint32_t size);
uint32_t sv_pmtu_discover(struct sv *s, struct sv_peer *p, uint32_t upper, int timeout_ms);

#endif
