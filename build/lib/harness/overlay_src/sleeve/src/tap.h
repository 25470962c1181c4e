/* tap.h - TAP/TUN device: open, offloads, MTU, up, gso_max_size */
#ifndef SLEEVE_TAP_H
#define SLEEVE_TAP_H

#include <linux/if_tun.h>

#ifndef TUN_F_USO4
#define TUN_F_USO4 0x20
#define TUN_F_USO6 0x40
#endif

/* Returns an fd or -errno. vnet: open with IFF_VNET_HDR (10-byte header). */
int sv_tap_open(const char *name, int l3, int vnet);
int sv_tap_set_offload(int fd, unsigned flags);
int sv_tap_set_nonblock(int fd, int on);
int sv_link_set_mtu(const char *name, int mtu);
int sv_link_up(const char *name);
int sv_link_set_gso_max_size(const char *name, unsigned size);

#endif
