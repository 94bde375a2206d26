/* SPDX-License-Identifier: MIT */
/* kmock's shared state (see kmock.c). */
#ifndef KMOCK_H
#define KMOCK_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <infiniband/verbs.h>

#include "sroce_abi.h"

#define MAX_DEVS 4
#define MAX_OBJS 1024

enum kind { K_FREE, K_PD, K_MR, K_CQ, K_QP, K_SRQ, K_AH };

struct map {
	uint8_t *base;
	size_t bytes;
};

struct ring {
	struct sroce_ring *hdr;
	uint8_t *entries;
	uint32_t cons; /* ours, for SQ/RQ/SRQ */
};

struct obj {
	enum kind kind;
	int dev;
	uint32_t ctx;
	uint32_t handle; /* PD/CQ/SRQ/AH handle, MR lkey, QP qpn */
	uint64_t user_handle;
	struct map map;
	/* MR */
	uint64_t addr, length;
	uint64_t first_byte;
	uint32_t rkey, access;
	bool writable;
	/* CQ */
	struct ring cq;
	/* QP */
	struct ring sq, rq;
	uint32_t send_cq, recv_cq, srq, qp_type, state, qkey;
	bool sig_all;
	/* SRQ */
	struct ring srqr;
	uint32_t srq_limit;
};

struct dev {
	const char *name;
	int fd;
	struct sroce_kgid gids[32];
};

extern struct dev devs[MAX_DEVS];
extern int ndevs;
extern struct obj objs[MAX_OBJS];
extern FILE *log_file;
extern volatile sig_atomic_t stop;
extern bool wire, hang;
/* an async event to send after the reply that caused it */
struct post_event {
	bool set;
	struct sroce_async_event_desc ev;
};
extern struct post_event post_event;
struct kmock_stats {
	unsigned long requests, replies_err, closes, doorbells, cqes, events;
	unsigned long gsi_in, gsi_out, gids, left_at_close, mr_checked;
	unsigned long ro_refused, ro_violations, late_touched;
};
extern struct kmock_stats st;

void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char *what);
struct obj *find(enum kind k, int dev, uint32_t ctx, uint32_t handle);
struct obj *new_obj(enum kind k, int dev, uint32_t ctx);
void free_obj(struct obj *o);
int map_region(int dev, const struct sroce_kmap *m, bool writable, struct map *out);
void ring_at(struct ring *r, uint8_t *at);
int send_msg(int dev, uint32_t kind, uint32_t ctx, const void *a, size_t alen,
	     const void *b, size_t blen);

/* kmock_engine.c: the loopback engine */
void run_engine(void);
/* kmock_ops.c: one request, the status and the reply body */
int handle(int dev, uint32_t ctx, uint16_t op, const uint8_t *body, size_t blen,
	   uint8_t *resp, size_t *rlen);

#endif /* KMOCK_H */
