/* fuzz_sock.c - libFuzzer entry at the socket: what recvmmsg returns, handed to
 * sv_rx_batch, the entry the daemon's receive loops use. Source addresses
 * (peers, a peer's address on another port, strangers), empty and oversize
 * reads, the UDP_GRO segment size and everything behind them: both AEADs, the
 * cipher the peers' heartbeats agree on, reflected datagrams.
 *
 * Input: a cfg byte, bit0 keyed, bit1 L3, bit2 vnet device, bit3 --segment,
 * bit4 IPv6 underlay, bit5 a second peer, bit6 --basic (one read per batch and
 * no control messages, as basic.c's receive thread), bit7 the receiver accepts only
 * ChaCha20-Poly1305; then reads, each
 *
 *   how u8    bits 0-1 source: 0 the peer, 1 the peer's address on another
 *                      port, 2 a stranger, 3 the second peer (or the first)
 *             bit 2    the source address one byte short
 *             bit 3    MSG_TRUNC (the read did not fit the buffer)
 *             bits 4-5 UDP_GRO control message: 0 none, 1 segment size seg,
 *                      2 segment size -seg, 3 too short to hold one
 *             bit 6    the batch ends after this read
 *             bit 7    a second passes after this read (reassembly timeouts)
 *   seg u16   only when bits 4-5 are not 0
 *   len u16   then len bytes; a tail shorter than len is the last read
 *
 * Checked beyond the sanitizers: every datagram is counted once; a stranger's
 * are all dropped as a stranger's; a batch of strangers' reads delivers
 * nothing, answers nothing and leaves every peer's state as it was; every
 * virtio_net_hdr the device gets names an offload this side advertised and
 * offsets inside its frame. Keyed inputs: fuzz_prime (fuzz/seedver.h). */
#include <arpa/inet.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rx.h"
#include "sleeve.h"
#include "seedver.h"
#include "sink.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

uint64_t sv_now_ns(void) { return 0; }
int sv_spin_yield(uint64_t now) { (void)now; return 0; }
void sv_log(const struct sv *s, const char *fmt, ...) { (void)s; (void)fmt; }
void sv_warn(const char *fmt, ...) { (void)fmt; }

#define MSGS 32          /* RX_MSGS in rx.c */
#define BUF RX_BUF      /* as the receive threads read (rx.h) */

static unsigned delivered, answered;

/* A virtio_net_hdr that reaches the device: only offloads the receiver
 * advertised (TCP GSO with a vnet device; UDP GSO only where the kernel took
 * USO, never here: tun_ok is 0), and every offset inside the frame of flen
 * bytes. Independent of rxctl.c. */
static int vnet_hdr_sane(const struct sv *s, const uint8_t *h, size_t flen)
{
	unsigned type = h[1] & 0x7f, ecn = h[1] & 0x80;
	unsigned hdr_len = h[2] | h[3] << 8, gso_size = h[4] | h[5] << 8;
	unsigned cstart = h[6] | h[7] << 8, coff = h[8] | h[9] << 8;

	if (!s->vnet || (type != 0 && type != 1 && type != 4) || (ecn && type == 0))
		return 0;
	if (hdr_len > flen || (type && (gso_size == 0 || gso_size > flen)))
		return 0;
	return !(h[0] & 1) || (size_t)cstart + coff + 2 <= flen;
}

static int deliver(struct sv *s, const struct iovec *iov, int n, int has_vnet)
{
	uint8_t vh[SV_VNET_LEN];
	size_t len = sink_frame(iov, n, has_vnet);

	if (has_vnet) {
		size_t got = 0;

		for (int k = 0; k < n && got < sizeof(vh); k++) {
			size_t c = iov[k].iov_len < sizeof(vh) - got ? iov[k].iov_len : sizeof(vh) - got;

			memcpy(vh + got, iov[k].iov_base, c);
			got += c;
		}
		if (!vnet_hdr_sane(s, vh, len - SV_VNET_LEN))
			abort(); /* a virtio_net_hdr from the network reached the device unchecked */
	}
	delivered++;
	return 0;
}

static int send_ctl(struct sv *s, struct sv_peer *p, const uint8_t *d, size_t len)
{
	(void)s;
	if (len > SV_MAX_DGRAM + 64 || p < s->peers || p >= s->peers + s->npeers)
		abort();
	sink += d[0];
	answered++;
	return 0;
}

static void set_addr(struct sockaddr_storage *ss, int v6, uint8_t host, uint16_t port)
{
	memset(ss, 0, sizeof(*ss));
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		inet_pton(AF_INET6, "2001:db8::", &a->sin6_addr); /* documentation prefix */
		a->sin6_addr.s6_addr[15] = host;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		a->sin_addr.s_addr = htonl(0xc6120000u | host); /* 198.18.0.host */
	}
}

static socklen_t addr_len(int v6)
{
	return v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* What the receive entry must count for one read: independent of rx.c. */
static uint64_t dgrams_of(size_t len, int have_seg, long seg, int trunc_from_peer)
{
	if (trunc_from_peer || len == 0)
		return 1;
	if (!have_seg || seg <= 0 || (size_t)seg > len)
		return 1;
	return (len + (size_t)seg - 1) / (size_t)seg;
}

static uint16_t get16(const uint8_t **d, size_t *n)
{
	uint16_t v;

	if (*n < 2) {
		v = *n ? (*d)[0] : 0;
		*d += *n;
		*n = 0;
		return v;
	}
	v = (uint16_t)((*d)[0] << 8 | (*d)[1]);
	*d += 2;
	*n -= 2;
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sv s;
	static uint8_t bufs[MSGS][BUF];
	static struct sv_peer before[2];
	static struct mmsghdr msg[MSGS];
	static struct iovec iov[MSGS];
	static struct sockaddr_storage src[MSGS];
	static union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm[MSGS];
	uint64_t now = 1000000000ull, want_dgrams = 0, want_strange = 0;
	int v6, basic, nmsg = 0, only_strangers = 1, primed[2] = {0, 0};
	struct sockaddr_storage local;
	struct sv_ident me;

	if (size < 1)
		return 0;
	for (int i = 0; i < s.npeers; i++) {
		sv_reasm_free(&s.peers[i].reasm);
		sv_open_free(&s.peers[i].open);
	}
	sv_seal_free(&s.seal);
	memset(&s, 0, sizeof(s));
	pthread_mutex_init(&s.lock, NULL);
	s.enc = data[0] & 1;
	s.l3 = (data[0] >> 1) & 1;
	s.vnet = (data[0] >> 2) & 1;
	s.segment = (data[0] >> 3) & 1;
	v6 = (data[0] >> 4) & 1;
	s.npeers = 1 + ((data[0] >> 5) & 1);
	basic = (data[0] >> 6) & 1;
	s.basic = basic;
	s.mtu = 1500;
	s.deliver = deliver;
	s.send_ctl = send_ctl;
	s.tap_fd = s.udp_fd = -1;
	memset(s.master, 0x42, sizeof(s.master));
	/* the peers 198.18.0.1 and .2 (the two sides of the captures), this side .9 */
	for (int i = 0; i < s.npeers; i++) {
		struct sv_ident id;

		set_addr(&s.peers[i].addr, v6, (uint8_t)(1 + i), 6784);
		s.peers[i].alen = addr_len(v6);
		s.peers[i].pmtu = 1472;
		sv_ident_of(&id, &s.peers[i].addr);
		sv_open_init(&s.peers[i].open, &id);
	}
	set_addr(&local, v6, 9, 6784);
	sv_ident_of(&me, &local);
	if (s.enc) {
		s.cipher_flag = (data[0] & 0x80) ? SV_AEAD_CHACHA20POLY1305 : 0;
		s.aead_acc = s.cipher_flag ? SV_AEAD_BIT(s.cipher_flag) : SV_AEAD_ALL;
		s.aead_fast = SV_AEAD_ALL;
		if (sv_seal_init(&s.seal, s.master, 0x2222, 1, &me,
				 s.cipher_flag ? s.cipher_flag : SV_AEAD_AES256GCM) < 0)
			abort();
	}
	data++;
	size--;
	memcpy(before, s.peers, sizeof(before));
	delivered = answered = 0;
	while (size > 0) {
		uint8_t how = data[0];
		int from = how & 3, short_addr = (how >> 2) & 1, trunc = (how >> 3) & 1;
		int gro = basic ? 0 : (how >> 4) & 3, end = basic || ((how >> 6) & 1);
		long seg = 0;
		size_t len;
		struct msghdr *m = &msg[nmsg].msg_hdr;
		int peer;

		data++;
		size--;
		if ((how >> 4) & 3)
			seg = get16(&data, &size);
		len = get16(&data, &size);
		if (len > size)
			len = size;
		memcpy(bufs[nmsg], data, len);
		tally_version(bufs[nmsg], len);
		data += len;
		size -= len;

		/* the source, as the kernel writes it */
		switch (from) {
		case 0:
			set_addr(&src[nmsg], v6, 1, 6784);
			break;
		case 1:
			set_addr(&src[nmsg], v6, 1, (uint16_t)(6785 + len % 7));
			break;
		case 2:
			set_addr(&src[nmsg], v6, 77, 6784);
			break;
		default:
			set_addr(&src[nmsg], v6, s.npeers > 1 ? 2 : 1, 6784);
		}
		peer = (from == 0 || from == 3) && !short_addr;
		if (peer && s.enc) {
			int k = from == 3 && s.npeers > 1;

			if (!primed[k]++)
				fuzz_prime(&s.peers[k].open, bufs[nmsg], len);
		}
		iov[nmsg] = (struct iovec){bufs[nmsg], BUF};
		memset(m, 0, sizeof(*m));
		m->msg_name = &src[nmsg];
		m->msg_namelen = addr_len(v6) - (short_addr ? 1 : 0);
		m->msg_iov = &iov[nmsg];
		m->msg_iovlen = 1;
		m->msg_flags = trunc ? MSG_TRUNC : 0;
		msg[nmsg].msg_len = (unsigned)len;
		if (gro) {
			struct cmsghdr *c;
			int v = gro == 2 ? -(int)seg : (int)seg;

			memset(&cm[nmsg], 0, sizeof(cm[nmsg]));
			m->msg_control = cm[nmsg].b;
			m->msg_controllen = sizeof(cm[nmsg].b);
			c = CMSG_FIRSTHDR(m);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_GRO;
			c->cmsg_len = gro == 3 ? CMSG_LEN(0) : CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &v, sizeof(v));
			seg = v;
		}
		{
			uint64_t n = dgrams_of(len, gro == 1 || gro == 2, seg, peer && trunc);

			want_dgrams += n;
			if (!peer)
				want_strange += n;
			else
				only_strangers = 0;
		}
		nmsg++;
		if (end || nmsg == MSGS || size == 0) {
			sv_rx_batch(&s, msg, (unsigned)nmsg, now);
			nmsg = 0;
			if (s.ctr_rx.c[SV_C_RX_DGRAMS] != want_dgrams)
				abort(); /* a datagram counted twice or not at all */
			if (s.ctr_rx.drop[SV_D_NO_PEER] + s.ctr_rx.drop[SV_D_WRONG_PORT] != want_strange)
				abort(); /* a stranger's datagram not dropped as one */
			if (only_strangers &&
			    (delivered || answered || memcmp(before, s.peers, sizeof(before))))
				abort(); /* strangers reached a device, got an answer or moved a peer */
			only_strangers = 1;
			memcpy(before, s.peers, sizeof(before));
			delivered = answered = 0;
		}
		now += (how & 0x80) ? 1000000000ull : 1000000ull;
	}
	for (int i = 0; i < s.npeers; i++)
		sv_reasm_free(&s.peers[i].reasm);
	return 0;
}
