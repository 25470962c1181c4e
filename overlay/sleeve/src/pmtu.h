/* pmtu.h - heartbeats, probes, the path MTU and the overhead */
#ifndef SLEEVE_PMTU_H
#define SLEEVE_PMTU_H

#include <stddef.h>
#include <stdint.h>

#include "sleeve.h"

/* Overhead from the overlay MTU to the underlay MTU (outer IP included). */
int sv_overhead(const struct sv *s);
/* Largest UDP payload allowed towards every peer. */
uint32_t sv_min_pmtu(struct sv *s);
/* The caps this side's HEARTBEATs advertise (SV_CAP_*). */
uint16_t sv_my_caps(const struct sv *s);
size_t sv_build_heartbeat(struct sv *s, struct sv_peer *p, uint8_t *buf, int want_reply);
void sv_heartbeat_all(struct sv *s);
size_t sv_build_probe(struct sv *s, uint8_t *buf, uint32_t id, size_t size);
size_t sv_build_probe_ack(struct sv *s, uint8_t *buf, uint32_t id, uint32_t size);
uint32_t sv_pmtu_discover(struct sv *s, struct sv_peer *p, uint32_t upper, int timeout_ms);

#endif
