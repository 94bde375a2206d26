/* sroce-datacheck: verbs setup, the TCP side channel, and the two roles (datacheck.c). */
#ifndef SROCE_DATACHECK_IO_H
#define SROCE_DATACHECK_IO_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "datacheck.h"

struct dc_ctx {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	union ibv_gid gid;
	int gid_index;
	uint32_t psn;
	uint32_t mtu;
	enum ibv_mtu mtu_enum;
	uint32_t max_sge;
	uint8_t rd_atom;
	/* This side's QP: its requester's rnr_retry, its responder's min_rnr_timer
	 * (--rnr-retry, --rnr-timer; IBA table 45 encoding). */
	uint8_t rnr_retry;
	uint8_t min_rnr_timer;
};

struct dc_run {
	const struct dc_params *p;
	const struct dc_layout *l;
	const struct dc_step *steps;
	const uint64_t *final_words;
	struct dc_ctx *ctx;
	int fd;
	long corrupt;
	uint64_t remote_addr;
	uint32_t rkey;
	/* results */
	uint32_t done;
	uint32_t count[DC_NOPS];
	unsigned long long bytes_checked;
};

int dc_tcp_connect(const char *host, int port);
int dc_tcp_accept(int port);
int dc_send_all(int fd, const void *p, size_t n);
int dc_recv_all(int fd, void *p, size_t n);
/* Sends c and expects c back: a barrier. */
int dc_sync(int fd, char c);
/* True when the peer sent DC_ABORT or closed the connection: it gave up. */
#define DC_ABORT 'X'
int dc_peer_spoke(int fd);

int dc_open(struct dc_ctx *c, const char *dev, int gid_index); /* rnr_retry 7, min_rnr_timer 12 */
int dc_setup(struct dc_ctx *c, size_t len, uint32_t send_depth);
int dc_connect_qp(struct dc_ctx *c, uint32_t qpn, uint32_t psn, const union ibv_gid *gid);
void dc_close(struct dc_ctx *c);
/* One completion, or -1 after DC_POLL_SECONDS without one (or when the peer gave up). */
#define DC_POLL_SECONDS 120
int dc_poll_one(struct dc_ctx *c, int fd, struct ibv_wc *wc);

int dc_run_client(struct dc_run *r);
int dc_run_server(struct dc_run *r);

#endif
