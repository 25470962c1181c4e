/* blast: the edge. Usage errors exit 2, a failed run 1, each with one line naming blast. */
#include <stdio.h>
#include <string.h>

#include "blast.h"

int main(int argc, char **argv)
{
	struct bl_opts o;
	char err[256] = "";
	int ret;

	if (argc == 2 && !strcmp(argv[1], "--version")) {
		printf("%s %s\n", BL_NAME, BL_VERSION);
		return 0;
	}
	if (bl_parse_opts(argc, argv, &o, err, sizeof(err)) ||
	    bl_check_opts(&o, o.addr && strchr(o.addr, ':'), err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", BL_NAME, err);
		return 2;
	}
	ret = o.role == BL_SEND ? bl_send(&o) : bl_recv(&o);
	if (ret == BL_SAID)
		return 1;
	if (ret) {
		fprintf(stderr, "%s: %s failed: %s\n", BL_NAME, o.role == BL_SEND ? "send" : "recv", strerror(-ret));
		return 1;
	}
	return 0;
}
