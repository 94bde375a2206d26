/* SPDX-License-Identifier: MIT */
/*
 * Link impairments for the namespace fabric (tools/sroce-fabric): the layout of
 * the two maps shared by impair.bpf.c and the tool that sets and reads them.
 *
 * The tool (tools/sroce-fabric/sroce_fabric/impair.py) packs and unpacks these
 * structs with Python's struct module ("<QQII" and "<12Q"): every field is a
 * fixed-width little-endian integer, no padding is implicit, and the sizes are
 * pinned below so a change here that the tool does not follow fails to build.
 */
#ifndef SROCE_EBPF_IMPAIR_H
#define SROCE_EBPF_IMPAIR_H

#include <linux/types.h>

/* Which packets the loss and CE decisions apply to. Non-IPv4 frames (ARP in
 * particular) are never dropped: losing neighbour resolution would turn a
 * 1 % loss into a dead link for seconds, which is not what anyone asks for. */
enum impair_match {
	IMPAIR_MATCH_IPV4 = 0, /* every IPv4 packet */
	IMPAIR_MATCH_UDP = 1,  /* IPv4 UDP only */
	IMPAIR_MATCH_ROCE = 2, /* IPv4 UDP to SROCE_UDP_PORT (4791) only */
};

enum impair_flags {
	/* A packet picked for a CE mark that is not ECN-capable (ECN field 00)
	 * is dropped, as a RED/ECN switch queue does (RFC 3168 section 5);
	 * without the flag it passes unmarked. */
	IMPAIR_F_DROP_NOT_ECT = 1u << 0,
};

/* Array map "impair_config", one entry (key 0). A decision fires when
 * bpf_get_prandom_u32() < threshold, so threshold = p * 2^32 and 2^32 means
 * "always"; 0 disables it. */
struct impair_config {
	__u64 loss_threshold;
	__u64 ce_threshold;
	__u32 match; /* enum impair_match */
	__u32 flags; /* enum impair_flags */
};

/* Per-CPU array map "impair_stats", one entry (key 0), summed by the reader.
 * "packets" count wire packets: an skb that carries a GSO/GRO batch counts
 * gso_segs packets, and a decision on it applies to the whole batch. */
struct impair_stats {
	__u64 skbs;         /* every skb seen */
	__u64 packets;      /* wire packets, all protocols */
	__u64 bytes;        /* skb->len summed */
	__u64 ipv4_packets; /* IPv4 wire packets */
	__u64 udp_packets;  /* IPv4 UDP wire packets */
	__u64 roce_packets; /* IPv4 UDP to port 4791 */
	__u64 dropped;      /* wire packets dropped (loss or DROP_NOT_ECT) */
	__u64 ce_marked;    /* wire packets this program set to CE */
	__u64 ce_seen;      /* wire packets that arrived already CE */
	__u64 not_ect;      /* picked for a CE mark but not ECN-capable */
	__u64 gso_skbs;     /* skbs carrying more than one wire packet */
	__u64 matched;      /* wire packets the match selected */
};

_Static_assert(sizeof(struct impair_config) == 24, "tool packs impair_config as <QQII");
_Static_assert(sizeof(struct impair_stats) == 12 * 8, "tool unpacks impair_stats as <12Q");

#endif /* SROCE_EBPF_IMPAIR_H */
