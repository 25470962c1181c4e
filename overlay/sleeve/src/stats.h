/* stats.h - the counters as JSON (overlay/README.md, "Counters") */
#ifndef SLEEVE_STATS_H
#define SLEEVE_STATS_H

#include "sleeve.h"

/* Writes path atomically (tmp file + rename); 0 or -errno. */
int sv_stats_write(struct sv *s, const char *path);

#endif
