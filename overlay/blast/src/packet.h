#ifndef BLAST_PACKET_H
#define BLAST_PACKET_H
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdint.h>

#include "blast.h"

#define BL_IP_UDP 28              /* IPv4 20 + UDP 8: what --packet writes before the payload */

struct bl_packet {
	int fd;                       /* AF_PACKET, SOCK_DGRAM, qdisc bypassed */
	struct sockaddr_ll to;        /* the route's device and next hop */
	char dev[IFNAMSIZ];
	uint32_t dst;
	uint8_t hdr[BL_MAX_FLOWS][BL_IP_UDP];   /* each flow's headers, the UDP checksum to fill */
};

void bl_ipv4_udp(uint8_t *pkt, uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, unsigned payload);
void bl_udp_csum(uint8_t *pkt);
int bl_packet_open(const struct bl_opts *o, const int *fds, struct bl_packet *pk, char *err, size_t errlen);
#endif
