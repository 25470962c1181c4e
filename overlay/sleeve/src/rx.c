/* rx.c - network -> device: decapsulation, decryption, reassembly, delivery
 *
 * Inbound flow
 *
 *   1. Receive      sv_rx_thread: recvmmsg of up to RX_MSGS reads, each a
 *                   datagram or a UDP GRO train of them; after traffic it polls
 *                   the socket a while before it sleeps (spin.c)
 *   2. Sort reads   sv_rx_batch, rx_msg: the source is looked up among the
 *                   peers (sv_peer_find); a stranger's reads are counted and
 *                   dropped unread (stranger); a peer's read is cut at its GRO
 *                   segment size (gro_size) into datagrams
 *   3. Open         sv_rx_datagram: header, key or none, the AEAD accepted, one
 *                   AEAD open per DATA or control datagram; then by type:
 *                   control to sv_rx_ctl (rxctl.c: heartbeats, probes, answered
 *                   from this thread), DATA to rx_data, FRAG to rx_frag
 *   4. Frames       rx_data: the body's frame or records; rx_frag: a piece into
 *                   its unit (reasm.c), a whole unit opened once (open_unit)
 *                   and its virtio_net_hdr checked (rxctl.c)
 *   5. Gather       rx_frame (--segment): TCP segments of one flow joined into a
 *                   super-frame (gro.c); anything else flushes them first
 *                   (sv_rx_gro_flush), so the order on the wire is kept
 *   6. Deliver      deliver: lengths checked, then s->deliver, which is
 *                   sv_tap_deliver (one write or writev to the device) in the
 *                   daemon and a capture in the tests
 *   7. Settle       sv_rx_settle, at the end of every batch: the gathered
 *                   super-frame written, and the pieces of units still open
 *                   copied out of the receive buffers, which the next
 *                   recvmmsg reuses
 *
 * One thread runs all of it: "sleeve-rx", a single instance, which owns the
 * peers' reassembly and opening state and the gatherer. With --basic that
 * thread is basic.c's (recvfrom, one message per call) and enters at stage 2;
 * the socket fuzz target enters there too. The functions below appear in the
 * order of the stages.
 */
#include <errno.h>
#include <linux/virtio_net.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rx.h"
#include "route.h"
#include "rxctl.h"
#include "sleeve.h"
#include "spin.h"

#define RX_MSGS 32

static void rx_msg(struct sv *s, struct mmsghdr *mm, uint64_t now);
static enum sv_drop stranger(const struct sv *s, const struct sockaddr_storage *a, socklen_t alen);
static size_t gro_size(struct msghdr *m);
static enum sv_drop rx_data(struct sv *s, const uint8_t *body, size_t len, uint8_t flags);
static enum sv_drop rx_frag(struct sv *s, struct sv_peer *p, const uint8_t *d, const struct sv_hdr *h,
			    uint64_t now);
static enum sv_drop open_unit(struct sv *s, struct sv_peer *p, const struct sv_frag *f,
			      uint8_t flags, struct sv_unit *u, struct iovec *out);
static enum sv_drop rx_frame(struct sv *s, const uint8_t *f, size_t len);
static enum sv_drop deliver(struct sv *s, const struct iovec *iov, int n, size_t len, int has_vnet);
static size_t link_hlen(const struct sv *s);

/* ---- 1. receive ---- */

void *sv_rx_thread(void *arg)
{
	struct sv *s = arg;
	static __thread struct mmsghdr msg[RX_MSGS];
	static __thread struct iovec iov[RX_MSGS];
	static __thread struct sockaddr_storage src[RX_MSGS];
	static __thread union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm[RX_MSGS];
	uint8_t *bufs;
	struct sv_spin sp;
	int polling = 0;

	bufs = malloc((size_t)RX_MSGS * RX_BUF);
	if (!bufs)
		return NULL;
	sv_spin_init(&sp, s->spin_ns);
	for (;;) {
		int n;
		uint64_t now;

		for (int i = 0; i < RX_MSGS; i++) {
			iov[i].iov_base = bufs + (size_t)i * RX_BUF;
			iov[i].iov_len = RX_BUF;
			memset(&msg[i].msg_hdr, 0, sizeof(msg[i].msg_hdr));
			msg[i].msg_hdr.msg_name = &src[i];
			msg[i].msg_hdr.msg_namelen = sizeof(src[i]);
			msg[i].msg_hdr.msg_iov = &iov[i];
			msg[i].msg_hdr.msg_iovlen = 1;
			msg[i].msg_hdr.msg_control = cm[i].b;
			msg[i].msg_hdr.msg_controllen = sizeof(cm[i].b);
		}
		n = recvmmsg(s->udp_fd, msg, RX_MSGS, polling ? MSG_DONTWAIT : MSG_WAITFORONE, NULL);
		if (n <= 0) {
			if (n < 0 && errno == EAGAIN && polling) {
				/* after traffic, poll the socket a little before sleeping again */
				polling = sv_spin_again(&sp, &s->ctr_rx);
			} else if (n < 0 && errno != EINTR) {
				usleep(1000);
			}
			continue;
		}
		sv_count(&s->ctr_rx, SV_C_RX_CALLS, 1);
		now = sv_now_ns();
		sv_spin_work(&sp, &s->ctr_rx, now);
		sv_spin_arm(&sp, now);
		polling = sp.max != 0;
		sv_rx_batch(s, msg, (unsigned)n, now);
	}
	return NULL;
}

/* ---- 2. sort reads ---- */

void sv_rx_batch(struct sv *s, struct mmsghdr *msg, unsigned n, uint64_t now)
{
	for (unsigned i = 0; i < n; i++)
		rx_msg(s, &msg[i], now);
	sv_rx_settle(s);
}

/* One read: a datagram, or a GRO train of datagrams of the segment size (the
 * last may be shorter). An empty read is one empty datagram. A stranger's
 * bytes are never looked at: its datagrams are counted and dropped. */
static void rx_msg(struct sv *s, struct mmsghdr *mm, uint64_t now)
{
	struct msghdr *m = &mm->msg_hdr;
	const struct sockaddr_storage *src = m->msg_name;
	struct sv_peer *p = sv_peer_find(s, src, m->msg_namelen);
	uint8_t *buf = m->msg_iov[0].iov_base;
	size_t len = mm->msg_len, seg = gro_size(m), off = 0;
	uint64_t n;

	if (!seg || seg > len)
		seg = len ? len : 1;
	n = len ? (len + seg - 1) / seg : 1;
	if (!p) {
		sv_count(&s->ctr_rx, SV_C_RX_DGRAMS, n);
		sv_count_drop(&s->ctr_rx, stranger(s, src, m->msg_namelen), n);
		return;
	}
	if ((m->msg_flags & MSG_TRUNC) || len > m->msg_iov[0].iov_len) {
		/* larger than the buffer: what is there is not the whole datagram */
		sv_count(&s->ctr_rx, SV_C_RX_DGRAMS, 1);
		sv_count_drop(&s->ctr_rx, SV_D_OVERSIZE, 1);
		return;
	}
	do {
		sv_rx_datagram(s, p, buf + off, len - off < seg ? len - off : seg, now);
		off += seg;
	} while (off < len);
}

struct sv_peer *sv_peer_find(struct sv *s, const struct sockaddr_storage *a, socklen_t alen)
{
	for (int i = 0; i < s->npeers; i++) {
		struct sv_peer *p = &s->peers[i];

		if (p->addr.ss_family == AF_INET && a->ss_family == AF_INET &&
		    alen >= sizeof(struct sockaddr_in)) {
			const struct sockaddr_in *x = (const void *)&p->addr, *y = (const void *)a;

			if (x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr)
				return p;
		} else if (p->addr.ss_family == AF_INET6 && a->ss_family == AF_INET6 &&
			   alen >= sizeof(struct sockaddr_in6)) {
			const struct sockaddr_in6 *x = (const void *)&p->addr, *y = (const void *)a;

			if (x->sin6_port == y->sin6_port &&
			    !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)))
				return p;
		}
	}
	return NULL;
}

/* Why a read from no peer is dropped: from a peer's address but another port,
 * or from an address that is no peer's. */
static enum sv_drop stranger(const struct sv *s, const struct sockaddr_storage *a, socklen_t alen)
{
	for (int i = 0; i < s->npeers; i++) {
		const struct sockaddr_storage *x = &s->peers[i].addr;

		if (x->ss_family == AF_INET && a->ss_family == AF_INET &&
		    alen >= sizeof(struct sockaddr_in) &&
		    ((const struct sockaddr_in *)x)->sin_addr.s_addr ==
			    ((const struct sockaddr_in *)a)->sin_addr.s_addr)
			return SV_D_WRONG_PORT;
		if (x->ss_family == AF_INET6 && a->ss_family == AF_INET6 &&
		    alen >= sizeof(struct sockaddr_in6) &&
		    !memcmp(&((const struct sockaddr_in6 *)x)->sin6_addr,
			    &((const struct sockaddr_in6 *)a)->sin6_addr, sizeof(struct in6_addr)))
			return SV_D_WRONG_PORT;
	}
	return SV_D_NO_PEER;
}

/* The UDP_GRO segment size of a read; 0 when there is none, or when the
 * control message is too short to hold one. */
static size_t gro_size(struct msghdr *m)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		size_t end = (size_t)(CMSG_DATA(c) - (unsigned char *)m->msg_control) + sizeof(int);
		int v;

		if (c->cmsg_level != SOL_UDP || c->cmsg_type != UDP_GRO)
			continue;
		if (c->cmsg_len < CMSG_LEN(sizeof(int)) || end > m->msg_controllen)
			return 0;
		memcpy(&v, CMSG_DATA(c), sizeof(v));
		return v > 0 ? (size_t)v : 0;
	}
	return 0;
}

/* ---- 3. open ---- */

enum sv_drop sv_rx_datagram(struct sv *s, struct sv_peer *p, uint8_t *d, size_t n, uint64_t now)
{
	struct sv_hdr h;
	const uint8_t *body;
	enum sv_drop r;

	sv_count(&s->ctr_rx, SV_C_RX_DGRAMS, 1);
	r = sv_hdr_parse(d, n, &h);
	if (r)
		goto drop;
	if (!(h.flags & SV_F_ENC) != !s->enc) {
		r = SV_D_CRYPTO_MISMATCH;
		goto drop;
	}
	/* frames only under an AEAD we accept; control under either, so that
	 * peers with different forced ciphers still hear why they do not talk */
	if (s->enc && (h.type == SV_T_DATA || h.type == SV_T_FRAG) &&
	    !(s->aead_acc & SV_AEAD_BIT(h.aead))) {
		r = SV_D_CIPHER_MISMATCH;
		goto drop;
	}
	/* sealed per datagram, except FRAG pieces: their unit is sealed once; only a
	 * HEARTBEAT may come under a session not proven yet */
	if (s->enc && h.type != SV_T_FRAG) {
		if (h.type == SV_T_HEARTBEAT)
			r = sv_open_hello(&p->open, s->master, d, &h, now);
		else
			r = sv_open_dgram(&p->open, s->master, d, &h);
		if (r)
			goto drop;
	}
	body = d + sv_body_off(s->enc);
	s->rx_from = (int)(p - s->peers);
	if (h.type == SV_T_DATA || h.type == SV_T_FRAG) {
		if (!(h.flags & SV_F_L3) != !s->l3) {
			r = SV_D_MODE_MISMATCH;
			goto drop;
		}
		if (h.type == SV_T_DATA)
			r = rx_data(s, body, h.len, h.flags);
		else
			r = rx_frag(s, p, d, &h, now);
	} else {
		r = sv_rx_ctl(s, p, d, &h, body, n, now);
	}
drop:
	if (r)
		sv_count_drop(&s->ctr_rx, r, 1);
	return r;
}

/* ---- 4. frames ---- */

static enum sv_drop rx_data(struct sv *s, const uint8_t *body, size_t len, uint8_t flags)
{
	const uint8_t *cur = body, *end = body + len, *f;
	unsigned nrec;
	size_t flen;
	enum sv_drop r;

	if (flags & SV_F_SINGLE) /* the body is the frame (len >= 1: the header check saw to it) */
		return rx_frame(s, body, len);
	r = sv_records_check(body, len, &nrec);
	if (r)
		return r;
	/* a bad frame is dropped alone and counted here; its datagram was fine */
	while ((f = sv_records_next(&cur, end, &flen))) {
		enum sv_drop d = rx_frame(s, f, flen);

		if (d)
			sv_count_drop(&s->ctr_rx, d, 1);
	}
	return SV_OK;
}

static enum sv_drop rx_frag(struct sv *s, struct sv_peer *p, const uint8_t *d, const struct sv_hdr *h,
			    uint64_t now)
{
	struct sv_frag f;
	struct sv_unit u;
	struct iovec flat;
	const uint8_t *body = d + sv_body_off(s->enc);
	enum sv_drop r = sv_frag_parse(body, h->len, &f);

	if (r)
		return r;
	if (!s->enc && f.total > SV_MAX_UNIT) /* only a sealed stream has a tag more */
		return SV_D_BAD_LENGTH;
	if ((h->flags & SV_F_VNET) && !s->vnet)
		return SV_D_GSO_UNSUPPORTED;
	if (s->enc) {
		/* the unit's nonce; a piece the open would refuse as a replay (of a
		 * unit already opened, or too old) is dropped now */
		f.session = sv_get64(d + SV_HDR_LEN);
		f.ctr = sv_get64(d + SV_HDR_LEN + 8);
		f.aead = h->aead;
		if (!sv_open_proven(&p->open, f.session))
			return SV_D_UNPROVEN_SESSION; /* never takes a slot */
		f.trusted = 1;
		if (sv_replay_check(&p->open.win, f.ctr) < 0)
			return SV_D_REPLAY;
	}
	sv_count(&s->ctr_rx, SV_C_RX_FRAGS, 1);
	r = sv_reasm_add(&p->reasm, &f, h->flags, now, &u);
	if (r || !u.n)
		return r;
	if (s->enc) {
		r = open_unit(s, p, &f, h->flags, &u, &flat);
		if (r)
			return r;
	}
	if (h->flags & SV_F_VNET) {
		if (!sv_vnet_ok(s, u.iov, u.n, u.len))
			return SV_D_BAD_VNET;
		sv_count(&s->ctr_rx, SV_C_RX_SUPER, 1);
	}
	if (s->npeers > 1 && u.iov[0].iov_len > SV_VNET_LEN + SV_ETH_HLEN) {
		size_t off = (h->flags & SV_F_VNET) ? SV_VNET_LEN : 0;

		sv_learn(s, (int)(p - s->peers), (const uint8_t *)u.iov[0].iov_base + off,
			 u.iov[0].iov_len - off);
	}
	sv_rx_gro_flush(s); /* frames gathered before this unit go first */
	return deliver(s, u.iov, u.n, u.len, !!(h->flags & SV_F_VNET));
}

/* A complete sealed unit: one AEAD open over the whole stream, in place. */
static enum sv_drop open_unit(struct sv *s, struct sv_peer *p, const struct sv_frag *f,
			      uint8_t flags, struct sv_unit *u, struct iovec *out)
{
	uint8_t ad[SV_FRAG_AD_LEN];
	uint8_t *c;
	enum sv_drop r;

	if (u->len <= SV_TAG_LEN)
		return SV_D_BAD_LENGTH;
	c = sv_reasm_flatten(&p->reasm, u);
	if (!c)
		return SV_D_REASM_EVICTED;
	sv_frag_ad(ad, flags, f->aead, f->session, f->ctr, f->id, f->total, f->count);
	r = sv_open_buf(&p->open, s->master, f->aead, f->session, f->ctr, c, u->len, ad, sizeof(ad));
	if (r)
		return r;
	*out = (struct iovec){c, u->len - SV_TAG_LEN};
	u->iov = out;
	u->n = 1;
	u->len -= SV_TAG_LEN;
	return SV_OK;
}

/* ---- 5. gather ---- */

/* --segment: TCP segments go back into a super-frame before the device */
static enum sv_drop rx_frame(struct sv *s, const uint8_t *f, size_t len)
{
	struct iovec v = {(void *)f, len};

	if (s->npeers > 1)
		sv_learn(s, s->rx_from, f, len);
	if (s->segment && s->vnet) {
		/* an oversize frame is not gathered: deliver() drops it */
		int fits = len <= (size_t)s->mtu + link_hlen(s);

		if (fits && sv_gro_add(&s->gro, f, len, s->l3))
			return SV_OK;
		sv_rx_gro_flush(s); /* what was gathered goes first */
		if (fits && sv_gro_add(&s->gro, f, len, s->l3))
			return SV_OK;
	}
	return deliver(s, &v, 1, len, 0);
}

void sv_rx_gro_flush(struct sv *s)
{
	const struct iovec *iov;
	size_t len;
	int has_vnet, n = sv_gro_finish(&s->gro, &iov, &len, &has_vnet);
	enum sv_drop d;

	if (!n)
		return;
	d = deliver(s, iov, n, len, has_vnet);
	if (d)
		sv_count_drop(&s->ctr_rx, d, 1);
	else if (has_vnet)
		sv_count(&s->ctr_rx, SV_C_RX_COALESCED, 1);
}

/* ---- 6. deliver ---- */

static enum sv_drop deliver(struct sv *s, const struct iovec *iov, int n, size_t len, int has_vnet)
{
	size_t min = s->l3 ? 20u : (size_t)SV_ETH_HLEN;

	if (has_vnet) {
		if (len < SV_VNET_LEN + min)
			return SV_D_BAD_LENGTH;
	} else {
		if (len < min)
			return SV_D_BAD_LENGTH;
		if (len > (size_t)s->mtu + link_hlen(s))
			return SV_D_OVERSIZE;
	}
	if (s->deliver(s, iov, n, has_vnet) < 0)
		return SV_D_DEV_WRITE;
	sv_count(&s->ctr_rx, SV_C_RX_FRAMES, 1);
	sv_count(&s->ctr_rx, SV_C_RX_BYTES, has_vnet ? len - SV_VNET_LEN : len);
	return SV_OK;
}

static size_t link_hlen(const struct sv *s)
{
	return s->l3 ? 0 : SV_ETH_HLEN + 4; /* room for one VLAN tag */
}

int sv_tap_deliver(struct sv *s, const struct iovec *iov, int n, int has_vnet)
{
	static const uint8_t zero[SV_VNET_LEN];
	struct iovec v[SV_MAX_FRAGS + 1];
	ssize_t r;

	sv_calibrate(s);
	if (s->vnet && !has_vnet) {
		/* a plain frame at a vnet-header device: prepend an empty header */
		if (n > (int)SV_MAX_FRAGS)
			return -EINVAL;
		v[0] = (struct iovec){(void *)zero, SV_VNET_LEN};
		memcpy(v + 1, iov, (size_t)n * sizeof(*iov));
		iov = v;
		n++;
	}
	/* (has_vnet without a vnet device never gets here: gso_unsupported) */
	r = n == 1 ? write(s->tap_fd, iov[0].iov_base, iov[0].iov_len) : writev(s->tap_fd, iov, n);
	return r < 0 ? -errno : 0;
}

/* ---- 7. settle ---- */

void sv_rx_settle(struct sv *s)
{
	sv_rx_gro_flush(s);
	for (int i = 0; i < s->npeers; i++)
		sv_reasm_settle(&s->peers[i].reasm);
}
