/* send.c - what both sending paths share: one sendmsg to a peer, and a unit
 * sealed once and planned into FRAG pieces */
#include <errno.h>
#include <sys/socket.h>

#include "send.h"
#include "sleeve.h"

int sv_send_one(struct sv *s, struct sv_peer *p, struct iovec *iov, size_t n)
{
	struct msghdr m = {.msg_name = &p->addr, .msg_namelen = p->alen, .msg_iov = iov,
			   .msg_iovlen = n};

	sv_count(&s->ctr_tx, SV_C_TX_CALLS, 1);
	return sendmsg(s->udp_fd, &m, 0) < 0 ? -errno : 0;
}

enum sv_drop sv_seal_unit(struct sv *s, struct sv_aead_set *t, uint8_t *data, size_t len,
			  uint8_t flags, uint32_t id, uint32_t dgram, struct sv_txunit *u)
{
	uint8_t ad[SV_FRAG_AD_LEN];

	u->stream = len + (s->enc ? SV_TAG_LEN : 0);
	u->cnt = sv_frag_plan(u->stream, dgram, s->enc, &u->chunk);
	u->ctr = 0;
	u->aead = 0;
	if (!u->cnt)
		return SV_D_OVERSIZE;
	if (!s->enc)
		return SV_OK;
	u->aead = (uint8_t)sv_seal_cipher(&s->seal);
	if (sv_seal_next(&s->seal, &u->ctr) < 0) {
		sv_wipe(data, len);
		return SV_D_SEND_ERR;
	}
	sv_frag_ad(ad, flags, u->aead, s->seal.session, u->ctr, id, (uint32_t)u->stream,
		   (uint16_t)u->cnt);
	if (sv_seal_buf(t, u->aead, u->ctr, data, len, ad, sizeof(ad)) < 0) {
		sv_wipe(data, u->stream); /* never let a half-sealed unit out */
		return SV_D_SEND_ERR;
	}
	return SV_OK;
}
