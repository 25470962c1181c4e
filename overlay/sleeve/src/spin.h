/* spin.h - bounded busy-polling of a thread's fd after traffic (README "Latency") */
#ifndef SLEEVE_SPIN_H
#define SLEEVE_SPIN_H

#include <stdint.h>

struct sv_counters;

/* One per polling thread. With adapt, the window follows how long the thread
 * then slept (as cpuidle-haltpoll does): a sleep the longest window would have
 * covered doubles it, a longer one halves it, and below max/8 it is 0 (the
 * thread sleeps at once until a short sleep turns polling on again). Without
 * adapt the window is always max. */
struct sv_spin {
	uint64_t max;    /* longest window, ns; 0 = never poll */
	uint64_t window; /* the window now */
	int adapt;
	uint64_t t0;     /* polling since (0: not polling) */
	uint64_t idle0;  /* gave up polling at (0: not sleeping) */
};

void sv_spin_init(struct sv_spin *p, uint64_t max, int adapt);
/* The fd had nothing: 1 = poll it again now, 0 = block on it. */
int sv_spin_again(struct sv_spin *p, struct sv_counters *k);
/* The fd had work (now: the time, or 0 if the caller has none at hand). */
void sv_spin_work(struct sv_spin *p, struct sv_counters *k, uint64_t now);
/* The window after a sleep of slept ns (pure: the policy, for the tests). */
uint64_t sv_spin_next(uint64_t window, uint64_t max, uint64_t slept);

#endif
