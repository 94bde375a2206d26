// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * sroce_xdp: the XDP program the af_xdp PMD attaches for sroced's DPDK
 * datapath (dpdk.xdp_prog = "", docs/dpdk.md). It steers RoCEv2 only, i.e.
 * IPv4/UDP and IPv6/UDP (no extension header: Annex A17.4.5.1) to destination
 * port 4791 (IBA Annex A17.2.1, proto/roce.h), to the
 * AF_XDP socket of the receiving queue, and passes everything else to the
 * kernel: ARP and IPv6 neighbour discovery keep working (the datapath takes
 * its next-hop MAC addresses from the kernel's neighbour table), and so do
 * ssh, the TCP exchange of perftest, ICMP.
 *
 * The af_xdp PMD loads this object itself (vdev argument xdp_prog=) and puts
 * each queue's socket into the map it finds by the name "xsks_map".
 *
 * Passed as well, on purpose: IPv4 fragments (a fragmented RoCEv2 packet is
 * not one the datapath could take; the kernel reassembles or drops it), IP
 * options (sroce's ICRC rule assumes a 20-byte header, proto/icrc.h), VLAN
 * tags (the datapath parses untagged frames only).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "proto/roce.h"

/* Queue index -> AF_XDP socket, filled by the PMD. 64 queues at most. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

/* Verdict counters (per CPU): what `bpftool map dump name sroce_xdp_stats`
 * shows and what the tests assert on. */
enum sroce_xdp_stat {
	SROCE_XDP_STEERED = 0, /* RoCEv2: handed to bpf_redirect_map */
	SROCE_XDP_PASSED = 1,  /* everything else: to the kernel */
	SROCE_XDP_NSTATS = 2,
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SROCE_XDP_NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} sroce_xdp_stats SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&sroce_xdp_stats, &which);

	if (v)
		*v += 1;
}

static __always_inline int pass(void)
{
	count(SROCE_XDP_PASSED);
	return XDP_PASS;
}

SEC("xdp")
int sroce_xdp_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct ipv6hdr *ip6;
	struct udphdr *udp;

	if ((void *)(eth + 1) > end)
		return pass();
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		/* ICMPv6 (neighbour discovery) and extension headers go to the kernel. */
		ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end || ip6->version != 6 || ip6->nexthdr != IPPROTO_UDP)
			return pass();
		udp = (void *)(ip6 + 1);
		if ((void *)(udp + 1) > end || udp->dest != bpf_htons(SROCE_UDP_PORT))
			return pass();
		count(SROCE_XDP_STEERED);
		return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
	}
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return pass();
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return pass();
	/* More fragments, or a non-zero fragment offset. */
	if (ip->frag_off & bpf_htons(0x3fff))
		return pass();
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end || udp->dest != bpf_htons(SROCE_UDP_PORT))
		return pass();
	count(SROCE_XDP_STEERED);
	/* No socket on this queue (yet): the kernel gets it rather than nobody. */
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
