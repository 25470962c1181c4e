/* seedver.h - the fuzz seeds' wire versions, tallied while a corpus is replayed
 * (fuzz/replay.c calls fuzz_replay_summary at the end). A corpus whose datagrams
 * mostly carry an older version stops at the version check and tests nothing
 * behind it, so such a replay fails. Included by one target per binary. */
#ifndef SLEEVE_SEEDVER_H
#define SLEEVE_SEEDVER_H

#include <stdint.h>
#include <stdio.h>

#include "wire.h"

static unsigned long seen_current, seen_other;

static void tally_version(const uint8_t *d, size_t n)
{
	if (n < 3 || d[0] != (SV_MAGIC >> 8) || d[1] != (SV_MAGIC & 0xff))
		return;
	if (d[2] == SV_VERSION)
		seen_current++;
	else
		seen_other++;
}

int fuzz_replay_summary(void);
int fuzz_replay_summary(void)
{
	printf("fuzz_replay: %lu datagrams of wire version %d, %lu of another\n", seen_current, SV_VERSION,
	       seen_other);
	if (seen_other > seen_current) {
		printf("fuzz_replay: the corpus is stale (the wire version changed): capture new seeds "
		       "(tests/capture_seeds.sh) and fuzz again (overlay/README.md, fuzzing)\n");
		return 1;
	}
	return 0;
}

#endif
