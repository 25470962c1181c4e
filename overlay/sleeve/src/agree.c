/* agree.c - which AEAD to seal with, from what the peers' heartbeats say they
 * accept (overlay/README.md, "Choosing the cipher") */
#include <stdio.h>

#include "sleeve.h"

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
