// SPDX-License-Identifier: GPL-2.0
/*
 * Random loss and ECN CE marking for one direction of a fabric link.
 *
 * This kernel has no netem, gact or matchall, so the namespace fabric
 * (tools/sroce-fabric) attaches this program with `tc filter add ... bpf da`
 * on the clsact INGRESS hook of the receiving end of every veth. Ingress of the
 * next hop, not egress of the sender, because on egress a GSO skb still holds
 * up to 64 wire packets; the fabric's routers segment on their egress, so on
 * router-to-router and router-to-host links every skb seen here is one wire
 * packet. Only a host's own transmissions (host -> leaf) can still arrive as a
 * GSO batch; the stats count such skbs and the decision then covers the batch.
 *
 * Probabilities are map values the tool writes at run time (impair.h), drawn
 * against bpf_get_prandom_u32(), so an impairment changes without reloading.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <stdbool.h>
#include <stddef.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "ebpf/impair/impair.h"
#include "proto/roce.h"

/* IPv4 ECN field (RFC 3168 section 5): the two low bits of the TOS byte. */
#define ECN_MASK 0x3
#define ECN_NOT_ECT 0x0
#define ECN_CE 0x3
#define IP_FRAG_OFFSET_MASK 0x1fff

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct impair_config);
} impair_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct impair_stats);
} impair_stats SEC(".maps");

static __always_inline bool draw(__u64 threshold)
{
	return threshold != 0 && (__u64)bpf_get_prandom_u32() < threshold;
}

/* Rewrites the ECN field to CE and fixes the IPv4 header checksum over the
 * first 16-bit word of the header (version/IHL + TOS), RFC 1624 style. */
static __always_inline int set_ce(struct __sk_buff *skb, __u8 tos)
{
	__u8 first[2];

	if (bpf_skb_load_bytes(skb, ETH_HLEN, first, sizeof(first)))
		return -1;
	__u16 old_word = *(__u16 *)first;
	first[1] = tos | ECN_CE;
	__u16 new_word = *(__u16 *)first;
	if (bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), old_word, new_word,
				sizeof(__u16)))
		return -1;
	return bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct iphdr, tos), &first[1], 1, 0);
}

SEC("tc")
int impair(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct impair_stats *st = bpf_map_lookup_elem(&impair_stats, &zero);
	struct impair_config *cfg = bpf_map_lookup_elem(&impair_config, &zero);

	if (!st || !cfg)
		return TC_ACT_OK;

	__u64 segs = skb->gso_segs > 1 ? skb->gso_segs : 1;

	st->skbs++;
	st->packets += segs;
	st->bytes += skb->len;
	if (segs > 1)
		st->gso_skbs++;

	if (skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;

	struct iphdr iph;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, &iph, sizeof(iph)))
		return TC_ACT_OK;
	st->ipv4_packets += segs;

	bool udp = false;
	bool roce = false;

	if (iph.protocol == IPPROTO_UDP) {
		udp = true;
		st->udp_packets += segs;
		/* Only a first fragment carries the UDP header. */
		if ((bpf_ntohs(iph.frag_off) & IP_FRAG_OFFSET_MASK) == 0) {
			struct udphdr uh;
			__u32 l4 = ETH_HLEN + (__u32)iph.ihl * 4;

			if (bpf_skb_load_bytes(skb, l4, &uh, sizeof(uh)) == 0 &&
			    uh.dest == bpf_htons(SROCE_UDP_PORT)) {
				roce = true;
				st->roce_packets += segs;
			}
		}
	}

	__u8 ecn = iph.tos & ECN_MASK;

	if (ecn == ECN_CE)
		st->ce_seen += segs;

	if ((cfg->match == IMPAIR_MATCH_UDP && !udp) || (cfg->match == IMPAIR_MATCH_ROCE && !roce))
		return TC_ACT_OK;
	st->matched += segs;

	if (draw(cfg->loss_threshold)) {
		st->dropped += segs;
		return TC_ACT_SHOT;
	}

	if (draw(cfg->ce_threshold)) {
		if (ecn == ECN_NOT_ECT) {
			st->not_ect += segs;
			if (cfg->flags & IMPAIR_F_DROP_NOT_ECT) {
				st->dropped += segs;
				return TC_ACT_SHOT;
			}
		} else if (ecn != ECN_CE && set_ce(skb, iph.tos) == 0) {
			st->ce_marked += segs;
		}
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
