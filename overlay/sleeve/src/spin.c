/* spin.c - bounded, optionally adaptive busy-polling after traffic */
#include "spin.h"
#include "sleeve.h"

void sv_spin_init(struct sv_spin *p, uint64_t max, int adapt)
{
	p->max = max;
	p->window = max;
	p->adapt = adapt;
	p->t0 = 0;
	p->idle0 = 0;
}

uint64_t sv_spin_next(uint64_t window, uint64_t max, uint64_t slept)
{
	uint64_t start = max / 8;

	if (!max)
		return 0;
	if (slept <= max)
		return window < start ? start : window * 2 > max ? max : window * 2;
	window /= 2;
	return window < start ? 0 : window;
}

int sv_spin_again(struct sv_spin *p, struct sv_counters *k)
{
	uint64_t now;

	if (!p->window) {
		if (!p->idle0)
			p->idle0 = sv_now_ns();
		return 0;
	}
	now = sv_now_ns();
	if (!p->t0)
		p->t0 = now;
	if (now - p->t0 < p->window && sv_spin_yield(now))
		return 1;
	/* nothing came in the window, or someone else needed the CPU: sleep */
	sv_count(k, SV_C_SPIN_MISS, 1);
	sv_count(k, SV_C_SPIN_NS, now - p->t0);
	p->t0 = 0;
	p->idle0 = now;
	return 0;
}

void sv_spin_work(struct sv_spin *p, struct sv_counters *k, uint64_t now)
{
	if (p->t0) {
		if (!now)
			now = sv_now_ns();
		sv_count(k, SV_C_SPIN_HIT, 1);
		sv_count(k, SV_C_SPIN_NS, now - p->t0);
		p->t0 = 0;
	} else if (p->idle0) {
		/* woke from a sleep */
		if (p->adapt) {
			if (!now)
				now = sv_now_ns();
			p->window = sv_spin_next(p->window, p->max, now - p->idle0);
		}
		sv_count(k, SV_C_SLEEPS, 1);
	}
	p->idle0 = 0;
}
