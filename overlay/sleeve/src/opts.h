/* opts.h - the command line (overlay/README.md, "Command line") */
#ifndef SLEEVE_OPTS_H
#define SLEEVE_OPTS_H

#include "sleeve.h"

struct opts {
	const char *dev, *local, *key_file, *stats_file;
	const char *peer[SV_MAX_PEERS];
	int npeers;
	int l3, basic, nobatch, nooffload, segment, verbose, hb_ms;
	int mtu;          /* 0 = auto */
	int cipher;       /* --cipher: 0 auto, else the AEAD */
	int cipher_given;
	int calibrate_ns; /* --calibrate-ns */
};

/* Returns 0, 1 (printed help/version: exit 0) or 2 (bad usage, message printed). */
int sv_opts_parse(int argc, char **argv, struct opts *o);
/* A decimal in [lo, hi]: 0, or -EINVAL. */
int sv_parse_int(const char *s, long lo, long hi, int *out);

#endif
