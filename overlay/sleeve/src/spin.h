/* spin.h - bounded busy-polling of a thread's fd after traffic (README "Latency") */
#ifndef SLEEVE_SPIN_H
#define SLEEVE_SPIN_H

#include <stdint.h>

struct sv_counters;

/* One per polling thread: after traffic it polls its fd for up to max ns,
 * yielding the CPU at every step, then sleeps. Counted in the thread's
 * counters: hits (polling found work), misses (it slept), the time polled and
 * the sleeps. (An adaptive window, haltpoll-style, and no polling after bulk
 * reads were tried and measured no better: BENCHMARKS.md section 7.) */
struct sv_spin {
	uint64_t max;   /* the window, ns; 0 = never poll */
	uint64_t t0;    /* polling since (0: not polling) */
	uint64_t w0;    /* the window counts from (0: from the first poll) */
	int idle;       /* gave up polling: sleeping */
};

void sv_spin_init(struct sv_spin *p, uint64_t max);
/* The window of the next polling counts from now (the receive thread: from
 * when a batch came in, not from when it was handled). */
static inline void sv_spin_arm(struct sv_spin *p, uint64_t now)
{
	p->w0 = now;
}
/* The fd had nothing: 1 = poll it again now, 0 = block on it. */
int sv_spin_again(struct sv_spin *p, struct sv_counters *k);
/* The fd had work (now: the time, or 0 if the caller has none at hand). */
void sv_spin_work(struct sv_spin *p, struct sv_counters *k, uint64_t now);

#endif
