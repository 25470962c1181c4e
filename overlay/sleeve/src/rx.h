/* rx.h - network -> device: the receive entry and the batched receive thread */
#ifndef SLEEVE_RX_H
#define SLEEVE_RX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "sleeve.h"

#define RX_BUF (65536 + 64) /* one read: a datagram, or a GRO train of them */

/* One datagram from peer p: checked, opened, delivered or answered; counted once
 * in rx.datagrams and, when dropped, under its reason (also returned). */
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
/* The batched receive thread (recvmmsg, polling after traffic); ends by cancellation. */
void *sv_rx_thread(void *arg);
/* The device writer the daemon uses as s->deliver. */
int sv_tap_deliver(struct sv *s, const struct iovec *iov, int n, int has_vnet);
/* after a receive batch, before its buffers are reused */
void sv_rx_settle(struct sv *s);
/* writes out a super-frame being gathered from segments (--segment) */
void sv_rx_gro_flush(struct sv *s);

#endif
