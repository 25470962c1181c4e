/* basic.c - --basic, the 2015 reference, both directions: one read and one
 * sendmsg per frame or piece, one recvfrom and one write per datagram; no
 * batching, no offloads, no polling. main.c starts these two threads instead
 * of tx.c's and rx.c's.
 *
 *   sleeve-tx (one):  read(device) -> basic_frame: a SINGLE DATA datagram, or a
 *                     unit sealed once and cut into FRAG pieces -> basic_send:
 *                     one sendmsg per datagram and peer
 *   sleeve-rx (one):  recvfrom(socket) -> sv_rx_batch (rx.c) with one message,
 *                     the same receive entry as the batched path
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "basic.h"
#include "pmtu.h"
#include "route.h"
#include "rx.h"
#include "send.h"
#include "sleeve.h"

/* ---- device -> network ---- */

/* The sending thread's state: freed when the thread is cancelled. */
struct basic {
	uint8_t *buf, *out;
	uint32_t id; /* of the next unit */
	struct sv_aead_set aead;
};

static void basic_free(void *arg)
{
	struct basic *b = arg;

	sv_aead_set_free(&b->aead);
	free(b->buf);
	free(b->out);
}

/* One datagram to the frame's peer (route >= 0) or to every peer that takes
 * frames from us, one sendmsg each. */
static void basic_send(struct sv *s, struct iovec *v, size_t n, int frag, int route)
{
	for (int i = 0; i < s->npeers; i++) {
		if (route >= 0 && i != route)
			continue;
		if (s->enc && sv_peer_skipped(&s->peers[i])) {
			sv_count_drop(&s->ctr_tx, SV_D_CIPHER_MISMATCH, 1);
			continue;
		}
		sv_count(&s->ctr_tx, SV_C_TX_DGRAMS, 1);
		if (frag)
			sv_count(&s->ctr_tx, SV_C_TX_FRAGS, 1);
		if (sv_send_one(s, &s->peers[i], v, n) < 0)
			sv_count_drop(&s->ctr_tx, SV_D_SEND_ERR, 1);
	}
}

/* One frame read from the device, in the 2015 way. */
static void basic_frame(struct sv *s, struct basic *b, size_t n, uint32_t id)
{
	uint32_t dgram = sv_min_pmtu(s);
	size_t hlen = sv_frag_over(s->enc);
	struct sv_txunit u;
	enum sv_drop r;
	int route = sv_route(s, b->buf, n); /* before a key seals the frame in place */

	if (n <= sv_pack_max_frame(dgram, s->enc)) {
		struct sv_packer pk;
		size_t len;
		struct iovec v;

		sv_pack_begin(&pk, b->out, dgram, sv_base_flags(s));
		sv_pack_add(&pk, b->buf, n);
		len = sv_pack_finish(&pk);
		len = s->enc ? sv_seal_dgram(&s->seal, &b->aead, pk.dgram, pk.blen) : len;
		if (!len) {
			sv_count_drop(&s->ctr_tx, SV_D_SEND_ERR, 1);
			return;
		}
		v = (struct iovec){pk.dgram, len};
		basic_send(s, &v, 1, 0, route);
		return;
	}
	r = sv_seal_unit(s, &b->aead, b->buf, n, sv_base_flags(s), id, dgram, &u);
	if (r) {
		sv_count_drop(&s->ctr_tx, r, 1);
		return;
	}
	for (unsigned i = 0; i < u.cnt; i++) {
		size_t off = (size_t)i * u.chunk;
		size_t clen = u.stream - off < u.chunk ? u.stream - off : u.chunk;
		struct iovec v[2] = {{b->out, hlen}, {b->buf + off, clen}};

		sv_piece_put(b->out, sv_base_flags(s), u.aead, s->seal.session, u.ctr, id,
			     (uint32_t)u.stream, (uint16_t)i, (uint16_t)u.cnt, clen);
		basic_send(s, v, 2, 1, route);
	}
}

/* One read and one sendto per frame, no offloads. */
void *sv_basic_tx_thread(void *arg)
{
	struct sv *s = arg;
	struct basic b = {.buf = malloc(RBUF_SZ + TAILROOM), .out = malloc(SV_MAX_DGRAM + 64)};

	pthread_cleanup_push(basic_free, &b);
	if (b.buf && b.out && (!s->enc || sv_seal_set_init(&b.aead, &s->seal) == 0)) {
		for (;;) {
			ssize_t n = read(s->tap_fd, b.buf, RBUF_SZ);

			if (n <= 0) {
				if (n < 0 && errno != EINTR && errno != EAGAIN)
					usleep(1000);
				continue;
			}
			sv_calibrate(s);
			sv_count(&s->ctr_tx, SV_C_TX_FRAMES, 1);
			sv_count(&s->ctr_tx, SV_C_TX_BYTES, (uint64_t)n);
			basic_frame(s, &b, (size_t)n, b.id++);
		}
	}
	pthread_cleanup_pop(1);
	return NULL;
}

/* ---- network -> device ---- */

/* One recvfrom and one write per datagram. */
void *sv_basic_rx_thread(void *arg)
{
	struct sv *s = arg;
	uint8_t *buf = malloc(RX_BUF);

	if (!buf)
		return NULL;
	for (;;) {
		struct sockaddr_storage src;
		struct iovec iov = {buf, RX_BUF};
		struct mmsghdr mm = {.msg_hdr = {.msg_name = &src, .msg_namelen = sizeof(src),
						 .msg_iov = &iov, .msg_iovlen = 1}};
		ssize_t n = recvfrom(s->udp_fd, buf, RX_BUF, 0, (struct sockaddr *)&src,
				     &mm.msg_hdr.msg_namelen);

		if (n < 0) {
			if (errno != EINTR)
				usleep(1000);
			continue;
		}
		sv_count(&s->ctr_rx, SV_C_RX_CALLS, 1);
		mm.msg_len = (unsigned)n;
		sv_rx_batch(s, &mm, 1, sv_now_ns());
	}
	return NULL;
}
