/* env.h - what the datapath asks of the process around it: the clock, a CPU
 * yield, log lines. env.c is the daemon's; the unit tests and the fuzz targets
 * link their own instead (a clock they move by hand, logs they count). */
#ifndef SLEEVE_ENV_H
#define SLEEVE_ENV_H

#include <stdint.h>

struct sv;

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t sv_now_ns(void);
/* One busy-poll step: yields the CPU; returns 0 when someone else needed it (the
 * yield took long), so that polling only ever uses otherwise idle CPU. */
int sv_spin_yield(uint64_t now);
/* With -v (or s NULL): one line "sleeve: ..." on stderr. */
void sv_log(const struct sv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Always printed (a condition the operator must see, e.g. a refused peer). */
void sv_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
