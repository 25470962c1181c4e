/* route.c - which peer a frame goes to (route.h). */
#include <string.h>

#include "route.h"
#include "sleeve.h"

/* A slot: bits 0-47 the address (a MAC, or an IPv4 address), bits 48-55 the
 * peer index + 1 (0: empty). */
#define KEY_MASK ((UINT64_C(1) << 48) - 1)

static uint64_t mac_key(const uint8_t *m)
{
	uint64_t k = 0;

	for (int i = 0; i < 6; i++)
		k = k << 8 | m[i];
	return k;
}

static unsigned slot_of(uint64_t key)
{
	return (unsigned)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 54) % SV_ROUTE_SLOTS;
}

/* The frame's source (src = 1) or destination address as a key; 0 if it has none
 * to learn or route by (too short, multicast, not IPv4 with --l3). */
static uint64_t addr_key(const struct sv *s, const uint8_t *f, size_t len, int src)
{
	if (s->l3) {
		uint32_t a;

		if (len < 20 || (f[0] >> 4) != 4)
			return 0;
		memcpy(&a, f + (src ? 12 : 16), 4);
		if ((f[src ? 12 : 16] & 0xf0) == 0xe0) /* 224.0.0.0/4: multicast */
			return 0;
		return (uint64_t)a | UINT64_C(1) << 40; /* never 0 */
	}
	if (len < SV_ETH_HLEN || (f[src ? 6 : 0] & 1)) /* group bit: broadcast or multicast */
		return 0;
	return mac_key(f + (src ? 6 : 0));
}

int sv_route(const struct sv *s, const uint8_t *frame, size_t len)
{
	uint64_t key, e;

	if (s->npeers < 2)
		return -1;
	key = addr_key(s, frame, len, 0);
	if (!key)
		return -1;
	e = __atomic_load_n(&s->routes[slot_of(key)], __ATOMIC_RELAXED);
	if ((e & KEY_MASK) != key || !(e >> 48))
		return -1;
	return (int)(e >> 48) - 1;
}

void sv_learn(struct sv *s, int peer, const uint8_t *frame, size_t len)
{
	uint64_t key, e;
	uint64_t *slot;

	if (s->npeers < 2 || peer < 0 || peer >= s->npeers)
		return;
	key = addr_key(s, frame, len, 1);
	if (!key)
		return;
	e = key | (uint64_t)(peer + 1) << 48;
	slot = &s->routes[slot_of(key)];
	if (__atomic_load_n(slot, __ATOMIC_RELAXED) != e)
		__atomic_store_n(slot, e, __ATOMIC_RELAXED);
}
