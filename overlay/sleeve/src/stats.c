/* stats.c - counters to JSON, written atomically (tmp + rename) */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pmtu.h"
#include "sleeve.h"
#include "stats.h"
#include "tap.h"

static uint64_t get(struct sv *s, enum sv_ctr i)
{
	return __atomic_load_n(&s->ctr_tx.c[i], __ATOMIC_RELAXED) +
	       __atomic_load_n(&s->ctr_rx.c[i], __ATOMIC_RELAXED) +
	       __atomic_load_n(&s->ctr_main.c[i], __ATOMIC_RELAXED);
}

static uint64_t get_drop(struct sv *s, enum sv_drop d)
{
	uint64_t v = __atomic_load_n(&s->ctr_tx.drop[d], __ATOMIC_RELAXED) +
		     __atomic_load_n(&s->ctr_rx.drop[d], __ATOMIC_RELAXED) +
		     __atomic_load_n(&s->ctr_main.drop[d], __ATOMIC_RELAXED);

	for (int i = 0; i < s->npeers; i++) {
		if (d == SV_D_REASM_TIMEOUT)
			v += __atomic_load_n(&s->peers[i].reasm.timeouts, __ATOMIC_RELAXED);
		if (d == SV_D_REASM_EVICTED)
			v += __atomic_load_n(&s->peers[i].reasm.evicted, __ATOMIC_RELAXED);
	}
	return v;
}

static const char *tf(int v)
{
	return v ? "true" : "false";
}

static void group(FILE *f, struct sv *s, const char *name, const char *const *keys,
		  const enum sv_ctr *idx, int n, int last)
{
	fprintf(f, "  \"%s\": {", name);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s\"%s\": %llu", i ? ", " : "", keys[i],
			(unsigned long long)get(s, idx[i]));
	fprintf(f, "}%s\n", last ? "" : ",");
}

static int write_json(FILE *f, struct sv *s)
{
	static const char *const txk[] = {"frames", "bytes", "datagrams", "batches",
					  "super_frames", "fragments", "send_calls", "segmented"};
	static const enum sv_ctr txi[] = {SV_C_TX_FRAMES, SV_C_TX_BYTES, SV_C_TX_DGRAMS,
					  SV_C_TX_BATCHES, SV_C_TX_SUPER, SV_C_TX_FRAGS,
					  SV_C_TX_CALLS, SV_C_TX_SEGMENTED};
	static const char *const rxk[] = {"frames", "bytes", "datagrams", "super_frames",
					  "fragments", "recv_calls", "coalesced"};
	static const enum sv_ctr rxi[] = {SV_C_RX_FRAMES, SV_C_RX_BYTES, SV_C_RX_DGRAMS,
					  SV_C_RX_SUPER, SV_C_RX_FRAGS, SV_C_RX_CALLS, SV_C_RX_COALESCED};
	static const char *const hbk[] = {"sent", "received"};
	static const enum sv_ctr hbi[] = {SV_C_HB_SENT, SV_C_HB_RECV};
	static const enum sv_ctr pri[] = {SV_C_PROBE_SENT, SV_C_PROBE_ACKED};
	static const char *const prk[] = {"sent", "acked"};
	static const enum sv_ctr poi[] = {SV_C_SPIN_HIT, SV_C_SPIN_MISS, SV_C_SPIN_NS, SV_C_SLEEPS};
	static const char *const pok[] = {"hits", "misses", "ns", "sleeps"};
	uint64_t now = sv_now_ns();
	unsigned tso = (unsigned)__atomic_load_n(&s->tso, __ATOMIC_RELAXED);

	fprintf(f, "{\n  \"version\": \"%s\", \"dev\": \"%s\", \"mode\": \"%s\",\n", SV_VERSION_STR,
		s->dev, s->l3 ? "l3" : "l2");
	fprintf(f, "  \"basic\": %s, \"batch\": %s, \"segment\": %s, \"crypto\": %s,\n",
		tf(s->basic), tf(s->batch), tf(s->segment), tf(s->enc));
	if (s->enc)
		fprintf(f, "  \"cipher\": \"%s\", \"cipher_flag\": \"%s\", \"cipher_impl\": \"%s\",\n",
			sv_aead_name(sv_seal_cipher(&s->seal)),
			s->cipher_flag ? sv_aead_name(s->cipher_flag) : "auto",
			sv_aead_impl(sv_seal_cipher(&s->seal)));
	else
		fprintf(f, "  \"cipher\": null, \"cipher_flag\": null, \"cipher_impl\": null,\n");
	fprintf(f, "  \"mtu\": %d, \"path_mtu\": %u, \"overhead\": %d, \"uptime_s\": %.3f,\n", s->mtu,
		sv_min_pmtu(s) + (unsigned)s->ip_over + 8, sv_overhead(s),
		(double)(now - s->start_ns) / 1e9);
	group(f, s, "tx", txk, txi, (int)(sizeof(txi) / sizeof(txi[0])), 0);
	group(f, s, "rx", rxk, rxi, (int)(sizeof(rxi) / sizeof(rxi[0])), 0);
	group(f, s, "heartbeats", hbk, hbi, 2, 0);
	group(f, s, "probes", prk, pri, 2, 0);
	group(f, s, "polling", pok, poi, 4, 0);
	fprintf(f, "  \"drops\": {");
	for (int d = 1; d < SV_D__MAX; d++)
		fprintf(f, "%s\"%s\": %llu", d > 1 ? ", " : "", sv_drop_names[d],
			(unsigned long long)get_drop(s, (enum sv_drop)d));
	fprintf(f, "},\n");
	fprintf(f,
		"  \"offload\": {\"vnet_hdr\": %s, \"tso\": %s, \"uso\": %s, \"udp_gso\": %s, "
		"\"udp_gro\": %s, \"mmsg\": %s},\n",
		tf(s->vnet), tf(tso & TUN_F_TSO4), tf(tso & TUN_F_USO4),
		tf(__atomic_load_n(&s->udp_gso, __ATOMIC_RELAXED)), tf(s->udp_gro), tf(s->mmsg));
	fprintf(f, "  \"peers\": [");
	for (int i = 0; i < s->npeers; i++) {
		struct sv_peer *p = &s->peers[i];
		uint64_t lh = __atomic_load_n(&p->last_heard_ns, __ATOMIC_RELAXED);
		int heard = __atomic_load_n(&p->heard, __ATOMIC_RELAXED);

		char cipher[32] = "null";

		if (s->enc && heard)
			snprintf(cipher, sizeof(cipher), "\"%s\"",
				 sv_peer_skipped(p) ? "none" : sv_aead_name(sv_seal_cipher(&s->seal)));
		fprintf(f, "%s{\"addr\": \"%s\", \"heard\": %s, \"gso_rx\": %s, \"pmtu\": %u, "
			"\"last_heard_ms\": %lld, \"cipher\": %s}",
			i ? ", " : "", p->name, tf(heard),
			tf(__atomic_load_n(&p->caps, __ATOMIC_RELAXED) & SV_CAP_GSO_RX),
			__atomic_load_n(&p->pmtu, __ATOMIC_RELAXED) + (unsigned)s->ip_over + 8,
			heard ? (long long)((now - lh) / 1000000) : -1LL, cipher);
	}
	fprintf(f, "]\n}\n");
	return ferror(f) ? -EIO : 0;
}

int sv_stats_write(struct sv *s, const char *path)
{
	char tmp[4096];
	FILE *f;
	int ret;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	ret = write_json(f, s);
	if (fclose(f) != 0 && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path) < 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}
