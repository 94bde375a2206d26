// SPDX-License-Identifier: MIT
/*
 * kmad: MADs through the kernel GSI QP (QP1) of two sroce devices, with
 * ib_umad as the unchanged kernel client: a vendor-class GET from DEV_A to
 * DEV_B and its GET_RESP back (IBA 13.4). The MADs go ib_mad -> rdma_sroce
 * QP1 -> GSI_SEND -> sroced (kmock --wire) -> GSI_RECV -> QP1 -> ib_mad,
 * the path ib_cm and rdma_cm use for connection setup.
 *
 *   kmad DEV_A DEV_B v4|v6
 *
 * v6 uses the devices' fd01:: GIDs and has ib_mad match the GET_RESP to its
 * request. v4 uses their IPv4 GIDs and answers with a SEND, as ib_cm does:
 * for RoCEv2 over IPv4 the 40 bytes before a UD payload hold the IPv4
 * header (Annex A17.4.5.1), so ib_mad's response matching, which compares
 * GRH GIDs, cannot match there (the same with rxe and RNICs).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <rdma/ib_user_mad.h>

#define VENDOR_CLASS 0x09	/* IBA 13.4.4: vendor-specific range 1 */
#define METHOD_GET 0x01
#define METHOD_SEND 0x03
#define METHOD_GET_RESP 0x81
#define QP1_QKEY 0x80010000u

struct mad {
	uint8_t base_version, mgmt_class, class_version, method;
	uint16_t status, class_specific;
	uint64_t tid;
	uint16_t attr_id, resv;
	uint32_t attr_mod;
	uint8_t data[232];
} __attribute__((packed));

struct umad {
	struct ib_user_mad_hdr hdr;
	struct mad mad;
};

static int checks, failures;

/* ib_mad puts the agent's own number in the upper half of a request's TID
 * (IBA 13.4.6.4 leaves the TID to the requester); the lower half is ours. */
static bool same_tid(uint64_t a, uint64_t b)
{
	return (be64toh(a) & 0xffffffffu) == (be64toh(b) & 0xffffffffu);
}

static bool check(bool ok, const char *what)
{
	checks++;
	failures += !ok;
	printf("%s %s\n", ok ? "PASS" : "FAIL", what);
	return ok;
}

/* The umad node of DEV's port 1, opened; -1 if none. */
static int open_umad(const char *dev)
{
	DIR *d = opendir("/sys/class/infiniband_mad");
	struct dirent *de;
	char p[300], name[64];
	int fd = -1;

	if (!d)
		return -1;
	while ((de = readdir(d)) && fd < 0) {
		FILE *f;

		if (strncmp(de->d_name, "umad", 4))
			continue;
		snprintf(p, sizeof(p), "/sys/class/infiniband_mad/%.32s/ibdev", de->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f) && !strncmp(name, dev, strlen(dev)) &&
		    name[strlen(dev)] == '\n') {
			snprintf(p, sizeof(p), "/dev/infiniband/%.32s", de->d_name);
			fd = open(p, O_RDWR);
		}
		fclose(f);
	}
	closedir(d);
	return fd;
}

/* A GID of DEV whose text starts with prefix (index and value), from sysfs. */
static int find_gid(const char *dev, const char *prefix, uint8_t gid[16])
{
	char p[256], s[64];

	for (int i = 0; i < 32; i++) {
		unsigned int w[8];
		FILE *f;

		snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports/1/gids/%d", dev, i);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(s, sizeof(s), f) && !strncmp(s, prefix, strlen(prefix)) &&
		    sscanf(s, "%x:%x:%x:%x:%x:%x:%x:%x", &w[0], &w[1], &w[2], &w[3], &w[4], &w[5],
			   &w[6], &w[7]) == 8) {
			for (int k = 0; k < 8; k++) {
				gid[2 * k] = (uint8_t)(w[k] >> 8);
				gid[2 * k + 1] = (uint8_t)w[k];
			}
			fclose(f);
			return i;
		}
		fclose(f);
	}
	return -1;
}

static int reg_agent(int fd, int method)
{
	struct ib_user_mad_reg_req req = { .qpn = 1, .mgmt_class = VENDOR_CLASS,
					   .mgmt_class_version = 1 };

	req.method_mask[0] = 1ul << method;
	if (ioctl(fd, IB_USER_MAD_ENABLE_PKEY) < 0 || ioctl(fd, IB_USER_MAD_REGISTER_AGENT, &req) < 0)
		return -1;
	return (int)req.id;
}

static bool read_mad(int fd, struct umad *m, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && read(fd, m, sizeof(*m)) >= (ssize_t)sizeof(m->hdr);
}

int main(int argc, char **argv)
{
	uint8_t gid_a[16], gid_b[16];
	struct umad req = { 0 }, got = { 0 }, resp = { 0 };
	int fa, fb, ia, ib, agent_a, agent_b;

	bool v6 = argc == 4 && !strcmp(argv[3], "v6");
	const char *prefix = v6 ? "fd01:" : "0000:0000:0000:0000:0000:ffff:";

	if (argc != 4) {
		fprintf(stderr, "usage: kmad DEV_A DEV_B v4|v6\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("kmad: %s GIDs\n", v6 ? "IPv6 (fd01::)" : "IPv4");
	fa = open_umad(argv[1]);
	fb = open_umad(argv[2]);
	ia = find_gid(argv[1], prefix, gid_a);
	ib = find_gid(argv[2], prefix, gid_b);
	if (!check(fa >= 0 && fb >= 0, "umad nodes of both devices") ||
	    !check(ia >= 0 && ib >= 0, "GIDs of that kind on both devices"))
		return 1;
	agent_a = reg_agent(fa, METHOD_SEND);
	agent_b = reg_agent(fb, METHOD_GET);
	if (!check(agent_a >= 0 && agent_b >= 0, "umad agents registered (QP1, vendor class)"))
		return 1;

	req.hdr.id = (uint32_t)agent_a;
	req.hdr.timeout_ms = v6 ? 3000 : 0;
	req.hdr.length = sizeof(req);
	req.hdr.qpn = htonl(1);
	req.hdr.qkey = htonl(QP1_QKEY);
	req.hdr.grh_present = 1;
	req.hdr.gid_index = (uint8_t)ia;
	req.hdr.hop_limit = 64;
	memcpy(req.hdr.gid, gid_b, 16);
	req.mad.base_version = 1;
	req.mad.mgmt_class = VENDOR_CLASS;
	req.mad.class_version = 1;
	req.mad.method = METHOD_GET;
	req.mad.tid = htobe64(0x5352000012345678ull);
	req.mad.attr_id = htons(0x10);
	for (size_t i = 0; i < sizeof(req.mad.data); i++)
		req.mad.data[i] = (uint8_t)(i ^ 0x5a);
	/* ib_umad builds the AH here: for RoCE the kernel resolves B's MAC (ARP/ND) within 1 s. */
	if (!check(write(fa, &req, sizeof(req)) == sizeof(req), "A: GET written to QP1 (ib_umad)"))
		printf("    write: %s\n", strerror(errno));

	check(read_mad(fb, &got, 5000) && got.hdr.status == 0, "B: GET received through QP1");
	check(got.mad.method == METHOD_GET && same_tid(got.mad.tid, req.mad.tid) &&
		      !memcmp(got.mad.data, req.mad.data, sizeof(got.mad.data)),
	      "B: method, TID and payload intact");
	check(got.hdr.grh_present && !memcmp(got.hdr.gid, gid_a, 16) && ntohl(got.hdr.qpn) == 1,
	      v6 ? "B: source is A's GID and QP1 (GRH parsed by ib_core)" :
		   "B: source is A's GID and QP1 (IPv4 header parsed by ib_core)");

	resp.hdr = got.hdr;
	resp.hdr.id = (uint32_t)agent_b;
	resp.hdr.timeout_ms = 0;
	resp.hdr.retries = 0;
	resp.hdr.length = sizeof(resp);
	resp.hdr.qkey = htonl(QP1_QKEY);
	resp.hdr.gid_index = (uint8_t)ib;
	resp.mad = got.mad;
	resp.mad.method = v6 ? METHOD_GET_RESP : METHOD_SEND;
	if (!v6)
		resp.mad.tid = htobe64(0x99);
	resp.mad.data[0] = 0xee;
	check(write(fb, &resp, sizeof(resp)) == sizeof(resp),
	      v6 ? "B: GET_RESP written back" : "B: SEND written back");
	memset(&got, 0, sizeof(got));
	if (v6)
		check(read_mad(fa, &got, 5000) && got.hdr.status == 0 &&
			      got.mad.method == METHOD_GET_RESP && same_tid(got.mad.tid, req.mad.tid) &&
			      got.mad.data[0] == 0xee,
		      "A: GET_RESP matched to its request by ib_mad (TID, GIDs)");
	else
		check(read_mad(fa, &got, 5000) && got.hdr.status == 0 &&
			      got.mad.method == METHOD_SEND && got.mad.data[0] == 0xee &&
			      !memcmp(got.hdr.gid, gid_b, 16),
		      "A: SEND from B's GID received");
	printf("RESULT kmad %d checks %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
