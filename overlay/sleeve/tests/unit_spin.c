/* unit_spin.c - spin.c: the busy-polling window and what it counts */
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "spin.h"
#include "unit.h"

/* Busy-polling: the window and what is counted. */
void test_spin(void)
{
	const uint64_t max = 100000;
	struct sv_counters k;
	struct sv_spin p;

	/* polls until the window is over, counts the miss, the time, the sleep */
	memset(&k, 0, sizeof(k));
	sv_spin_init(&p, max);
	fake_yield_quick = 1;
	fake_now = 1000;
	CHECK(sv_spin_again(&p, &k));
	fake_now += max - 1;
	CHECK(sv_spin_again(&p, &k));
	fake_now += 1;
	CHECK(!sv_spin_again(&p, &k));
	CHECK_EQ(k.c[SV_C_SPIN_MISS], 1);
	CHECK_EQ(k.c[SV_C_SPIN_NS], max);
	fake_now += 10 * max;
	sv_spin_work(&p, &k, 0);
	CHECK_EQ(k.c[SV_C_SLEEPS], 1);
	/* work found while polling is a hit, not a sleep */
	CHECK(sv_spin_again(&p, &k));
	fake_now += 500;
	sv_spin_work(&p, &k, fake_now);
	CHECK_EQ(k.c[SV_C_SPIN_HIT], 1);
	CHECK_EQ(k.c[SV_C_SPIN_NS], max + 500);
	CHECK_EQ(k.c[SV_C_SLEEPS], 1);
	/* work right after work: neither */
	sv_spin_work(&p, &k, fake_now);
	CHECK_EQ(k.c[SV_C_SPIN_HIT] + k.c[SV_C_SLEEPS], 2);
	/* a slow yield (someone else needed the CPU) ends polling at once */
	fake_yield_quick = 0;
	CHECK(!sv_spin_again(&p, &k));
	CHECK_EQ(k.c[SV_C_SPIN_MISS], 2);
	fake_yield_quick = 1;
	sv_spin_work(&p, &k, 0);
	CHECK_EQ(k.c[SV_C_SLEEPS], 2);
	/* polling off: sleeps at once, nothing polled */
	memset(&k, 0, sizeof(k));
	sv_spin_init(&p, 0);
	CHECK(!sv_spin_again(&p, &k));
	sv_spin_work(&p, &k, 0);
	CHECK_EQ(k.c[SV_C_SPIN_NS] + k.c[SV_C_SPIN_MISS] + k.c[SV_C_SPIN_HIT], 0);
	CHECK_EQ(k.c[SV_C_SLEEPS], 1);
	fake_now = 0;
	fake_yield_quick = 0;
}
