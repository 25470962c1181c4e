/* Unit checks of blast's pure parts: options, the header, pacing. */
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>

#include "blast.h"
#include "packet.h"

static int failures;

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
	failures++; } } while (0)

static int parse(struct bl_opts *o, char *err, const char *line)
{
	char buf[512], *argv[32], *tok;
	int argc = 0;

	snprintf(buf, sizeof(buf), "blast %s", line);
	for (tok = strtok(buf, " "); tok && argc < 31; tok = strtok(NULL, " "))
		argv[argc++] = tok;
	argv[argc] = NULL;
	err[0] = 0;
	if (bl_parse_opts(argc, argv, o, err, 256))
		return -1;
	return bl_check_opts(o, o->addr && strchr(o->addr, ':'), err, 256) ? -2 : 0;
}

static void test_opts(void)
{
	struct bl_opts o;
	char err[256];

	CHECK(parse(&o, err, "send --addr 198.18.0.2 --port 9000 --flows 4 --size 64 --rate 1e6 --duration 1.5") == 0);
	CHECK(o.role == BL_SEND && o.flows == 4 && o.size == 64 && o.rate == 1e6 && o.duration == 1.5);
	CHECK(parse(&o, err, "recv --port 9100 --flows 2") == 0 && o.role == BL_RECV && o.port == 9100);
	CHECK(parse(&o, err, "send --addr 198.18.0.2 --size 17") == -2 && strstr(err, "under the 18-byte header"));
	CHECK(parse(&o, err, "send --addr 198.18.0.2 --size 1473") == -2 && strstr(err, "at most 1472"));
	CHECK(parse(&o, err, "send --addr 198.18.0.2 --size 1472") == 0);
	CHECK(parse(&o, err, "send --addr fd00::2 --size 1453") == -2 && strstr(err, "at most 1452"));
	CHECK(parse(&o, err, "send --addr 198.18.0.2 --rate -1") == -1 && strstr(err, "--rate"));
	CHECK(parse(&o, err, "send --addr 198.18.0.2 --flows 0") == -1 && strstr(err, "--flows"));
	CHECK(parse(&o, err, "send --addr 198.18.0.2 --flows 1.5") == -1);
	CHECK(parse(&o, err, "send --addr 198.18.0.2 --duration 0") == -1 && strstr(err, "--duration"));
	CHECK(parse(&o, err, "send --addr 198.18.0.2 --bogus 1") == -1 && strstr(err, "unknown option"));
	CHECK(parse(&o, err, "send --addr 198.18.0.2 extra") == -1 && strstr(err, "unexpected"));
	CHECK(parse(&o, err, "send --size 64") == -2 && strstr(err, "needs --addr"));
	CHECK(parse(&o, err, "flood") == -1 && strstr(err, "usage"));
	CHECK(parse(&o, err, "recv --port 65535 --flows 2") == -2 && strstr(err, "past 65535"));
	CHECK(parse(&o, err, "send --addr 198.18.0.2 --packet") == 0 && o.packet);
	CHECK(parse(&o, err, "send --addr fd00::2 --packet") == -2 && strstr(err, "over IPv4"));
	CHECK(parse(&o, err, "recv --packet") == -2 && strstr(err, "the sender's"));
}

static void test_hdr(void)
{
	uint8_t buf[BL_HDR];
	struct bl_hdr h = {.magic = BL_MAGIC_DATA, .run = 0xdeadbeef, .seq = 0x0102030405060708ull, .flow = 7}, g;

	bl_put_hdr(buf, &h);
	CHECK(buf[0] == 'B' && buf[1] == 'L' && buf[2] == 'D' && buf[3] == '1');
	CHECK(buf[8] == 1 && buf[15] == 8 && buf[17] == 7);
	CHECK(bl_get_hdr(buf, sizeof(buf), &g) == 0);
	CHECK(g.run == h.run && g.seq == h.seq && g.flow == 7 && g.magic == BL_MAGIC_DATA);
	CHECK(bl_get_hdr(buf, BL_HDR - 1, &g) == -1);
	buf[0] = 'X';
	CHECK(bl_get_hdr(buf, sizeof(buf), &g) == -1);
}

static void test_pace(void)
{
	CHECK(bl_batch_for(0, 64) == 64);
	CHECK(bl_batch_for(1e6, 64) == 64);
	CHECK(bl_batch_for(10000, 64) == 10);   /* a millisecond's packets */
	CHECK(bl_batch_for(100, 64) == 1);
	CHECK(bl_batch_ns(0, 64) == 0);
	CHECK(bl_batch_ns(1e6, 64) == 64000);
	CHECK(bl_batch_ns(3, 1) == 333333333);
	CHECK(bl_cpu_seconds() >= 0);
}

/* --packet's headers against checksums computed apart (Python's struct, RFC 1071's sum). */
static void test_packet_headers(void)
{
	uint8_t pkt[BL_IP_UDP + 19];
	struct bl_hdr h = {.magic = BL_MAGIC_DATA, .run = 1, .seq = 0, .flow = 7};
	uint32_t src, dst;

	inet_pton(AF_INET, "198.18.0.1", &src);
	inet_pton(AF_INET, "198.18.0.2", &dst);
	bl_ipv4_udp(pkt, src, dst, htons(40000), htons(9000), 18);
	bl_put_hdr(pkt + BL_IP_UDP, &h);
	bl_udp_csum(pkt);
	CHECK(pkt[0] == 0x45 && pkt[2] == 0 && pkt[3] == 46 && pkt[6] == 0x40 && pkt[9] == 17);
	CHECK(pkt[10] == 0xae && pkt[11] == 0x97);          /* IPv4 header checksum */
	CHECK(pkt[24] == 0 && pkt[25] == 26);                /* UDP length */
	CHECK(pkt[26] == 0x2d && pkt[27] == 0xa4);          /* UDP checksum */
	bl_ipv4_udp(pkt, src, dst, htons(40000), htons(9000), 19);      /* an odd payload */
	bl_put_hdr(pkt + BL_IP_UDP, &h);
	pkt[BL_IP_UDP + 18] = 0x55;
	bl_udp_csum(pkt);
	CHECK(pkt[26] == 0xd8 && pkt[27] == 0xa1);
}

int main(void)
{
	test_opts();
	test_hdr();
	test_pace();
	test_packet_headers();
	if (failures) {
		fprintf(stderr, "unit: %d failed\n", failures);
		return 1;
	}
	printf("unit: ok\n");
	return 0;
}
