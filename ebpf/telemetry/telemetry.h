/* SPDX-License-Identifier: MIT */
/*
 * Layout shared by the telemetry tc programs (telemetry.bpf.c) and their
 * user-space readers: map keys, map values, statistics slots. Fixed-width
 * fields, explicit padding, no pointers, so the two sides agree byte for byte.
 *
 * A path is one direction of one queue pair's traffic on one ECMP path as seen
 * on this host: (local address, peer address, UDP source port, destination QP,
 * direction). The UDP source port is the ECMP entropy of RoCEv2 (Annex A17.5.1),
 * so one source port is one fabric path, and for sroce one lane.
 */
#ifndef SROCE_EBPF_TELEMETRY_H
#define SROCE_EBPF_TELEMETRY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SROCE_TM_RTT_BUCKETS 32 /* log2 buckets of nanoseconds: up to ~4.3 s */
#define SROCE_TM_NAK_SLOTS 8
#define SROCE_TM_PSN_WINDOW 64  /* PSNs below the highest one remembered per path */

/* Pinned object names under the pin directory (default /sys/fs/bpf/sroce/telemetry). */
#define SROCE_TM_PIN_PATHS "paths"
#define SROCE_TM_PIN_PENDING "pending"
#define SROCE_TM_PIN_STATS "stats"
#define SROCE_TM_PIN_ATTACH "attachments"
#define SROCE_TM_PIN_PROG_INGRESS "prog_ingress"
#define SROCE_TM_PIN_PROG_EGRESS "prog_egress"

#define SROCE_TM_DEFAULT_MAX_PATHS 8192u
#define SROCE_TM_DEFAULT_MAX_PENDING 16384u

enum sroce_tm_dir {
	SROCE_TM_INGRESS = 0,
	SROCE_TM_EGRESS = 1,
};

/* Addresses are 16 bytes: IPv6, or IPv4-mapped (::ffff:a.b.c.d) for IPv4, as in a
 * RoCEv2 GID (Annex A17.4.5.1). */
struct sroce_tm_path_key {
	uint8_t local[16] __attribute__((aligned(8))); /* copied as 64-bit words */
	uint8_t peer[16] __attribute__((aligned(8)));
	uint32_t dqpn;  /* BTH DestQP, 24 bits */
	uint16_t sport; /* UDP source port of the packets, host order */
	uint8_t dir;    /* enum sroce_tm_dir */
	uint8_t pad;    /* always 0: keys are compared as bytes */
};

/* NAK counters by AETH syndrome (IBA 9.7.5.2.8, table 43). */
enum sroce_tm_nak_slot {
	SROCE_TM_NAK_PSN_SEQ = 0,      /* NAK code 0: PSN sequence error */
	SROCE_TM_NAK_INVALID_REQ = 1,  /* code 1 */
	SROCE_TM_NAK_REMOTE_ACCESS = 2,/* code 2 */
	SROCE_TM_NAK_REMOTE_OP = 3,    /* code 3 */
	SROCE_TM_NAK_INVALID_RD = 4,   /* code 4: invalid RD request */
	SROCE_TM_NAK_RNR = 5,          /* RNR NAK (syndrome 001xxxxx) */
	SROCE_TM_NAK_OTHER = 6,        /* reserved NAK codes, reserved AETH type */
};

/* Per-path counters. Written by BPF with atomic adds; the PSN tracker fields
 * are owned by the BPF side (a path is handled by one CPU at a time in
 * practice; a race there only blurs one retx/ooo decision, never a count). */
struct sroce_tm_path {
	/* Touched by every packet: kept together, in the first cache line. */
	uint64_t packets;
	uint64_t bytes;      /* Ethernet frame bytes without FCS, per segment */
	uint64_t last_ns;    /* CLOCK_MONOTONIC (coarse) of the last packet */
	uint64_t seen;       /* PSN tracker: bit i set: PSN (max_psn - i) was carried */
	uint32_t max_psn;    /* PSN tracker (IBA 9.7.1 24-bit modular PSNs) */
	uint32_t psn_valid;
	uint64_t ce;         /* IP ECN field == CE (RFC 3168; Annex A17.9.3) */
	uint64_t retx;       /* PSN regressions: a PSN this path already carried */
	uint64_t ooo;        /* late arrivals: a PSN below the highest, not seen before */
	/* The rest. */
	uint64_t cnp;        /* RoCEv2 CNP, opcode 0x81 */
	uint64_t acks;       /* AETH type ACK (ACK, atomic ACK, read responses with AETH) */
	uint64_t nak[SROCE_TM_NAK_SLOTS];
	uint64_t rtt_hist[SROCE_TM_RTT_BUCKETS]; /* bucket b: [2^b, 2^(b+1)) ns; 0 goes to 0 */
	uint64_t rtt_sum_ns;
	uint64_t first_ns;   /* CLOCK_MONOTONIC (coarse) of the first packet */
};

/* A request that asked for an ACK (BTH AckReq, IBA 9.2), waiting for it. The
 * ACK comes back on the reverse direction with the requester's QPN and often
 * another UDP source port, so it is matched by (local, peer, PSN): the ACK's
 * PSN is the PSN of the request it acknowledges (IBA 9.7.5.1). */
struct sroce_tm_pending_key {
	uint8_t local[16] __attribute__((aligned(8)));
	uint8_t peer[16] __attribute__((aligned(8)));
	uint32_t psn;
	uint32_t pad; /* always 0: keys are compared as bytes */
};
struct sroce_tm_pending {
	struct sroce_tm_path_key path; /* the egress path that carried the request */
	uint64_t sent_ns;
};

/* Where the programs are attached: key (network namespace inode, ifindex). */
struct sroce_tm_attach_key {
	uint64_t netns_ino;
	uint32_t ifindex;
	uint32_t pad;
};
struct sroce_tm_attach {
	char ifname[16];
	uint64_t attached_ns; /* CLOCK_MONOTONIC */
	uint32_t created_clsact;
	uint32_t pad;
};

/* Global statistics: one per-CPU value (struct sroce_tm_stats, array key 0),
 * so a packet costs one lookup; the reader sums the CPUs. Every skb lands in
 * exactly one of the "result" slots (ROCE_SKBS .. BAD_GSO). */
enum sroce_tm_stat {
	/* Touched by every packet: together in the first cache line. */
	SROCE_TM_STAT_SKBS = 0,       /* skbs seen */
	SROCE_TM_STAT_ROCE_PKTS,      /* RoCEv2 packets counted (GSO segments each) */
	SROCE_TM_STAT_ROCE_SKBS,      /* result: parsed as RoCEv2 */
	SROCE_TM_STAT_NOT_IP,         /* result: not IPv4/IPv6 */
	SROCE_TM_STAT_NOT_UDP,        /* result: IP but not UDP (incl. ESP, no next header) */
	SROCE_TM_STAT_NOT_ROCE,       /* result: UDP, destination port not 4791 */
	SROCE_TM_STAT_RUNT,           /* result: shorter than an Ethernet header (+ its VLAN tags) */
	SROCE_TM_STAT_TRUNC_IP,       /* result: IP header (or IPv6 ext header) cut short, bad IHL */
	SROCE_TM_STAT_TRUNC_UDP,      /* result: UDP header cut short or UDP length beyond the frame */
	SROCE_TM_STAT_TRUNC_BTH,      /* result: UDP payload too short for BTH (+AETH) + ICRC */
	SROCE_TM_STAT_BAD_TVER,       /* result: BTH TVer != 0 (IBA 9.2: packet dropped) */
	SROCE_TM_STAT_IP_FRAG,        /* result: IP fragment (no UDP header, or not the whole datagram) */
	SROCE_TM_STAT_IPV6_EXT,       /* result: more IPv6 extension headers than we walk */
	SROCE_TM_STAT_BAD_GSO,        /* result: gso_segs/gso_size inconsistent with the length */
	SROCE_TM_STAT_GSO_SKBS,       /* skbs to port 4791 with more than one segment */
	SROCE_TM_STAT_SEG_TRUNC,      /* a later GSO segment cut short: not counted */
	SROCE_TM_STAT_PATH_INSERT,    /* new path entries created */
	SROCE_TM_STAT_PATH_FULL,      /* path map update failed: packet not counted */
	SROCE_TM_STAT_PENDING_FULL,   /* pending map update failed: RTT sample lost */
	SROCE_TM_STAT_RTT_SAMPLES,    /* ACK matched to its request */
	SROCE_TM_STAT_RTT_UNMATCHED,  /* ACK with no request waiting (coalesced, or not sent here) */
	SROCE_TM_STAT_RTT_KARN,       /* request retransmitted: its sample dropped (Karn) */
	SROCE_TM_STAT_PULL_FAILED,    /* headers not linear and bpf_skb_pull_data failed */
	SROCE_TM_STAT_COUNT,
};

struct sroce_tm_stats {
	uint64_t v[SROCE_TM_STAT_COUNT];
};

#ifdef __cplusplus
}
#endif

#endif /* SROCE_EBPF_TELEMETRY_H */
