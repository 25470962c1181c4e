/* seedver.h - what the fuzz targets share about their seeds. The seeds' wire
 * versions, tallied while a corpus is replayed (fuzz/replay.c calls
 * fuzz_replay_summary at the end): a corpus whose datagrams mostly carry an
 * older version stops at the version check and tests nothing behind it, so
 * such a replay fails. And the proven session a keyed seed's reads assume
 * (fuzz_prime). Included by one target per binary. */
#ifndef SLEEVE_SEEDVER_H
#define SLEEVE_SEEDVER_H

#include <stdint.h>
#include <stdio.h>

#include "crypto.h"
#include "wire.h"

/* A keyed target meets a peer whose session is already proven, as a running
 * daemon does: the session of the peer's first datagram in the input, unless
 * that is a HEARTBEAT (then the input goes through the handshake itself, which
 * the "hello" seeds do: they echo the targets' own session, 0x2222). Real
 * captures open so, though their HEARTBEATs echo another daemon's session. */
static void fuzz_prime(struct sv_open *o, const uint8_t *d, size_t n)
{
	if (o->have || o->cand_have || n < SV_HDR_LEN + SV_CRYPTO_PRE || d[0] != (SV_MAGIC >> 8) ||
	    d[1] != (SV_MAGIC & 0xff) || d[3] == SV_T_HEARTBEAT)
		return;
	o->cand_session = (uint64_t)d[8] << 56 | (uint64_t)d[9] << 48 | (uint64_t)d[10] << 40 |
			  (uint64_t)d[11] << 32 | (uint64_t)d[12] << 24 | (uint64_t)d[13] << 16 |
			  (uint64_t)d[14] << 8 | d[15];
	o->cand_have = 1;
	sv_open_prove(o, 0);
}

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
