/* agree.c - what this side makes of its peers' heartbeats: whether the device
 * hands over super-frames (every peer takes them), and which AEAD to seal with
 * (overlay/README.md, "Choosing the cipher") */
#include <pthread.h>
#include <stdio.h>

#include "agree.h"
#include "sleeve.h"
#include "tap.h"

void sv_update_tso(struct sv *s)
{
	unsigned want = TUN_F_CSUM, gso_all = 1, uso_all = 1;

	if (!s->vnet || !s->offload)
		return;
	for (int i = 0; i < s->npeers; i++) {
		uint32_t caps = __atomic_load_n(&s->peers[i].caps, __ATOMIC_RELAXED);

		if (!__atomic_load_n(&s->peers[i].heard, __ATOMIC_RELAXED) || !(caps & SV_CAP_GSO_RX))
			gso_all = 0;
		if (!(caps & SV_CAP_USO_RX))
			uso_all = 0;
	}
	if (gso_all)
		want |= s->tun_ok & (TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN);
	if (gso_all && uso_all)
		want |= s->tun_ok & (TUN_F_USO4 | TUN_F_USO6);
	pthread_mutex_lock(&s->lock);
	if ((unsigned)s->tso != want) {
		if (sv_tap_set_offload(s->tap_fd, want) == 0) {
			sv_log(s, "device offloads now 0x%x (%s)", want,
			       want & TUN_F_TSO4 ? "super-frames on" : "super-frames off");
			__atomic_store_n(&s->tso, (int)want, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&s->lock);
}

/* "aes-256-gcm", "chacha20-poly1305" or "aes-256-gcm, chacha20-poly1305" */
static const char *names_of(unsigned mask, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (int c = SV_AEAD_NONE + 1; c < SV_AEAD__MAX; c++)
		if (mask & SV_AEAD_BIT(c))
			used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s",
						 used ? ", " : "", sv_aead_name(c));
	if (!used)
		snprintf(buf, len, "nothing");
	return buf;
}

void sv_update_cipher(struct sv *s)
{
	int heard[SV_MAX_PEERS], skip[SV_MAX_PEERS], c;
	unsigned acc[SV_MAX_PEERS], fast[SV_MAX_PEERS];

	if (!s->enc)
		return;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->npeers; i++) {
		struct sv_peer *p = &s->peers[i];

		heard[i] = __atomic_load_n(&p->heard, __ATOMIC_RELAXED);
		acc[i] = __atomic_load_n(&p->aead_acc, __ATOMIC_RELAXED);
		fast[i] = __atomic_load_n(&p->aead_fast, __ATOMIC_RELAXED);
	}
	c = sv_aead_pick(s->aead_acc, s->aead_fast, s->npeers, heard, acc, fast, skip);
	if (c && c != sv_seal_cipher(&s->seal)) {
		sv_log(s, "sealing with %s now", sv_aead_name(c));
		__atomic_store_n(&s->seal.cipher, c, __ATOMIC_RELAXED);
	}
	for (int i = 0; i < s->npeers; i++) {
		struct sv_peer *p = &s->peers[i];
		char theirs[64], ours[64];

		__atomic_store_n(&p->aead_skip, skip[i], __ATOMIC_RELAXED);
		if (skip[i] && !p->aead_told) {
			p->aead_told = 1;
			sv_warn("peer %s accepts only %s, this side %s (--cipher %s): not sending it frames",
				p->name, names_of(acc[i], theirs, sizeof(theirs)),
				names_of(s->aead_acc, ours, sizeof(ours)),
				s->cipher_flag ? sv_aead_name(s->cipher_flag) : "auto");
		} else if (!skip[i]) {
			p->aead_told = 0;
		}
	}
	pthread_mutex_unlock(&s->lock);
}
