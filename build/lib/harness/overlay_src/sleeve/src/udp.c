/* udp.c - underlay addresses and the UDP socket */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "udp.h"

int sv_addr_parse(const char *s, int default_port, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *port = NULL, *colon;
	long pv = default_port;
	size_t hl;

	memset(ss, 0, sizeof(*ss));
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (!rb)
			return -EINVAL;
		hl = (size_t)(rb - s - 1);
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hl);
		host[hl] = 0;
		if (rb[1] == ':')
			port = rb + 2;
		else if (rb[1])
			return -EINVAL;
	} else {
		colon = strchr(s, ':');
		if (colon && strchr(colon + 1, ':'))
			colon = NULL; /* bare IPv6 */
		hl = colon ? (size_t)(colon - s) : strlen(s);
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, hl);
		host[hl] = 0;
		if (colon)
			port = colon + 1;
	}
	if (port) {
		char *end;

		errno = 0;
		pv = strtol(port, &end, 10);
		if (errno || *port == 0 || *end || pv < 1 || pv > 65535)
			return -EINVAL;
	}
	if (inet_pton(AF_INET, host, &((struct sockaddr_in *)ss)->sin_addr) == 1) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)pv);
		*len = sizeof(*a);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)ss)->sin6_addr) == 1) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)pv);
		*len = sizeof(*a);
		return 0;
	}
	return -EINVAL;
}

void sv_addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char h[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &a->sin_addr, h, sizeof(h));
		snprintf(buf, len, "%s:%u", h, ntohs(a->sin_port));
	} else {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;

		inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof(h));
		snprintf(buf, len, "[%s]:%u", h, ntohs(a->sin6_port));
	}
}

int sv_addr_equal(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		return x->sin6_port == y->sin6_port &&
		       !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
	}
	return 0;
}

static void set_bufs(int fd, int sz)
{
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
}

int sv_udp_open(const struct sockaddr_storage *local, socklen_t len, const struct sv_udp_opts *o,
		int *gro_on, int *gso_on)
{
	int fd, ret, one = 1, v;
	socklen_t vl = sizeof(v);

	fd = socket(local->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (local->ss_family == AF_INET) {
		v = IP_PMTUDISC_PROBE;
		if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof(v)) < 0)
			goto fail;
	} else {
		v = IPV6_PMTUDISC_PROBE;
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &v, sizeof(v)) < 0)
			goto fail;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	}
	if (bind(fd, (const struct sockaddr *)local, len) < 0)
		goto fail;
	if (o->bufsz)
		set_bufs(fd, o->bufsz);
	*gro_on = 0;
	if (o->gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0)
		*gro_on = 1;
	*gso_on = getsockopt(fd, SOL_UDP, UDP_SEGMENT, &v, &vl) == 0;
	return fd;
fail:
	ret = -errno;
	close(fd);
	return ret;
}

int sv_udp_route_mtu(const struct sockaddr_storage *local, const struct sockaddr_storage *peer,
		     socklen_t len)
{
	int fd, mtu, ret;
	socklen_t ml = sizeof(mtu);
	struct sockaddr_storage l = *local;

	fd = socket(peer->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* same source address, any port: the route is what matters */
	if (l.ss_family == AF_INET)
		((struct sockaddr_in *)&l)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&l)->sin6_port = 0;
	if (bind(fd, (struct sockaddr *)&l, len) < 0 ||
	    connect(fd, (const struct sockaddr *)peer, len) < 0) {
		ret = -errno;
		goto out;
	}
	if (getsockopt(fd, peer->ss_family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
		       peer->ss_family == AF_INET ? IP_MTU : IPV6_MTU, &mtu, &ml) < 0) {
		ret = -errno;
		goto out;
	}
	ret = mtu;
out:
	close(fd);
	return ret;
}
