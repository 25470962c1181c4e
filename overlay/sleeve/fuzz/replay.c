/* replay.c - runs LLVMFuzzerTestOneInput over files and directories (no clang needed) */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
/* A target may say, once every file has run, whether what it saw is sound (e.g. its
 * seeds still speak the current wire version): non-zero fails the replay. */
int fuzz_replay_summary(void) __attribute__((weak));

static int runs;

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;

	if (!f) {
		perror(path);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		free(buf);
		fprintf(stderr, "replay: cannot read %s\n", path);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	/* and every prefix of it: truncation at each point */
	for (long k = 0; k < n; k += 1 + n / 64)
		LLVMFuzzerTestOneInput(buf, (size_t)k);
	free(buf);
	runs++;
	return 0;
}

static int run_path(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int ret = 0;

	if (stat(path, &st) < 0) {
		perror(path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return run_file(path);
	d = opendir(path);
	if (!d) {
		perror(path);
		return -1;
	}
	while ((e = readdir(d))) {
		char p[4096];

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		ret |= run_path(p);
	}
	closedir(d);
	return ret;
}

int main(int argc, char **argv)
{
	int ret = 0;

	for (int i = 1; i < argc; i++)
		ret |= run_path(argv[i]);
	printf("fuzz_replay: %d inputs replayed without a crash\n", runs);
	if (fuzz_replay_summary && fuzz_replay_summary())
		ret = 1;
	return ret ? 1 : 0;
}
