/* unit.h - the unit tests, one file per unit of src/, in the order unit.c runs
 * them; and the fuzz seeds the unit binary writes */
#ifndef SLEEVE_TEST_UNIT_H
#define SLEEVE_TEST_UNIT_H

#include <stdint.h>

/* unit_frame.c */
void test_hdr(void);
void test_route(void);
void test_pack(void);
void test_records_bad(void);
void test_frag_parse(void);
void test_csum(void);
/* unit_reasm.c */
void test_reasm(void);
void test_reasm_keyed(void);
/* unit_aead.c */
/* Counts OpenSSL's allocations from now on: call first, before anything
 * allocates through OpenSSL; 0 if that was too late. */
int aead_count_allocs(void);
void test_aead_kat(void);
void test_hkdf_kat(void);
void test_aead_pick(void);
void test_aead_sealing(void);
void test_aead_no_alloc(void);
void test_replay_window(void);
struct sv_open;
/* Makes session the proven one of o directly (tests of the sealing side). */
void test_trust(struct sv_open *o, uint64_t session);
/* unit_rx.c (the first three under test_cipher) */
void test_rx_path(void);
void test_sealed_units(void);
void test_rx_reflected(void);
void test_rx_input(void);
/* unit_agree.c (under test_cipher) */
void test_rx_cipher(void);
/* unit_harden.c */
void test_harden(void);
/* unit_segment.c */
void test_segment(void);
/* unit_tx.c */
void test_tx_device(void);
/* unit_spin.c */
void test_spin(void);

/* seeds.c: 0 or -errno */
int write_corpus(const char *dir);
int write_sock_corpus(const char *dir);

#endif
