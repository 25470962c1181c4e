/* blast send: batched sendmmsg over connected sockets, one per flow, paced per batch; with
 * --packet, the same datagrams as whole packets into a packet socket (packet.c). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "blast.h"
#include "net.h"
#include "packet.h"

#define REPORT_WAIT_MS 1500       /* how long the sender asks for the receiver's counts */
#define END_EVERY_MS 100

struct sender {
	int fds[BL_MAX_FLOWS];
	uint8_t *bufs;
	struct mmsghdr *msgs;
	struct iovec *iovs;
	uint64_t seq[BL_MAX_FLOWS];
	uint64_t sent, errors;
	uint32_t run;
	size_t stride;                /* a buffer's bytes: the payload, or (--packet) the whole packet */
	struct bl_packet pk;
};

static int open_flows(const struct bl_opts *o, struct sender *s)
{
	struct sockaddr_storage dst, src;
	socklen_t dlen, slen;
	unsigned i;
	int fd;

	if (bl_addr(o->addr, o->port, &dst, &dlen))
		return -EINVAL;
	for (i = 0; i < o->flows; i++) {
		if (o->src_port) {
			bl_addr(dst.ss_family == AF_INET6 ? "::" : NULL, o->src_port + i, &src, &slen);
			fd = bl_socket(dst.ss_family, &src, slen);
		} else {
			fd = bl_socket(dst.ss_family, NULL, 0);
		}
		if (fd < 0)
			return fd;
		s->fds[i] = fd;
		bl_set_port(&dst, o->port + i);
		if (connect(fd, (struct sockaddr *)&dst, dlen) != 0)
			return -errno;
	}
	return 0;
}

/* One batch of `n` on flow `f`; the count sent, or -errno for what stops the run. */
static int send_batch(const struct bl_opts *o, struct sender *s, unsigned f, unsigned n)
{
	struct bl_hdr h = {.magic = BL_MAGIC_DATA, .run = s->run, .flow = (uint16_t)f};
	unsigned i;
	int got;

	for (i = 0; i < n; i++) {
		uint8_t *b = s->bufs + (size_t)i * s->stride;

		h.seq = s->seq[f] + i;
		if (o->packet) {
			memcpy(b, s->pk.hdr[f], BL_IP_UDP);
			bl_put_hdr(b + BL_IP_UDP, &h);
			bl_udp_csum(b);
		} else {
			bl_put_hdr(b, &h);
		}
	}
	got = sendmmsg(o->packet ? s->pk.fd : s->fds[f], s->msgs, n, 0);
	if (got < 0) {
		/* no receiver (ICMP unreachable), a full queue, a signal: counted, not fatal */
		if (errno == ECONNREFUSED || errno == ENOBUFS || errno == EAGAIN || errno == EINTR ||
		    errno == EHOSTUNREACH || errno == ENETUNREACH) {
			s->errors++;
			return 0;
		}
		return -errno;
	}
	s->seq[f] += (unsigned)got;
	s->sent += (unsigned)got;
	return got;
}

static int printable(const char *s)
{
	if (*s != '{')
		return 0;
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return 0;
	return 1;
}

/* Ask the receiver for its counts of this run: END on flow 0 until a report comes. */
static int ask_report(struct sender *s, char *rep, size_t replen)
{
	uint8_t end[BL_HDR], buf[512];
	struct bl_hdr h = {.magic = BL_MAGIC_END, .run = s->run, .seq = s->sent};
	struct pollfd p = {.fd = s->fds[0], .events = POLLIN};
	int waited, n;
	struct bl_hdr got;

	bl_put_hdr(end, &h);
	for (waited = 0; waited < REPORT_WAIT_MS; waited += END_EVERY_MS) {
		if (send(s->fds[0], end, sizeof(end), 0) < 0 && errno != ECONNREFUSED)
			return -errno;
		while (poll(&p, 1, END_EVERY_MS) > 0) {
			n = (int)recv(s->fds[0], buf, sizeof(buf) - 1, MSG_DONTWAIT);
			if (n < 0)
				break;
			if (bl_get_hdr(buf, (size_t)n, &got) || got.magic != BL_MAGIC_REP || got.run != s->run)
				continue;
			buf[n] = 0;
			/* our receiver's JSON object: one line of printable bytes, or nothing */
			if (!printable((char *)buf + BL_HDR))
				continue;
			snprintf(rep, replen, "%.*s", (int)(sizeof(buf) - BL_HDR), (char *)buf + BL_HDR);
			return 0;
		}
	}
	return -ETIMEDOUT;
}

static void fill_msgs(const struct bl_opts *o, struct sender *s)
{
	unsigned i;

	for (i = 0; i < o->batch; i++) {
		s->iovs[i].iov_base = s->bufs + (size_t)i * s->stride;
		s->iovs[i].iov_len = s->stride;
		s->msgs[i].msg_hdr.msg_iov = &s->iovs[i];
		s->msgs[i].msg_hdr.msg_iovlen = 1;
		if (o->packet) {
			s->msgs[i].msg_hdr.msg_name = &s->pk.to;
			s->msgs[i].msg_hdr.msg_namelen = sizeof(s->pk.to);
		}
	}
}

static int send_loop(const struct bl_opts *o, struct sender *s, double *seconds)
{
	struct timespec start, now, next;
	unsigned f = 0, n = bl_batch_for(o->rate, o->batch);
	int64_t step = bl_batch_ns(o->rate, n), ns;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &start);
	now = next = start;
	while (bl_ts(&start, &now) < o->duration) {
		ret = send_batch(o, s, f, n);
		if (ret < 0)
			return ret;
		f = (f + 1) % o->flows;
		if (step) {
			ns = next.tv_nsec + step;
			next.tv_sec += ns / 1000000000;
			next.tv_nsec = ns % 1000000000;
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
	}
	*seconds = bl_ts(&start, &now);
	return 0;
}

int bl_send(const struct bl_opts *o)
{
	struct sender s;
	char rep[1024] = "null", err[256] = "";
	double seconds = 0, cpu0, cpu, wait0, wait;
	unsigned i;
	int ret;

	memset(&s, 0, sizeof(s));
	for (i = 0; i < BL_MAX_FLOWS; i++)
		s.fds[i] = -1;
	s.pk.fd = -1;
	s.stride = o->size + (o->packet ? BL_IP_UDP : 0);
	s.bufs = calloc(o->batch, s.stride);
	s.msgs = calloc(o->batch, sizeof(*s.msgs));
	s.iovs = calloc(o->batch, sizeof(*s.iovs));
	if (!s.bufs || !s.msgs || !s.iovs) {
		ret = -ENOMEM;
		goto out;
	}
	if (getrandom(&s.run, sizeof(s.run), 0) != sizeof(s.run))
		s.run = (uint32_t)getpid() ^ (uint32_t)time(NULL);
	ret = open_flows(o, &s);
	if (ret)
		goto out;
	if (o->packet && (ret = bl_packet_open(o, s.fds, &s.pk, err, sizeof(err)))) {
		if (err[0]) {
			fprintf(stderr, "%s: send failed: %s\n", BL_NAME, err);
			ret = BL_SAID;
		}
		goto out;
	}
	fill_msgs(o, &s);
	cpu0 = bl_cpu_seconds();
	wait0 = bl_wait_seconds();
	ret = send_loop(o, &s, &seconds);
	if (ret)
		goto out;
	cpu = bl_cpu_seconds() - cpu0;
	wait = wait0 < 0 ? -1 : bl_wait_seconds() - wait0;
	usleep(50000);                /* what is in flight lands before END asks */
	if (ask_report(&s, rep, sizeof(rep)) == -ETIMEDOUT)
		snprintf(rep, sizeof(rep), "null");
	printf("{\"blast\":\"send\",\"version\":\"%s\",\"sender\":\"%s\",\"run\":%" PRIu32 ",\"flows\":%u,\"size\":%u,"
	       "\"batch\":%u,\"asked_pps\":%.0f,\"sent\":%" PRIu64 ",\"sent_pps\":%.1f,\"seconds\":%.6f,"
	       "\"cpu_s\":%.4f,\"wait_s\":%.4f,\"errors\":%" PRIu64 ",\"receiver\":%s}\n",
	       BL_VERSION, o->packet ? "packet" : "socket", s.run, o->flows, o->size, o->batch, o->rate, s.sent,
	       seconds > 0 ? (double)s.sent / seconds : 0.0, seconds, cpu, wait, s.errors, rep);
	fflush(stdout);
out:
	for (i = 0; i < BL_MAX_FLOWS; i++)
		if (s.fds[i] >= 0)
			close(s.fds[i]);
	if (s.pk.fd >= 0)
		close(s.pk.fd);
	free(s.bufs);
	free(s.msgs);
	free(s.iovs);
	return ret;
}
