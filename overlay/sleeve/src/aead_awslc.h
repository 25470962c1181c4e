/* aead_awslc.h - AES-256-GCM from AWS-LC (aead_awslc.c), in builds with AWSLC=DIR */
#ifndef SLEEVE_AEAD_AWSLC_H
#define SLEEVE_AEAD_AWSLC_H

#include <stddef.h>
#include <stdint.h>

/* "AWS-LC 5.12.0" */
const char *sv_awslc_version(void);
/* A context keyed once (allocates; NULL on failure), then reused for every message. */
void *sv_awslc_gcm_new(const uint8_t key[32]);
void sv_awslc_gcm_free(void *ctx);
/* In place, as sv_aead_seal and sv_aead_open: 0, -EIO or -EBADMSG. */
int sv_awslc_gcm_seal(void *ctx, const uint8_t nonce[12], uint8_t *m, size_t len, const uint8_t *ad,
		      size_t adlen, uint8_t tag[16]);
int sv_awslc_gcm_open(void *ctx, const uint8_t nonce[12], uint8_t *c, size_t len, const uint8_t *ad,
		      size_t adlen, const uint8_t tag[16]);

#endif
