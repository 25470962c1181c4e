/* Addresses and sockets shared by send and recv. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"

/* `addr` (numeric IPv4 or IPv6; NULL: IPv4 any) with `port` in `ss`. */
int bl_addr(const char *addr, unsigned port, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (!addr || inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		if (!addr)
			a4->sin_addr.s_addr = htonl(INADDR_ANY);
		*len = sizeof(*a4);
		return 0;
	}
	if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a6);
		return 0;
	}
	return -EINVAL;
}

void bl_set_port(struct sockaddr_storage *ss, unsigned port)
{
	if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
	else
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

/* A UDP socket of `family` bound to `bind_to` (may be NULL); -errno on failure. */
int bl_socket(int family, const struct sockaddr_storage *bind_to, socklen_t len)
{
	int fd, ret;

	fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind_to && bind(fd, (const struct sockaddr *)bind_to, len) != 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}
