/* sroce-datacheck: every byte of SEND, SEND with immediate, WRITE, WRITE with immediate and
 * READ, and the results of both atomics, checked across two hosts (datacheck.h).
 *
 *   server: sroce-datacheck [-d DEV] [-g GID] [-p PORT] [--rnr-retry N] [--rnr-timer N]
 *   client: sroce-datacheck [-d DEV] [-g GID] [-p PORT] [-n STEPS] [-s MAX] [-S SEED]
 *                           [-r SLOTS] [-m MIN] [--corrupt STEP] [--late-recv MS|never]
 *                           [--rnr-retry N] [--rnr-timer N] SERVER
 *
 * The client's plan parameters win (it sends them first). The steps run in rounds of SLOTS:
 * the server fills its buffers with canaries, posts one receive per step and says go (TCP);
 * the client posts every step of the round (an 8-byte marker SEND after each operation that
 * consumes no receive), checks its completions, READ data and atomic results, and says done;
 * the server checks each receive's completion and buffers, and the atomic targets, and gives
 * its verdict. Exit 0 only if every check on both sides passed; the last line says what was
 * checked. --corrupt STEP flips one byte of that step's data on the client, to show that the
 * other side notices.
 *
 * RNR (IBA 9.7.5): --late-recv MS has the server post each round's receives MS ms after its
 * go, so the client's SENDs meet RNR NAKs until then; --late-recv never has it post none, and
 * the client then expects, in the first round, success up to the first operation that needs a
 * receive, RNR_RETRY_EXC_ERR for that one and WR_FLUSH_ERR for the rest (and needs a finite
 * --rnr-retry). --rnr-retry N (0-7, 7 = forever) and --rnr-timer N (the responder's
 * min_rnr_timer, 0-31 as in IBA table 45) set this side's QP; the defaults are 7 and 12. */
#include "datacheck.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "datacheck_io.h"

static const char *g_server;
static const char *g_dev;
static int g_gid;
static int g_port = 18800;
static long g_corrupt = -1;
static struct dc_params g_p = {.steps = 400, .max_size = 65536, .slots = 16, .max_sge = 3};
static bool g_seeded;
static int g_rnr_retry = 7, g_rnr_timer = 12;

static void usage(void)
{
	fprintf(stderr, "usage: sroce-datacheck [-d DEV] [-g GID] [-p PORT] [-n STEPS] [-s MAX] "
			"[-S SEED] [-r SLOTS] [-m MIN] [--corrupt STEP] [--late-recv MS|never] "
			"[--rnr-retry 0-7] [--rnr-timer 0-31] [SERVER]\n");
	exit(2);
}

static void parse(int argc, char **argv)
{
	static const struct option longs[] = {{"corrupt", required_argument, 0, 'C'},
					      {"late-recv", required_argument, 0, 'L'},
					      {"rnr-retry", required_argument, 0, 'R'},
					      {"rnr-timer", required_argument, 0, 'T'},
					      {0, 0, 0, 0}};
	int c;
	while ((c = getopt_long(argc, argv, "d:g:p:n:s:S:r:m:", longs, NULL)) != -1) {
		char *end = NULL;
		unsigned long long v = 0;
		if (c == 'L' && strcmp(optarg, "never") == 0) {
			g_p.late_recv_ms = DC_LATE_NEVER;
			continue;
		}
		if (c != 'd') {
			errno = 0;
			v = strtoull(optarg, &end, 0);
			if (errno || !end || *end)
				usage();
		}
		switch (c) {
		case 'd': g_dev = optarg; break;
		case 'g': g_gid = (int)v; break;
		case 'p': g_port = (int)v; break;
		case 'n': g_p.steps = (uint32_t)v; break;
		case 's': g_p.max_size = (uint32_t)v; break;
		case 'S': g_p.seed = v; g_seeded = true; break;
		case 'r': g_p.slots = (uint32_t)v; break;
		case 'm': g_p.min_size = (uint32_t)v; break;
		case 'C': g_corrupt = (long)v; break;
		case 'L':
			if (v > 60000) {
				fprintf(stderr, "datacheck: --late-recv takes 0..60000 ms or never (the "
						"client waits %d s for a completion)\n", DC_POLL_SECONDS);
				exit(2);
			}
			g_p.late_recv_ms = (uint32_t)v;
			break;
		case 'R': g_rnr_retry = v <= 7 ? (int)v : -1; break;
		case 'T': g_rnr_timer = v <= 31 ? (int)v : -1; break;
		default: usage();
		}
	}
	if (optind + 1 == argc)
		g_server = argv[optind];
	else if (optind != argc)
		usage();
	if (g_p.steps == 0 || g_p.max_size == 0 || g_p.max_size > (64u << 20) || g_p.slots == 0 ||
	    g_p.slots > 512 || g_p.min_size > g_p.max_size) {
		fprintf(stderr, "datacheck: -n, -s (1..64 MiB), -r (1..512) must be positive, -m <= -s\n");
		exit(2);
	}
	if (g_rnr_retry < 0 || g_rnr_timer < 0) {
		fprintf(stderr, "datacheck: --rnr-retry takes 0..7 (7: forever), --rnr-timer 0..31 "
				"(IBA table 45)\n");
		exit(2);
	}
	if (g_p.late_recv_ms == DC_LATE_NEVER && g_rnr_retry == 7) {
		fprintf(stderr, "datacheck: --late-recv never needs --rnr-retry 0..6: 7 retries "
				"forever\n");
		exit(2);
	}
}

/* The wire of the TCP exchange: fixed-width, big-endian. */
struct dc_wire_params {
	uint64_t seed;
	uint32_t steps, max_size, slots, max_sge, mtu, min_size, late_recv_ms, pad;
};
struct dc_wire_qp {
	uint32_t qpn, psn, rkey, pad;
	uint64_t addr;
	uint8_t gid[16];
};

int main(int argc, char **argv)
{
	parse(argc, argv);
	int fd = g_server ? dc_tcp_connect(g_server, g_port) : dc_tcp_accept(g_port);
	if (fd < 0)
		return 1;
	struct dc_ctx ctx;
	if (dc_open(&ctx, g_dev, g_gid))
		return 1;
	ctx.rnr_retry = (uint8_t)g_rnr_retry;
	ctx.min_rnr_timer = (uint8_t)g_rnr_timer;

	/* The plan's parameters: the client's. */
	struct dc_wire_params wp;
	if (g_server) {
		if (!g_seeded && getrandom(&g_p.seed, sizeof(g_p.seed), 0) != sizeof(g_p.seed))
			g_p.seed = (uint64_t)time(NULL);
		g_p.mtu = ctx.mtu;
		if (g_p.max_sge > ctx.max_sge)
			g_p.max_sge = ctx.max_sge;
		wp = (struct dc_wire_params){htobe64(g_p.seed), htonl(g_p.steps), htonl(g_p.max_size),
					     htonl(g_p.slots), htonl(g_p.max_sge), htonl(g_p.mtu),
					     htonl(g_p.min_size), htonl(g_p.late_recv_ms), 0};
		if (dc_send_all(fd, &wp, sizeof(wp)))
			return 1;
	} else {
		if (dc_recv_all(fd, &wp, sizeof(wp)))
			return 1;
		g_p = (struct dc_params){be64toh(wp.seed), ntohl(wp.steps), ntohl(wp.max_size),
					 ntohl(wp.slots), ntohl(wp.max_sge), ntohl(wp.mtu),
					 ntohl(wp.min_size), ntohl(wp.late_recv_ms)};
		if (g_p.slots == 0 || g_p.slots > 512 || g_p.max_size > (64u << 20) ||
		    g_p.max_sge == 0 || g_p.mtu == 0) {
			fprintf(stderr, "datacheck: the client sent impossible parameters\n");
			return 1;
		}
	}
	printf("datacheck: %s, seed 0x%llx, %u steps, sizes %u..%u B, %u per round, %u SGEs, "
	       "MTU %u\n", g_server ? "client" : "server", (unsigned long long)g_p.seed, g_p.steps,
	       g_p.min_size, g_p.max_size, g_p.slots, g_p.max_sge, g_p.mtu);
	if (g_p.late_recv_ms == DC_LATE_NEVER)
		printf("datacheck: the server never posts its receives; rnr_retry %d, min_rnr_timer "
		       "%d\n", g_rnr_retry, g_rnr_timer);
	else if (g_p.late_recv_ms)
		printf("datacheck: the server posts its receives %u ms late; rnr_retry %d, "
		       "min_rnr_timer %d\n", g_p.late_recv_ms, g_rnr_retry, g_rnr_timer);
	fflush(stdout);

	struct dc_layout l;
	dc_layout_of(&g_p, &l);
	if (dc_setup(&ctx, g_server ? l.client_len : l.server_len, 2 * g_p.slots + 2))
		return 1;

	struct dc_wire_qp mine = {htonl(ctx.qp->qp_num), htonl(ctx.psn), htonl(ctx.mr->rkey), 0,
				  htobe64((uint64_t)(uintptr_t)ctx.buf), {0}};
	memcpy(mine.gid, ctx.gid.raw, 16);
	struct dc_wire_qp peer;
	if (dc_send_all(fd, &mine, sizeof(mine)) || dc_recv_all(fd, &peer, sizeof(peer)))
		return 1;
	union ibv_gid pgid;
	memcpy(pgid.raw, peer.gid, 16);
	if (dc_connect_qp(&ctx, ntohl(peer.qpn), ntohl(peer.psn), &pgid))
		return 1;
	/* Both QPs in RTS before the first round (a barrier). */
	if (dc_sync(fd, 'R'))
		return 1;

	struct dc_step *steps = calloc(g_p.steps, sizeof(*steps));
	uint64_t words[DC_WORDS];
	for (uint32_t w = 0; w < DC_WORDS; w++)
		words[w] = dc_word_init(g_p.seed, w);
	if (!steps)
		return 1;
	dc_plan(&g_p, steps, words);

	struct dc_run run = {.p = &g_p, .l = &l, .steps = steps, .final_words = words,
			     .ctx = &ctx, .fd = fd, .corrupt = g_corrupt,
			     .remote_addr = be64toh(peer.addr), .rkey = ntohl(peer.rkey)};
	int rc = g_server ? dc_run_client(&run) : dc_run_server(&run);
	printf("datacheck: %s %s: %u steps (", g_server ? "client" : "server", rc ? "FAIL" : "OK",
	       run.done);
	for (int k = 0; k < DC_NOPS; k++)
		printf("%s%s %u", k ? ", " : "", dc_op_name((enum dc_op)k), run.count[k]);
	printf("), %llu bytes compared, seed 0x%llx\n", (unsigned long long)run.bytes_checked,
	       (unsigned long long)g_p.seed);
	dc_close(&ctx);
	free(steps);
	close(fd);
	return rc ? 1 : 0;
}
