/* SPDX-License-Identifier: MIT */
/*
 * The uverbs side of libsroce's kernel path, in miniature, for the VM tests
 * (kverbs.c): legacy uverbs write() commands with the driver data of
 * sroce_abi.h, the rings mapped from the uverbs fd, posting and polling.
 * Helpers return 0 or an errno value.
 */
#ifndef KVERBS_H
#define KVERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

#include "sroce_abi.h"

extern int checks, failures;
bool report(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The condition runs first (it usually makes the call whose results the
 * message prints): function arguments have no evaluation order. */
#define check(cond, ...) ({ bool ok_ = (cond); report(ok_, __VA_ARGS__); })
double now_s(void);

struct ctx {
	int fd;
	int async_fd;
	struct sroce_kuctx_resp k;
};

struct ringv {
	struct sroce_ring *h;
	uint8_t *e;
};

struct mr {
	uint32_t handle, lkey, rkey;
};

struct cq {
	uint32_t handle;
	struct ringv r;
	void *map;
	size_t bytes;
};

struct srq {
	uint32_t handle;
	struct ringv r;
	void *map;
	size_t bytes;
};

struct qp {
	uint32_t handle, qpn;
	struct ringv sq, rq;
	void *map;
	size_t bytes;
	struct ib_uverbs_create_qp_resp r;
};

extern char uverbs_path[64];

int uv(int fd, uint32_t cmd, void *req, size_t req_len, void *resp, size_t resp_len);
int find_uverbs(const char *dev);
int open_ctx(struct ctx *c);
int alloc_pd(struct ctx *c, uint32_t *pd);
int dealloc(struct ctx *c, uint32_t cmd, uint32_t handle);
int reg_mr(struct ctx *c, uint32_t pd, void *addr, size_t len, uint32_t access, struct mr *mr);
int comp_channel(struct ctx *c);
int create_cq(struct ctx *c, int cqe, int channel, uint64_t uh, struct cq *cq, size_t out_extra);
int destroy_cq(struct ctx *c, struct cq *cq, uint32_t *events);
int create_srq(struct ctx *c, uint32_t pd, uint32_t max_wr, struct srq *s);
int destroy_srq(struct ctx *c, struct srq *s);
int create_qp(struct ctx *c, uint32_t pd, uint32_t cq, uint32_t srq, uint8_t type,
	      uint32_t max_wr, uint64_t uh, struct qp *qp);
int destroy_qp(struct ctx *c, struct qp *qp, uint32_t *events);
int modify_qp(struct ctx *c, struct qp *qp, uint32_t mask, struct ib_uverbs_modify_qp *m);
int doorbell(struct ctx *c, uint32_t cmd, uint32_t qp_handle);
void post_recv(struct ringv *rq, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey);
void post_send(struct ringv *sq, uint64_t wr_id, uint8_t opcode, void *addr, uint32_t len,
	       uint32_t lkey, uint64_t raddr, uint32_t rkey);
int poll_cq(struct cq *cq, struct sroce_cqe *out, int max, double timeout);
int gid_index(const char *dev, bool v4, uint8_t gid[16]);
void *page_buf(size_t len);
int to_rts(struct ctx *c, struct qp *qp, const uint8_t dgid[16], int sgid, uint32_t dqpn);
bool wait_async(int fd, uint32_t type, struct ib_uverbs_async_event_desc *ev, int ms);

/* kverbs_late.c: a slow or stopped daemon */
int t_latehello(double wait);
int t_latedereg(double wait);
int t_killdestroy(double limit);
int t_uid(unsigned int uid, int want);

#endif /* KVERBS_H */
