/* unit_tx.c - tx.c: the send thread between a fake device and real UDP sockets
 * on 127.0.0.1: empty reads, a super-frame to many peers without UDP GSO, and
 * sealed frames and units to a peer that accepts none of our AEADs */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/virtio_net.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "fixture.h"
#include "tx.h"
#include "unit.h"

/* ---- the device side: the send thread between a fake device and real sockets ----
 * The device is one end of an AF_UNIX datagram socket pair (a read returns one
 * written datagram, as a TAP read returns one frame); the peers are UDP sockets
 * on 127.0.0.1. */
#define TX_PEERS 8
static struct {
	int dev[2], peer[TX_PEERS];
	pthread_t thread;
} txl;

static void tx_start(struct sv *s, int npeers, int vnet, int udp_gso, int enc)
{
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int big = 4 << 20;

	sv_setup(s, enc, 0, vnet, 0x7777); /* seals as 198.18.0.1:6784 */
	s->batch = 1;
	s->offload = vnet;
	s->udp_gso = udp_gso;
	s->mmsg = 1;
	s->npeers = npeers;
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, txl.dev) == 0);
	setsockopt(txl.dev[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	fcntl(txl.dev[0], F_SETFL, O_NONBLOCK);
	s->tap_fd = txl.dev[0];
	s->udp_fd = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(bind(s->udp_fd, (struct sockaddr *)&lo, sizeof(lo)) == 0);
	for (int i = 0; i < npeers; i++) {
		struct sv_peer *p = &s->peers[i];

		txl.peer[i] = socket(AF_INET, SOCK_DGRAM, 0);
		setsockopt(txl.peer[i], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		CHECK(bind(txl.peer[i], (struct sockaddr *)&lo, sizeof(lo)) == 0);
		p->alen = sizeof(struct sockaddr_in);
		getsockname(txl.peer[i], (struct sockaddr *)&p->addr, &p->alen);
		p->pmtu = 1472;
	}
	CHECK(pthread_create(&txl.thread, NULL, sv_tx_thread, s) == 0);
}

static void tx_stop(struct sv *s)
{
	pthread_cancel(txl.thread);
	pthread_join(txl.thread, NULL);
	for (int i = 0; i < s->npeers; i++)
		close(txl.peer[i]);
	close(txl.dev[0]);
	close(txl.dev[1]);
	close(s->udp_fd);
	s->npeers = 1;
}

/* Datagrams that reach peer i: waits up to first_ms for one, then until none
 * came for 100 ms; each one's first bytes kept in d (up to max). Pieces of one
 * FRAG unit are waited for until all of them (the count in their header) are
 * there, 10 s at most: the send thread may flush a unit in several batches, and
 * a busy machine can hold it between two for longer than any short gap. */
static int tx_collect(int i, uint8_t (*d)[64], size_t *len, int max, int first_ms)
{
	struct pollfd pfd = {.fd = txl.peer[i], .events = POLLIN};
	static uint8_t buf[65536];
	unsigned frag_count = 0;
	int n = 0;

	while (poll(&pfd, 1, n ? (frag_count ? 10000 : 100) : first_ms) == 1) {
		ssize_t r = recv(txl.peer[i], buf, sizeof(buf), 0);
		struct sv_hdr h;

		if (r < 0)
			break;
		if (n < max) {
			memcpy(d[n], buf, r < 64 ? (size_t)r : 64);
			len[n] = (size_t)r;
		}
		n++;
		if (sv_hdr_parse(buf, (size_t)r, &h) == SV_OK && h.type == SV_T_FRAG &&
		    (size_t)r >= SV_HDR_LEN + 12)
			frag_count = sv_get16(buf + SV_HDR_LEN + 10);
		else
			frag_count = 0;
		if (frag_count && (unsigned)n >= frag_count)
			break;
	}
	return n;
}

void test_tx_device(void)
{
	static struct sv s;
	static uint8_t frame[70000], got[1100][64];
	static size_t glen[1100];
	struct sv_hdr h;
	int n;

	/* a read of nothing is no frame: nothing is sent for it, and the next
	 * frame leaves alone in a well-formed datagram */
	tx_start(&s, 1, 0, 1, 0);
	CHECK(write(txl.dev[1], frame, 0) == 0);
	n = tx_collect(0, got, glen, 4, 200);
	CHECK_EQ(n, 0);
	memset(frame, 0x5a, 60);
	CHECK(write(txl.dev[1], frame, 60) == 60);
	n = tx_collect(0, got, glen, 4, 10000);
	CHECK_EQ(n, 1);
	CHECK(n >= 1 && glen[0] == 8 + 60 && sv_hdr_parse(got[0], glen[0], &h) == SV_OK &&
	      (h.flags & SV_F_SINGLE));
	CHECK_EQ(s.ctr_tx.c[SV_C_TX_FRAMES], 1);
	tx_stop(&s);

	/* a 64 kB super-frame to eight peers without UDP GSO: 45 pieces each, one
	 * message per piece and peer, more than one send queue holds */
	tx_start(&s, TX_PEERS, 1, 0, 0);
	{
		struct virtio_net_hdr vh = {.gso_type = VIRTIO_NET_HDR_GSO_TCPV4, .gso_size = 1400};
		size_t flen = make_super(frame + SV_VNET_LEN, 0, 65000, 0x10);

		memcpy(frame, &vh, sizeof(vh));
		CHECK(write(txl.dev[1], frame, SV_VNET_LEN + flen) == (ssize_t)(SV_VNET_LEN + flen));
		for (int i = 0; i < TX_PEERS; i++) {
			uint8_t seen[SV_MAX_FRAGS] = {0};
			unsigned cnt = 0, dup = 0, bad = 0;

			n = tx_collect(i, got, glen, 1100, 10000);
			for (int k = 0; k < n && k < 1100; k++) {
				unsigned idx;

				if (sv_hdr_parse(got[k], glen[k], &h) != SV_OK || h.type != SV_T_FRAG) {
					bad++;
					continue;
				}
				/* the FRAG header: id, total, index, count */
				idx = sv_get16(got[k] + SV_HDR_LEN + 8);
				cnt = sv_get16(got[k] + SV_HDR_LEN + 10);
				dup += idx < SV_MAX_FRAGS && seen[idx]++;
			}
			CHECK_EQ(bad, 0);
			CHECK_EQ(dup, 0);
			CHECK(cnt > 40);
			CHECK_EQ(n, cnt);
		}
		for (int i = 0; i < TX_PEERS; i++) /* and no piece more */
			CHECK_EQ(tx_collect(i, got, glen, 4, 100), 0);
		CHECK_EQ(s.ctr_tx.c[SV_C_TX_SUPER], 1);
		CHECK_EQ(s.ctr_tx.drop[SV_D_SEND_ERR], 0);
	}
	tx_stop(&s);

	/* keyed, two peers, the second accepting none of our AEADs: a frame and a
	 * 3000-byte unit go sealed to the first, which opens them; nothing goes to
	 * the second, and every datagram it would have got is counted */
	for (int k = 0; k < 2; k++) {
		static struct sv_open op;
		static uint8_t buf[4][2048];
		struct pollfd pfd;
		struct sv_hdr hs[4];
		size_t lens[4];
		int got0 = 0, opened = 0;

		test_cipher = k ? SV_AEAD_CHACHA20POLY1305 : SV_AEAD_AES256GCM;
		tx_start(&s, 2, 0, 1, 1);
		s.peers[1].aead_skip = 1;
		memset(frame, 0x5a, 3000);
		CHECK(write(txl.dev[1], frame, 60) == 60);
		CHECK(write(txl.dev[1], frame, 3000) == 3000);
		pfd = (struct pollfd){.fd = txl.peer[0], .events = POLLIN};
		while (got0 < 4 && poll(&pfd, 1, 10000) == 1) {
			ssize_t r = recv(txl.peer[0], buf[got0], sizeof(buf[0]), 0);

			if (r <= 0)
				break;
			lens[got0] = (size_t)r;
			got0++;
		}
		CHECK_EQ(got0, 4); /* one DATA, three pieces */
		CHECK_EQ(tx_collect(1, got, glen, 4, 300), 0);
		CHECK_EQ(s.ctr_tx.drop[SV_D_CIPHER_MISMATCH], 4);
		/* what peer 0 got opens as sealed by 198.18.0.1:6784 */
		{
			static uint8_t stream[4000];
			struct sockaddr_storage me;
			struct sv_ident id;
			size_t slen = 0;
			struct sv_frag f = {0};

			addr4(&me, "198.18.0.1", 6784);
			sv_ident_of(&id, &me);
			sv_open_init(&op, &id);
			test_trust(&op, s.seal.session);
			for (int i = 0; i < got0; i++) {
				if (sv_hdr_parse(buf[i], lens[i], &hs[i]) != SV_OK || hs[i].aead != test_cipher)
					continue;
				if (hs[i].type == SV_T_DATA) {
					opened += sv_open_dgram(&op, test_key, buf[i], &hs[i]) == SV_OK &&
						  hs[i].len == 60 && buf[i][24] == 0x5a && buf[i][24 + 59] == 0x5a;
					continue;
				}
				if (sv_frag_parse(buf[i] + 24, hs[i].len, &f) != SV_OK)
					continue;
				memcpy(stream + slen, f.chunk, f.clen); /* in order on loopback */
				slen += f.clen;
				opened++;
			}
			if (slen == f.total && slen == 3016) {
				uint8_t ad[SV_FRAG_AD_LEN];

				sv_frag_ad(ad, SV_F_ENC, (uint8_t)test_cipher, sv_get64(buf[1] + 8),
					   sv_get64(buf[1] + 16), f.id, f.total, f.count);
				CHECK_EQ(sv_open_buf(&op, test_key, test_cipher, sv_get64(buf[1] + 8),
						     sv_get64(buf[1] + 16), stream, slen, ad, sizeof(ad)),
					 SV_OK);
				CHECK(stream[0] == 0x5a && stream[2999] == 0x5a);
			} else {
				CHECK(0); /* the unit's pieces did not add up */
			}
			sv_open_free(&op);
		}
		CHECK_EQ(opened, 4);
		tx_stop(&s);
	}
	test_cipher = SV_AEAD_AES256GCM;
	sv_setup(&s, 0, 0, 0, 0);
}
