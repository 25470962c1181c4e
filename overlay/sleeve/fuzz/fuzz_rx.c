/* fuzz_rx.c - libFuzzer entry on the receive path: header, decryption under
 * both AEADs, records, reassembly, control messages and the cipher they agree
 * on, gathering segments. Input: cfg byte (bit0 keyed, bit1 L3, bit2 vnet
 * device, bit3 --segment, bit7 the receiver accepts only ChaCha20-Poly1305),
 * then datagrams as (len u16 big-endian, bytes)* from the peer 198.18.0.1:6784;
 * a short tail is one more datagram. */
#include <arpa/inet.h>
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

static int deliver(struct sv *s, const struct iovec *iov, int n, int has_vnet)
{
	(void)s;
	sink_frame(iov, n, has_vnet);
	return 0;
}

static int send_ctl(struct sv *s, struct sv_peer *p, const uint8_t *d, size_t len)
{
	(void)s;
	(void)p;
	if (len > SV_MAX_DGRAM + 64)
		abort();
	sink += d[0];
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sv s;
	static uint8_t buf[1 << 20];
	size_t used = 0;
	int primed = 0;
	uint64_t now = 1000;
	struct sockaddr_in *pa = (struct sockaddr_in *)&s.peers[0].addr;
	struct sockaddr_storage local = {0};
	struct sv_ident peer, me;

	if (size < 1)
		return 0;
	sv_reasm_free(&s.peers[0].reasm);
	sv_open_free(&s.peers[0].open);
	sv_seal_free(&s.seal);
	memset(&s, 0, sizeof(s));
	pthread_mutex_init(&s.lock, NULL);
	s.enc = data[0] & 1;
	s.l3 = (data[0] >> 1) & 1;
	s.vnet = (data[0] >> 2) & 1;
	s.segment = (data[0] >> 3) & 1;
	s.mtu = 1500;
	s.npeers = 1;
	s.peers[0].pmtu = 1472;
	s.deliver = deliver;
	s.send_ctl = send_ctl;
	s.tap_fd = -1;
	memset(s.master, 0x42, sizeof(s.master));
	/* the peer 198.18.0.1:6784, this side 198.18.0.9:6784 */
	pa->sin_family = AF_INET;
	pa->sin_port = htons(6784);
	pa->sin_addr.s_addr = htonl(0xc6120001u);
	s.peers[0].alen = sizeof(*pa);
	memcpy(&local, pa, sizeof(*pa));
	((struct sockaddr_in *)&local)->sin_addr.s_addr = htonl(0xc6120009u);
	sv_ident_of(&peer, &s.peers[0].addr);
	sv_ident_of(&me, &local);
	sv_open_init(&s.peers[0].open, &peer);
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
	while (size > 0) {
		size_t n = size;

		if (size >= 2) {
			size_t want = (size_t)data[0] << 8 | data[1];

			if (want <= size - 2) {
				data += 2;
				size -= 2;
				n = want;
			}
		}
		/* datagrams of one receive batch lie side by side in buf; a batch ends
		 * after an odd-length datagram or when buf is full, and is settled
		 * before buf is reused, as the daemon's receive loop does */
		if (used + n > sizeof(buf)) {
			sv_rx_settle(&s);
			used = 0;
		}
		memcpy(buf + used, data, n); /* decryption works in place */
		tally_version(data, n);
		if (s.enc && !primed++)
			fuzz_prime(&s.peers[0].open, data, n);
		sv_rx_datagram(&s, &s.peers[0], buf + used, n, now);
		used += n;
		if (n & 1) {
			sv_rx_settle(&s);
			used = 0;
		}
		data += n;
		size -= n;
		now += 1000000;
	}
	sv_rx_settle(&s); /* the end of the input ends the batch */
	sv_reasm_free(&s.peers[0].reasm);
	return 0;
}
