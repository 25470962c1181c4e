/* unit_route.c - route.c: sources learned per peer, destinations looked up */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "route.h"
#include "sleeve.h"
#include "unit.h"

static void eth(uint8_t *f, const uint8_t dst[6], const uint8_t src[6])
{
	memset(f, 0, 64);
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	f[12] = 0x08; /* IPv4 */
}

static void ip4(uint8_t *f, uint32_t src, uint32_t dst)
{
	memset(f, 0, 40);
	f[0] = 0x45;
	for (int i = 0; i < 4; i++) {
		f[12 + i] = (uint8_t)(src >> (24 - 8 * i));
		f[16 + i] = (uint8_t)(dst >> (24 - 8 * i));
	}
}

void test_route(void)
{
	static const uint8_t a[6] = {2, 0, 0, 0, 0, 0xa}, b[6] = {2, 0, 0, 0, 0, 0xb},
			     c[6] = {2, 0, 0, 0, 0, 0xc}, bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			     mcast[6] = {0x01, 0, 0x5e, 0, 0, 1};
	struct sv *s = calloc(1, sizeof(*s));
	uint8_t f[64];

	/* one peer: every frame to it, nothing learned */
	s->npeers = 1;
	eth(f, a, b);
	sv_learn(s, 0, f, sizeof(f));
	eth(f, b, a);
	CHECK_EQ(sv_route(s, f, sizeof(f)), -1);

	/* three peers: unknown destinations flood, learned ones go to their peer */
	s->npeers = 3;
	eth(f, a, b);
	CHECK_EQ(sv_route(s, f, sizeof(f)), -1);
	eth(f, bcast, b); /* b sends from behind peer 2 */
	sv_learn(s, 2, f, sizeof(f));
	eth(f, a, c); /* c from behind peer 0 */
	sv_learn(s, 0, f, sizeof(f));
	eth(f, b, a);
	CHECK_EQ(sv_route(s, f, sizeof(f)), 2);
	eth(f, c, a);
	CHECK_EQ(sv_route(s, f, sizeof(f)), 0);
	eth(f, bcast, a);
	CHECK_EQ(sv_route(s, f, sizeof(f)), -1);
	eth(f, mcast, a);
	CHECK_EQ(sv_route(s, f, sizeof(f)), -1);
	CHECK_EQ(sv_route(s, f, 10), -1); /* too short to have a destination */

	/* a source that moves is learned again; a bad peer index or a group source is not */
	eth(f, a, b);
	sv_learn(s, 1, f, sizeof(f));
	sv_learn(s, 7, f, sizeof(f));
	eth(f, a, mcast);
	sv_learn(s, 0, f, sizeof(f));
	eth(f, b, a);
	CHECK_EQ(sv_route(s, f, sizeof(f)), 1);
	eth(f, mcast, a);
	CHECK_EQ(sv_route(s, f, sizeof(f)), -1);

	/* --l3: IPv4 sources and destinations; multicast and other versions flood */
	memset(s->routes, 0, sizeof(s->routes));
	s->l3 = 1;
	ip4(f, 0xc6124002, 0xc6124001); /* 198.18.64.2 from behind peer 1 */
	sv_learn(s, 1, f, 40);
	ip4(f, 0xc6124001, 0xc6124002);
	CHECK_EQ(sv_route(s, f, 40), 1);
	ip4(f, 0xc6124001, 0xc6124003);
	CHECK_EQ(sv_route(s, f, 40), -1);
	ip4(f, 0xc6124001, 0xe0000001);
	CHECK_EQ(sv_route(s, f, 40), -1);
	ip4(f, 0xc6124001, 0xc6124002);
	f[0] = 0x60;
	CHECK_EQ(sv_route(s, f, 40), -1);
	free(s);
}
