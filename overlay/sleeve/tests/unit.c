/* unit.c - the unit tests' runner: every unit file's tests (unit.h) in one
 * binary, in a fixed order, and the count of checks. `unit --write-corpus DIR`
 * and `unit --write-sock-corpus DIR` write fuzz seeds instead (seeds.c). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "unit.h"

int failures, checks;

int main(int argc, char **argv)
{
	int counting = aead_count_allocs(); /* before anything allocates */

	if (argc == 3 && !strcmp(argv[1], "--write-sock-corpus")) {
		int ret = write_sock_corpus(argv[2]);

		if (ret)
			fprintf(stderr, "unit: writing corpus to %s: %s\n", argv[2], strerror(-ret));
		return ret ? 1 : 0;
	}
	if (argc == 3 && !strcmp(argv[1], "--write-corpus")) {
		int ret = write_corpus(argv[2]);

		if (ret)
			fprintf(stderr, "unit: writing corpus to %s: %s\n", argv[2], strerror(-ret));
		return ret ? 1 : 0;
	}
	test_hdr();
	test_pack();
	test_records_bad();
	test_frag_parse();
	test_reasm();
	test_reasm_keyed();
	CHECK(counting);
	test_aead_kat();
	test_hkdf_kat();
	test_aead_pick();
	test_aead_sealing();
	test_aead_no_alloc();
	test_replay_window();
	for (int k = 0; k < 2; k++) {
		test_cipher = k ? SV_AEAD_CHACHA20POLY1305 : SV_AEAD_AES256GCM;
		test_rx_path();
		test_sealed_units();
		test_rx_cipher();
		test_rx_reflected();
	}
	test_rx_input();
	test_harden();
	test_csum();
	test_segment();
	test_tx_device();
	test_spin();
	test_route();
	printf("unit: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
