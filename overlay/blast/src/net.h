#ifndef BLAST_NET_H
#define BLAST_NET_H
#include <sys/socket.h>

int bl_addr(const char *addr, unsigned port, struct sockaddr_storage *ss, socklen_t *len);
void bl_set_port(struct sockaddr_storage *ss, unsigned port);
int bl_socket(int family, const struct sockaddr_storage *bind_to, socklen_t len);
#endif
