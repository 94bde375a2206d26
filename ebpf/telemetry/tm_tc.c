// SPDX-License-Identifier: MIT
/*
 * The two tc questions libbpf's tc API does not answer: is anything else still
 * attached to a clsact hook (detach must not delete a qdisc that carries
 * somebody else's filters: ebpf/impair's, an operator's own), and is there a
 * clsact qdisc at all. One rtnetlink dump each (rtnetlink(7), tc(8)).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdint.h>

#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include "telemetry/tm_loader.h"

/* Send one dump request and call fn for each reply message; fn returns
 * non-zero to count the message. Returns the count or a negative errno. */
static int nl_dump(void *req, uint32_t len, int (*fn)(const struct nlmsghdr *h, int ifindex), int ifindex)
{
	char buf[16384];
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	int fd, count = 0, ret = 0;
	bool done = false;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	if (sendto(fd, req, len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		goto out;
	}
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out;
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = true;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				ret = e->error ? e->error : -EPROTO;
				goto out;
			}
			count += fn(h, ifindex);
		}
	}
	ret = count;
out:
	close(fd);
	return ret;
}

static int is_filter(const struct nlmsghdr *h, int ifindex)
{
	(void)ifindex;
	return h->nlmsg_type == RTM_NEWTFILTER;
}

int sroce_tm_tc_count_filters(int ifindex, bool ingress)
{
	struct {
		struct nlmsghdr n;
		struct tcmsg t;
	} req;

	memset(&req, 0, sizeof(req));
	req.n.nlmsg_len = NLMSG_LENGTH(sizeof(struct tcmsg));
	req.n.nlmsg_type = RTM_GETTFILTER;
	req.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.n.nlmsg_seq = 1;
	req.t.tcm_family = AF_UNSPEC;
	req.t.tcm_ifindex = ifindex;
	req.t.tcm_parent = TC_H_MAKE(TC_H_CLSACT, ingress ? TC_H_MIN_INGRESS : TC_H_MIN_EGRESS);
	return nl_dump(&req, req.n.nlmsg_len, is_filter, ifindex);
}

/* A qdisc of ifindex whose TCA_KIND is "clsact". */
static int is_clsact(const struct nlmsghdr *h, int ifindex)
{
	const struct tcmsg *t = NLMSG_DATA(h);
	int len = (int)h->nlmsg_len - NLMSG_LENGTH(sizeof(*t));
	const struct rtattr *a;

	if (h->nlmsg_type != RTM_NEWQDISC || t->tcm_ifindex != ifindex)
		return 0;
	for (a = (const struct rtattr *)((const char *)t + NLMSG_ALIGN(sizeof(*t))); RTA_OK(a, len);
	     a = RTA_NEXT(a, len)) {
		if (a->rta_type == TCA_KIND && RTA_PAYLOAD(a) >= sizeof("clsact") &&
		    strcmp((const char *)RTA_DATA(a), "clsact") == 0)
			return 1;
	}
	return 0;
}

int sroce_tm_tc_has_clsact(int ifindex)
{
	struct {
		struct nlmsghdr n;
		struct tcmsg t;
	} req;

	memset(&req, 0, sizeof(req));
	req.n.nlmsg_len = NLMSG_LENGTH(sizeof(struct tcmsg));
	req.n.nlmsg_type = RTM_GETQDISC;
	req.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.n.nlmsg_seq = 1;
	req.t.tcm_family = AF_UNSPEC;
	req.t.tcm_ifindex = ifindex;
	return nl_dump(&req, req.n.nlmsg_len, is_clsact, ifindex);
}
