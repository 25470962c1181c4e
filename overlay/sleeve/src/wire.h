/* wire.h - sleeve wire format constants (see overlay/README.md) */
#ifndef SLEEVE_WIRE_H
#define SLEEVE_WIRE_H

#define SV_MAGIC 0x5356u /* "SV" */
#define SV_VERSION 5
#define SV_DEFAULT_PORT 6784

enum sv_type {
	SV_T_DATA = 1,
	SV_T_FRAG = 2,
	SV_T_HEARTBEAT = 3,
	SV_T_PROBE = 4,
	SV_T_PROBE_ACK = 5,
};

#define SV_F_ENC 0x01u
#define SV_F_L3 0x02u
#define SV_F_VNET 0x04u
#define SV_F_SINGLE 0x08u /* DATA only: the body is exactly one frame, no record length */
#define SV_F_KNOWN (SV_F_ENC | SV_F_L3 | SV_F_VNET | SV_F_SINGLE)

#define SV_HDR_LEN 8
#define SV_CRYPTO_PRE 16 /* session u64 + counter u64 */
#define SV_TAG_LEN 16
#define SV_CRYPTO_OVER (SV_CRYPTO_PRE + SV_TAG_LEN)
#define SV_REC_HDR 2
#define SV_FRAG_HDR 12
#define SV_VNET_LEN 10 /* struct virtio_net_hdr */
#define SV_ETH_HLEN 14

#define SV_MAX_UNIT 65600u /* vnet hdr + 64 KiB frame + slack */
#define SV_MAX_STREAM (SV_MAX_UNIT + SV_TAG_LEN) /* a sealed unit: ciphertext + tag */
#define SV_FRAG_AD_LEN 34 /* AD of a sealed unit (README "Crypto framing") */
#define SV_MAX_FRAGS 1024u
#define SV_MAX_DGRAM 65507u /* largest UDP payload over IPv4 */

/* heartbeat caps */
#define SV_CAP_GSO_RX 0x0001u /* accepts VNET units with TCP GSO */
#define SV_CAP_WANT_REPLY 0x0002u
#define SV_CAP_USO_RX 0x0004u /* accepts VNET units with UDP L4 GSO */

#define SV_HB_LEN 18 /* caps, dev_mtu, seq, aead_accept, aead_fast, echo */
#define SV_PROBE_MIN 4
#define SV_PROBE_ACK_LEN 8

#endif
