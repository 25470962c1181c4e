/* tx.c - device -> network: batching, super-frame splitting, UDP GSO, sendmmsg
 *
 * Outbound flow
 *
 *   1. Read       tx_loop: read() the device until EAGAIN, each read into the
 *                 next of TX_RBUFS buffers; drained, the thread sends what is
 *                 queued, polls the device a while (spin.c), then sleeps in poll()
 *   2. Classify   tx_frame: the virtio_net_hdr taken off and a partial checksum
 *                 completed; a TSO super-frame, or a frame too big for a DATA
 *                 datagram, is a unit (4); with --segment a TCP super-frame is
 *                 cut here into frames instead (tx_segments, seg.c)
 *   3. Pack       pk_reserve, pk_close: frames packed into DATA datagrams in the
 *                 arena (one frame SINGLE, more as records); with a key each
 *                 datagram is sealed as it closes
 *   4. Cut        tx_unit: a unit sealed once, in place in its read buffer
 *                 (sv_seal_unit, send.c), and cut into FRAG pieces: headers in
 *                 the arena, chunks pointing into the read buffer, which stays
 *                 taken until the flush
 *   5. Queue      push_dgram, push: one message per peer that takes frames (a
 *                 refused peer's datagrams count as cipher_mismatch); with UDP
 *                 GSO on, a unit's pieces, and DATA datagrams of one size to a
 *                 single peer, leave as trains (set_segment)
 *   6. Send       flush: the whole queue in sendmmsg calls when the device is
 *                 drained, or before the queue, the arena or the read buffers
 *                 run out; a train the kernel refuses goes datagram by datagram
 *                 (send_train_split) and UDP GSO stays off from then on
 *
 * One thread runs all of it: "sleeve-tx", a single instance, which owns the
 * queue (struct txq) and its sealing contexts. The receive thread and the main
 * thread send control datagrams on the same socket on their own (pmtu.c,
 * rxctl.c). With --basic main.c starts basic.c's sending thread instead. The
 * functions below appear in the order of the stages.
 */
#include <errno.h>
#include <linux/virtio_net.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pmtu.h"
#include "route.h"
#include "seg.h"
#include "send.h"
#include "sleeve.h"
#include "spin.h"
#include "tx.h"

#define TX_MSGS 256
#define TX_IOVS 4096
#define TX_ARENA (2u << 20)
#define TX_RBUFS 16
#define GSO_MAX_SEGS 64 /* UDP_MAX_SEGMENTS on older kernels */

struct txq {
	struct sv *s;
	struct mmsghdr msg[TX_MSGS];
	uint16_t dgram_iovs[TX_MSGS]; /* GSO trains: iovecs per datagram, 0 = not a train */
	uint16_t ndgrams[TX_MSGS];
	uint16_t train_seg; /* last message: a train of DATA datagrams of this size that
			     * may grow (0 = it may not) */
	int nmsg;
	struct iovec iov[TX_IOVS];
	int niov;
	union {
		char b[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} cm[TX_MSGS];
	uint8_t *arena;
	size_t aused;
	uint8_t *rbuf[TX_RBUFS];
	int rbused; /* read buffers still referenced by queued iovecs */
	struct sv_packer pk;
	int pk_open;
	uint32_t frame_id;
	struct sv_aead_set aead; /* this thread's sealing contexts */
	int route;       /* the frame being classified goes to this peer (-1: every peer; route.h) */
	int pk_route;    /* the DATA datagram being packed goes to this peer */
	int train_route; /* the last message's peer, while a train may grow */
};

static void txq_free(void *arg);
static void tx_loop(struct txq *q);
static int tx_frame(struct txq *q, uint8_t *buf, size_t n);
static void tx_segments(struct txq *q, const struct sv_seg *g, uint32_t dgram);
static uint8_t *pk_reserve(struct txq *q, size_t len, uint32_t dgram);
static void pk_close(struct txq *q);
static int tx_unit(struct txq *q, uint8_t *data, size_t len, uint8_t flags, uint32_t dgram);
static int room(struct txq *q, int msgs, int iovs, size_t bytes);
static void push_dgram(struct txq *q, int first, size_t len, int route);
static int push(struct txq *q, int first, int n, unsigned ndgrams, size_t seg, unsigned per, int route);
static void set_segment(struct msghdr *m, void *cbuf, size_t cbuflen, uint16_t seg);
static void flush(struct txq *q);
static void send_train_split(struct txq *q, struct mmsghdr *mm, unsigned per);

/* ---- the thread ---- */

void *sv_tx_thread(void *arg)
{
	struct sv *s = arg;
	struct txq *q;

	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->s = s;
	q->route = q->pk_route = q->train_route = -1;
	q->arena = malloc(TX_ARENA);
	for (int i = 0; i < TX_RBUFS; i++)
		q->rbuf[i] = malloc(RBUF_SZ + TAILROOM);
	pthread_cleanup_push(txq_free, q); /* the thread ends by cancellation */
	/* without its contexts a keyed sleeve sends nothing, never plaintext */
	if (!s->enc || sv_seal_set_init(&q->aead, &s->seal) == 0)
		tx_loop(q);
	pthread_cleanup_pop(1);
	return NULL;
}

static void txq_free(void *arg)
{
	struct txq *q = arg;

	for (int i = 0; i < TX_RBUFS; i++)
		free(q->rbuf[i]);
	free(q->arena);
	sv_aead_set_free(&q->aead);
	free(q);
}

/* ---- 1. read ---- */

/* Reads the device until the thread is cancelled. */
static void tx_loop(struct txq *q)
{
	struct sv *s = q->s;
	struct pollfd pfd = {.fd = s->tap_fd, .events = POLLIN};
	struct sv_spin sp;

	sv_spin_init(&sp, s->spin_ns);
	for (;;) {
		uint8_t *b = q->rbuf[q->rbused];
		ssize_t n = read(s->tap_fd, b, RBUF_SZ);

		if (n < 0) {
			if (errno == EAGAIN) {
				pk_close(q);
				flush(q);
				/* poll the device a little before sleeping: a wakeup costs more */
				if (!sv_spin_again(&sp, &s->ctr_tx))
					poll(&pfd, 1, -1);
			} else if (errno != EINTR) {
				usleep(1000);
			}
			continue;
		}
		sv_spin_work(&sp, &s->ctr_tx, 0);
		sv_calibrate(s);
		if (tx_frame(q, b, (size_t)n)) {
			q->rbused++;
			if (q->rbused == TX_RBUFS) {
				pk_close(q);
				flush(q);
			}
		}
	}
}

/* ---- 2. classify ---- */

/* One read from the device. Returns 1 if the buffer must be kept until the flush. */
static int tx_frame(struct txq *q, uint8_t *buf, size_t n)
{
	struct sv *s = q->s;
	uint8_t *frame = buf;
	size_t flen = n;
	uint32_t dgram = sv_min_pmtu(s);

	if (!n) /* a read of nothing is no frame */
		return 0;
	if (s->npeers > 1 && (!s->vnet || n > SV_VNET_LEN)) /* before a key seals the frame in place */
		q->route = s->vnet ? sv_route(s, buf + SV_VNET_LEN, n - SV_VNET_LEN) : sv_route(s, buf, n);
	if (s->vnet) {
		struct virtio_net_hdr vh;

		if (n <= SV_VNET_LEN)
			return 0;
		memcpy(&vh, buf, sizeof(vh));
		frame = buf + SV_VNET_LEN;
		flen = n - SV_VNET_LEN;
		if (vh.gso_type != VIRTIO_NET_HDR_GSO_NONE) {
			struct sv_seg g;

			if (s->segment && sv_seg_plan(&g, frame, flen, &vh, s->l3) &&
			    sv_seg_len(&g, 0) <= sv_pack_max_frame(dgram, s->enc)) {
				tx_segments(q, &g, dgram);
				return 0;
			}
			sv_count(&s->ctr_tx, SV_C_TX_FRAMES, 1);
			sv_count(&s->ctr_tx, SV_C_TX_BYTES, flen);
			sv_count(&s->ctr_tx, SV_C_TX_SUPER, 1);
			return tx_unit(q, buf, n, sv_base_flags(s) | SV_F_VNET, dgram);
		}
		if ((vh.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) &&
		    sv_csum_complete(frame, flen, vh.csum_start, vh.csum_offset) < 0)
			return 0;
	}
	sv_count(&s->ctr_tx, SV_C_TX_FRAMES, 1);
	sv_count(&s->ctr_tx, SV_C_TX_BYTES, flen);
	if (flen > sv_pack_max_frame(dgram, s->enc))
		return tx_unit(q, frame, flen, sv_base_flags(s), dgram);
	memcpy(pk_reserve(q, flen, dgram), frame, flen);
	if (!s->batch)
		pk_close(q);
	return 0;
}

/* --segment: a TCP super-frame cut into ordinary frames here, each packed like a
 * frame read from the device (and sent in GSO trains by push_dgram). */
static void tx_segments(struct txq *q, const struct sv_seg *g, uint32_t dgram)
{
	struct sv *s = q->s;

	sv_count(&s->ctr_tx, SV_C_TX_SEGMENTED, 1);
	for (unsigned i = 0; i < g->count; i++) {
		size_t len = sv_seg_len(g, i);

		sv_seg_build(g, i, pk_reserve(q, len, dgram));
		sv_count(&s->ctr_tx, SV_C_TX_FRAMES, 1);
		sv_count(&s->ctr_tx, SV_C_TX_BYTES, len);
		if (!s->batch)
			pk_close(q);
	}
}

/* ---- 3. pack ---- */

/* Room for a frame of len bytes (at most sv_pack_max_frame(dgram)) in the DATA
 * datagram being packed, or in a new one when it does not fit. */
static uint8_t *pk_reserve(struct txq *q, size_t len, uint32_t dgram)
{
	/* frames to different peers never share a datagram */
	uint8_t *p = q->pk_open && q->pk_route == q->route ? sv_pack_reserve(&q->pk, len) : NULL;

	if (p)
		return p;
	pk_close(q);
	if (!room(q, 1, 1, (size_t)dgram + SV_PACK_SLACK))
		flush(q);
	sv_pack_begin(&q->pk, q->arena + q->aused, dgram, sv_base_flags(q->s));
	q->pk_open = 1;
	q->pk_route = q->route;
	return sv_pack_reserve(&q->pk, len);
}

static void pk_close(struct txq *q)
{
	size_t len;

	if (!q->pk_open)
		return;
	q->pk_open = 0;
	if (q->pk.nrec > 1)
		sv_count(&q->s->ctr_tx, SV_C_TX_BATCHES, 1);
	len = sv_pack_finish(&q->pk);
	len = q->s->enc ? sv_seal_dgram(&q->s->seal, &q->aead, q->pk.dgram, q->pk.blen) : len;
	if (!len) {
		sv_count_drop(&q->s->ctr_tx, SV_D_SEND_ERR, 1);
		return;
	}
	q->iov[q->niov].iov_base = q->pk.dgram;
	q->iov[q->niov].iov_len = len;
	q->aused += (size_t)(q->pk.dgram - q->pk.buf) + len;
	q->niov++;
	push_dgram(q, q->niov - 1, len, q->pk_route);
}

/* ---- 4. cut ---- */

/* A unit too big for one DATA datagram: sealed once (with a key), then cut into
 * FRAG pieces, in GSO trains when allowed. The pieces point into the read buffer
 * (returns 1: it stays referenced until the flush); only their headers are
 * written, into the arena. */
static int tx_unit(struct txq *q, uint8_t *data, size_t len, uint8_t flags, uint32_t dgram)
{
	struct sv *s = q->s;
	size_t chunk, full, hlen = sv_frag_over(s->enc);
	unsigned cnt, per, trains;
	int gso = __atomic_load_n(&s->udp_gso, __ATOMIC_RELAXED);
	struct sv_txunit u;
	enum sv_drop r;
	uint32_t id;

	pk_close(q);
	if (!sv_frag_plan(len + (s->enc ? SV_TAG_LEN : 0), dgram, s->enc, &chunk)) {
		sv_count_drop(&s->ctr_tx, SV_D_OVERSIZE, 1);
		return 0;
	}
	full = hlen + chunk;
	per = gso ? (unsigned)(SV_MAX_DGRAM / full) : 1;
	if (per > GSO_MAX_SEGS)
		per = GSO_MAX_SEGS;
	if (per < 1)
		per = 1;
	cnt = (unsigned)((len + SV_TAG_LEN + chunk - 1) / chunk); /* upper bound for room() */
	trains = (cnt + per - 1) / per;
	if (!room(q, (int)trains, (int)cnt * 2, (size_t)cnt * hlen))
		flush(q);
	id = q->frame_id++;
	r = sv_seal_unit(s, &q->aead, data, len, flags, id, dgram, &u);
	if (r) {
		sv_count_drop(&s->ctr_tx, r, 1);
		return 0;
	}
	cnt = u.cnt;
	trains = (cnt + per - 1) / per;
	for (unsigned t = 0; t < trains; t++) {
		int first;
		unsigned from = t * per, to = from + per < cnt ? from + per : cnt;

		/* without GSO each piece is a message per peer: a unit may not fit
		 * the queue at all, so it leaves in parts */
		if (q->nmsg + s->npeers > TX_MSGS)
			flush(q);
		first = q->niov;
		for (unsigned i = from; i < to; i++) {
			size_t off = (size_t)i * chunk;
			size_t clen = u.stream - off < chunk ? u.stream - off : chunk;
			uint8_t *h = q->arena + q->aused;

			sv_piece_put(h, flags, u.aead, s->seal.session, u.ctr, id, (uint32_t)u.stream,
				     (uint16_t)i, (uint16_t)cnt, clen);
			q->iov[q->niov++] = (struct iovec){h, hlen};
			q->iov[q->niov++] = (struct iovec){data + off, clen};
			q->aused += hlen;
		}
		push(q, first, q->niov - first, to - from, full, 2, q->route);
	}
	sv_count(&s->ctr_tx, SV_C_TX_FRAGS, (uint64_t)cnt * (q->route >= 0 ? 1u : (unsigned)s->npeers));
	return 1;
}

/* ---- 5. queue ---- */

static int room(struct txq *q, int msgs, int iovs, size_t bytes)
{
	return q->nmsg + msgs * q->s->npeers <= TX_MSGS && q->niov + iovs <= TX_IOVS &&
	       q->aused + bytes <= TX_ARENA;
}

/* Queues one DATA datagram (iov[first], len bytes) to `route` (-1: every peer).
 * Consecutive datagrams of one size (the last may be shorter) to a single peer
 * join one UDP GSO train: a super-frame cut in userspace still leaves in one
 * sendmsg and arrives as one GRO train. */
static void push_dgram(struct txq *q, int first, size_t len, int route)
{
	struct sv *s = q->s;
	struct mmsghdr *mm = q->nmsg ? &q->msg[q->nmsg - 1] : NULL;
	struct msghdr *m = mm ? &mm->msg_hdr : NULL;

	if (m && q->train_seg && q->train_route == route && len <= q->train_seg && m->msg_iovlen < GSO_MAX_SEGS &&
	    m->msg_iov + m->msg_iovlen == &q->iov[first] &&
	    (m->msg_iovlen + 1) * (size_t)q->train_seg <= SV_MAX_DGRAM) {
		if (m->msg_iovlen == 1)
			set_segment(m, q->cm[q->nmsg - 1].b, sizeof(q->cm[q->nmsg - 1].b),
				    q->train_seg);
		m->msg_iovlen++;
		q->dgram_iovs[q->nmsg - 1] = 1;
		q->ndgrams[q->nmsg - 1]++;
		sv_count(&s->ctr_tx, SV_C_TX_DGRAMS, 1);
		if (len < q->train_seg)
			q->train_seg = 0; /* a shorter datagram ends a train */
		return;
	}
	if (push(q, first, 1, 1, 0, 0, route) == 1 && (s->npeers == 1 || route >= 0) &&
	    __atomic_load_n(&s->udp_gso, __ATOMIC_RELAXED) && len <= UINT16_MAX) {
		q->train_seg = (uint16_t)len;
		q->train_route = route;
	}
}

/* Queues iov[first .. first+n) as one message to `route`, or (-1) to every peer
 * that takes frames from us; returns how many were queued. */
static int push(struct txq *q, int first, int n, unsigned ndgrams, size_t seg, unsigned per, int route)
{
	struct sv *s = q->s;
	int queued = 0;

	for (int i = 0; i < s->npeers; i++) {
		struct mmsghdr *mm = &q->msg[q->nmsg];
		struct msghdr *m = &mm->msg_hdr;

		if (route >= 0 && i != route)
			continue;
		if (s->enc && sv_peer_skipped(&s->peers[i])) {
			sv_count_drop(&s->ctr_tx, SV_D_CIPHER_MISMATCH, ndgrams);
			continue;
		}

		memset(m, 0, sizeof(*m));
		m->msg_name = &s->peers[i].addr;
		m->msg_namelen = s->peers[i].alen;
		m->msg_iov = &q->iov[first];
		m->msg_iovlen = (size_t)n;
		q->dgram_iovs[q->nmsg] = 0;
		q->ndgrams[q->nmsg] = (uint16_t)ndgrams;
		if (ndgrams > 1) {
			set_segment(m, q->cm[q->nmsg].b, sizeof(q->cm[q->nmsg].b), (uint16_t)seg);
			q->dgram_iovs[q->nmsg] = (uint16_t)per;
		}
		q->nmsg++;
		queued++;
		sv_count(&s->ctr_tx, SV_C_TX_DGRAMS, ndgrams);
	}
	q->train_seg = 0;
	return queued;
}

static void set_segment(struct msghdr *m, void *cbuf, size_t cbuflen, uint16_t seg)
{
	struct cmsghdr *c;

	m->msg_control = cbuf;
	m->msg_controllen = cbuflen;
	c = CMSG_FIRSTHDR(m);
	c->cmsg_level = SOL_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(seg));
	memcpy(CMSG_DATA(c), &seg, sizeof(seg));
}

/* ---- 6. send ---- */

static void flush(struct txq *q)
{
	struct sv *s = q->s;
	int i = 0;

	if (q->pk_open) {
		/* caller closes the packer first; never flush half a datagram */
		abort();
	}
	while (i < q->nmsg) {
		int r = sendmmsg(s->udp_fd, q->msg + i, (unsigned)(q->nmsg - i), 0);

		sv_count(&s->ctr_tx, SV_C_TX_CALLS, 1);
		if (r > 0) {
			i += r;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (q->dgram_iovs[i] && (errno == EIO || errno == EINVAL || errno == ENOPROTOOPT)) {
			if (__atomic_exchange_n(&s->udp_gso, 0, __ATOMIC_RELAXED))
				sv_log(s, "UDP GSO refused (%s), sending datagrams one by one",
				       strerror(errno));
			send_train_split(q, &q->msg[i], q->dgram_iovs[i]);
		} else {
			sv_count_drop(&s->ctr_tx, SV_D_SEND_ERR, q->ndgrams[i]);
		}
		i++;
	}
	q->nmsg = 0;
	q->niov = 0;
	q->aused = 0;
	q->train_seg = 0;
	/* the buffer being filled or processed now becomes buffer 0 */
	if (q->rbused > 0 && q->rbused < TX_RBUFS) {
		uint8_t *cur = q->rbuf[q->rbused];

		q->rbuf[q->rbused] = q->rbuf[0];
		q->rbuf[0] = cur;
	}
	q->rbused = 0;
}

/* The kernel refused a GSO train: send its datagrams one by one. */
static void send_train_split(struct txq *q, struct mmsghdr *mm, unsigned per)
{
	struct msghdr *m = &mm->msg_hdr;
	struct sv_peer *p = NULL;

	for (int i = 0; i < q->s->npeers; i++)
		if (m->msg_name == &q->s->peers[i].addr)
			p = &q->s->peers[i];
	for (size_t i = 0; p && i < m->msg_iovlen; i += per) {
		size_t k = m->msg_iovlen - i < per ? m->msg_iovlen - i : per;

		if (sv_send_one(q->s, p, m->msg_iov + i, k) < 0)
			sv_count_drop(&q->s->ctr_tx, SV_D_SEND_ERR, 1);
	}
}
