/* The command line: `blast send|recv [options]` (README.md). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blast.h"

static int num(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static int uint_opt(const char *name, const char *s, double lo, double hi, unsigned *out,
		    char *err, size_t errlen)
{
	double v;

	if (num(s, lo, hi, &v) || v != floor(v)) {
		snprintf(err, errlen, "--%s must be a whole number %.0f..%.0f, not '%s'", name, lo, hi, s);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

int bl_parse_opts(int argc, char **argv, struct bl_opts *o, char *err, size_t errlen)
{
	static const struct option longs[] = {
		{"addr", required_argument, 0, 'a'}, {"port", required_argument, 0, 'p'},
		{"flows", required_argument, 0, 'f'}, {"size", required_argument, 0, 's'},
		{"mtu", required_argument, 0, 'm'}, {"batch", required_argument, 0, 'b'},
		{"rate", required_argument, 0, 'r'}, {"duration", required_argument, 0, 'd'},
		{"src-port", required_argument, 0, 'S'}, {"packet", no_argument, 0, 'K'}, {0, 0, 0, 0},
	};
	int c, ret = 0;

	memset(o, 0, sizeof(*o));
	o->port = 9000;
	o->flows = 1;
	o->size = BL_HDR;
	o->mtu = 1500;
	o->batch = 64;
	o->duration = 2;
	if (argc < 2 || (strcmp(argv[1], "send") && strcmp(argv[1], "recv"))) {
		snprintf(err, errlen, "usage: blast send|recv [--addr A] [--port P] [--flows N] [--size B] "
			 "[--mtu M] [--batch N] [--rate PPS] [--duration S] [--src-port P] [--packet]");
		return -EINVAL;
	}
	o->role = argv[1][0] == 's' ? BL_SEND : BL_RECV;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, "", longs, NULL)) != -1) {
		switch (c) {
		case 'a': o->addr = optarg; break;
		case 'p': ret = uint_opt("port", optarg, 1, 65535, &o->port, err, errlen); break;
		case 'f': ret = uint_opt("flows", optarg, 1, BL_MAX_FLOWS, &o->flows, err, errlen); break;
		case 's': ret = uint_opt("size", optarg, 0, BL_MAX_PAYLOAD, &o->size, err, errlen); break;
		case 'm': ret = uint_opt("mtu", optarg, 68, 65535, &o->mtu, err, errlen); break;
		case 'b': ret = uint_opt("batch", optarg, 1, BL_MAX_BATCH, &o->batch, err, errlen); break;
		case 'S': ret = uint_opt("src-port", optarg, 0, 65535, &o->src_port, err, errlen); break;
		case 'K': o->packet = 1; break;
		case 'r':
			if (num(optarg, 0, 1e9, &o->rate)) {
				snprintf(err, errlen, "--rate must be packets/s 0..1e9 (0: as fast as it goes), not '%s'", optarg);
				ret = -EINVAL;
			}
			break;
		case 'd':
			if (num(optarg, 0.001, BL_MAX_DURATION, &o->duration)) {
				snprintf(err, errlen, "--duration must be seconds 0.001..%.0f, not '%s'", BL_MAX_DURATION, optarg);
				ret = -EINVAL;
			}
			break;
		default:
			snprintf(err, errlen, "unknown option or missing value: '%s'", argv[optind]);
			ret = -EINVAL;
		}
		if (ret)
			return ret;
	}
	if (optind + 1 < argc) {
		snprintf(err, errlen, "unexpected argument '%s'", argv[optind + 1]);
		return -EINVAL;
	}
	return 0;
}

/* What cannot work: a payload without room for the header or beyond the MTU, flows past 65535. */
int bl_check_opts(const struct bl_opts *o, int ipv6, char *err, size_t errlen)
{
	unsigned hdrs = ipv6 ? 48 : 28;

	if (o->role == BL_SEND && !o->addr) {
		snprintf(err, errlen, "send needs --addr");
		return -EINVAL;
	}
	if (o->packet && (o->role != BL_SEND || ipv6)) {
		snprintf(err, errlen, "--packet is the sender's, over IPv4");
		return -EINVAL;
	}
	if (o->size < BL_HDR) {
		snprintf(err, errlen, "--size %u is under the %u-byte header", o->size, BL_HDR);
		return -EINVAL;
	}
	if (o->size + hdrs > o->mtu) {
		snprintf(err, errlen, "--size %u does not fit --mtu %u (at most %u payload bytes)",
			 o->size, o->mtu, o->mtu > hdrs ? o->mtu - hdrs : 0);
		return -EINVAL;
	}
	if (o->port + o->flows - 1 > 65535 || (o->src_port && o->src_port + o->flows - 1 > 65535)) {
		snprintf(err, errlen, "ports %u + %u flows run past 65535", o->port, o->flows);
		return -EINVAL;
	}
	return 0;
}
