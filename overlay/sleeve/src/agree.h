/* agree.h - what this side makes of its peers' heartbeats */
#ifndef SLEEVE_AGREE_H
#define SLEEVE_AGREE_H

#include "sleeve.h"

/* Super-frames from the device (TSO, USO) on when every peer takes them, off
 * otherwise. */
void sv_update_tso(struct sv *s);
/* Recomputes the AEAD to seal with and the peers refused, from the heartbeats. */
void sv_update_cipher(struct sv *s);

#endif
