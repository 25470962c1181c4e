/* pmtu.c - heartbeats, DF probes, path MTU discovery and the MTU arithmetic */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "pmtu.h"
#include "sleeve.h"
#include "tap.h"

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

/* Writes the header and seals: returns the datagram length, 0 if it could not
 * be sealed (then nothing may be sent). */
static size_t finish(struct sv *s, uint8_t *buf, uint8_t type, size_t body_len)
{
	sv_hdr_put(buf, type, sv_base_flags(s), (uint16_t)body_len);
	if (s->enc)
		return sv_seal_ctl(&s->seal, buf, body_len);
	return SV_HDR_LEN + body_len;
}

uint16_t sv_my_caps(const struct sv *s)
{
	uint16_t caps = 0;

	if (s->vnet)
		caps |= SV_CAP_GSO_RX;
	if (s->vnet && (s->tun_ok & TUN_F_USO4))
		caps |= SV_CAP_USO_RX;
	return caps;
}

size_t sv_build_heartbeat(struct sv *s, struct sv_peer *p, uint8_t *buf, int want_reply)
{
	uint8_t *body = buf + sv_body_off(s->enc);
	uint32_t seq = __atomic_fetch_add(&s->hb_seq, 1, __ATOMIC_RELAXED);

	sv_put16(body, (uint16_t)(sv_my_caps(s) | (want_reply ? SV_CAP_WANT_REPLY : 0)));
	sv_put16(body + 2, (uint16_t)s->mtu);
	sv_put32(body + 4, seq);
	body[8] = s->enc ? (uint8_t)s->aead_acc : 0;
	body[9] = s->enc ? (uint8_t)s->aead_fast : 0;
	/* the peer's session as last heard: proves to it that this HEARTBEAT is new */
	sv_put64(body + 10, s->enc ? __atomic_load_n(&p->echo, __ATOMIC_RELAXED) : 0);
	return finish(s, buf, SV_T_HEARTBEAT, SV_HB_LEN);
}

void sv_heartbeat_all(struct sv *s)
{
	uint8_t buf[128];

	for (int i = 0; i < s->npeers; i++) {
		struct sv_peer *p = &s->peers[i];
		size_t n = sv_build_heartbeat(s, p, buf, !__atomic_load_n(&p->heard, __ATOMIC_RELAXED));

		if (n && s->send_ctl(s, p, buf, n) == 0)
			sv_count(&s->ctr_main, SV_C_HB_SENT, 1);
	}
}

size_t sv_build_probe(struct sv *s, uint8_t *buf, uint32_t id, size_t size)
{
	size_t over = sv_dgram_over(s->enc), body_len;
	uint8_t *body = buf + sv_body_off(s->enc);

	body_len = size > over + SV_PROBE_MIN ? size - over : SV_PROBE_MIN;
	memset(body, 0, body_len);
	sv_put32(body, id);
	return finish(s, buf, SV_T_PROBE, body_len);
}

size_t sv_build_probe_ack(struct sv *s, uint8_t *buf, uint32_t id, uint32_t size)
{
	uint8_t *body = buf + sv_body_off(s->enc);

	sv_put32(body, id);
	sv_put32(body + 4, size);
	return finish(s, buf, SV_T_PROBE_ACK, SV_PROBE_ACK_LEN);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* 1 = the peer acknowledged a probe of this size, 0 = it did not in time. */
static int try_size(struct sv *s, struct sv_peer *p, uint8_t *buf, uint32_t size, int tries)
{
	static uint32_t next_id = 1;

	for (int t = 0; t < tries; t++) {
		uint32_t id = next_id++;
		size_t n = sv_build_probe(s, buf, id, size);

		if (!n || s->send_ctl(s, p, buf, n) == -EMSGSIZE)
			return 0;
		sv_count(&s->ctr_main, SV_C_PROBE_SENT, 1);
		for (int w = 0; w < 100; w++) {
			if (__atomic_load_n(&p->probe_ack_id, __ATOMIC_ACQUIRE) == id)
				return __atomic_load_n(&p->probe_ack_size, __ATOMIC_RELAXED) >= size;
			sleep_ms(1);
		}
	}
	return 0;
}

uint32_t sv_pmtu_discover(struct sv *s, struct sv_peer *p, uint32_t upper, int timeout_ms)
{
	static uint8_t buf[SV_MAX_DGRAM + 64];
	uint64_t deadline = sv_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	uint32_t lo = 548, hi = upper; /* 576 - IPv4 - UDP: assumed to work */

	if (upper > SV_MAX_DGRAM)
		hi = upper = SV_MAX_DGRAM;
	/* is the peer there at all? */
	while (!try_size(s, p, buf, 64, 1)) {
		if (sv_now_ns() > deadline)
			return 0;
	}
	if (try_size(s, p, buf, upper, 3))
		return upper;
	if (lo >= hi)
		return hi;
	hi--; /* upper failed */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;

		if (try_size(s, p, buf, mid, 3))
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}
