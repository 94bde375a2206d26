// SPDX-License-Identifier: MIT
/* uverbs commands, rings and small helpers for kverbs (see kverbs.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kverbs.h"

int checks, failures;

bool report(bool ok, const char *fmt, ...)
{
	va_list ap;

	checks++;
	if (!ok)
		failures++;
	printf("%s ", ok ? "PASS" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	return ok;
}


double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One legacy uverbs command: header, request (whose first u64 is the
 * response pointer when resp is given), driver data in the tails. */
int uv(int fd, uint32_t cmd, void *req, size_t req_len, void *resp,
	      size_t resp_len)
{
	uint8_t buf[512];
	struct ib_uverbs_cmd_hdr *h = (void *)buf;

	if (sizeof(*h) + req_len > sizeof(buf) || (req_len | resp_len) % 4)
		return EINVAL;
	if (resp)
		*(uint64_t *)req = (uintptr_t)resp;
	h->command = cmd;
	h->in_words = (uint16_t)((sizeof(*h) + req_len) / 4);
	h->out_words = (uint16_t)(resp_len / 4);
	memcpy(buf + sizeof(*h), req, req_len);
	if (write(fd, buf, sizeof(*h) + req_len) != (ssize_t)(sizeof(*h) + req_len))
		return errno;
	return 0;
}



/* What a ring view shows before it is mapped (or when creation failed). */
static struct sroce_ring no_ring;

static void ringv_at(struct ringv *r, void *at)
{
	r->h = at;
	r->e = (uint8_t *)at + ((sizeof(struct sroce_ring) + 63) & ~(size_t)63);
}

static void *slot(struct ringv *r, uint32_t i)
{
	return r->e + (size_t)(i & (r->h->size - 1)) * r->h->entry_size;
}

static void publish(struct ringv *r)
{
	__atomic_store_n(&r->h->prod, r->h->prod + 1, __ATOMIC_RELEASE);
}

char uverbs_path[64];

int find_uverbs(const char *dev)
{
	DIR *d = opendir("/sys/class/infiniband_verbs");
	struct dirent *de;
	char p[256], name[64];

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		FILE *f;

		if (strncmp(de->d_name, "uverbs", 6))
			continue;
		snprintf(p, sizeof(p), "/sys/class/infiniband_verbs/%.32s/ibdev", de->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f) && !strncmp(name, dev, strlen(dev)) &&
		    name[strlen(dev)] == '\n') {
			snprintf(uverbs_path, sizeof(uverbs_path), "/dev/infiniband/%.32s", de->d_name);
			fclose(f);
			closedir(d);
			return 0;
		}
		fclose(f);
	}
	closedir(d);
	return -1;
}

int open_ctx(struct ctx *c)
{
	struct ib_uverbs_get_context req = { 0 };
	struct {
		struct ib_uverbs_get_context_resp r;
		struct sroce_kuctx_resp k;
	} resp = { 0 };
	int err;

	c->fd = open(uverbs_path, O_RDWR | O_CLOEXEC);
	if (c->fd < 0)
		return errno;
	err = uv(c->fd, IB_USER_VERBS_CMD_GET_CONTEXT, &req, sizeof(req), &resp, sizeof(resp));
	c->async_fd = (int)resp.r.async_fd;
	c->k = resp.k;
	return err;
}

int alloc_pd(struct ctx *c, uint32_t *pd)
{
	struct ib_uverbs_alloc_pd req = { 0 };
	struct ib_uverbs_alloc_pd_resp resp = { 0 };
	int err = uv(c->fd, IB_USER_VERBS_CMD_ALLOC_PD, &req, sizeof(req), &resp, sizeof(resp));

	*pd = resp.pd_handle;
	return err;
}

int dealloc(struct ctx *c, uint32_t cmd, uint32_t handle)
{
	uint32_t req = handle;

	return uv(c->fd, cmd, &req, sizeof(req), NULL, 0);
}


int reg_mr(struct ctx *c, uint32_t pd, void *addr, size_t len, uint32_t access, struct mr *mr)
{
	struct ib_uverbs_reg_mr req = {
		.start = (uintptr_t)addr, .length = len, .hca_va = (uintptr_t)addr,
		.pd_handle = pd, .access_flags = access,
	};
	struct ib_uverbs_reg_mr_resp resp = { 0 };
	int err = uv(c->fd, IB_USER_VERBS_CMD_REG_MR, &req, sizeof(req), &resp, sizeof(resp));

	mr->handle = resp.mr_handle;
	mr->lkey = resp.lkey;
	mr->rkey = resp.rkey;
	return err;
}

int comp_channel(struct ctx *c)
{
	struct ib_uverbs_create_comp_channel req = { 0 };
	struct ib_uverbs_create_comp_channel_resp resp = { 0 };

	if (uv(c->fd, IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, &req, sizeof(req), &resp, sizeof(resp)))
		return -1;
	return (int)resp.fd;
}


int create_cq(struct ctx *c, int cqe, int channel, uint64_t uh, struct cq *cq, size_t out_extra)
{
	struct ib_uverbs_create_cq req = { .user_handle = uh, .cqe = (uint32_t)cqe,
					   .comp_channel = channel };
	struct {
		struct ib_uverbs_create_cq_resp r;
		struct sroce_kring_resp k;
	} resp = { 0 };
	int err = uv(c->fd, IB_USER_VERBS_CMD_CREATE_CQ, &req, sizeof(req), &resp,
		     sizeof(resp.r) + out_extra);

	cq->r.h = &no_ring;
	if (err)
		return err;
	cq->handle = resp.r.cq_handle;
	cq->bytes = resp.k.ring_bytes;
	cq->map = mmap(NULL, cq->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd,
		       (off_t)resp.k.mmap_offset);
	if (cq->map == MAP_FAILED)
		return errno;
	ringv_at(&cq->r, cq->map);
	return 0;
}

int destroy_cq(struct ctx *c, struct cq *cq, uint32_t *events)
{
	struct ib_uverbs_destroy_cq req = { .cq_handle = cq->handle };
	struct ib_uverbs_destroy_cq_resp resp = { 0 };
	int err = uv(c->fd, IB_USER_VERBS_CMD_DESTROY_CQ, &req, sizeof(req), &resp, sizeof(resp));

	if (events)
		*events = resp.comp_events_reported;
	if (cq->map && cq->map != MAP_FAILED)
		munmap(cq->map, cq->bytes);
	cq->map = NULL;
	return err;
}


int create_srq(struct ctx *c, uint32_t pd, uint32_t max_wr, struct srq *s)
{
	struct ib_uverbs_create_srq req = { .user_handle = 0x5151, .pd_handle = pd,
					    .max_wr = max_wr, .max_sge = 1 };
	struct {
		struct ib_uverbs_create_srq_resp r;
		struct sroce_kring_resp k;
	} resp = { 0 };
	int err = uv(c->fd, IB_USER_VERBS_CMD_CREATE_SRQ, &req, sizeof(req), &resp, sizeof(resp));

	s->r.h = &no_ring;
	if (err)
		return err;
	s->handle = resp.r.srq_handle;
	s->bytes = resp.k.ring_bytes;
	s->map = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd,
		      (off_t)resp.k.mmap_offset);
	if (s->map == MAP_FAILED)
		return errno;
	ringv_at(&s->r, s->map);
	return 0;
}

int destroy_srq(struct ctx *c, struct srq *s)
{
	struct ib_uverbs_destroy_srq req = { .srq_handle = s->handle };
	struct ib_uverbs_destroy_srq_resp resp = { 0 };
	int err = uv(c->fd, IB_USER_VERBS_CMD_DESTROY_SRQ, &req, sizeof(req), &resp, sizeof(resp));

	munmap(s->map, s->bytes);
	return err;
}


int create_qp(struct ctx *c, uint32_t pd, uint32_t cq, uint32_t srq, uint8_t type,
		     uint32_t max_wr, uint64_t uh, struct qp *qp)
{
	struct ib_uverbs_create_qp req = {
		.user_handle = uh, .pd_handle = pd, .send_cq_handle = cq, .recv_cq_handle = cq,
		.srq_handle = srq, .max_send_wr = max_wr, .max_recv_wr = srq ? 0 : max_wr,
		.max_send_sge = 2, .max_recv_sge = srq ? 0 : 2, .max_inline_data = 64,
		.qp_type = type, .is_srq = srq != 0,
	};
	struct {
		struct ib_uverbs_create_qp_resp r;
		struct sroce_kqp_resp k;
	} resp = { 0 };
	int err = uv(c->fd, IB_USER_VERBS_CMD_CREATE_QP, &req, sizeof(req), &resp, sizeof(resp));

	qp->sq.h = &no_ring;
	qp->rq.h = NULL;
	qp->qpn = 0;
	if (err)
		return err;
	qp->r = resp.r;
	qp->handle = resp.r.qp_handle;
	qp->qpn = resp.r.qpn;
	qp->bytes = resp.k.ring_bytes;
	qp->map = mmap(NULL, qp->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd,
		       (off_t)resp.k.mmap_offset);
	if (qp->map == MAP_FAILED)
		return errno;
	ringv_at(&qp->sq, (uint8_t *)qp->map + resp.k.sq_offset);
	if (resp.k.rq_offset != ~0ull)
		ringv_at(&qp->rq, (uint8_t *)qp->map + resp.k.rq_offset);
	return 0;
}

int destroy_qp(struct ctx *c, struct qp *qp, uint32_t *events)
{
	struct ib_uverbs_destroy_qp req = { .qp_handle = qp->handle };
	struct ib_uverbs_destroy_qp_resp resp = { 0 };
	int err = uv(c->fd, IB_USER_VERBS_CMD_DESTROY_QP, &req, sizeof(req), &resp, sizeof(resp));

	if (events)
		*events = resp.events_reported;
	munmap(qp->map, qp->bytes);
	return err;
}

int modify_qp(struct ctx *c, struct qp *qp, uint32_t mask, struct ib_uverbs_modify_qp *m)
{
	m->qp_handle = qp->handle;
	m->attr_mask = mask;
	return uv(c->fd, IB_USER_VERBS_CMD_MODIFY_QP, m, sizeof(*m), NULL, 0);
}

/* The doorbell: a POST_SEND / POST_RECV without work requests. */
int doorbell(struct ctx *c, uint32_t cmd, uint32_t qp_handle)
{
	struct ib_uverbs_post_send req = { .qp_handle = qp_handle,
					   .wqe_size = sizeof(struct ib_uverbs_send_wr) };
	struct ib_uverbs_post_send_resp resp = { 0 };

	if (cmd == IB_USER_VERBS_CMD_POST_RECV)
		req.wqe_size = sizeof(struct ib_uverbs_recv_wr);
	return uv(c->fd, cmd, &req, sizeof(req), &resp, sizeof(resp));
}

void post_recv(struct ringv *rq, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey)
{
	struct sroce_recv_wqe *w = slot(rq, rq->h->prod);
	struct sroce_sge *s = (void *)(w + 1);

	memset(w, 0, sizeof(*w));
	w->wr_id = wr_id;
	w->num_sge = 1;
	s->addr = (uintptr_t)addr;
	s->length = len;
	s->lkey = lkey;
	publish(rq);
}

void post_send(struct ringv *sq, uint64_t wr_id, uint8_t opcode, void *addr, uint32_t len,
		      uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct sroce_send_wqe *w = slot(sq, sq->h->prod);
	struct sroce_sge *s = (void *)(w + 1);

	memset(w, 0, sizeof(*w));
	w->wr_id = wr_id;
	w->opcode = opcode;
	w->num_sge = 1;
	w->send_flags = IBV_SEND_SIGNALED;
	w->remote_addr = raddr;
	w->rkey = rkey;
	s->addr = (uintptr_t)addr;
	s->length = len;
	s->lkey = lkey;
	publish(sq);
}

int poll_cq(struct cq *cq, struct sroce_cqe *out, int max, double timeout)
{
	double end = now_s() + timeout;
	int n = 0;

	while (n < max && now_s() < end) {
		uint32_t prod = __atomic_load_n(&cq->r.h->prod, __ATOMIC_ACQUIRE);
		uint32_t cons = cq->r.h->cons;

		if (cons == prod) {
			usleep(1000);
			continue;
		}
		memcpy(&out[n++], slot(&cq->r, cons), sizeof(*out));
		__atomic_store_n(&cq->r.h->cons, cons + 1, __ATOMIC_RELEASE);
	}
	return n;
}

/* A GID of the port by type and prefix, from sysfs ("::ffff:" for IPv4). */
int gid_index(const char *dev, bool v4, uint8_t gid[16])
{
	char p[256], s[64];

	for (int i = 0; i < 32; i++) {
		FILE *f;
		unsigned int w[8];

		snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports/1/gids/%d", dev, i);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (!fgets(s, sizeof(s), f) ||
		    sscanf(s, "%x:%x:%x:%x:%x:%x:%x:%x", &w[0], &w[1], &w[2], &w[3], &w[4], &w[5],
			   &w[6], &w[7]) != 8) {
			fclose(f);
			continue;
		}
		fclose(f);
		for (int k = 0; k < 8; k++) {
			gid[2 * k] = (uint8_t)(w[k] >> 8);
			gid[2 * k + 1] = (uint8_t)w[k];
		}
		if (!w[0] && !w[1] && !w[2] && !w[3] && !w[4] && !w[5] && !w[6] && !w[7])
			continue;
		if (v4 == (w[0] == 0 && w[5] == 0xffff))
			return i;
	}
	return -1;
}

void *page_buf(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int to_rts(struct ctx *c, struct qp *qp, const uint8_t dgid[16], int sgid, uint32_t dqpn)
{
	struct ib_uverbs_modify_qp m = { 0 };
	int err;

	m.qp_state = IBV_QPS_INIT;
	m.port_num = 1;
	m.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	err = modify_qp(c, qp, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, &m);
	if (err)
		return err;
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_RTR;
	m.path_mtu = IBV_MTU_1024;
	m.dest_qp_num = dqpn;
	m.rq_psn = 1;
	m.max_dest_rd_atomic = 1;
	m.min_rnr_timer = 12;
	memcpy(m.dest.dgid, dgid, 16);
	m.dest.sgid_index = (uint8_t)sgid;
	m.dest.hop_limit = 64;
	m.dest.is_global = 1;
	m.dest.port_num = 1;
	err = modify_qp(c, qp, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, &m);
	if (err)
		return err;
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_RTS;
	m.timeout = 14;
	m.retry_cnt = 7;
	m.rnr_retry = 7;
	m.sq_psn = 1;
	m.max_rd_atomic = 1;
	return modify_qp(c, qp, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC, &m);
}

/* Reads async events until one of `type` (port events may come first). */
bool wait_async(int fd, uint32_t type, struct ib_uverbs_async_event_desc *ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	memset(ev, 0, sizeof(*ev));
	while (poll(&p, 1, ms) == 1 && read(fd, ev, sizeof(*ev)) == sizeof(*ev))
		if (ev->event_type == type)
			return true;
	return false;
}
