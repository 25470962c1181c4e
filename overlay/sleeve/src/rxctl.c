/* rxctl.c - network -> this side: control datagrams (HEARTBEAT and the session
 * it proves, PROBE, PROBE_ACK) and the check of a virtio_net_hdr from the network */
#include <endian.h>
#include <linux/virtio_net.h>
#include <string.h>

#include "agree.h"
#include "pmtu.h"
#include "rxctl.h"
#include "sleeve.h"

#ifndef VIRTIO_NET_HDR_GSO_UDP_L4
#define VIRTIO_NET_HDR_GSO_UDP_L4 5 /* linux/virtio_net.h before 5.18 */
#endif

/* What a HEARTBEAT of a proven session (or without a key) tells about its peer. */
static void hb_apply(struct sv *s, struct sv_peer *p, const uint8_t *body, uint64_t now)
{
	uint32_t caps, old, acc = body[8], fast = body[9];
	int was, aead_new;

	caps = sv_get16(body) & ~SV_CAP_WANT_REPLY;
	old = __atomic_exchange_n(&p->caps, caps, __ATOMIC_RELAXED);
	aead_new = __atomic_exchange_n(&p->aead_acc, acc, __ATOMIC_RELAXED) != acc;
	aead_new |= __atomic_exchange_n(&p->aead_fast, fast, __ATOMIC_RELAXED) != fast;
	was = __atomic_exchange_n(&p->heard, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&p->last_heard_ns, now, __ATOMIC_RELAXED);
	if (!was || old != caps)
		sv_update_tso(s);
	if (s->enc && (!was || aead_new))
		sv_update_cipher(s);
}

/* With a key, a HEARTBEAT under a session not proven yet proves it when it
 * echoes our session; its contents count only once the session is proven. We
 * answer at once when asked, when the peer does not echo our session yet (it
 * needs ours to prove), and when this one proved the peer's (it needs our echo). */
static enum sv_drop rx_heartbeat(struct sv *s, struct sv_peer *p, const uint8_t *d,
				 const struct sv_hdr *h, const uint8_t *body, uint64_t now)
{
	uint8_t out[128];
	size_t len;
	int proven = 1, tell = 0;

	if (h->len < SV_HB_LEN)
		return SV_D_BAD_LENGTH;
	if (s->enc) {
		uint64_t session = sv_get64(d + SV_HDR_LEN), ctr = sv_get64(d + SV_HDR_LEN + 8);
		int echoed = sv_get64(body + 10) == s->seal.session;

		if (ctr > p->echo_ctr) {
			p->echo_ctr = ctr;
			__atomic_store_n(&p->echo, session, __ATOMIC_RELAXED);
		}
		proven = sv_open_proven(&p->open, session);
		if (!proven && echoed) {
			sv_open_prove(&p->open, ctr);
			sv_log(s, "peer %s: session %016llx proven", p->name, (unsigned long long)session);
			proven = tell = 1;
		}
		tell |= !echoed;
	}
	sv_count(&s->ctr_rx, SV_C_HB_RECV, 1);
	if (proven)
		hb_apply(s, p, body, now);
	if (tell || (sv_get16(body) & SV_CAP_WANT_REPLY)) {
		len = sv_build_heartbeat(s, p, out, 0);
		if (len && s->send_ctl(s, p, out, len) == 0)
			sv_count(&s->ctr_rx, SV_C_HB_SENT, 1);
	}
	return SV_OK;
}

enum sv_drop sv_rx_ctl(struct sv *s, struct sv_peer *p, const uint8_t *d, const struct sv_hdr *h,
		       const uint8_t *body, size_t n, uint64_t now)
{
	uint8_t out[128];
	size_t len;

	switch (h->type) {
	case SV_T_HEARTBEAT:
		return rx_heartbeat(s, p, d, h, body, now);
	case SV_T_PROBE:
		if (h->len < SV_PROBE_MIN)
			return SV_D_BAD_LENGTH;
		len = sv_build_probe_ack(s, out, sv_get32(body), (uint32_t)n);
		if (len)
			s->send_ctl(s, p, out, len);
		return SV_OK;
	case SV_T_PROBE_ACK:
		if (h->len < SV_PROBE_ACK_LEN)
			return SV_D_BAD_LENGTH;
		__atomic_store_n(&p->probe_ack_size, sv_get32(body + 4), __ATOMIC_RELAXED);
		__atomic_store_n(&p->probe_ack_id, sv_get32(body), __ATOMIC_RELEASE);
		sv_count(&s->ctr_rx, SV_C_PROBE_ACKED, 1);
		return SV_OK;
	}
	return SV_D_BAD_TYPE;
}

/* The virtio_net_hdr in front of a VNET unit of len bytes (gathered from iov),
 * checked against what this side advertised and the frame behind it. */
int sv_vnet_ok(const struct sv *s, const struct iovec *iov, int n, size_t len)
{
	struct virtio_net_hdr vh;
	uint8_t *b = (uint8_t *)&vh;
	size_t got = 0, flen;
	uint16_t caps = sv_my_caps(s), hlen, gsz, cst, cof;
	unsigned gso;

	for (int i = 0; i < n && got < sizeof(vh); i++) {
		size_t k = iov[i].iov_len < sizeof(vh) - got ? iov[i].iov_len : sizeof(vh) - got;

		memcpy(b + got, iov[i].iov_base, k);
		got += k;
	}
	if (got < sizeof(vh) || len < SV_VNET_LEN)
		return 0;
	flen = len - SV_VNET_LEN;
	gso = vh.gso_type & ~VIRTIO_NET_HDR_GSO_ECN;
	if (gso == VIRTIO_NET_HDR_GSO_TCPV4 || gso == VIRTIO_NET_HDR_GSO_TCPV6) {
		if (!(caps & SV_CAP_GSO_RX))
			return 0;
	} else if (gso == VIRTIO_NET_HDR_GSO_UDP_L4 || gso == VIRTIO_NET_HDR_GSO_NONE) {
		if ((gso && !(caps & SV_CAP_USO_RX)) || (vh.gso_type & VIRTIO_NET_HDR_GSO_ECN))
			return 0;
	} else {
		return 0;
	}
	hlen = le16toh(vh.hdr_len);
	gsz = le16toh(vh.gso_size);
	cst = le16toh(vh.csum_start);
	cof = le16toh(vh.csum_offset);
	if (hlen > flen || (gso && (gsz == 0 || gsz > flen)))
		return 0;
	return !(vh.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) || (size_t)cst + cof + 2 <= flen;
}
