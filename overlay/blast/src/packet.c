/* blast send --packet: each flow's datagrams written as whole IPv4 packets into a packet
 * socket on the route's device, past its qdisc (PACKET_QDISC_BYPASS), with the flow
 * sockets' own addresses and ports. The UDP socket layer, the route lookup, the neighbour
 * and the qdisc are left out of every packet, as a packet generator's are (netsniff-ng's
 * trafgen); needs CAP_NET_RAW, IPv4 only. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if_arp.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "packet.h"

#define NEIGH_WAIT_MS 2000        /* how long the next hop's address may take to resolve */

static uint32_t sum16(const uint8_t *p, size_t len, uint32_t s)
{
	for (; len > 1; p += 2, len -= 2)
		s += (uint32_t)p[0] << 8 | p[1];
	if (len)
		s += (uint32_t)p[0] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* The IPv4 and UDP headers of a `payload`-byte datagram (DF set, the IPv4 checksum filled,
 * the UDP one left for bl_udp_csum) at `pkt`; addresses and ports in network order. */
void bl_ipv4_udp(uint8_t *pkt, uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, unsigned payload)
{
	uint16_t tot = (uint16_t)(BL_IP_UDP + payload), ulen = (uint16_t)(8 + payload), c;

	memset(pkt, 0, BL_IP_UDP);
	pkt[0] = 0x45;
	pkt[2] = (uint8_t)(tot >> 8);
	pkt[3] = (uint8_t)tot;
	pkt[6] = 0x40;                /* DF */
	pkt[8] = 64;
	pkt[9] = IPPROTO_UDP;
	memcpy(pkt + 12, &src, 4);
	memcpy(pkt + 16, &dst, 4);
	c = fold(sum16(pkt, 20, 0));
	pkt[10] = (uint8_t)(c >> 8);
	pkt[11] = (uint8_t)c;
	memcpy(pkt + 20, &sport, 2);
	memcpy(pkt + 22, &dport, 2);
	pkt[24] = (uint8_t)(ulen >> 8);
	pkt[25] = (uint8_t)ulen;
}

/* The UDP checksum of the packet at `pkt` (headers of bl_ipv4_udp, then its payload). */
void bl_udp_csum(uint8_t *pkt)
{
	unsigned ulen = (unsigned)pkt[24] << 8 | pkt[25];
	uint32_t s = sum16(pkt + 12, 8, IPPROTO_UDP + ulen);    /* the pseudo-header */
	uint16_t c;

	pkt[26] = pkt[27] = 0;
	c = fold(sum16(pkt + 20, ulen, s));
	if (c == 0)
		c = 0xffff;           /* 0 says "no checksum" */
	pkt[26] = (uint8_t)(c >> 8);
	pkt[27] = (uint8_t)c;
}

/* The route to `dst`: its device and next hop (the gateway, or dst itself). */
static int route_to(uint32_t dst, int *oif, uint32_t *hop)
{
	struct {
		struct nlmsghdr n;
		struct rtmsg r;
		char attrs[32];
	} req;
	char buf[8192];
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	struct rtattr *a;
	int fd, n, len;

	memset(&req, 0, sizeof(req));
	req.n.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	req.n.nlmsg_type = RTM_GETROUTE;
	req.n.nlmsg_flags = NLM_F_REQUEST;
	req.r.rtm_family = AF_INET;
	req.r.rtm_dst_len = 32;
	a = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.n.nlmsg_len));
	a->rta_type = RTA_DST;
	a->rta_len = RTA_LENGTH(4);
	memcpy(RTA_DATA(a), &dst, 4);
	req.n.nlmsg_len = NLMSG_ALIGN(req.n.nlmsg_len) + RTA_ALIGN(a->rta_len);

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	n = send(fd, &req, req.n.nlmsg_len, 0) < 0 ? -1 : (int)recv(fd, buf, sizeof(buf), 0);
	len = errno;
	close(fd);
	if (n < 0)
		return -len;
	if (!NLMSG_OK(h, (unsigned)n))
		return -EPROTO;
	if (h->nlmsg_type == NLMSG_ERROR)
		return ((struct nlmsgerr *)NLMSG_DATA(h))->error ? ((struct nlmsgerr *)NLMSG_DATA(h))->error : -EPROTO;
	*oif = 0;
	*hop = dst;
	len = (int)RTM_PAYLOAD(h);
	for (a = RTM_RTA(NLMSG_DATA(h)); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == RTA_OIF)
			memcpy(oif, RTA_DATA(a), sizeof(*oif));
		else if (a->rta_type == RTA_GATEWAY)
			memcpy(hop, RTA_DATA(a), 4);
	}
	return *oif ? 0 : -ENETUNREACH;
}

/* The resolved link address of `hop` on `dev` in /proc/net/arp; 0 found, -ENOENT not yet. */
static int arp_entry(uint32_t hop, const char *dev, uint8_t mac[6])
{
	char line[256], ip[64], hw[64], mask[32], name[IFNAMSIZ + 1];
	unsigned type, flags;
	struct in_addr want = {.s_addr = hop};
	FILE *f = fopen("/proc/net/arp", "r");
	int ret = -ENOENT;

	if (!f)
		return -errno;
	snprintf(ip, sizeof(ip), "%s", inet_ntoa(want));
	while (fgets(line, sizeof(line), f)) {
		char got[64];

		if (sscanf(line, "%63s 0x%x 0x%x %63s %31s %16s", got, &type, &flags, hw, mask, name) != 6)
			continue;
		if (strcmp(got, ip) || strcmp(name, dev) || !(flags & 0x2))    /* ATF_COM: resolved */
			continue;
		if (sscanf(hw, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &mac[0], &mac[1], &mac[2], &mac[3], &mac[4],
			   &mac[5]) == 6)
			ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

static void wait_ms(long ms)
{
	struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&t, NULL);
}

int bl_packet_open(const struct bl_opts *o, const int *fds, struct bl_packet *pk, char *err, size_t errlen)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	struct ifreq ifr;
	uint8_t warm[BL_HDR] = {0};   /* magic 0: every receiver ignores it */
	uint32_t hop;
	int oif, ret, one = 1, waited;
	unsigned i;

	memset(pk, 0, sizeof(*pk));
	pk->fd = -1;
	if (getpeername(fds[0], (struct sockaddr *)&a, &alen) || a.sin_family != AF_INET) {
		snprintf(err, errlen, "--packet sends IPv4 only");
		return -EAFNOSUPPORT;
	}
	pk->dst = a.sin_addr.s_addr;
	for (i = 0; i < o->flows; i++) {          /* a connected socket's own address and port */
		alen = sizeof(a);
		if (getsockname(fds[i], (struct sockaddr *)&a, &alen))
			return -errno;
		bl_ipv4_udp(pk->hdr[i], a.sin_addr.s_addr, pk->dst, a.sin_port, htons((uint16_t)(o->port + i)), o->size);
	}
	ret = route_to(pk->dst, &oif, &hop);
	if (ret) {
		snprintf(err, errlen, "--packet: no route to %s: %s", o->addr, strerror(-ret));
		return ret;
	}
	memset(&ifr, 0, sizeof(ifr));
	if (!if_indextoname((unsigned)oif, ifr.ifr_name) || ioctl(fds[0], SIOCGIFHWADDR, &ifr)) {
		snprintf(err, errlen, "--packet: the route's device %d: %s", oif, strerror(errno));
		return -errno;
	}
	snprintf(pk->dev, sizeof(pk->dev), "%s", ifr.ifr_name);
	pk->to.sll_family = AF_PACKET;
	pk->to.sll_protocol = htons(ETH_P_IP);
	pk->to.sll_ifindex = oif;
	if (ifr.ifr_hwaddr.sa_family == ARPHRD_ETHER) {
		pk->to.sll_halen = 6;
		for (waited = 0; (ret = arp_entry(hop, pk->dev, pk->to.sll_addr)) == -ENOENT; waited += 10) {
			if (waited >= NEIGH_WAIT_MS) {
				snprintf(err, errlen, "--packet: the next hop's address on %s never resolved", pk->dev);
				return -EHOSTUNREACH;
			}
			if (waited % 200 == 0)
				send(fds[0], warm, sizeof(warm), 0);     /* asks the kernel to resolve it */
			wait_ms(10);
		}
		if (ret)
			return ret;
	} else if (ifr.ifr_hwaddr.sa_family == ARPHRD_LOOPBACK) {
		pk->to.sll_halen = 6;     /* any address: loopback takes them all */
	} else if (ifr.ifr_hwaddr.sa_family != ARPHRD_NONE) {
		snprintf(err, errlen, "--packet: device %s is of link type %u, not Ethernet, loopback or IP-only",
			 pk->dev, ifr.ifr_hwaddr.sa_family);
		return -EPFNOSUPPORT;
	}
	pk->fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (pk->fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "--packet: a packet socket: %s%s", strerror(errno),
			 errno == EPERM ? " (it needs CAP_NET_RAW)" : "");
		return ret;
	}
	if (setsockopt(pk->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one))) {
		ret = -errno;
		snprintf(err, errlen, "--packet: PACKET_QDISC_BYPASS: %s", strerror(errno));
		return ret;
	}
	return 0;
}
