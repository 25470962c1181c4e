/* fuzz_rx.c - libFuzzer entry on the receive path: header, decryption, records,
 * reassembly, control messages. Input: cfg byte (bit0 keyed, bit1 L3, bit2 vnet
 * device), then datagrams as (len u16 big-endian, bytes)*; a short tail is one
 * more datagram. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sleeve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

uint64_t sv_now_ns(void) { return 0; }
int sv_overhead(const struct sv *s) { (void)s; return 0; }
uint32_t sv_min_pmtu(struct sv *s) { return s->peers[0].pmtu; }
void sv_log(const struct sv *s, const char *fmt, ...) { (void)s; (void)fmt; }

static volatile uint64_t sink;

static int deliver(struct sv *s, const uint8_t *vnet, const uint8_t *f, size_t len)
{
	uint64_t x = 0;

	(void)s;
	if (vnet)
		for (size_t i = 0; i < 10; i++)
			x += vnet[i];
	for (size_t i = 0; i < len; i++) /* touch every byte: ASan checks the bounds */
		x += f[i];
	sink += x;
	if (len > SV_MAX_UNIT)
		abort();
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
	static uint8_t buf[70000];
	static int init;
	uint64_t now = 1000;

	if (!init) {
		if (sodium_init() < 0)
			abort();
		init = 1;
	}
	if (size < 1)
		return 0;
	sv_reasm_free(&s.peers[0].reasm);
	memset(&s, 0, sizeof(s));
	s.enc = data[0] & 1;
	s.l3 = (data[0] >> 1) & 1;
	s.vnet = (data[0] >> 2) & 1;
	s.mtu = 1500;
	s.npeers = 1;
	s.peers[0].pmtu = 1472;
	s.deliver = deliver;
	s.send_ctl = send_ctl;
	s.tap_fd = -1;
	memset(s.master, 0x42, sizeof(s.master));
	if (s.enc)
		sv_seal_init(&s.seal, s.master, 0x2222, 1);
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
		memcpy(buf, data, n); /* decryption works in place */
		sv_rx_datagram(&s, &s.peers[0], buf, n, now);
		data += n;
		size -= n;
		now += 1000000;
	}
	sv_reasm_free(&s.peers[0].reasm);
	return 0;
}
