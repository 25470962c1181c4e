/* blast recv: one bound socket per flow, recvmmsg, counts per sender run and in all. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "blast.h"
#include "net.h"

#define RCVBUF (4 << 20)
#define CMSG_ROOM CMSG_SPACE(sizeof(uint32_t))

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct count {
	uint64_t packets, bytes, drops;
	struct timespec first, last;
};

struct receiver {
	int fds[BL_MAX_FLOWS];
	uint32_t ovfl[BL_MAX_FLOWS];  /* each socket's SO_RXQ_OVFL, as last seen */
	uint8_t *bufs;
	char *ctl;
	struct mmsghdr *msgs;
	struct iovec *iovs;
	struct sockaddr_storage *from;
	struct count all, run;
	uint64_t run_drops0;
	uint32_t run_id, prev_run, runs;
	unsigned bufsize;
	int end_flow;                 /* a sender's END to answer, on this flow (-1: none) */
	struct sockaddr_storage end_from;
	socklen_t end_len;
};

static uint64_t drops_now(const struct receiver *r, unsigned flows)
{
	uint64_t d = 0;
	unsigned i;

	for (i = 0; i < flows; i++)
		d += r->ovfl[i];
	return d;
}

static void seen_drops(struct receiver *r, unsigned f, struct msghdr *m)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL)
			memcpy(&r->ovfl[f], CMSG_DATA(c), sizeof(uint32_t));
}

static void count(struct count *c, size_t len, const struct timespec *now)
{
	if (!c->packets)
		c->first = *now;
	c->packets++;
	c->bytes += len;
	c->last = *now;
}

static int drain(const struct bl_opts *o, struct receiver *r, unsigned f);

/* The counts of the current run, as JSON after the header, to whoever sent END: after
 * every socket is read empty, so that what the sender sent before END is in them. */
static void report(const struct bl_opts *o, struct receiver *r)
{
	uint8_t buf[512];
	struct bl_hdr h = {.magic = BL_MAGIC_REP, .run = r->run_id};
	unsigned f;
	int i;
	double secs;

	for (f = 0; f < o->flows; f++)
		drain(o, r, f);
	f = (unsigned)r->end_flow;
	r->end_flow = -1;
	secs = r->run.packets > 1 ? bl_ts(&r->run.first, &r->run.last) : 0;
	bl_put_hdr(buf, &h);
	i = snprintf((char *)buf + BL_HDR, sizeof(buf) - BL_HDR,
		     "{\"packets\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"drops\":%" PRIu64 ",\"seconds\":%.6f}",
		     r->run.packets, r->run.bytes, drops_now(r, o->flows) - r->run_drops0, secs);
	sendto(r->fds[f], buf, BL_HDR + (size_t)i, 0, (struct sockaddr *)&r->end_from, r->end_len);
}

/* Read socket `f` until it is empty; a sender's END is kept to be answered (report). */
static int drain(const struct bl_opts *o, struct receiver *r, unsigned f)
{
	struct timespec now;
	struct bl_hdr h;
	int n, k;

	for (;;) {
		for (k = 0; k < (int)o->batch; k++) {
			r->msgs[k].msg_hdr.msg_namelen = sizeof(r->from[k]);
			r->msgs[k].msg_hdr.msg_controllen = CMSG_ROOM;
		}
		n = recvmmsg(r->fds[f], r->msgs, o->batch, MSG_DONTWAIT | MSG_TRUNC, NULL);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		clock_gettime(CLOCK_MONOTONIC, &now);
		for (k = 0; k < n; k++) {
			seen_drops(r, f, &r->msgs[k].msg_hdr);
			if (bl_get_hdr(r->iovs[k].iov_base, r->msgs[k].msg_len, &h))
				continue;
			if (h.magic == BL_MAGIC_END) {
				r->end_flow = (int)f;
				r->end_len = r->msgs[k].msg_hdr.msg_namelen;
				memcpy(&r->end_from, &r->from[k], sizeof(r->end_from));
				continue;
			}
			if (h.magic != BL_MAGIC_DATA)
				continue;
			if (r->runs && h.run == r->prev_run) {   /* a straggler of the run before */
				count(&r->all, r->msgs[k].msg_len, &now);
				continue;
			}
			if (h.run != r->run_id || !r->runs) {
				memset(&r->run, 0, sizeof(r->run));
				r->prev_run = r->run_id;
				r->run_id = h.run;
				r->run_drops0 = drops_now(r, o->flows);
				r->runs++;
			}
			count(&r->run, r->msgs[k].msg_len, &now);
			count(&r->all, r->msgs[k].msg_len, &now);
		}
	}
}

static int open_flows(const struct bl_opts *o, struct receiver *r)
{
	struct sockaddr_storage a;
	socklen_t alen;
	unsigned i;
	int one = 1, size = RCVBUF, fd;

	if (bl_addr(o->addr, o->port, &a, &alen))
		return -EINVAL;
	for (i = 0; i < o->flows; i++) {
		bl_set_port(&a, o->port + i);
		fd = bl_socket(a.ss_family, &a, alen);
		if (fd < 0)
			return fd;
		r->fds[i] = fd;
		if (setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one)) != 0)
			return -errno;
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)); /* capped by rmem_max */
	}
	return 0;
}

static int setup(const struct bl_opts *o, struct receiver *r)
{
	unsigned k;

	r->bufsize = o->mtu;
	r->bufs = calloc(o->batch, r->bufsize);
	r->ctl = calloc(o->batch, CMSG_ROOM);
	r->msgs = calloc(o->batch, sizeof(*r->msgs));
	r->iovs = calloc(o->batch, sizeof(*r->iovs));
	r->from = calloc(o->batch, sizeof(*r->from));
	if (!r->bufs || !r->ctl || !r->msgs || !r->iovs || !r->from)
		return -ENOMEM;
	for (k = 0; k < o->batch; k++) {
		r->iovs[k].iov_base = r->bufs + (size_t)k * r->bufsize;
		r->iovs[k].iov_len = r->bufsize;
		r->msgs[k].msg_hdr.msg_iov = &r->iovs[k];
		r->msgs[k].msg_hdr.msg_iovlen = 1;
		r->msgs[k].msg_hdr.msg_name = &r->from[k];
		r->msgs[k].msg_hdr.msg_control = r->ctl + (size_t)k * CMSG_ROOM;
	}
	return open_flows(o, r);
}

static int recv_loop(const struct bl_opts *o, struct receiver *r, double *elapsed)
{
	struct pollfd p[BL_MAX_FLOWS];
	struct timespec start, now;
	unsigned i;
	int ret;

	for (i = 0; i < o->flows; i++)
		p[i] = (struct pollfd){.fd = r->fds[i], .events = POLLIN};
	clock_gettime(CLOCK_MONOTONIC, &start);
	now = start;
	while (!stop && bl_ts(&start, &now) < o->duration) {
		ret = poll(p, o->flows, 100);
		if (ret < 0 && errno != EINTR)
			return -errno;
		for (i = 0; ret > 0 && i < o->flows; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			ret = drain(o, r, i);
			if (ret < 0)
				return ret;
			ret = 1;
		}
		if (r->end_flow >= 0)
			report(o, r);
		clock_gettime(CLOCK_MONOTONIC, &now);
	}
	*elapsed = bl_ts(&start, &now);
	return 0;
}

int bl_recv(const struct bl_opts *o)
{
	struct receiver r;
	struct sigaction sa = {.sa_handler = on_signal};
	double elapsed = 0;
	unsigned i;
	int ret;

	memset(&r, 0, sizeof(r));
	r.end_flow = -1;
	for (i = 0; i < BL_MAX_FLOWS; i++)
		r.fds[i] = -1;
	sigaction(SIGTERM, &sa, NULL);  /* no SA_RESTART: poll returns, the counts are printed */
	sigaction(SIGINT, &sa, NULL);
	ret = setup(o, &r);
	if (ret)
		goto out;
	printf("{\"blast\":\"ready\",\"port\":%u,\"flows\":%u}\n", o->port, o->flows);
	fflush(stdout);
	ret = recv_loop(o, &r, &elapsed);
	if (ret)
		goto out;
	printf("{\"blast\":\"recv\",\"version\":\"%s\",\"flows\":%u,\"runs\":%" PRIu32 ",\"packets\":%" PRIu64
	       ",\"bytes\":%" PRIu64 ",\"drops\":%" PRIu64 ",\"seconds\":%.6f,\"elapsed\":%.3f}\n",
	       BL_VERSION, o->flows, r.runs, r.all.packets, r.all.bytes, drops_now(&r, o->flows),
	       r.all.packets > 1 ? bl_ts(&r.all.first, &r.all.last) : 0.0, elapsed);
	fflush(stdout);
out:
	for (i = 0; i < BL_MAX_FLOWS; i++)
		if (r.fds[i] >= 0)
			close(r.fds[i]);
	free(r.bufs);
	free(r.ctl);
	free(r.msgs);
	free(r.iovs);
	free(r.from);
	return ret;
}
