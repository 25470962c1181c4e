/* The datagram header, pacing arithmetic and clocks: pure, unit-checked (tests/unit.c). */
#include <endian.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "blast.h"

void bl_put_hdr(uint8_t *buf, const struct bl_hdr *h)
{
	uint32_t m = htobe32(h->magic), r = htobe32(h->run);
	uint64_t s = htobe64(h->seq);
	uint16_t f = htobe16(h->flow);

	memcpy(buf, &m, 4);
	memcpy(buf + 4, &r, 4);
	memcpy(buf + 8, &s, 8);
	memcpy(buf + 16, &f, 2);
}

/* 0 for a header of ours, -1 for anything else (too short, another magic) */
int bl_get_hdr(const uint8_t *buf, size_t len, struct bl_hdr *h)
{
	uint32_t m, r;
	uint64_t s;
	uint16_t f;

	if (len < BL_HDR)
		return -1;
	memcpy(&m, buf, 4);
	memcpy(&r, buf + 4, 4);
	memcpy(&s, buf + 8, 8);
	memcpy(&f, buf + 16, 2);
	h->magic = be32toh(m);
	h->run = be32toh(r);
	h->seq = be64toh(s);
	h->flow = be16toh(f);
	if (h->magic != BL_MAGIC_DATA && h->magic != BL_MAGIC_END && h->magic != BL_MAGIC_REP)
		return -1;
	return 0;
}

/* The batch at `rate`: bursts of at most a millisecond's packets, at least one. */
unsigned bl_batch_for(double rate, unsigned batch)
{
	double per_ms;

	if (rate <= 0)
		return batch;
	per_ms = rate / 1000.0;
	if (per_ms < 1)
		return 1;
	return per_ms < batch ? (unsigned)per_ms : batch;
}

/* Nanoseconds `n` packets take at `rate` (0 for as fast as it goes). */
int64_t bl_batch_ns(double rate, unsigned n)
{
	if (rate <= 0)
		return 0;
	return (int64_t)((double)n * 1e9 / rate + 0.5);
}

double bl_ts(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* This process's CPU time so far, user and system. */
double bl_cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* How long this thread has waited, runnable, for a CPU so far (the second field of
 * /proc/thread-self/schedstat, in ns); -1 where the kernel does not say. */
double bl_wait_seconds(void)
{
	unsigned long long on_cpu, waited;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "%llu %llu", &on_cpu, &waited);
	fclose(f);
	return n == 2 ? (double)waited / 1e9 : -1;
}
