/* unit_frame.c - frame.c: the header, batching frames into DATA datagrams and
 * reading them back, FRAG headers and how a unit is cut, checksum completion */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "frame.h"
#include "unit.h"

/* ---- header ---- */
void test_hdr(void)
{
	uint8_t d[64];
	struct sv_hdr h;

	sv_hdr_put(d, SV_T_DATA, SV_F_L3, 10);
	memset(d + 8, 0xaa, 10);
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_OK);
	CHECK_EQ(h.type, SV_T_DATA);
	CHECK_EQ(h.flags, SV_F_L3);
	CHECK_EQ(h.len, 10);
	for (size_t n = 0; n < 8; n++)
		CHECK_EQ(sv_hdr_parse(d, n, &h), SV_D_TRUNCATED);
	CHECK_EQ(sv_hdr_parse(d, 17, &h), SV_D_TRUNCATED);
	CHECK_EQ(sv_hdr_parse(d, 19, &h), SV_D_BAD_LENGTH);
	d[0] ^= 1;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_MAGIC);
	d[0] ^= 1;
	d[1] ^= 0x80;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_MAGIC);
	d[1] ^= 0x80;
	d[2] = 0;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_VERSION);
	/* version 1 had no SINGLE form, 2 sealed every FRAG piece, 3 had no aead
	 * byte and libsodium's keys: refused, not misread */
	for (uint8_t v = 1; v <= 5; v++) {
		if (v == SV_VERSION)
			continue;
		d[2] = v;
		CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_VERSION);
	}
	d[2] = SV_VERSION;
	d[3] = 0;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_TYPE);
	d[3] = 6;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_TYPE);
	d[3] = SV_T_DATA;
	d[4] = 0x10;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	d[4] = 0x80;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	d[4] = SV_F_VNET; /* VNET only on FRAG */
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	d[4] = SV_F_SINGLE | SV_F_VNET; /* SINGLE with a FRAG-only flag */
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	d[4] = SV_F_SINGLE;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_OK);
	CHECK_EQ(h.flags, SV_F_SINGLE);
	/* SINGLE only on DATA: not on FRAG (even with VNET) nor on control types */
	for (uint8_t t = SV_T_FRAG; t <= SV_T_PROBE_ACK; t++) {
		d[3] = t;
		CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	}
	d[3] = SV_T_FRAG;
	d[4] = SV_F_SINGLE | SV_F_VNET;
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	d[3] = SV_T_DATA;
	/* DATA with an empty body, SINGLE or not */
	sv_hdr_put(d, SV_T_DATA, SV_F_SINGLE, 0);
	CHECK_EQ(sv_hdr_parse(d, 8, &h), SV_D_BAD_LENGTH);
	sv_hdr_put(d, SV_T_DATA, 0, 0);
	CHECK_EQ(sv_hdr_parse(d, 8, &h), SV_D_BAD_LENGTH);
	sv_hdr_put(d, SV_T_DATA, SV_F_SINGLE | SV_F_ENC, 0);
	d[5] = SV_AEAD_AES256GCM;
	CHECK_EQ(sv_hdr_parse(d, 8 + 32, &h), SV_D_BAD_LENGTH);
	/* the aead byte: 0 without ENC; an AEAD's id with it */
	sv_hdr_put(d, SV_T_DATA, SV_F_L3, 10);
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_OK);
	CHECK_EQ(h.aead, 0);
	for (int v = 1; v < 256; v++) {
		d[5] = (uint8_t)v;
		CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_BAD_FLAGS);
	}
	sv_hdr_put(d, SV_T_DATA, SV_F_ENC, 10);
	for (int v = 0; v < 256; v++) {
		d[5] = (uint8_t)v;
		CHECK_EQ(sv_hdr_parse(d, 50, &h),
			 v == SV_AEAD_AES256GCM || v == SV_AEAD_CHACHA20POLY1305 ? SV_OK : SV_D_BAD_FLAGS);
	}
	d[5] = SV_AEAD_CHACHA20POLY1305;
	CHECK_EQ(sv_hdr_parse(d, 50, &h), SV_OK);
	CHECK_EQ(h.aead, SV_AEAD_CHACHA20POLY1305);
	/* sealed: 32 more bytes are expected */
	CHECK_EQ(sv_hdr_parse(d, 18, &h), SV_D_TRUNCATED);
	CHECK_EQ(sv_hdr_parse(d, 50, &h), SV_OK);
	CHECK_EQ(sv_hdr_parse(d, 49, &h), SV_D_TRUNCATED);
	CHECK_EQ(sv_hdr_parse(d, 51, &h), SV_D_BAD_LENGTH);
	/* a sealed FRAG piece: session and counter, no tag of its own */
	sv_hdr_put(d, SV_T_FRAG, SV_F_ENC, 20);
	d[5] = SV_AEAD_AES256GCM;
	CHECK_EQ(sv_hdr_parse(d, 8 + 16 + 20, &h), SV_OK);
	CHECK_EQ(sv_hdr_parse(d, 8 + 16 + 19, &h), SV_D_TRUNCATED);
	CHECK_EQ(sv_hdr_parse(d, 8 + 16 + 20 + 16, &h), SV_D_BAD_LENGTH);
}

/* ---- batching ---- */
void test_pack(void)
{
	uint8_t buf[2048 + SV_PACK_SLACK], frame[1500];
	struct sv_packer pk;
	size_t cap = 1472, maxf = sv_pack_max_frame(cap, 0), len;
	const uint8_t *cur, *end, *f;
	unsigned nrec;
	size_t flen;
	struct sv_hdr h;

	for (size_t i = 0; i < sizeof(frame); i++)
		frame[i] = (uint8_t)i;
	/* one frame: no record length, so 8 bytes of header only */
	CHECK_EQ(maxf, 1472 - 8);
	CHECK_EQ(sv_pack_max_frame(cap, 1), 1472 - 8 - 32);
	/* exact fit of a single frame; nothing more fits beside it */
	sv_pack_begin(&pk, buf, cap, 0);
	CHECK_EQ(sv_pack_add(&pk, frame, maxf), 1);
	CHECK_EQ(sv_pack_add(&pk, frame, 1), 0);
	len = sv_pack_finish(&pk);
	CHECK_EQ(len, cap);
	CHECK(pk.dgram == buf + SV_REC_HDR);
	CHECK_EQ(pk.blen, maxf);
	CHECK_EQ(sv_hdr_parse(pk.dgram, len, &h), SV_OK);
	CHECK_EQ(h.flags, SV_F_SINGLE);
	CHECK_EQ(h.len, maxf);
	CHECK(!memcmp(pk.dgram + 8, frame, maxf));
	/* one byte over does not fit an empty datagram */
	sv_pack_begin(&pk, buf, cap, 0);
	CHECK_EQ(sv_pack_add(&pk, frame, maxf + 1), 0);
	CHECK_EQ(sv_pack_add(&pk, frame, 0), 0);
	/* a full single frame leaves no room for a batch: a second frame needs both
	 * record lengths to fit too */
	sv_pack_begin(&pk, buf, cap, 0);
	CHECK_EQ(sv_pack_add(&pk, frame, maxf - 4), 1);
	CHECK_EQ(sv_pack_add(&pk, frame, 1), 0);
	sv_pack_begin(&pk, buf, cap, 0);
	CHECK_EQ(sv_pack_add(&pk, frame, maxf - 5), 1);
	CHECK_EQ(sv_pack_add(&pk, frame, 1), 1);
	CHECK_EQ(sv_pack_finish(&pk), cap);
	CHECK(pk.dgram == buf);
	/* several frames, the last one exactly filling the datagram */
	sv_pack_begin(&pk, buf, cap, 0);
	CHECK_EQ(sv_pack_add(&pk, frame, 100), 1);
	CHECK_EQ(sv_pack_add(&pk, frame + 1, 200), 1);
	CHECK_EQ(sv_pack_add(&pk, frame + 2, maxf - 100 - 200 - 6 + 1), 0);
	CHECK_EQ(sv_pack_add(&pk, frame + 2, maxf - 100 - 200 - 6), 1);
	CHECK_EQ(pk.nrec, 3);
	len = sv_pack_finish(&pk);
	CHECK_EQ(len, cap);
	CHECK(pk.dgram == buf);
	CHECK_EQ(sv_hdr_parse(buf, len, &h), SV_OK);
	CHECK_EQ(h.flags & SV_F_SINGLE, 0);
	CHECK_EQ(sv_records_check(buf + 8, h.len, &nrec), SV_OK);
	CHECK_EQ(nrec, 3);
	cur = buf + 8;
	end = buf + len;
	f = sv_records_next(&cur, end, &flen);
	CHECK(f && flen == 100 && !memcmp(f, frame, 100));
	f = sv_records_next(&cur, end, &flen);
	CHECK(f && flen == 200 && !memcmp(f, frame + 1, 200));
	f = sv_records_next(&cur, end, &flen);
	CHECK(f && flen == maxf - 306 && !memcmp(f, frame + 2, flen));
	CHECK(sv_records_next(&cur, end, &flen) == NULL);
	/* a cap beyond one UDP datagram is clamped */
	CHECK_EQ(sv_pack_max_frame(100000, 0), SV_MAX_DGRAM - 8);
	/* overhead from the overlay MTU to the underlay MTU (IPv4 20 + UDP 8 + this) */
	CHECK_EQ(28 + sv_payload_over(0, 0), 50);
	CHECK_EQ(28 + sv_payload_over(1, 0), 36);
	CHECK_EQ(28 + sv_payload_over(0, 1), 82);
	CHECK_EQ(28 + sv_payload_over(1, 1), 68);
}

void test_records_bad(void)
{
	uint8_t b[16] = {0};
	unsigned n;

	CHECK_EQ(sv_records_check(b, 0, &n), SV_D_BAD_LENGTH);
	b[0] = 0;
	b[1] = 0; /* zero-length record */
	CHECK_EQ(sv_records_check(b, 2, &n), SV_D_BAD_LENGTH);
	b[1] = 5; /* record longer than the body */
	CHECK_EQ(sv_records_check(b, 6, &n), SV_D_BAD_LENGTH);
	/* one record alone is not a batch: that frame has to be SINGLE */
	CHECK_EQ(sv_records_check(b, 7, &n), SV_D_BAD_LENGTH);
	CHECK_EQ(sv_records_check(b, 8, &n), SV_D_BAD_LENGTH); /* 1 trailing byte */
	b[7] = 0;
	b[8] = 1;
	CHECK_EQ(sv_records_check(b, 10, &n), SV_OK);
	CHECK_EQ(n, 2);
	CHECK_EQ(sv_records_check(b, 9, &n), SV_D_BAD_LENGTH);
}

/* ---- FRAG ---- */
void test_frag_parse(void)
{
	uint8_t b[32] = {0};
	struct sv_frag f;
	size_t chunk;

	sv_frag_put(b, 7, 100, 1, 3);
	CHECK_EQ(sv_frag_parse(b, 12 + 10, &f), SV_OK);
	CHECK_EQ(f.id, 7);
	CHECK_EQ(f.total, 100);
	CHECK_EQ(f.index, 1);
	CHECK_EQ(f.count, 3);
	CHECK_EQ(f.clen, 10);
	CHECK_EQ(sv_frag_parse(b, 12, &f), SV_D_BAD_LENGTH); /* empty chunk */
	CHECK_EQ(sv_frag_parse(b, 5, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, 100, 3, 3); /* index == count */
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, 100, 0, 0);
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, 0, 0, 1);
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, SV_MAX_STREAM + 1, 0, 2);
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, 100, 0, SV_MAX_FRAGS + 1);
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);
	sv_frag_put(b, 7, 5, 0, 1); /* chunk longer than the unit */
	CHECK_EQ(sv_frag_parse(b, 22, &f), SV_D_BAD_LENGTH);

	CHECK_EQ(sv_frag_plan(65546, 1472, 0, &chunk), 46);
	CHECK_EQ(chunk, 1472 - 20);
	CHECK_EQ(sv_frag_plan(1452, 1472, 0, &chunk), 1);
	CHECK_EQ(sv_frag_plan(1453, 1472, 0, &chunk), 2);
	CHECK_EQ(sv_frag_plan(100, 1472, 1, &chunk), 1);
	CHECK_EQ(chunk, 1472 - 36); /* header, session, counter, FRAG header; no tag per piece */
	CHECK_EQ(sv_frag_plan(SV_MAX_STREAM, 1472, 1, &chunk), 46);
	CHECK_EQ(sv_frag_plan(SV_MAX_STREAM, 1472, 0, &chunk), 0); /* plain: a unit at most */
	CHECK_EQ(sv_frag_plan(0, 1472, 0, &chunk), 0);
	CHECK_EQ(sv_frag_plan(SV_MAX_UNIT + 1, 1472, 0, &chunk), 0);
	CHECK_EQ(sv_frag_plan(65000, 30, 0, &chunk), 0); /* too many pieces */
	CHECK_EQ(sv_frag_plan(100, 20, 0, &chunk), 0);
}

/* ---- checksum completion ---- */
static uint16_t ref_csum(const uint8_t *p, size_t n, uint32_t sum)
{
	return (uint16_t)~ref_sum(p, n, sum);
}

void test_csum(void)
{
	for (size_t len = 20; len < 200; len += 7) {
		uint8_t pkt[256];
		uint16_t want, got;

		for (size_t i = 0; i < len; i++)
			pkt[i] = (uint8_t)(i * 31 + len);
		/* checksum field at 16..17, seeded with a "pseudo header" value 0x1234 */
		pkt[16] = 0x12;
		pkt[17] = 0x34;
		{
			uint8_t tmp[256];

			memcpy(tmp, pkt, len);
			tmp[16] = tmp[17] = 0;
			want = ref_csum(tmp, len, 0x1234);
			if (want == 0)
				want = 0xffff;
		}
		CHECK_EQ(sv_csum_complete(pkt, len, 0, 16), 0);
		got = (uint16_t)(pkt[16] << 8 | pkt[17]);
		CHECK_EQ(got, want);
		/* verifying the whole range now gives 0 (or all ones) */
		CHECK(ref_csum(pkt, len, 0x1234) == 0 || ref_csum(pkt, len, 0x1234) == 0xffff);
	}
	{
		uint8_t pkt[40] = {0};

		CHECK_EQ(sv_csum_complete(pkt, 40, 40, 0), -EINVAL);
		CHECK_EQ(sv_csum_complete(pkt, 40, 30, 9), -EINVAL);
		CHECK_EQ(sv_csum_complete(pkt, 40, 30, 8), 0);
	}
}
