/* unit_reasm.c - reasm.c: pieces into units in any order, pieces that disagree
 * with their unit, lost pieces, more units than slots, units of one frame id
 * under other counters, untrusted pieces, and pieces settled between batches */
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "reasm.h"
#include "unit.h"

static int unit_eq(const struct sv_unit *u, const uint8_t *want, size_t len)
{
	static uint8_t tmp[70000];

	return u->n > 0 && u->len == len && flatten(u->iov, u->n, tmp, sizeof(tmp)) == len &&
	       !memcmp(tmp, want, len);
}

static struct sv_frag mk(uint32_t id, uint32_t total, uint16_t idx, uint16_t cnt,
			 const uint8_t *data, size_t csize)
{
	struct sv_frag f = {.id = id, .total = total, .index = idx, .count = cnt};
	size_t off = (size_t)idx * csize;

	f.chunk = data + off;
	f.clen = idx == cnt - 1 ? total - off : csize;
	return f;
}

void test_reasm(void)
{
	static struct sv_reasm r;
	static uint8_t data[5000];
	struct sv_unit u;
	struct sv_frag f;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	/* in order */
	for (int i = 0; i < 4; i++) {
		f = mk(1, 5000, (uint16_t)i, 4, data, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
		CHECK(i < 3 ? u.n == 0 : (unit_eq(&u, data, 5000) && u.n == 4)); /* not copied */
	}
	/* reverse order, last piece first */
	for (int i = 3; i >= 0; i--) {
		f = mk(2, 5000, (uint16_t)i, 4, data, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
		CHECK(i > 0 ? u.n == 0 : unit_eq(&u, data, 5000));
	}
	/* a duplicate piece is dropped, the unit survives */
	f = mk(3, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	for (int i = 1; i < 4; i++) {
		f = mk(3, 5000, (uint16_t)i, 4, data, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	}
	CHECK(unit_eq(&u, data, 5000));
	/* inconsistent pieces: other total, other chunk size, other count, other flags */
	f = mk(4, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(4, 4999, 1, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	f = mk(5, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(5, 5000, 1, 4, data, 1300);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	f = mk(6, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(6, 5000, 1, 5, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	f = mk(7, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(7, 5000, 1, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, SV_F_VNET, 10, &u), SV_D_REASM_BAD);
	/* pieces whose sizes leave a hole: 3 x 1000 + last 1000 != 5000 */
	f = mk(8, 5000, 0, 4, data, 1000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(8, 5000, 1, 4, data, 1000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(8, 5000, 2, 4, data, 1000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = (struct sv_frag){.id = 8, .total = 5000, .index = 3, .count = 4, .chunk = data, .clen = 1000};
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	CHECK(u.n == 0);
	/* a chunk size that puts the last piece out of range */
	f = mk(9, 5000, 0, 4, data, 2000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	/* one piece, no slot */
	f = mk(10, 100, 0, 1, data, 100);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	CHECK(u.n == 1 && u.iov[0].iov_base == data && u.len == 100);
	f.clen = 99;
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
	/* a lost piece: the unit times out, later ones still work */
	memset(&r.timeouts, 0, sizeof(r.timeouts));
	f = mk(11, 5000, 0, 4, data, 1400);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
	f = mk(12, 5000, 0, 2, data, 4000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10 + SV_REASM_TIMEOUT_NS + 1, &u), SV_OK);
	CHECK(r.timeouts >= 1);
	f = mk(12, 5000, 1, 2, data, 4000);
	CHECK_EQ(sv_reasm_add(&r, &f, 0, 10 + SV_REASM_TIMEOUT_NS + 2, &u), SV_OK);
	CHECK(unit_eq(&u, data, 5000));
	/* more incomplete units than slots: the oldest are evicted */
	r.evicted = 0;
	for (uint32_t id = 100; id < 100 + SV_REASM_SLOTS + 3; id++) {
		f = mk(id, 5000, 0, 4, data, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 2 * SV_REASM_TIMEOUT_NS + id, &u), SV_OK);
	}
	CHECK(r.evicted >= 3);
	/* pieces settled (copied) between batches: the source may change afterwards */
	{
		static uint8_t scratch[5000];

		memcpy(scratch, data, sizeof(scratch));
		f = mk(200, 5000, 0, 4, scratch, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 3 * SV_REASM_TIMEOUT_NS, &u), SV_OK);
		f = mk(200, 5000, 2, 4, scratch, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 3 * SV_REASM_TIMEOUT_NS, &u), SV_OK);
		sv_reasm_settle(&r);
		memset(scratch, 0xee, sizeof(scratch)); /* the receive buffer is reused */
		memcpy(scratch + 1400, data + 1400, 1400);
		memcpy(scratch + 4200, data + 4200, 800);
		f = mk(200, 5000, 1, 4, scratch, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 3 * SV_REASM_TIMEOUT_NS, &u), SV_OK);
		f = mk(200, 5000, 3, 4, scratch, 1400);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 3 * SV_REASM_TIMEOUT_NS, &u), SV_OK);
		CHECK(unit_eq(&u, data, 5000));
		CHECK_EQ(u.n, 1); /* came out of the slot's own buffer */
	}
	sv_reasm_free(&r);
}

static struct sv_frag piece(uint32_t id, uint64_t ctr, uint32_t total, uint16_t idx,
			    const uint8_t *data)
{
	struct sv_frag f = {.id = id, .total = total, .index = idx, .count = 4, .ctr = ctr};

	f.chunk = data + (size_t)idx * 1000;
	f.clen = idx == 3 ? total - 3000 : 1000;
	return f;
}

/* A piece that disagrees with its unit is dropped alone; units with one frame
 * id but other counters are different units. */
void test_reasm_keyed(void)
{
	static struct sv_reasm r;
	static uint8_t data[4000];
	struct sv_unit u;
	struct sv_frag f;
	int done = 0;

	for (int i = 0; i < 4; i++) {
		f = piece(1, 50, 3500, (uint16_t)i, data);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
		if (i == 1) { /* a guessed id with another total: dropped, unit kept */
			f = piece(1, 50, 3600, 2, data);
			CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_D_REASM_BAD);
		}
		done += u.n > 0 && u.len == 3500;
	}
	CHECK_EQ(done, 1);
	/* two units, one id, two counters, interleaved: both complete */
	done = 0;
	for (int i = 0; i < 4; i++)
		for (uint64_t c = 60; c < 62; c++) {
			f = piece(2, c, 3500, (uint16_t)i, data);
			CHECK_EQ(sv_reasm_add(&r, &f, 0, 10, &u), SV_OK);
			done += u.n > 0 && u.len == 3500;
		}
	CHECK_EQ(done, 2);
	CHECK_EQ(r.evicted, 0);
#if SV_VERSION >= 5
	/* untrusted pieces never evict trusted units */
	for (uint32_t id = 10; id < 10 + SV_REASM_SLOTS; id++) {
		f = piece(id, 70, 3500, 0, data);
		f.trusted = 1;
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 20, &u), SV_OK);
	}
	for (uint32_t id = 100; id < 120; id++) {
		f = piece(id, 80, 3500, 0, data);
		CHECK_EQ(sv_reasm_add(&r, &f, 0, 30, &u), SV_D_REASM_EVICTED);
	}
	CHECK_EQ(r.evicted, 0);
	for (uint32_t id = 10; id < 10 + SV_REASM_SLOTS; id++) {
		int got = 0;

		for (int i = 1; i < 4; i++) {
			f = piece(id, 70, 3500, (uint16_t)i, data);
			f.trusted = 1;
			CHECK_EQ(sv_reasm_add(&r, &f, 0, 40, &u), SV_OK);
			got += u.n > 0;
		}
		CHECK_EQ(got, 1);
	}
#endif
	sv_reasm_free(&r);
}
