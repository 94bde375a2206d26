// SPDX-License-Identifier: MIT
/*
 * kmock: a stand-in for sroced's kernel path, for the VM tests of
 * rdma_sroce.ko. It attaches to /dev/sroce, answers every request the way
 * sroced would (userspace/abi/sroce_abi.h), maps the rings and the MRs the
 * module hands it, and runs a loopback "engine": a SEND lands in the
 * receive queue of the same QP, an RDMA WRITE in the MR its rkey names,
 * each with its completions and completion events. With --wire it also
 * carries GSI MADs between the devices it serves (QP1 for rdma_cm).
 *
 *   kmock [--dev NAME]... [--wire] [--hang] [--slow OP:MS] [--log FILE] [--ready FILE]
 *   kmock --faults NAME        channel misuse checks, then exit
 *
 * --slow hello:MS / dereg:MS: the first such request is answered MS ms
 * late, after the module gave up on it (a slow or stopped sroced); a slow
 * DEREG_MR first reads and writes the whole MR through its mapping, as a
 * sroced that has not yet seen the DEREG would (late_touched counts it).
 * Contexts are tracked as sroced does: HELLO for an open id is EALREADY.
 *
 * SIGTERM ends it with a summary line; objects a context still had at
 * CLOSE are counted as "left_at_close" only if the module failed to
 * destroy them first (which would be a module bug).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kmock.h"

struct dev devs[MAX_DEVS];
int ndevs;
struct obj objs[MAX_OBJS];
static uint32_t next_handle = 1;
static int doorbell = -1;
FILE *log_file;
volatile sig_atomic_t stop;
bool wire, hang;
static int slow_op;		/* SROCE_OP_HELLO / _DEREG_MR, or 0 */
static unsigned int slow_ms;
#define MAX_CTXS 256
static struct { bool open; int dev; uint32_t ctx; } ctxs[MAX_CTXS];
struct post_event post_event;
struct kmock_stats st;

void logmsg(const char *fmt, ...)
{
	va_list ap;

	if (!log_file)
		return;
	va_start(ap, fmt);
	vfprintf(log_file, fmt, ap);
	va_end(ap);
	fputc('\n', log_file);
	fflush(log_file);
}

void die(const char *what)
{
	fprintf(stderr, "kmock: %s: %s\n", what, strerror(errno));
	exit(1);
}

struct obj *find(enum kind k, int dev, uint32_t ctx, uint32_t handle)
{
	for (int i = 0; i < MAX_OBJS; i++)
		if (objs[i].kind == k && objs[i].dev == dev &&
		    (ctx == ~0u || objs[i].ctx == ctx) && objs[i].handle == handle)
			return &objs[i];
	return NULL;
}

struct obj *new_obj(enum kind k, int dev, uint32_t ctx)
{
	for (int i = 0; i < MAX_OBJS; i++)
		if (objs[i].kind == K_FREE) {
			memset(&objs[i], 0, sizeof(objs[i]));
			objs[i].kind = k;
			objs[i].dev = dev;
			objs[i].ctx = ctx;
			objs[i].handle = next_handle++;
			return &objs[i];
		}
	return NULL;
}

void free_obj(struct obj *o)
{
	if (o->map.base)
		munmap(o->map.base, o->map.bytes);
	o->kind = K_FREE;
}

int map_region(int dev, const struct sroce_kmap *m, bool writable,
		      struct map *out)
{
	void *p = mmap(NULL, m->bytes, PROT_READ | (writable ? PROT_WRITE : 0),
		       MAP_SHARED, devs[dev].fd, (off_t)m->offset);

	if (p == MAP_FAILED)
		return -errno;
	out->base = p;
	out->bytes = m->bytes;
	return 0;
}

void ring_at(struct ring *r, uint8_t *at)
{
	r->hdr = (struct sroce_ring *)at;
	r->entries = at + ((sizeof(struct sroce_ring) + 63) & ~(size_t)63);
	r->cons = 0;
}


int send_msg(int dev, uint32_t kind, uint32_t ctx, const void *a,
		    size_t alen, const void *b, size_t blen)
{
	uint8_t buf[SROCE_KMSG_MAX];
	struct sroce_kmsg *km = (struct sroce_kmsg *)buf;

	km->kind = kind;
	km->ctx = ctx;
	memcpy(buf + sizeof(*km), a, alen);
	if (blen)
		memcpy(buf + sizeof(*km) + alen, b, blen);
	if (write(devs[dev].fd, buf, sizeof(*km) + alen + blen) < 0)
		return -errno;
	return 0;
}

static int ctx_slot(int dev, uint32_t ctx)
{
	for (int i = 0; i < MAX_CTXS; i++)
		if (ctxs[i].open && ctxs[i].dev == dev && ctxs[i].ctx == ctx)
			return i;
	return -1;
}

/* sroced's context table: one context per id, until CLOSE. */
static int on_hello(int dev, uint32_t ctx, size_t blen)
{
	if (blen != sizeof(struct sroce_hello) + sizeof(struct sroce_khello_ext))
		return -EINVAL;
	if (ctx_slot(dev, ctx) >= 0)
		return -EALREADY;
	for (int i = 0; i < MAX_CTXS; i++)
		if (!ctxs[i].open) {
			ctxs[i].open = true;
			ctxs[i].dev = dev;
			ctxs[i].ctx = ctx;
			return 0;
		}
	return -EMFILE;
}

/* --slow: late, and for DEREG_MR touching the MR as a sroced that has not
 * seen the DEREG yet would. Under a module that released the pages without
 * care this is a SIGBUS (or a write into the application's memory).
 */
static void be_slow(int dev, uint32_t ctx, uint16_t op, const uint8_t *body, size_t blen)
{
	struct timespec ts = { slow_ms / 1000, (long)(slow_ms % 1000) * 1000000L };
	const struct sroce_handle_req *h = (const void *)body;
	struct obj *o;

	slow_op = 0;	/* once */
	logmsg("slow: op %u answered %u ms late", op, slow_ms);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	if (op != SROCE_OP_DEREG_MR || blen < sizeof(*h))
		return;
	o = find(K_MR, dev, ctx, h->handle);
	if (!o || !o->map.base)
		return;
	{
		volatile uint8_t *m = o->map.base;
		unsigned long sum = 0;

		for (size_t i = 0; i < o->map.bytes; i++)
			sum += m[i];
		if (o->writable)
			memset(o->map.base, 0xEE, o->map.bytes);
		logmsg("slow: touched MR 0x%x (%zu bytes, sum %lu)", h->handle, o->map.bytes, sum);
	}
	st.late_touched++;
}

static void on_request(int dev, uint32_t ctx, const uint8_t *p, size_t len)
{
	const struct sroce_msg_hdr *h = (const void *)p;
	uint8_t out[sizeof(struct sroce_msg_hdr) + SROCE_MAX_MSG] = { 0 };
	struct sroce_msg_hdr *rh = (struct sroce_msg_hdr *)out;
	size_t rlen = 0;

	if (len < sizeof(*h) || h->magic != SROCE_ABI_MAGIC)
		return;
	st.requests++;
	if (hang)
		return;
	if (slow_op && h->op == slow_op)
		be_slow(dev, ctx, h->op, p + sizeof(*h), h->len);
	rh->status = h->op == SROCE_OP_HELLO ? on_hello(dev, ctx, h->len) : 0;
	if (rh->status == 0)
		rh->status = handle(dev, ctx, h->op, p + sizeof(*h), h->len,
				    out + sizeof(*rh), &rlen);
	if (rh->status)
		st.replies_err++;
	logmsg("req dev=%d ctx=%u op=%u status=%d", dev, ctx, h->op,
	       rh->status);
	rh->magic = SROCE_ABI_MAGIC;
	rh->op = h->op;
	rh->seq = h->seq;
	rh->len = (uint16_t)rlen;
	if (send_msg(dev, SROCE_KMSG_REPLY, ctx, out, sizeof(*rh) + rlen,
		     NULL, 0))
		fprintf(stderr, "kmock: reply: %s\n", strerror(errno));
	if (post_event.set) {
		post_event.set = false;
		if (send_msg(dev, SROCE_KMSG_ASYNC_EVENT, 0, &post_event.ev,
			     sizeof(post_event.ev), NULL, 0) == 0)
			st.events++;
	}
}

/* --wire: a MAD for a GID of another device we serve goes there. */
static void on_gsi(int dev, const uint8_t *p, size_t len)
{
	const struct sroce_kgsi *g = (const void *)p;
	struct sroce_kgsi in;

	st.gsi_in++;
	if (!wire || len < sizeof(*g) || len != sizeof(*g) + g->len)
		return;
	for (int d = 0; d < ndevs; d++)
		for (int i = 0; i < 32; i++)
			if (d != dev && devs[d].gids[i].present &&
			    !memcmp(devs[d].gids[i].entry.gid, g->dgid, 16)) {
				in = *g;
				in.remote_qpn = 1; /* source: the sender's QP1 */
				if (send_msg(d, SROCE_KMSG_GSI_RECV, 0, &in,
					     sizeof(in), g + 1, g->len) == 0)
					st.gsi_out++;
				return;
			}
}

static void on_message(int dev, const uint8_t *buf, size_t len)
{
	const struct sroce_kmsg *km = (const void *)buf;
	const uint8_t *p = buf + sizeof(*km);

	len -= sizeof(*km);
	switch (km->kind) {
	case SROCE_KMSG_REQUEST:
		on_request(dev, km->ctx, p, len);
		break;
	case SROCE_KMSG_CLOSE: {
		int slot = ctx_slot(dev, km->ctx);

		if (slot >= 0)
			ctxs[slot].open = false;
		st.closes++;
		for (int i = 0; i < MAX_OBJS; i++)
			if (objs[i].kind != K_FREE && objs[i].dev == dev &&
			    objs[i].ctx == km->ctx) {
				st.left_at_close++;
				free_obj(&objs[i]);
			}
		logmsg("close dev=%d ctx=%u", dev, km->ctx);
		break;
	}
	case SROCE_KMSG_GID: {
		const struct sroce_kgid *g = (const void *)p;

		if (len == sizeof(*g) && g->entry.index < 32) {
			devs[dev].gids[g->entry.index] = *g;
			st.gids++;
			logmsg("gid dev=%d index=%u present=%u type=%u", dev,
			       g->entry.index, g->present, g->entry.gid_type);
		}
		break;
	}
	case SROCE_KMSG_GSI_SEND:
		on_gsi(dev, p, len);
		break;
	default:
		logmsg("unknown message kind %u", km->kind);
	}
}

static int attach(const char *name, int db)
{
	struct sroce_kattach a = { .abi_version = SROCE_KABI_VERSION,
				   .doorbell_fd = db };
	int fd = open(SROCE_KDEV_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	snprintf(a.ibdev, sizeof(a.ibdev), "%s", name);
	/* Limits the VM test expects back from ibv_query_device. */
	a.attr.max_qp = 77;
	a.attr.max_qp_wr = 1024;
	a.attr.max_sge = 8;
	a.attr.max_cq = 64;
	a.attr.max_cqe = 4096;
	a.attr.max_mr = 256;
	a.attr.max_pd = 64;
	a.attr.max_qp_rd_atom = 4;
	a.attr.max_qp_init_rd_atom = 4;
	a.attr.max_srq = 16;
	a.attr.max_srq_wr = 1024;
	a.attr.max_srq_sge = 8;
	a.attr.max_ah = 128;
	a.attr.max_inline_data = 128;
	a.attr.max_mr_size = 1ull << 32;
	a.attr.page_size_cap = 4096;
	a.attr.vendor_id = 0x5352;
	a.attr.atomic_cap = IBV_ATOMIC_HCA;
	a.attr.phys_port_cnt = 1;
	if (ioctl(fd, SROCE_KIOC_ATTACH, &a) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

static int expect(const char *what, int got, int want)
{
	printf("%s %s (got %d, want %d)\n", got == want ? "PASS" : "FAIL",
	       what, got, want);
	return got == want ? 0 : 1;
}

static int errno_of(int rc)
{
	return rc < 0 ? errno : 0;
}

/* Misuse of the channel: each must be refused cleanly. */
static int faults(const char *name)
{
	struct sroce_kattach a = { .abi_version = SROCE_KABI_VERSION,
				   .doorbell_fd = -1 };
	uint8_t buf[SROCE_KMSG_MAX + 16] = { 0 };
	struct sroce_kmsg *km = (void *)buf;
	int fails = 0, fd, fd2;

	a.attr.max_qp = a.attr.max_cqe = a.attr.max_qp_wr = 1;
	a.attr.max_sge = 1;
	fd = open(SROCE_KDEV_PATH, O_RDWR);
	if (fd < 0)
		die("open " SROCE_KDEV_PATH);
	fails += expect("chan: read before attach", errno_of(read(fd, buf, sizeof(buf))), ENOTCONN);
	snprintf(a.ibdev, sizeof(a.ibdev), "nosuchdev");
	fails += expect("chan: attach unknown device", errno_of(ioctl(fd, SROCE_KIOC_ATTACH, &a)), ENODEV);
	snprintf(a.ibdev, sizeof(a.ibdev), "%s", name);
	a.abi_version = 99;
	fails += expect("chan: attach wrong abi", errno_of(ioctl(fd, SROCE_KIOC_ATTACH, &a)), EPROTONOSUPPORT);
	a.abi_version = SROCE_KABI_VERSION;
	a.doorbell_fd = 0; /* stdin: not an eventfd */
	fails += expect("chan: attach bad doorbell fd", errno_of(ioctl(fd, SROCE_KIOC_ATTACH, &a)), EINVAL);
	a.doorbell_fd = -1;
	fails += expect("chan: attach NULL arg", errno_of(ioctl(fd, SROCE_KIOC_ATTACH, NULL)), EFAULT);
	fails += expect("chan: unknown ioctl", errno_of(ioctl(fd, _IO('S', 99))), ENOTTY);
	fails += expect("chan: attach", errno_of(ioctl(fd, SROCE_KIOC_ATTACH, &a)), 0);
	fails += expect("chan: attach twice", errno_of(ioctl(fd, SROCE_KIOC_ATTACH, &a)), EBUSY);
	fd2 = open(SROCE_KDEV_PATH, O_RDWR);
	fails += expect("chan: second daemon for the device", errno_of(ioctl(fd2, SROCE_KIOC_ATTACH, &a)), EBUSY);
	close(fd2);
	fails += expect("chan: short write", errno_of(write(fd, buf, 4)), EINVAL);
	fails += expect("chan: oversized write", errno_of(write(fd, buf, sizeof(buf))), EINVAL);
	km->kind = 77;
	fails += expect("chan: unknown kind", errno_of(write(fd, buf, 16)), EINVAL);
	km->kind = SROCE_KMSG_REPLY;
	fails += expect("chan: reply without header", errno_of(write(fd, buf, 16)), EINVAL);
	km->kind = SROCE_KMSG_COMP_EVENT;
	fails += expect("chan: event of bad size", errno_of(write(fd, buf, 12)), EINVAL);
	fails += expect("chan: event for no CQ", errno_of(write(fd, buf, 16)), ENOENT);
	km->kind = SROCE_KMSG_ASYNC_EVENT;
	((struct sroce_async_event_desc *)(km + 1))->event_type = IBV_EVENT_PORT_ACTIVE;
	fails += expect("chan: port event from daemon", errno_of(write(fd, buf, 24)), EINVAL);
	fails += expect("chan: mmap unknown region",
			mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 4096 * 12345) == MAP_FAILED ? errno : 0,
			EINVAL);
	{
		/* the GID table arrives at attach: read it without blocking */
		int n = 0, fl = fcntl(fd, F_GETFL);

		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
		fails += expect("chan: read buffer too small", errno_of(read(fd, buf, 4)), EMSGSIZE);
		while (read(fd, buf, sizeof(buf)) > 0)
			n++;
		fails += expect("chan: non-blocking read drains", errno, EAGAIN);
		printf("%s chan: GID messages at attach: %d\n", n > 0 ? "PASS" : "FAIL", n);
		fails += n > 0 ? 0 : 1;
	}
	close(fd);
	return fails;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	const char *names[MAX_DEVS];
	const char *ready = NULL;
	struct pollfd pfd[MAX_DEVS + 1];
	static uint8_t buf[SROCE_KMSG_MAX];
	int n = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--dev") && i + 1 < argc && n < MAX_DEVS)
			names[n++] = argv[++i];
		else if (!strcmp(argv[i], "--wire"))
			wire = true;
		else if (!strcmp(argv[i], "--hang"))
			hang = true;
		else if (!strcmp(argv[i], "--slow") && i + 1 < argc) {
			const char *a = argv[++i];

			slow_op = !strncmp(a, "hello:", 6) ? SROCE_OP_HELLO :
				  !strncmp(a, "dereg:", 6) ? SROCE_OP_DEREG_MR : 0;
			slow_ms = (unsigned int)atoi(a + 6);
			if (!slow_op) {
				fprintf(stderr, "kmock: --slow hello:MS or dereg:MS\n");
				return 2;
			}
		}
		else if (!strcmp(argv[i], "--log") && i + 1 < argc)
			log_file = fopen(argv[++i], "w");
		else if (!strcmp(argv[i], "--ready") && i + 1 < argc)
			ready = argv[++i];
		else if (!strcmp(argv[i], "--faults") && i + 1 < argc)
			return faults(argv[++i]) ? 1 : 0;
		else {
			fprintf(stderr, "usage: kmock [--dev NAME]... [--wire] [--hang] [--slow OP:MS] [--log F] [--ready F] | --faults NAME\n");
			return 2;
		}
	}
	if (n == 0)
		names[n++] = "sroce0";
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	doorbell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (doorbell < 0)
		die("eventfd");
	for (int d = 0; d < n; d++) {
		devs[d].name = names[d];
		devs[d].fd = attach(names[d], doorbell);
		if (devs[d].fd < 0) {
			errno = -devs[d].fd;
			die(names[d]);
		}
		pfd[d].fd = devs[d].fd;
		pfd[d].events = POLLIN;
	}
	ndevs = n;
	pfd[n].fd = doorbell;
	pfd[n].events = POLLIN;
	if (ready)
		close(open(ready, O_CREAT | O_WRONLY, 0644));
	while (!stop) {
		int rc = poll(pfd, (nfds_t)n + 1, 20);

		if (rc < 0 && errno != EINTR)
			die("poll");
		for (int d = 0; d < n && rc > 0; d++) {
			ssize_t got;

			if (pfd[d].revents & POLLHUP) {
				logmsg("dev %d gone", d);
				stop = 1;
			}
			if (!(pfd[d].revents & POLLIN))
				continue;
			got = read(devs[d].fd, buf, sizeof(buf));
			if (got == 0)
				stop = 1;
			else if (got >= (ssize_t)sizeof(struct sroce_kmsg))
				on_message(d, buf, (size_t)got);
		}
		if (rc > 0 && (pfd[n].revents & POLLIN)) {
			uint64_t v;

			if (read(doorbell, &v, sizeof(v)) == sizeof(v))
				st.doorbells += v;
		}
		run_engine();
	}
	printf("kmock: summary requests=%lu errors=%lu closes=%lu doorbells=%lu cqes=%lu events=%lu gids=%lu gsi_in=%lu gsi_out=%lu mr_checked=%lu ro_refused=%lu ro_violations=%lu left_at_close=%lu late_touched=%lu\n",
	       st.requests, st.replies_err, st.closes, st.doorbells, st.cqes,
	       st.events, st.gids, st.gsi_in, st.gsi_out, st.mr_checked,
	       st.ro_refused, st.ro_violations, st.left_at_close, st.late_touched);
	fflush(stdout);
	return 0;
}
