/* blast - a batching UDP packet generator and counter (overlay/blast/README.md) */
#ifndef BLAST_H
#define BLAST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define BL_NAME "blast"
#define BL_VERSION "0.1.0"
#define BL_HDR 18                 /* magic, run, seq, flow: the smallest payload */
#define BL_MAX_PAYLOAD 65507      /* an IPv4 UDP datagram's most */
#define BL_MAX_FLOWS 64
#define BL_MAX_BATCH 1024
#define BL_MAX_DURATION 3600.0
#define BL_MAGIC_DATA 0x424c4431u /* "BLD1" */
#define BL_MAGIC_END  0x424c4531u /* "BLE1": the sender is done, asks for a report */
#define BL_MAGIC_REP  0x424c5231u /* "BLR1": the receiver's counts for one run */

enum bl_role { BL_SEND = 1, BL_RECV = 2 };

struct bl_opts {
	enum bl_role role;
	const char *addr;         /* send: destination; recv: bind address (NULL: any) */
	unsigned port;            /* first port; flow i uses port + i */
	unsigned flows;
	unsigned size;            /* UDP payload bytes */
	unsigned mtu;             /* the path's MTU: size + headers must fit */
	unsigned batch;
	double rate;              /* packets/s, 0: as fast as it goes */
	double duration;          /* seconds: the send window, or the receiver's hard bound */
	unsigned src_port;        /* send: first source port (flow i: + i); 0: the kernel's */
	int packet;               /* send: whole packets into a packet socket, qdisc bypassed */
};

/* The datagram's header, in network byte order on the wire (README.md). */
struct bl_hdr {
	uint32_t magic;
	uint32_t run;
	uint64_t seq;
	uint16_t flow;
};

/* opts.c */
int bl_parse_opts(int argc, char **argv, struct bl_opts *o, char *err, size_t errlen);
int bl_check_opts(const struct bl_opts *o, int ipv6, char *err, size_t errlen);

/* wire.c */
void bl_put_hdr(uint8_t *buf, const struct bl_hdr *h);
int bl_get_hdr(const uint8_t *buf, size_t len, struct bl_hdr *h);
unsigned bl_batch_for(double rate, unsigned batch);
int64_t bl_batch_ns(double rate, unsigned n);
double bl_ts(const struct timespec *a, const struct timespec *b);
double bl_cpu_seconds(void);
double bl_wait_seconds(void);

/* send.c, recv.c */
#define BL_SAID 1                 /* a failure already said on stderr */
int bl_send(const struct bl_opts *o);
int bl_recv(const struct bl_opts *o);

#endif
