/* tap.c - TAP/TUN device: open, offloads, MTU, up, gso_max_size */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"
#include "wire.h"

int sv_tap_open(const char *name, int l3, int vnet)
{
	struct ifreq ifr;
	int fd, hdrsz = SV_VNET_LEN, ret;

	if (strlen(name) >= IFNAMSIZ)
		return -ENAMETOOLONG;
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = (short)((l3 ? IFF_TUN : IFF_TAP) | IFF_NO_PI | (vnet ? IFF_VNET_HDR : 0));
	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		goto fail;
	if (vnet && ioctl(fd, TUNSETVNETHDRSZ, &hdrsz) < 0)
		goto fail;
	return fd;
fail:
	ret = -errno;
	close(fd);
	return ret;
}

int sv_tap_set_offload(int fd, unsigned flags)
{
	return ioctl(fd, TUNSETOFFLOAD, (unsigned long)flags) < 0 ? -errno : 0;
}

int sv_tap_set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}

static int ifreq_ioctl(const char *name, unsigned long req, struct ifreq *ifr)
{
	int s, ret = 0;

	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	strncpy(ifr->ifr_name, name, IFNAMSIZ - 1);
	if (ioctl(s, req, ifr) < 0)
		ret = -errno;
	close(s);
	return ret;
}

int sv_link_set_mtu(const char *name, int mtu)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_mtu = mtu;
	return ifreq_ioctl(name, SIOCSIFMTU, &ifr);
}

int sv_link_up(const char *name)
{
	struct ifreq ifr;
	int ret;

	memset(&ifr, 0, sizeof(ifr));
	ret = ifreq_ioctl(name, SIOCGIFFLAGS, &ifr);
	if (ret < 0)
		return ret;
	ifr.ifr_flags |= IFF_UP;
	return ifreq_ioctl(name, SIOCSIFFLAGS, &ifr);
}

/* RTM_NEWLINK with IFLA_GSO_MAX_SIZE, what `ip link set DEV gso_max_size N` sends. */
int sv_link_set_gso_max_size(const char *name, unsigned size)
{
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
		char attrs[64];
	} req;
	struct {
		struct nlmsghdr nh;
		struct nlmsgerr err;
		char pad[256];
	} resp;
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	struct rtattr *rta;
	unsigned idx = if_nametoindex(name);
	int fd, ret;
	ssize_t n;

	if (!idx)
		return -errno;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
	req.nh.nlmsg_type = RTM_NEWLINK;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	req.nh.nlmsg_seq = 1;
	req.ifi.ifi_family = AF_UNSPEC;
	req.ifi.ifi_index = (int)idx;
	rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
	rta->rta_type = IFLA_GSO_MAX_SIZE;
	rta->rta_len = RTA_LENGTH(sizeof(uint32_t));
	memcpy(RTA_DATA(rta), &size, sizeof(uint32_t));
	req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		goto out;
	}
	n = recv(fd, &resp, sizeof(resp), 0);
	if (n < 0) {
		ret = -errno;
		goto out;
	}
	if ((size_t)n < NLMSG_LENGTH(sizeof(struct nlmsgerr)) || resp.nh.nlmsg_type != NLMSG_ERROR) {
		ret = -EPROTO;
		goto out;
	}
	ret = resp.err.error; /* 0 or -errno */
out:
	close(fd);
	return ret;
}
