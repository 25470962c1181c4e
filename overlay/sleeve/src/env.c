/* env.c - the clock, the CPU yield and the log lines of the daemon (env.h) */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "env.h"
#include "sleeve.h"

#define PROG "sleeve"

uint64_t sv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int sv_spin_yield(uint64_t now)
{
	sched_yield();
	return sv_now_ns() - now < 20000;
}

void sv_log(const struct sv *s, const char *fmt, ...)
{
	va_list ap;

	if (s && !s->verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, PROG ": ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void sv_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, PROG ": ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}
