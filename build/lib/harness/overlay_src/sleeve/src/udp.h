/* udp.h - underlay addresses and the UDP socket */
#ifndef SLEEVE_UDP_H
#define SLEEVE_UDP_H

#include <stddef.h>
#include <sys/socket.h>

/* "ADDR[:PORT]", IPv6 as "[ADDR]:PORT" or bare "ADDR"; numeric only. */
int sv_addr_parse(const char *s, int default_port, struct sockaddr_storage *ss, socklen_t *len);
void sv_addr_str(const struct sockaddr_storage *ss, char *buf, size_t len);
int sv_addr_equal(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

struct sv_udp_opts {
	int gro;  /* ask for UDP_GRO */
	int bufsz;
};
/* Binds, sets DF (IP_PMTUDISC_PROBE), buffers; *gro_on, *gso_on report support. */
int sv_udp_open(const struct sockaddr_storage *local, socklen_t len, const struct sv_udp_opts *o,
		int *gro_on, int *gso_on);
/* MTU of the route to addr (IP_MTU of a connected socket), or -errno. */
int sv_udp_route_mtu(const struct sockaddr_storage *local, const struct sockaddr_storage *peer,
		     socklen_t len);

#endif
