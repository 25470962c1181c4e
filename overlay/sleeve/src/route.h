/* route.h - which peer a frame goes to: learned from what each peer sends.
 *
 * With one peer every frame goes to it and nothing is learned. With more, the
 * receive thread learns, from every frame a peer sends, that the frame's source
 * (its Ethernet source address, or with --l3 its IPv4 source) lives behind that
 * peer; the sending thread looks a frame's destination up and sends it to that
 * peer alone. A destination not learned yet, a broadcast or multicast one, or
 * anything but IPv4 with --l3, goes to every peer, as a switch floods. A source
 * that moves is learned again from its next frame; a table slot holds the
 * newest source hashed to it. Each slot is one 64-bit word, written by the
 * receive thread and read by the sending thread with atomic loads and stores. */
#ifndef SV_ROUTE_H
#define SV_ROUTE_H

#include <stddef.h>
#include <stdint.h>

struct sv;

/* The peer index a frame (after any virtio_net_hdr) goes to, or -1: every peer. */
int sv_route(const struct sv *s, const uint8_t *frame, size_t len);
/* Peer `peer` sent this frame (after any virtio_net_hdr): its source lives there. */
void sv_learn(struct sv *s, int peer, const uint8_t *frame, size_t len);

#endif
