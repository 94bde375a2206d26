/* sroce-datacheck: the device, the RC QP, and the TCP side channel (datacheck_io.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "datacheck_io.h"

static void set_timeouts(int fd)
{
	struct timeval tv = {DC_POLL_SECONDS, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int dc_tcp_connect(const char *host, int port)
{
	char service[16];
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
	snprintf(service, sizeof(service), "%d", port);
	int e = getaddrinfo(host, service, &hints, &res);
	if (e) {
		fprintf(stderr, "datacheck: %s: %s\n", host, gai_strerror(e));
		return -1;
	}
	/* The server may not listen yet: retry for up to 30 s. */
	for (int attempt = 0; attempt < 300; attempt++) {
		for (struct addrinfo *a = res; a; a = a->ai_next) {
			int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
			if (fd < 0)
				continue;
			if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
				freeaddrinfo(res);
				set_timeouts(fd);
				return fd;
			}
			close(fd);
		}
		usleep(100000);
	}
	fprintf(stderr, "datacheck: cannot connect to %s port %d: %s\n", host, port, strerror(errno));
	freeaddrinfo(res);
	return -1;
}

int dc_tcp_accept(int port)
{
	int one = 1, zero = 0;
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
					  .sin6_addr = IN6ADDR_ANY_INIT};
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(fd, (struct sockaddr *)&a6, sizeof(a6)) != 0) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0) { /* no IPv6 here */
		struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_ANY)};
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&a4, sizeof(a4)) != 0) {
			fprintf(stderr, "datacheck: bind port %d: %s\n", port, strerror(errno));
			close(fd);
			return -1;
		}
	}
	if (listen(fd, 1) != 0) {
		fprintf(stderr, "datacheck: listen: %s\n", strerror(errno));
		close(fd);
		return -1;
	}
	struct pollfd pfd = {fd, POLLIN, 0};
	if (poll(&pfd, 1, DC_POLL_SECONDS * 1000) != 1) {
		fprintf(stderr, "datacheck: no client within %d s\n", DC_POLL_SECONDS);
		close(fd);
		return -1;
	}
	int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	close(fd);
	if (c < 0) {
		fprintf(stderr, "datacheck: accept: %s\n", strerror(errno));
		return -1;
	}
	set_timeouts(c);
	return c;
}

int dc_send_all(int fd, const void *p, size_t n)
{
	const char *b = p;
	while (n) {
		ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
		if (k <= 0) {
			fprintf(stderr, "datacheck: TCP send: %s\n", k ? strerror(errno) : "closed");
			return -1;
		}
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

int dc_recv_all(int fd, void *p, size_t n)
{
	char *b = p;
	while (n) {
		ssize_t k = recv(fd, b, n, 0);
		if (k <= 0) {
			fprintf(stderr, "datacheck: TCP recv: %s\n", k ? strerror(errno) : "the peer closed");
			return -1;
		}
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

int dc_sync(int fd, char c)
{
	char got = 0;
	if (dc_send_all(fd, &c, 1) || dc_recv_all(fd, &got, 1))
		return -1;
	if (got != c) {
		fprintf(stderr, "datacheck: out of step with the peer (got '%c', expected '%c')\n", got, c);
		return -1;
	}
	return 0;
}

int dc_peer_spoke(int fd)
{
	char b = 0;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n == 1 && b == DC_ABORT);
}

int dc_open(struct dc_ctx *c, const char *dev, int gid_index)
{
	memset(c, 0, sizeof(*c));
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *d = NULL;
	for (int i = 0; list && i < n; i++)
		if (!dev || strcmp(ibv_get_device_name(list[i]), dev) == 0) {
			d = list[i];
			break;
		}
	if (!d) {
		fprintf(stderr, "datacheck: no RDMA device%s%s\n", dev ? " named " : "", dev ? dev : "");
		ibv_free_device_list(list);
		return -1;
	}
	c->ctx = ibv_open_device(d);
	ibv_free_device_list(list);
	if (!c->ctx) {
		fprintf(stderr, "datacheck: ibv_open_device: %s\n", strerror(errno));
		return -1;
	}
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	if (ibv_query_device(c->ctx, &da) || ibv_query_port(c->ctx, 1, &pa) ||
	    ibv_query_gid(c->ctx, 1, gid_index, &c->gid)) {
		fprintf(stderr, "datacheck: query device/port/gid %d: %s\n", gid_index, strerror(errno));
		return -1;
	}
	if (da.atomic_cap == IBV_ATOMIC_NONE) {
		fprintf(stderr, "datacheck: %s has no atomics (atomic_cap NONE)\n",
			ibv_get_device_name(c->ctx->device));
		return -1;
	}
	c->gid_index = gid_index;
	c->mtu_enum = pa.active_mtu;
	c->mtu = 128u << pa.active_mtu;
	c->max_sge = da.max_sge < DC_MAX_SGE ? (uint32_t)da.max_sge : DC_MAX_SGE;
	c->rd_atom = (uint8_t)(da.max_qp_rd_atom < 16 ? da.max_qp_rd_atom : 16);
	if (c->rd_atom == 0)
		c->rd_atom = 1;
	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)time(NULL);
	c->psn = r & 0xffffff;
	c->rnr_retry = 7;
	c->min_rnr_timer = 12; /* 0.64 ms */
	return 0;
}

int dc_setup(struct dc_ctx *c, size_t len, uint32_t send_depth)
{
	c->len = len;
	if (posix_memalign((void **)&c->buf, 4096, len)) {
		fprintf(stderr, "datacheck: cannot allocate %zu bytes\n", len);
		return -1;
	}
	memset(c->buf, 0, len);
	c->pd = ibv_alloc_pd(c->ctx);
	if (!c->pd) {
		fprintf(stderr, "datacheck: ibv_alloc_pd: %s\n", strerror(errno));
		return -1;
	}
	c->mr = ibv_reg_mr(c->pd, c->buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	if (!c->mr) {
		fprintf(stderr, "datacheck: ibv_reg_mr %zu bytes: %s\n", len, strerror(errno));
		return -1;
	}
	c->cq = ibv_create_cq(c->ctx, (int)(2 * send_depth + 8), NULL, NULL, 0);
	if (!c->cq) {
		fprintf(stderr, "datacheck: ibv_create_cq: %s\n", strerror(errno));
		return -1;
	}
	struct ibv_qp_init_attr ia = {.send_cq = c->cq, .recv_cq = c->cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = send_depth, .max_recv_wr = send_depth,
					      .max_send_sge = c->max_sge, .max_recv_sge = 1}};
	c->qp = ibv_create_qp(c->pd, &ia);
	if (!c->qp) {
		fprintf(stderr, "datacheck: ibv_create_qp (%u WRs, %u SGEs): %s\n", send_depth,
			c->max_sge, strerror(errno));
		return -1;
	}
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_ATOMIC};
	if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					     IBV_QP_ACCESS_FLAGS)) {
		fprintf(stderr, "datacheck: QP to INIT: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

int dc_connect_qp(struct dc_ctx *c, uint32_t qpn, uint32_t psn, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = c->mtu_enum,
				.dest_qp_num = qpn, .rq_psn = psn, .max_dest_rd_atomic = c->rd_atom,
				.min_rnr_timer = c->min_rnr_timer,
				.ah_attr = {.is_global = 1, .port_num = 1,
					    .grh = {.dgid = *gid, .sgid_index = (uint8_t)c->gid_index,
						    .hop_limit = 64}}};
	if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					     IBV_QP_MIN_RNR_TIMER)) {
		fprintf(stderr, "datacheck: QP to RTR: %s\n", strerror(errno));
		return -1;
	}
	/* A checker of data, not of speed: timeout 18 (4.096 us x 2^18 = 1.07 s) x 7 retries
	 * rides out a daemon starved for seconds (a loaded TCG VM stalled the default 14,
	 * 67 ms, into "retry counter exceeded"). */
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 18, .retry_cnt = 7,
				 .rnr_retry = c->rnr_retry, .sq_psn = c->psn, .max_rd_atomic = c->rd_atom};
	if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
		fprintf(stderr, "datacheck: QP to RTS: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

void dc_close(struct dc_ctx *c)
{
	if (c->qp)
		ibv_destroy_qp(c->qp);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->ctx)
		ibv_close_device(c->ctx);
	free(c->buf);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int dc_poll_one(struct dc_ctx *c, int fd, struct ibv_wc *wc)
{
	const double deadline = now_s() + DC_POLL_SECONDS;
	for (unsigned spin = 0;; spin++) {
		int n = ibv_poll_cq(c->cq, 1, wc);
		if (n < 0) {
			fprintf(stderr, "datacheck: ibv_poll_cq: %d\n", n);
			return -1;
		}
		if (n == 1)
			return 0;
		if ((spin & 255) == 255) {
			if (now_s() > deadline) {
				fprintf(stderr, "datacheck: FAIL: no completion within %d s\n",
					DC_POLL_SECONDS);
				return -1;
			}
			if (fd >= 0 && dc_peer_spoke(fd)) {
				fprintf(stderr, "datacheck: FAIL: the peer gave up (see its output)\n");
				return -1;
			}
		}
		if (spin > 64)
			usleep(50);
	}
}
