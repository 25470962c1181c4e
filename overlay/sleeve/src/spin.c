/* spin.c - bounded busy-polling after traffic, counted */
#include "spin.h"
#include "sleeve.h"

void sv_spin_init(struct sv_spin *p, uint64_t max)
{
	p->max = max;
	p->t0 = 0;
	p->w0 = 0;
	p->idle = 0;
}

int sv_spin_again(struct sv_spin *p, struct sv_counters *k)
{
	uint64_t now;

	if (!p->max) {
		p->idle = 1;
		return 0;
	}
	now = sv_now_ns();
	if (!p->t0)
		p->t0 = now;
	if (!p->w0)
		p->w0 = now;
	if (now - p->w0 < p->max && sv_spin_yield(now))
		return 1;
	/* nothing came in the window, or someone else needed the CPU: sleep */
	sv_count(k, SV_C_SPIN_MISS, 1);
	sv_count(k, SV_C_SPIN_NS, now - p->t0);
	p->t0 = 0;
	p->w0 = 0;
	p->idle = 1;
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
		p->w0 = 0;
	} else if (p->idle) {
		sv_count(k, SV_C_SLEEPS, 1);
	}
	p->idle = 0;
}
